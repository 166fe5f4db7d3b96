//! Instance slots, warm instances and plugin queries: no tenant can hold
//! the slots the others need, and no plugin query outlives its deadline.

use lovia_host::plugin::config::PluginConfig;
use lovia_host::{CallContext, CallRequest, ExecSettings, Host, HostConfig, InstanceMode, LoadError, RunState, Tool};
use lovia_tests::fixtures;
use lovia_tests::turn::{call, run};
use std::time::{Duration, Instant};

/// A small host of its own: 8 slots, 2 per tenant.
fn small_host(extra: impl FnOnce(&mut HostConfig)) -> Host {
    let mut config = HostConfig::default().with_pool_slots(8).with_tenant_instances(2);
    extra(&mut config);
    Host::new(config).expect("host")
}

fn hold(ms: u32, tenant: &str, session: Option<&str>) -> CallRequest {
    let context =
        CallContext { tenant: Some(tenant.into()), session_id: session.map(str::to_owned), ..CallContext::default() };
    CallRequest {
        context,
        timeout: Some(Duration::from_secs(20)),
        ..CallRequest::new("hold", format!(r#"{{"ms": {ms}}}"#))
    }
}

#[tokio::test]
async fn a_tenant_with_many_long_calls_takes_only_its_own_slots() {
    let host = small_host(|_| {});
    let plugin = host.load_file(fixtures::SLOW).await.expect("load");
    // Tenant A starts more long calls than the host has slots.
    let attack: Vec<_> = (0..12)
        .map(|_| {
            let plugin = plugin.clone();
            tokio::spawn(async move { plugin.invoke(&hold(1500, "a", None)).await.model_output() })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(host.tenant_instances("a"), 2, "A runs at most its share at once");
    let start = Instant::now();
    let answer = plugin.invoke(&hold(10, "b", None)).await.model_output();
    let took = start.elapsed();
    assert_eq!(answer, "held 10 ms");
    assert!(took < Duration::from_secs(1), "B waited {took:?} behind A");
    // A's calls all finish, in turns of two.
    for call in attack {
        assert_eq!(call.await.expect("join"), "held 1500 ms");
    }
    assert_eq!(host.tenant_instances("a"), 0, "every slot came back");
}

#[tokio::test]
async fn warm_sessions_of_one_tenant_cannot_hold_every_slot() {
    let host = small_host(|_| {});
    let config = PluginConfig::default().with_instance(InstanceMode::Session);
    let plugin = host.load_file_with(fixtures::SLOW, config).await.expect("load");
    for i in 0..20 {
        let session = format!("s{i}");
        assert_eq!(plugin.invoke(&hold(1, "a", Some(&session))).await.model_output(), "held 1 ms");
    }
    assert!(host.tenant_instances("a") <= 2, "A holds {} instances", host.tenant_instances("a"));
    assert!(plugin.warm_sessions() <= 2, "{} warm sessions", plugin.warm_sessions());
    let start = Instant::now();
    assert_eq!(plugin.invoke(&hold(1, "b", Some("s0"))).await.model_output(), "held 1 ms");
    assert!(start.elapsed() < Duration::from_secs(1), "B waited {:?}", start.elapsed());
}

#[tokio::test]
async fn a_tenant_at_its_limit_with_warm_instances_elsewhere_still_gets_a_slot() {
    let host = small_host(|_| {});
    let session = || PluginConfig::default().with_instance(InstanceMode::Session);
    let first = host.load_file_with(fixtures::SLOW, session()).await.expect("load");
    let second = host.load_file_with(fixtures::SLOW, session()).await.expect("load");
    for s in ["s1", "s2"] {
        assert_eq!(first.invoke(&hold(1, "a", Some(s))).await.model_output(), "held 1 ms");
    }
    assert_eq!(host.tenant_instances("a"), 2, "A's limit is spent on the first plugin's warm instances");
    let start = Instant::now();
    assert_eq!(second.invoke(&hold(1, "a", Some("s3"))).await.model_output(), "held 1 ms");
    assert!(start.elapsed() < Duration::from_secs(1), "waited {:?} for an idle instance elsewhere", start.elapsed());
    assert_eq!(first.warm_sessions(), 1, "the least recently used idle one made room");
}

#[tokio::test]
async fn idle_warm_instances_are_dropped_and_free_their_slot() {
    let host = small_host(|c| c.warm_idle_timeout = Duration::from_millis(200));
    let config = PluginConfig::default().with_instance(InstanceMode::Session);
    let plugin = host.load_file_with(fixtures::SLOW, config).await.expect("load");
    assert_eq!(plugin.invoke(&hold(1, "a", Some("s"))).await.model_output(), "held 1 ms");
    assert_eq!(plugin.warm_sessions(), 1);
    assert_eq!(host.tenant_instances("a"), 1, "the warm instance holds a slot");
    let start = Instant::now();
    while plugin.warm_sessions() > 0 && start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(plugin.warm_sessions(), 0, "the idle instance is still there after {:?}", start.elapsed());
    assert_eq!(host.tenant_instances("a"), 0);
}

#[tokio::test]
async fn a_plugin_whose_info_sleeps_fails_to_load_within_the_query_timeout() {
    let host = small_host(|c| c.plugin_query_timeout = Duration::from_millis(500));
    let start = Instant::now();
    let error = host.load_file(fixtures::SLOW_INFO).await.expect_err("a sleeping info() must not load");
    assert!(start.elapsed() < Duration::from_secs(3), "load took {:?}", start.elapsed());
    assert!(matches!(&error, LoadError::Describe { function: "info", .. }), "{error:?}");
    assert!(
        error.to_string().ends_with("`info` failed: no answer within 500 ms (the plugin query timeout)"),
        "{error}"
    );
}

#[tokio::test]
async fn a_sleeping_approval_check_is_denied_at_its_deadline() {
    let host = small_host(|c| c.plugin_query_timeout = Duration::from_millis(500));
    let plugin = host.load_file(fixtures::SLOW).await.expect("load");
    let exec = crate::exec::executor(Tool::from_plugin(&plugin), ExecSettings::default());
    let start = Instant::now();
    let turn = run(&exec, vec![call("g", "gated", "{}")], &RunState::default(), |_| Some(true)).await;
    assert!(start.elapsed() < Duration::from_secs(3), "the check ran {:?}", start.elapsed());
    assert_eq!(turn.output("g"), "Tool gated was not approved (approval check failed).");
}

#[tokio::test]
async fn cancelling_the_run_ends_a_sleeping_approval_check_at_once() {
    let host = small_host(|c| c.plugin_query_timeout = Duration::from_secs(60));
    let plugin = host.load_file(fixtures::SLOW).await.expect("load");
    let exec = crate::exec::executor(Tool::from_plugin(&plugin), ExecSettings::default());
    let state = RunState::default();
    let token = state.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        token.cancel(Some("stop"));
    });
    let start = Instant::now();
    let turn = run(&exec, vec![call("g", "gated", "{}")], &state, |_| Some(true)).await;
    assert!(start.elapsed() < Duration::from_secs(2), "the run lasted {:?} after the cancel", start.elapsed());
    assert!(
        matches!(&turn.result, Err(lovia_host::TurnError::Cancelled { reason, .. }) if reason == "stop"),
        "{:?}",
        turn.result
    );
    assert_eq!(host.tenant_instances("a"), 0);
}
