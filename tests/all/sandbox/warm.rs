//! Session mode: one warm instance per (tenant, session); fresh instances
//! per call stay the default; a failed call never hands its instance on.

use lovia_host::plugin::config::PluginConfig;
use lovia_host::{CallContext, CallOutcome, CallRequest, Failure, InstanceMode, Plugin};
use lovia_tests::{fixtures, host, load};
use std::time::Duration;

async fn session_mode() -> Plugin {
    let config = PluginConfig::default().with_instance(InstanceMode::Session);
    host().load_file_with(fixtures::DIAGNOSTICS, config).await.expect("load")
}

fn in_session(tool: &str, args: &str, tenant: Option<&str>, session: Option<&str>) -> CallRequest {
    let context = CallContext {
        session_id: session.map(str::to_owned),
        tenant: tenant.map(str::to_owned),
        ..CallContext::default()
    };
    CallRequest { context, ..CallRequest::new(tool, args) }
}

async fn count(plugin: &Plugin, tenant: Option<&str>, session: Option<&str>) -> String {
    plugin.invoke(&in_session("count_calls", "{}", tenant, session)).await.model_output()
}

#[tokio::test]
async fn fresh_instances_are_the_default() {
    let plugin = load(fixtures::DIAGNOSTICS).await;
    for _ in 0..3 {
        assert_eq!(count(&plugin, None, Some("s1")).await, "1");
    }
    assert_eq!(plugin.warm_sessions(), 0);
}

#[tokio::test]
async fn a_session_keeps_its_instance_and_no_other_session_or_tenant_sees_it() {
    let plugin = session_mode().await;
    assert_eq!(count(&plugin, None, Some("s1")).await, "1");
    assert_eq!(count(&plugin, None, Some("s1")).await, "2");
    assert_eq!(count(&plugin, None, Some("s2")).await, "1", "another session");
    assert_eq!(count(&plugin, Some("acme"), Some("s1")).await, "1", "same session id, another tenant");
    assert_eq!(count(&plugin, None, None).await, "1", "no session: a fresh instance");
    assert_eq!(count(&plugin, None, Some("s1")).await, "3");
    assert!(plugin.end_session(None, "s1"));
    assert_eq!(count(&plugin, None, Some("s1")).await, "1", "ended sessions start over");
}

#[tokio::test]
async fn a_call_that_fails_or_times_out_discards_the_warm_instance() {
    let plugin = session_mode().await;
    assert_eq!(count(&plugin, None, Some("s")).await, "1");
    assert_eq!(count(&plugin, None, Some("s")).await, "2");
    // A tool error is an answer: the instance is still good.
    let err = plugin.invoke(&in_session("fail_times", r#"{"times": 5}"#, None, Some("s"))).await;
    assert!(err.is_error(), "{err:?}");
    assert_eq!(count(&plugin, None, Some("s")).await, "3");
    // A timeout abandons the instance mid-call: it must not be reused.
    let spin = CallRequest {
        timeout: Some(Duration::from_millis(50)),
        ..in_session("spin_ms", r#"{"ms": 10000}"#, None, Some("s"))
    };
    assert_eq!(plugin.invoke(&spin).await, CallOutcome::Failed(Failure::TimedOut { ms: 50 }));
    assert_eq!(count(&plugin, None, Some("s")).await, "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_of_one_session_take_turns_on_its_instance() {
    let plugin = session_mode().await;
    let calls: Vec<_> = (0..20)
        .map(|_| {
            let plugin = plugin.clone();
            tokio::spawn(async move { count(&plugin, None, Some("busy")).await })
        })
        .collect();
    let mut seen: Vec<u64> = Vec::new();
    for call in calls {
        seen.push(call.await.expect("join").parse().expect("number"));
    }
    seen.sort_unstable();
    assert_eq!(seen, (1..=20).collect::<Vec<u64>>(), "every call saw the one instance, one at a time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_of_calls_in_one_session_runs_through_the_executor() {
    use lovia_host::{ExecSettings, RunState, Tool};
    use lovia_tests::turn::{call, run};
    let plugin = session_mode().await;
    let exec = crate::exec::executor(Tool::from_plugin(&plugin), ExecSettings::default());
    let calls = (0..20).map(|i| call(&format!("c{i}"), "count_calls", "{}")).collect();
    let state = RunState { session_id: Some("turn".into()), ..RunState::default() };
    let turn =
        tokio::time::timeout(Duration::from_secs(20), run(&exec, calls, &state, |_| None)).await.expect("no hang");
    let mut seen: Vec<u64> = turn.results().iter().map(|r| r.output.parse().expect("number")).collect();
    seen.sort_unstable();
    assert_eq!(seen, (1..=20).collect::<Vec<u64>>());
}

/// The calls of a turn that share a session's instance run one after
/// another, and the wait behind the others counts against each one's
/// timeout (docs/semantics.md §22): `count_calls` (200 ms) waits 400 ms
/// behind a sleep, so it times out without starting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_behind_a_sessions_other_calls_counts_against_the_timeout() {
    use lovia_host::{ExecSettings, RunState, Tool};
    use lovia_tests::turn::{call, run};
    let plugin = session_mode().await;
    let tools = Tool::from_plugin(&plugin).into_iter().map(|t| {
        let ms = if t.spec().name == "count_calls" { 200 } else { 5_000 };
        t.with_timeout(Duration::from_millis(ms))
    });
    let exec = crate::exec::executor(tools.collect(), ExecSettings::default());
    let calls = vec![call("a", "sleep_ms", r#"{"ms": 400}"#), call("b", "count_calls", "{}")];
    let state = RunState { session_id: Some("queued".into()), ..RunState::default() };
    let turn =
        tokio::time::timeout(Duration::from_secs(20), run(&exec, calls, &state, |_| None)).await.expect("no hang");
    let results = turn.results();
    let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["a", "b"], "in request order");
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(results[1].output, "Tool error: timed out after 200 ms", "{results:?}");
    // It never started: the instance has counted no call yet.
    assert_eq!(count(&plugin, None, Some("queued")).await, "1");
}
