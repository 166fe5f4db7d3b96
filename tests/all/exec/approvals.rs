//! Spec §13 with docs/semantics.md D7: every approval path, failing closed.

use super::executor;
use lovia_host::{ApprovalRequest, CallContext, ExecSettings, HandlerAnswer, NeedsApproval, RunState, Tool};
use lovia_tests::native::sleeper;
use lovia_tests::turn::{call, run};
use lovia_tests::{fixtures, load};
use std::sync::Arc;

fn gated() -> Tool {
    sleeper("gated").with_approval(NeedsApproval::Always)
}

fn with_handler(answer: Result<HandlerAnswer, String>) -> ExecSettings {
    let handler = move |_: &ApprovalRequest, _: &CallContext| answer.clone();
    ExecSettings::default().with_approval_handler(Some(Arc::new(handler)))
}

#[tokio::test]
async fn the_consumer_approves_or_rejects() {
    let exec = executor(vec![gated()], ExecSettings::default());
    let ok = run(&exec, vec![call("a", "gated", r#"{"ms": 0}"#)], &RunState::default(), |_| Some(true)).await;
    assert_eq!(ok.trace(), ["approval_required:a", "started:a", "completed:a"]);
    assert_eq!(ok.output("a"), "gated done");
    let no = run(&exec, vec![call("a", "gated", r#"{"ms": 0}"#)], &RunState::default(), |_| Some(false)).await;
    assert_eq!(no.trace(), ["approval_required:a", "completed:a"]);
    assert_eq!(no.output("a"), "Tool gated was not approved.");
}

#[tokio::test]
async fn undecided_calls_go_to_the_handler_then_fail_closed() {
    let calls = || vec![call("a", "gated", r#"{"ms": 0}"#)];
    let none = run(&executor(vec![gated()], ExecSettings::default()), calls(), &RunState::default(), |_| None).await;
    assert_eq!(none.output("a"), "Tool gated was not approved.", "no handler: deny");
    let allow =
        run(&executor(vec![gated()], with_handler(Ok(HandlerAnswer::Allow))), calls(), &RunState::default(), |_| None)
            .await;
    assert_eq!(allow.output("a"), "gated done");
    let ask =
        run(&executor(vec![gated()], with_handler(Ok(HandlerAnswer::Ask))), calls(), &RunState::default(), |_| None)
            .await;
    assert_eq!(ask.output("a"), "Tool gated was not approved.", "ask with nobody to ask: deny");
    let broken =
        run(&executor(vec![gated()], with_handler(Err("handler down".into()))), calls(), &RunState::default(), |_| {
            None
        })
        .await;
    assert_eq!(broken.trace(), ["approval_required:a", "failed:a", "completed:a"]);
    assert_eq!(broken.output("a"), "Tool gated was not approved.");
    assert_eq!(HandlerAnswer::parse("  ALLOW "), HandlerAnswer::Allow);
    assert_eq!(HandlerAnswer::parse("yes"), HandlerAnswer::Deny);
}

#[tokio::test]
async fn a_raising_predicate_denies_without_asking() {
    let tool = sleeper("gated").with_approval(NeedsApproval::Predicate(Arc::new(|_, _| Err("no rule".into()))));
    let turn = run(
        &executor(vec![tool], ExecSettings::default()),
        vec![call("a", "gated", r#"{"ms": 0}"#)],
        &RunState::default(),
        |_| Some(true),
    )
    .await;
    assert_eq!(turn.trace(), ["failed:a", "completed:a"]);
    assert_eq!(turn.output("a"), "Tool gated was not approved (approval check failed).");
}

#[tokio::test]
async fn the_predicate_sees_raw_arguments() {
    let tool = sleeper("gated").with_approval(NeedsApproval::Predicate(Arc::new(|args, _| Ok(args["ms"] == "7"))));
    let turn = run(
        &executor(vec![tool], ExecSettings::default()),
        vec![call("a", "gated", r#"{"ms": "7"}"#), call("b", "gated", r#"{"ms": 7}"#)],
        &RunState::default(),
        |_| Some(false),
    )
    .await;
    assert_eq!(turn.output("a"), "Tool gated was not approved.", "the string \"7\" was gated");
    assert_eq!(turn.output("b"), "gated done", "the coerced value never reached the predicate");
}

#[tokio::test]
async fn the_plugin_decides_with_its_own_export() {
    let orders = load(fixtures::ORDERS).await;
    let exec = executor(Tool::from_plugin(&orders), ExecSettings::default());
    let calls = vec![
        call("small", "refund", r#"{"order_id": "A-1002", "amount_cents": 100}"#),
        call("big", "refund", r#"{"order_id": "A-1002", "amount_cents": 6000}"#),
    ];
    let turn = run(&exec, calls, &RunState::default(), |r| {
        assert_eq!(r.plugin_digest.as_deref().map(str::len), Some(64), "bound to the plugin's digest");
        Some(false)
    })
    .await;
    assert_eq!(turn.output("small"), "Refunded 100 cents on A-1002");
    assert_eq!(turn.output("big"), "Tool refund was not approved.");
    assert!(!turn.trace().contains(&"approval_required:small".to_owned()));
}

#[tokio::test]
async fn a_later_approval_is_asked_while_an_earlier_call_runs() {
    let exec = executor(vec![sleeper("slow"), gated()], ExecSettings::default());
    let calls = vec![call("s", "slow", r#"{"ms": 300}"#), call("g", "gated", r#"{"ms": 0}"#)];
    let turn = run(&exec, calls, &RunState::default(), |_| Some(true)).await;
    assert!(turn.at("approval_required", "g") < turn.at("completed", "s"));
    assert_eq!(turn.order(), ["g", "s"]);
}

#[tokio::test]
async fn out_of_band_decisions_are_bound_to_the_pending_call() {
    let exec = executor(vec![gated()], ExecSettings::default());
    let state = RunState::default();
    let channel = state.approvals.clone();
    assert!(!channel.approve("a"), "nothing can be approved before it is asked");
    // The consumer holds the event (never decides); a decision arrives out of band.
    let (sink, mut rx) = lovia_host::EventSink::channel();
    let turn = tokio::spawn({
        let exec = exec.clone();
        let state = state.clone();
        async move { exec.run_turn(&[call("a", "gated", r#"{"ms": 0}"#)], &state, &sink).await }
    });
    let event = rx.recv().await.expect("event");
    let lovia_host::ToolEvent::ApprovalRequired { ticket, .. } = event else { panic!("expected an approval") };
    let mut other = ticket.request().clone();
    other.arguments = r#"{"ms": 1}"#.into();
    assert!(!channel.resolve_bound(&other, lovia_host::ApprovalDecision::Approve), "other arguments: refused");
    assert!(channel.approve("a"));
    assert!(!channel.approve("a"), "the first decision wins");
    let results = turn.await.expect("join").expect("turn");
    drop(ticket);
    assert_eq!(results[0].output, "gated done");
}
