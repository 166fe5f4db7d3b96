//! Spec §9: attempts, backoff gaps, and what is never retried.

use super::executor;
use lovia_host::{ExecSettings, Failure, RunState, Tool, ToolOutput};
use lovia_tests::native::flaky;
use lovia_tests::turn::{call, run};
use lovia_tests::{fixtures, load};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[tokio::test]
async fn retries_back_off_100_200_400_ms() {
    let stamps = Arc::new(Mutex::new(Vec::new()));
    let log = stamps.clone();
    let start = Instant::now();
    let tool = Tool::builder("flaky")
        .invoke(move |_, _| {
            let log = log.clone();
            async move {
                log.lock().expect("lock").push(start.elapsed().as_secs_f64() * 1000.0);
                Err::<ToolOutput, _>(Failure::Tool { message: "down".into(), hint: None, kind: None })
            }
        })
        .expect("tool")
        .with_retries(3);
    let turn = run(
        &executor(vec![tool], ExecSettings::default()),
        vec![call("c", "flaky", "{}")],
        &RunState::default(),
        |_| None,
    )
    .await;
    assert_eq!(turn.output("c"), "Tool error: down");
    assert_eq!(
        turn.trace(),
        ["started:c", "attempt_failed:c", "attempt_failed:c", "attempt_failed:c", "failed:c", "completed:c"],
        "one Started/Failed/Completed however many attempts, and an AttemptFailed for each retried one"
    );
    let attempts: Vec<&str> =
        turn.events.iter().filter(|e| e.kind == "attempt_failed").map(|e| e.text.as_str()).collect();
    assert_eq!(attempts, ["1: down", "2: down", "3: down"]);
    let t = stamps.lock().expect("lock").clone();
    assert_eq!(t.len(), 4);
    for (gap, want) in t.windows(2).map(|w| w[1] - w[0]).zip([100.0, 200.0, 400.0]) {
        assert!(gap >= want - 1.0 && gap < want + 150.0, "gap {gap} ms, want ≈{want}");
    }
}

#[tokio::test]
async fn the_last_failure_is_reported_and_success_ends_the_loop() {
    let count = Arc::new(AtomicU32::new(0));
    let exec = executor(vec![flaky("f", 2, count.clone()).with_retries(5)], ExecSettings::default());
    let turn = run(&exec, vec![call("c", "f", "{}")], &RunState::default(), |_| None).await;
    assert_eq!(turn.output("c"), "ok");
    assert_eq!(count.load(Ordering::SeqCst), 3);

    let count = Arc::new(AtomicU32::new(0));
    let settings = ExecSettings::default().with_default_retries(1);
    let turn = run(
        &executor(vec![flaky("f", 9, count.clone())], settings),
        vec![call("c", "f", "{}")],
        &RunState::default(),
        |_| None,
    )
    .await;
    assert_eq!(turn.output("c"), "Tool error: failure 2", "the agent default applies; the last error wins");

    let count = Arc::new(AtomicU32::new(0));
    let settings = ExecSettings::default().with_default_retries(3);
    let tool = flaky("f", 9, count.clone()).with_retries(0);
    run(&executor(vec![tool], settings), vec![call("c", "f", "{}")], &RunState::default(), |_| None).await;
    assert_eq!(count.load(Ordering::SeqCst), 1, "retries=0 on the tool overrides the agent default");
}

#[tokio::test]
async fn invalid_arguments_and_resource_limits_are_never_retried() {
    let count = Arc::new(AtomicU32::new(0));
    let counter = count.clone();
    let tool = Tool::builder("bad")
        .invoke(move |_, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Err::<ToolOutput, _>(Failure::InvalidArguments("no".into())) }
        })
        .expect("tool")
        .with_retries(3);
    run(&executor(vec![tool], ExecSettings::default()), vec![call("c", "bad", "{}")], &RunState::default(), |_| None)
        .await;
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_component_tool_fails_then_succeeds_across_attempts() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let store: Arc<dyn lovia_host::SessionStore> = Arc::new(lovia_host::MemoryStore::default());
    let tools = Tool::from_plugin_with_store(&diag, Some(store))
        .into_iter()
        .map(|t| if t.name() == "fail_times" { t.with_retries(2) } else { t });
    let exec = executor(tools.collect(), ExecSettings::default());
    let state = RunState { session_id: Some("s".into()), ..RunState::default() };
    let turn = run(&exec, vec![call("c", "fail_times", r#"{"times": 2}"#)], &state, |_| None).await;
    assert_eq!(turn.output("c"), "succeeded after 2 failures");
}
