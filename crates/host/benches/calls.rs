#![allow(missing_docs, reason = "criterion_group! generates an undocumented function")]
//! Criterion benchmarks of the per-call paths: one model turn of 200 `echo`
//! calls through the full executor (fresh instances and session mode), a
//! single call, and a cached plugin load.
//!
//! `cargo bench -p lovia-host` (the guest fixtures are built by lovia-tests).

use criterion::{Criterion, criterion_group, criterion_main};
use lovia_host::plugin::config::PluginConfig;
use lovia_host::{
    EventSink, ExecSettings, Executor, Host, HostConfig, InstanceMode, RunState, Tool, ToolCall, ToolSource, Toolset,
};
use lovia_tests::fixtures;
use std::time::Duration;

fn executor(host: &Host, rt: &tokio::runtime::Runtime, instance: InstanceMode) -> Executor {
    let config = PluginConfig::default().with_instance(instance);
    let plugin = rt.block_on(host.load_file_with(fixtures::DIAGNOSTICS, config)).expect("load diagnostics");
    let tools = Toolset::new().with(ToolSource::Plugin, Tool::from_plugin(&plugin)).expect("unique names");
    Executor::new(tools, ExecSettings::default())
}

async fn turn(exec: &Executor, calls: &[ToolCall], run: &RunState) {
    let (sink, mut rx) = EventSink::channel();
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let results = exec.run_turn(calls, run, &sink).await.expect("turn");
    assert_eq!(results.len(), calls.len());
    drop(sink);
    drain.await.expect("drain");
}

fn calls(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let host = Host::new(HostConfig::default()).expect("host");
    let echo: Vec<ToolCall> =
        (0..200).map(|i| ToolCall::new(format!("call_{i}"), "echo", r#"{"text": "hi"}"#)).collect();

    let mut group = c.benchmark_group("executor");
    group.measurement_time(Duration::from_secs(5));
    let fresh = executor(&host, &rt, InstanceMode::Fresh);
    let no_session = RunState::default();
    group.bench_function("turn_of_200_echo_calls/fresh", |b| b.to_async(&rt).iter(|| turn(&fresh, &echo, &no_session)));
    let session = executor(&host, &rt, InstanceMode::Session);
    let in_session = RunState { session_id: Some("bench".into()), ..RunState::default() };
    group.bench_function("turn_of_200_echo_calls/session", |b| {
        b.to_async(&rt).iter(|| turn(&session, &echo, &in_session))
    });
    group.bench_function("single_call/fresh", |b| b.to_async(&rt).iter(|| turn(&fresh, &echo[..1], &no_session)));
    group.finish();

    let cache = tempfile::tempdir().expect("tempdir");
    let cached = Host::new(HostConfig::default().with_cache_dir(Some(cache.path().to_owned()))).expect("host");
    rt.block_on(cached.load_file(fixtures::DIAGNOSTICS)).expect("warm the cache");
    c.bench_function("load/cached/diagnostics", |b| {
        b.to_async(&rt).iter(|| async { cached.load_file(fixtures::DIAGNOSTICS).await.expect("load") })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = calls
}
criterion_main!(benches);
