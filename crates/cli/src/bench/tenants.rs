//! `lovia bench --only tenants`: a `lovia serve` service configured with
//! many tenants of three plugins each (the same three components for every
//! tenant), beside the same service with one tenant, in one run: how long
//! each takes to start, the resident memory it adds, and the latency of one
//! tenant's `POST /api/tools/echo/call` on one keep-alive connection.

use super::Latency;
use super::load::{Load, drive};
use crate::CliError;
use bytes::Bytes;
use lovia_host::Host;
use lovia_serve::{ServeConfig, Service};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The `tenants` rows: one service with one tenant, and one with many.
#[derive(Serialize)]
pub(super) struct TenantsFigure {
    plugins_per_tenant: usize,
    one: ServiceFigure,
    many: ServiceFigure,
}

/// One service of the comparison.
#[derive(Serialize)]
struct ServiceFigure {
    tenants: u32,
    /// `Service::new`: every tenant's plugins loaded (from the artifact
    /// cache after the first), its doors built.
    start_ms: f64,
    /// Resident memory the started service added to this process.
    resident_mib: f64,
    /// One tenant's echo call, one connection, back to back.
    latency: Latency,
}

/// The key of tenant `i`; the service stores only its hash.
fn key(i: u32) -> String {
    format!("lovia-bench-tenant-{i}")
}

/// Measures a service of one tenant, then one of `many` tenants, each with
/// the `plugins` (the first has `echo`), driving each for `window`.
pub(super) async fn tenants(
    host: &Host,
    plugins: &[PathBuf],
    many: u32,
    window: Duration,
) -> Result<TenantsFigure, CliError> {
    let plugins = plugins
        .iter()
        .map(|p| std::path::absolute(p).map_err(|e| CliError::new(format!("{}: {e}", p.display()))))
        .collect::<Result<Vec<_>, _>>()?;
    let one = service(host, &plugins, 1, window).await?;
    let many = service(host, &plugins, many, window).await?;
    Ok(TenantsFigure { plugins_per_tenant: plugins.len(), one, many })
}

async fn service(host: &Host, plugins: &[PathBuf], tenants: u32, window: Duration) -> Result<ServiceFigure, CliError> {
    let dir = tempfile::tempdir().map_err(|e| CliError::new(format!("cannot make a temporary directory: {e}")))?;
    let config_path = dir.path().join("serve.toml");
    std::fs::write(&config_path, config(&dir.path().join("bench.db"), plugins, tenants))
        .map_err(|e| CliError::new(format!("cannot write the bench config: {e}")))?;
    // Read back through `ServeConfig::load`, so the bench runs exactly the
    // checks a real config gets.
    let config = ServeConfig::load(&config_path).map_err(|e| CliError::new(e.to_string()))?;
    let before = super::rss_mib();
    let started = Instant::now();
    let service = Service::new(host, &config).await.map_err(|e| CliError::new(e.to_string()))?;
    let start_ms = started.elapsed().as_secs_f64() * 1e3;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| CliError::new(format!("cannot listen on loopback: {e}")))?;
    let addr = listener.local_addr().map_err(|e| CliError::new(e.to_string()))?;
    let server = tokio::spawn(axum::serve(service.listener(listener), service.app()).into_future());
    // The tenant in the middle of the list: no first or last place favoured.
    let load = echo_call(tenants / 2);
    let _ = drive(addr, 1, Duration::from_millis(300), load.clone()).await;
    let resident_mib = super::rss_mib() - before;
    let (latencies, errors) = drive(addr, 1, window, load).await;
    server.abort();
    drop(service);
    if latencies.is_empty() || errors > 0 {
        return Err(CliError::new(format!(
            "the {tenants}-tenant service answered {} echo calls and failed {errors}",
            latencies.len()
        )));
    }
    Ok(ServiceFigure { tenants, start_ms, resident_mib, latency: Latency::of_seconds(latencies) })
}

/// `tenants` tenants `t0`, `t1`, … each with every plugin of `plugins`, and
/// quotas that do not limit one connection's calls.
fn config(store: &Path, plugins: &[PathBuf], tenants: u32) -> String {
    let mut text = format!("store = {:?}\n", store.display().to_string());
    for i in 0..tenants {
        text += &format!(
            "\n[[tenants]]\nname = \"t{i}\"\napi_keys = [{:?}]\ncalls_per_minute = 1000000000\n",
            lovia_serve::hash_key(&key(i))
        );
        for plugin in plugins {
            text += &format!("[[tenants.plugins]]\npath = {:?}\n", plugin.display().to_string());
        }
    }
    text
}

/// `POST /api/tools/echo/call` as tenant `i`, answered when the result is
/// not an error.
fn echo_call(i: u32) -> Arc<Load> {
    Arc::new(Load {
        path: "/api/tools/echo/call",
        headers: vec![
            ("host", "bench".to_owned()),
            ("authorization", format!("Bearer {}", key(i))),
            ("content-type", "application/json".to_owned()),
        ],
        body: Bytes::from_static(br#"{"text": "hi"}"#),
        answered: |body| {
            serde_json::from_slice::<serde_json::Value>(body)
                .is_ok_and(|v| v["is_error"] == serde_json::Value::Bool(false))
        },
    })
}

pub(super) fn rows(t: &TenantsFigure) -> String {
    let row = |s: &ServiceFigure| {
        format!(
            "tenants     {:>5} tenant(s) x {} plugins: start {:>8.1} ms, +{:>7.1} MiB resident; one tenant's echo p50 {:>6.1} µs p99 {:>7.1} µs\n",
            s.tenants, t.plugins_per_tenant, s.start_ms, s.resident_mib, s.latency.p50_us, s.latency.p99_us
        )
    };
    let mut out = row(&t.one);
    out += &row(&t.many);
    out += &format!(
        "tenants     a call among {} tenants against among 1: p50 {:.2}×, p99 {:.2}×\n",
        t.many.tenants,
        t.many.latency.p50_us / t.one.latency.p50_us,
        t.many.latency.p99_us / t.one.latency.p99_us
    );
    out
}
