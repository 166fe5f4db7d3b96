//! Limits: memory per plugin, fuel per call and per tenant, wall-clock ceiling.

use lovia_host::plugin::config::{LimitOverrides, PluginConfig};
use lovia_host::{CallContext, CallLimits, CallOutcome, CallRequest, Failure, Host, HostConfig};
use lovia_tests::{fixtures, load};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_plugin_config_lowers_the_memory_limit() {
    let config = PluginConfig::default().with_limits(LimitOverrides { memory_mib: Some(16), ..Default::default() });
    let hostile = lovia_tests::host().load_file_with(fixtures::HOSTILE, config).await.expect("load");
    let out = hostile.invoke(&CallRequest::new("memory_bomb", "{}")).await;
    assert_eq!(out.model_output(), "Tool error: out of memory (limit 16 MiB)");
}

#[tokio::test]
async fn the_wall_clock_ceiling_applies_without_a_timeout() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let limits = CallLimits::default().with_max_wall_clock(Duration::from_millis(100));
    let start = Instant::now();
    let out =
        diag.invoke(&CallRequest { limits: Some(limits), ..CallRequest::new("spin_ms", r#"{"ms": 60000}"#) }).await;
    assert_eq!(out, CallOutcome::Failed(Failure::WallClockCap { ms: 100 }));
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn the_wall_clock_ceiling_also_stops_a_call_waiting_on_the_host() {
    // A sleeping guest runs no wasm, so no epoch tick can stop it: the
    // ceiling must also hold while the guest waits on a host import.
    let diag = load(fixtures::DIAGNOSTICS).await;
    let limits = CallLimits::default().with_max_wall_clock(Duration::from_millis(100));
    let start = Instant::now();
    let out =
        diag.invoke(&CallRequest { limits: Some(limits), ..CallRequest::new("sleep_ms", r#"{"ms": 60000}"#) }).await;
    assert_eq!(out, CallOutcome::Failed(Failure::WallClockCap { ms: 100 }));
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn fuel_bounds_a_call_and_a_tenant() {
    let host = Host::new(
        HostConfig::default()
            .with_fuel_metering(true)
            .with_tenant_fuel(Some(30_000_000))
            .with_limits(CallLimits::default().with_fuel(Some(10_000_000)))
            .with_pool_slots(8),
    )
    .expect("host");
    let hostile = host.load_file(fixtures::HOSTILE).await.expect("load");
    let diag = host.load_file(fixtures::DIAGNOSTICS).await.expect("load");
    let tenant = |t: &str| CallContext { tenant: Some(t.into()), ..CallContext::default() };
    let spin = |t: &str| CallRequest { context: tenant(t), ..CallRequest::new("loop_forever", "{}") };
    assert_eq!(hostile.invoke(&spin("acme")).await, CallOutcome::Failed(Failure::CpuBudget), "the per-call budget");
    assert_eq!(
        diag.invoke(&CallRequest { context: tenant("acme"), ..CallRequest::new("echo", r#"{"text": "cheap"}"#) }).await,
        CallOutcome::Text("cheap".into()),
        "a cheap call fits"
    );
    for _ in 0..2 {
        hostile.invoke(&spin("acme")).await;
    }
    assert_eq!(host.tenant_fuel_remaining(Some("acme")), Some(0), "three exhausted calls spent the tenant's total");
    assert_eq!(
        diag.invoke(&CallRequest { context: tenant("acme"), ..CallRequest::new("echo", r#"{"text": "x"}"#) }).await,
        CallOutcome::Failed(Failure::CpuBudget),
        "the tenant is out of fuel"
    );
    assert_eq!(
        diag.invoke(&CallRequest { context: tenant("globex"), ..CallRequest::new("echo", r#"{"text": "x"}"#) }).await,
        CallOutcome::Text("x".into()),
        "another tenant is not"
    );
}

/// Two loads of the same bytes share the compiled component (one compile,
/// one copy: a thousand tenants of one plugin start without compiling it a
/// thousand times), and each keeps its own config; once no plugin of those
/// bytes lives, the next load compiles again.
#[tokio::test]
async fn loads_of_the_same_bytes_share_one_compile_and_keep_their_own_limits() {
    let compiles = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = compiles.clone();
    let notice = lovia_host::engine::CompileNotice(std::sync::Arc::new(move |_: &str, _: usize| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }));
    let host = Host::new(HostConfig::default().with_pool_slots(8).with_on_compile(Some(notice))).expect("host");
    let bytes = std::fs::read(fixtures::HOSTILE).expect("fixture");
    let small = PluginConfig::default().with_limits(LimitOverrides { memory_mib: Some(16), ..Default::default() });
    let first = host.load_bytes_with(&bytes, "first", small).await.expect("load");
    let second = host.load_bytes(&bytes, "second").await.expect("load");
    assert_eq!(compiles.load(std::sync::atomic::Ordering::SeqCst), 1, "the second load compiled again");
    assert_eq!(first.digest(), second.digest());
    let bomb = || CallRequest::new("memory_bomb", "{}");
    assert_eq!(first.invoke(&bomb()).await.model_output(), "Tool error: out of memory (limit 16 MiB)");
    let default_mib = second.limits().memory_mib();
    assert_ne!(default_mib, 16);
    let out = second.invoke(&bomb()).await.model_output();
    assert_eq!(out, format!("Tool error: out of memory (limit {default_mib} MiB)"));
    drop((first, second));
    host.load_bytes(&bytes, "third").await.expect("load");
    assert_eq!(compiles.load(std::sync::atomic::Ordering::SeqCst), 2, "nothing lived to share");
}
