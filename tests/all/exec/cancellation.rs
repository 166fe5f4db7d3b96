//! Spec §6 and §7: cancellation interrupts everything in flight; the budget
//! stops spawning but lets calls in flight finish.

use super::executor;
use lovia_host::{ExecSettings, Failure, RunState, Tool, ToolOutput, TurnError};
use lovia_tests::native::sleeper;
use lovia_tests::turn::{call, run};
use lovia_tests::{fixtures, load};
use std::time::{Duration, Instant};

#[tokio::test]
async fn cancel_during_a_parallel_batch_interrupts_every_call() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let exec = executor(Tool::from_plugin(&diag), ExecSettings::default());
    let state = RunState::default();
    let token = state.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        token.cancel(Some("user pressed stop"));
    });
    let start = Instant::now();
    let calls = vec![
        call("spin", "spin_ms", r#"{"ms": 30000}"#),
        call("sleep", "sleep_ms", r#"{"ms": 30000}"#),
        call("quick", "echo", r#"{"text": "x"}"#),
    ];
    let turn = run(&exec, calls, &state, |_| None).await;
    assert!(start.elapsed() < Duration::from_secs(2), "took {:?}", start.elapsed());
    assert!(!turn.trace().contains(&"completed:spin".to_owned()));
    match turn.result {
        Err(TurnError::Cancelled { reason, results }) => {
            assert_eq!(reason, "user pressed stop");
            assert_eq!(
                results.iter().map(|r| r.call_id.as_str()).collect::<Vec<_>>(),
                ["quick"],
                "interrupted calls leave no result"
            );
        }
        other => panic!("expected a cancellation, got {other:?}"),
    }
}

#[tokio::test]
async fn a_tool_that_cancels_the_run_ends_it_without_a_result() {
    let stopper = Tool::builder("stop")
        .invoke(|_, _| async { Err::<ToolOutput, _>(Failure::RunCancelled("enough".into())) })
        .expect("tool");
    let exec = executor(vec![stopper, sleeper("slow")], ExecSettings::default());
    let calls = vec![call("s", "slow", r#"{"ms": 30000}"#), call("x", "stop", "{}")];
    let start = Instant::now();
    let turn = run(&exec, calls, &RunState::default(), |_| None).await;
    assert!(start.elapsed() < Duration::from_secs(2));
    assert!(
        matches!(&turn.result, Err(TurnError::Cancelled { reason, results }) if reason == "enough" && results.is_empty()),
        "{:?}",
        turn.result
    );
    assert!(!turn.trace().iter().any(|e| e.starts_with("failed") || e.starts_with("completed")));
}

#[tokio::test]
async fn a_cancelled_run_runs_nothing() {
    let state = RunState::default();
    state.cancel.cancel(None);
    let turn = run(
        &executor(vec![sleeper("p")], ExecSettings::default()),
        vec![call("a", "p", r#"{"ms": 0}"#)],
        &state,
        |_| None,
    )
    .await;
    assert!(matches!(&turn.result, Err(TurnError::Cancelled { reason, .. }) if reason == "run cancelled"));
    assert!(turn.events.is_empty());
}

#[tokio::test]
async fn the_budget_stops_spawning_but_in_flight_calls_finish() {
    let settings = ExecSettings::default().with_max_tool_calls(Some(2));
    let exec = executor(vec![sleeper("p")], settings);
    let calls = vec![call("a", "p", r#"{"ms": 100}"#), call("b", "nope", "{}"), call("c", "p", r#"{"ms": 0}"#)];
    let turn = run(&exec, calls, &RunState::default(), |_| None).await;
    match turn.result {
        Err(TurnError::BudgetExceeded { message, results }) => {
            assert_eq!(message, "tool call count 3 exceeds budget 2");
            let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
            assert_eq!(ids, ["b", "a"], "the rejected call counted; the running one finished; the third never ran");
        }
        other => panic!("expected the budget to trip, got {other:?}"),
    }
    let zero = executor(vec![], ExecSettings::default().with_max_tool_calls(Some(0)));
    let turn = run(&zero, vec![call("a", "unknown", "{}")], &RunState::default(), |_| None).await;
    assert!(
        matches!(turn.result, Err(TurnError::BudgetExceeded { message, .. }) if message == "tool call count 1 exceeds budget 0")
    );
}
