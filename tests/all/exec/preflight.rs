//! Spec §4 and §16: preflight rejections and the per-call event sequences.

use super::executor;
use lovia_host::{ExecSettings, RunState, Tool};
use lovia_tests::native::sleeper;
use lovia_tests::turn::{call, run};
use lovia_tests::{fixtures, load};

#[tokio::test]
async fn rejections_complete_without_starting() {
    let exec = executor(vec![sleeper("p")], ExecSettings::default());
    let calls = vec![
        call("u", "unknown", "garbage"),
        call("j", "p", r#"{"ms": 1"#),
        call("o", "p", "[1]"),
        call("v", "p", r#"{"ms": -1}"#),
        call("e", "p", ""),
        call("ok", "p", r#"{"ms": "0"}"#),
    ];
    let turn = run(&exec, calls, &RunState::default(), |_| None).await;
    assert_eq!(turn.output("u"), "Tool 'unknown' is not available.");
    assert!(turn.output("j").starts_with("Invalid JSON in tool arguments: "));
    assert_eq!(turn.output("o"), "Invalid tool arguments: expected a JSON object, got array.");
    assert_eq!(
        turn.output("v"),
        "Tool error: Invalid arguments for tool 'p': ms: Input should be greater than or equal to 0"
    );
    assert_eq!(turn.output("e"), "Tool error: Invalid arguments for tool 'p': ms: Field required");
    assert_eq!(turn.output("ok"), "p done");
    for id in ["u", "j", "o", "v", "e"] {
        assert!(!turn.trace().contains(&format!("started:{id}")), "{id} must not start");
        assert!(turn.results().iter().any(|r| r.call_id == id && r.is_error && r.raw.is_none()));
    }
    assert_eq!(turn.order()[..5], ["u", "j", "o", "v", "e"], "rejections are recorded in request order");
}

#[tokio::test]
async fn progress_events_belong_to_their_call() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let exec = executor(Tool::from_plugin(&diag), ExecSettings::default());
    let turn = run(&exec, vec![call("c", "progress", r#"{"steps": 2}"#)], &RunState::default(), |_| None).await;
    assert_eq!(turn.trace(), ["started:c", "progress:c", "progress:c", "completed:c"]);
    assert_eq!(turn.events[1].text, "step 1 of 2");
}

#[tokio::test]
async fn only_the_first_handoff_of_a_turn_runs() {
    let exec = executor(
        vec![sleeper("to_a").as_handoff("a"), sleeper("to_b").as_handoff("b"), sleeper("p")],
        ExecSettings::default(),
    );
    let calls =
        vec![call("h1", "to_a", r#"{"ms": 0}"#), call("h2", "to_b", r#"{"ms": 0}"#), call("x", "p", r#"{"ms": 0}"#)];
    let turn = run(&exec, calls, &RunState::default(), |_| None).await;
    assert_eq!(turn.output("h1"), "to_a done");
    assert_eq!(
        turn.output("h2"),
        "Handoff not performed: this turn already transferred to 'a'. Only the first handoff in a turn takes effect."
    );
    assert_eq!(turn.output("x"), "p done", "a plain call after both still runs");
}
