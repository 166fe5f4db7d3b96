//! `Runner::stream`: the event shape of a run, approvals decided through the
//! stream and out of band, and cancel through the handle.

use super::{call, runner, tool_answers};
use lovia_host::ToolEvent;
use lovia_runner::{Agent, ModelReply, RunError, RunEvent};
use std::time::{Duration, Instant};

fn label(event: &RunEvent) -> String {
    match event {
        RunEvent::RunStarted { .. } => "run_started".into(),
        RunEvent::TurnStarted { turn, .. } => format!("turn_started:{turn}"),
        RunEvent::TextDelta { text } => format!("text:{text}"),
        RunEvent::MessageCompleted { .. } => "message".into(),
        RunEvent::Tool(ToolEvent::ApprovalRequired { call, .. }) => format!("approval:{}", call.id),
        RunEvent::Tool(ToolEvent::ToolCallStarted { call }) => format!("started:{}", call.id),
        RunEvent::Tool(ToolEvent::ToolCallCompleted { call, .. }) => format!("completed:{}", call.id),
        RunEvent::Tool(ToolEvent::ToolCallFailed { call, .. }) => format!("failed:{}", call.id),
        RunEvent::Tool(ToolEvent::ToolProgress { call, .. }) => format!("progress:{}", call.id),
        RunEvent::TurnEnded { turn, .. } => format!("turn_ended:{turn}"),
        RunEvent::HandoffOccurred { .. } => "handoff".into(),
        RunEvent::RunCompleted { .. } => "run_completed".into(),
        RunEvent::RunFailed { .. } => "run_failed".into(),
        other => format!("unknown:{other:?}"),
    }
}

#[tokio::test]
async fn approvals_are_decided_through_the_stream_and_out_of_band() {
    let refund = |id: &str| call(id, "refund", r#"{"order_id": "A-1002", "amount_cents": 9000}"#);
    let (runner, _) = runner(
        Agent::new("desk"),
        vec![ModelReply::calls([refund("r1"), refund("r2"), refund("r3")]), ModelReply::text("Done.")],
    )
    .await;
    let mut handle = runner.stream("refund it three times");
    let mut labels = Vec::new();
    while let Some(event) = handle.next_event().await {
        labels.push(label(&event));
        if let RunEvent::Tool(ToolEvent::ApprovalRequired { call, ticket }) = event {
            match call.id.as_str() {
                "r1" => assert!(ticket.approve()),
                "r2" => assert!(ticket.reject()),
                // Out of band, while the consumer still holds the event.
                _ => {
                    assert!(handle.approvals().approve("r3"));
                    assert!(!handle.approvals().approve("r3"), "a decision lands once");
                    drop(ticket);
                }
            }
        }
    }
    let result = handle.result().await.expect("run");
    let answers = tool_answers(&result.messages);
    assert!(answers.contains(&("r1".into(), "Refunded 9000 cents on A-1002".into())), "{answers:?}");
    assert!(answers.contains(&("r2".into(), "Tool refund was not approved.".into())));
    assert!(answers.contains(&("r3".into(), "Refunded 9000 cents on A-1002".into())));
    assert_eq!(labels.first().map(String::as_str), Some("run_started"));
    assert_eq!(labels.last().map(String::as_str), Some("run_completed"));
    assert_eq!(labels.iter().filter(|l| l.starts_with("run_")).count(), 2, "{labels:?}");
    let pos = |l: &str| labels.iter().position(|x| x == l).unwrap_or_else(|| panic!("{l} in {labels:?}"));
    assert!(pos("message") < pos("approval:r1") && pos("approval:r1") < pos("approval:r2"));
    assert!(!labels.contains(&"started:r2".to_owned()), "a denied call never starts");
    assert!(pos("turn_ended:1") < pos("turn_started:2") && pos("text:Done.") < pos("run_completed"));
}

#[tokio::test]
async fn a_run_without_a_reader_denies_what_needs_approval() {
    let (runner, _) = runner(
        Agent::new("desk"),
        vec![
            ModelReply::calls([call("r1", "refund", r#"{"order_id": "A-1002", "amount_cents": 9000}"#)]),
            ModelReply::text("Could not."),
        ],
    )
    .await;
    let result = runner.stream("refund").result().await.expect("run");
    assert_eq!(tool_answers(&result.messages), [("r1".to_owned(), "Tool refund was not approved.".to_owned())]);
}

#[tokio::test]
async fn cancel_through_the_handle_interrupts_the_call_and_fails_the_run_once() {
    let (runner, _) = runner(
        Agent::new("slow"),
        vec![ModelReply::calls([call("s1", "sleep_ms", r#"{"ms": 30000}"#)]), ModelReply::text("unreached")],
    )
    .await;
    let mut handle = runner.stream("wait");
    let started = Instant::now();
    let mut failed = 0;
    while let Some(event) = handle.next_event().await {
        match event {
            RunEvent::Tool(ToolEvent::ToolCallStarted { .. }) => handle.cancel(Some("stop")),
            RunEvent::RunFailed { error } => {
                failed += 1;
                assert_eq!(error.to_string(), "stop");
            }
            RunEvent::RunCompleted { .. } => panic!("a cancelled run does not complete"),
            _ => {}
        }
    }
    assert_eq!(failed, 1);
    assert!(started.elapsed() < Duration::from_secs(10), "the 30 s call was interrupted");
    assert!(matches!(handle.result().await, Err(RunError::Cancelled { .. })));
}
