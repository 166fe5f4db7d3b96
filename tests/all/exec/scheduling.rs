//! Spec §8: parallel by default, barriers run alone, results in completion order.

use super::executor;
use lovia_host::{ExecSettings, RunState, Tool};
use lovia_tests::native::sleeper;
use lovia_tests::turn::{call, run};
use lovia_tests::{fixtures, load};

#[tokio::test]
async fn the_worked_barrier_example() {
    let exec = executor(vec![sleeper("p"), sleeper("b").with_parallel(false)], ExecSettings::default());
    let ms = |n: u32| format!(r#"{{"ms": {n}}}"#);
    let calls = vec![
        call("p1", "p", &ms(200)),
        call("p2", "p", &ms(50)),
        call("B3", "b", &ms(50)),
        call("p4", "p", &ms(100)),
        call("B5", "b", &ms(50)),
        call("B6", "b", &ms(50)),
        call("p7", "p", &ms(50)),
    ];
    let turn = run(&exec, calls, &RunState::default(), |_| None).await;
    assert_eq!(turn.order(), ["p2", "p1", "B3", "p4", "B5", "B6", "p7"]);
    // The timing shape, with generous margins: B3 starts only after p1 ends,
    // p4 only after B3, and every barrier runs alone.
    assert!(turn.at("started", "p2") < 30.0, "p1 and p2 start together");
    assert!(turn.at("started", "B3") >= turn.at("completed", "p1"));
    assert!(turn.at("started", "p4") >= turn.at("completed", "B3"));
    assert!(turn.at("started", "B5") >= turn.at("completed", "p4"));
    assert!(turn.at("started", "B6") >= turn.at("completed", "B5"));
    assert!(turn.at("started", "p7") >= turn.at("completed", "B6"));
    let total = turn.at("completed", "p7");
    assert!((480.0..1500.0).contains(&total), "≈500 ms in all, took {total}");
}

#[tokio::test]
async fn a_batch_of_only_barriers_is_the_serial_loop() {
    let exec = executor(vec![sleeper("b").with_parallel(false)], ExecSettings::default());
    let calls = vec![call("c1", "b", r#"{"ms": 10}"#), call("c2", "b", r#"{"ms": 10}"#)];
    let turn = run(&exec, calls, &RunState::default(), |_| None).await;
    assert_eq!(turn.trace(), ["started:c1", "completed:c1", "started:c2", "completed:c2"]);
}

#[tokio::test]
async fn component_calls_run_in_parallel_and_pair_by_id() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let exec = executor(Tool::from_plugin(&diag), ExecSettings::default());
    let calls = vec![
        call("slow", "sleep_ms", r#"{"ms": 300}"#),
        call("fast", "sleep_ms", r#"{"ms": 50}"#),
        call("echo", "echo", r#"{"text": "hi"}"#),
    ];
    let turn = run(&exec, calls, &RunState::default(), |_| None).await;
    assert_eq!(turn.order(), ["echo", "fast", "slow"]);
    assert_eq!(turn.output("slow"), "slept 300 ms");
    assert!(turn.at("completed", "slow") < 1000.0, "the sleeps overlapped");
}

#[tokio::test]
async fn calls_after_a_barrier_are_not_preflighted_until_it_ends() {
    let gated = sleeper("later").with_approval(lovia_host::NeedsApproval::Always);
    let exec = executor(vec![sleeper("b").with_parallel(false), gated], ExecSettings::default());
    let calls = vec![call("B1", "b", r#"{"ms": 100}"#), call("x", "later", r#"{"ms": 0}"#)];
    let turn = run(&exec, calls, &RunState::default(), |_| Some(true)).await;
    assert!(turn.at("approval_required", "x") >= turn.at("completed", "B1"));
}

#[tokio::test]
async fn a_panicking_native_body_still_answers_its_call() {
    let panicking = |name: &str, message: &'static str| {
        Tool::builder(name)
            .invoke(move |_, _| async move {
                if std::hint::black_box(true) {
                    panic!("{message}");
                }
                Ok(lovia_host::ToolOutput::Text(String::new()))
            })
            .expect("tool")
    };
    let exec = executor(
        vec![panicking("bomb", "boom"), panicking("bomb_barrier", "barrier boom").with_parallel(false), sleeper("p")],
        ExecSettings::default(),
    );
    let calls = vec![call("a", "bomb", ""), call("b", "bomb_barrier", ""), call("c", "p", r#"{"ms": 0}"#)];
    let turn = run(&exec, calls, &RunState::default(), |_| None).await;
    assert_eq!(turn.output("a"), "Tool error: tool panicked: boom");
    assert_eq!(turn.output("b"), "Tool error: tool panicked: barrier boom");
    assert_eq!(turn.output("c"), "p done");
    assert_eq!(turn.results().len(), 3, "every call id answered exactly once");
}
