//! Spec §10 with docs/semantics.md D5: per-attempt timeouts that really stop the component.

use super::executor;
use lovia_host::{ExecSettings, RunState, Tool};
use lovia_tests::native::sleeper;
use lovia_tests::turn::{call, run};
use lovia_tests::{fixtures, load};
use std::time::{Duration, Instant};

/// Process CPU time is only meaningful with no other test running in the
/// process, so the measurement runs in a child process of this test binary.
#[test]
fn a_spinning_component_stops_at_its_timeout_and_burns_no_more_cpu() {
    lovia_tests::run_probe("exec::timeouts::cpu_probe", "LOVIA_CPU_PROBE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_spinning_component_stops_at_its_timeout_and_burns_no_more_cpu in its own process"]
async fn cpu_probe() {
    if std::env::var_os("LOVIA_CPU_PROBE").is_none() {
        return;
    }
    let diag = load(fixtures::DIAGNOSTICS).await;
    let tools = Tool::from_plugin(&diag)
        .into_iter()
        .map(|t| if t.name() == "spin_ms" { t.with_timeout(Duration::from_millis(50)) } else { t });
    let exec = executor(tools.collect(), ExecSettings::default());
    let start = Instant::now();
    let turn = run(&exec, vec![call("c", "spin_ms", r#"{"ms": 60000}"#)], &RunState::default(), |_| None).await;
    let took = start.elapsed();
    assert_eq!(turn.output("c"), "Tool error: timed out after 50 ms");
    assert!(took < Duration::from_millis(1000), "returned after {took:?}");
    let before = lovia_tests::process_cpu();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let burned = lovia_tests::process_cpu().saturating_sub(before);
    println!("returned after {took:?}; CPU in the next 500 ms: {burned:?}");
    // A component still spinning would burn ~500 ms here; the epoch ticker costs ~nothing.
    assert!(burned < Duration::from_millis(100), "the component kept running: {burned:?} of CPU in 500 ms");
}

#[tokio::test]
async fn timeout_and_retries_take_timeout_plus_backoff_per_attempt() {
    let exec = executor(
        vec![sleeper("slow").with_timeout(Duration::from_millis(50)).with_retries(1)],
        ExecSettings::default(),
    );
    let start = Instant::now();
    let turn = run(&exec, vec![call("c", "slow", r#"{"ms": 10000}"#)], &RunState::default(), |_| None).await;
    let took = start.elapsed().as_millis();
    assert_eq!(turn.output("c"), "Tool error: timed out after 50 ms");
    assert!((195..800).contains(&took), "≈ 50 + 100 + 50 ms, took {took} ms");
}

#[tokio::test]
async fn the_agent_default_timeout_applies_to_tools_without_one() {
    let settings = ExecSettings::default().with_default_timeout(Some(Duration::from_millis(30)));
    let turn = run(
        &executor(vec![sleeper("slow")], settings),
        vec![call("c", "slow", r#"{"ms": 5000}"#)],
        &RunState::default(),
        |_| None,
    )
    .await;
    assert_eq!(turn.output("c"), "Tool error: timed out after 30 ms");
}
