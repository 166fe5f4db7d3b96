//! `lovia bench --only serve`: `POST /api/tools/echo/call` through a real
//! `lovia serve` service on a loopback socket, driven by N keep-alive
//! connections for a bounded time (load.rs).
//!
//! The service runs in this process, on the same runtime as the load, so the
//! figure is what one machine serves while it also generates the load (as
//! wrk on the same machine would).

use super::load::{Load, drive};
use crate::CliError;
use bytes::Bytes;
use lovia_host::Host;
use lovia_serve::{ServeConfig, Service};
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The figures of one `serve` run.
#[derive(Serialize)]
pub(super) struct ServeFigure {
    pub connections: u32,
    pub seconds: f64,
    pub calls: u64,
    pub errors: u64,
    pub calls_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// The bench tenant's key; the service stores only its hash.
const KEY: &str = "lovia-bench-key";

/// Starts the service with `plugin` for one tenant whose quotas do not
/// limit the load, and drives it with `connections` connections for `window`.
pub(super) async fn serve(
    host: &Host,
    plugin: &Path,
    connections: u32,
    window: Duration,
) -> Result<ServeFigure, CliError> {
    serve_traced(host, plugin, connections, window, lovia_telemetry::Telemetry::off()).await
}

/// [`serve`] with the service's spans going to `telemetry`.
pub(super) async fn serve_traced(
    host: &Host,
    plugin: &Path,
    connections: u32,
    window: Duration,
    telemetry: lovia_telemetry::Telemetry,
) -> Result<ServeFigure, CliError> {
    let dir = tempfile::tempdir().map_err(|e| CliError::new(format!("cannot make a temporary directory: {e}")))?;
    let plugin = std::path::absolute(plugin).map_err(|e| CliError::new(format!("{}: {e}", plugin.display())))?;
    // Written as TOML and read back through `ServeConfig::load`, so the
    // bench runs exactly the checks a real config gets.
    let config = format!(
        "store = {store:?}\nmax_connections_per_ip = {conns}\nmax_connections = {conns}\n\n\
         [[tenants]]\nname = \"bench\"\napi_keys = [{key:?}]\nmax_concurrent_calls = {conns}\n\
         calls_per_minute = 1000000000\n\n[[tenants.plugins]]\npath = {path:?}\n",
        store = dir.path().join("bench.db").display().to_string(),
        // Room for the warm-up's connections, which may still be closing.
        conns = connections.max(1) * 2 + 4,
        key = lovia_serve::hash_key(KEY),
        path = plugin.display().to_string(),
    );
    let config_path = dir.path().join("serve.toml");
    std::fs::write(&config_path, config).map_err(|e| CliError::new(format!("cannot write the bench config: {e}")))?;
    let config = ServeConfig::load(&config_path).map_err(|e| CliError::new(e.to_string()))?;
    let service = Service::new_traced(host, &config, telemetry).await.map_err(|e| CliError::new(e.to_string()))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| CliError::new(format!("cannot listen on loopback: {e}")))?;
    let addr = listener.local_addr().map_err(|e| CliError::new(e.to_string()))?;
    let server = tokio::spawn(axum::serve(service.listener(listener), service.app()).into_future());

    // Warm up every connection path once, then measure.
    let _ = drive(addr, connections, Duration::from_millis(300), echo_call()).await;
    let start = Instant::now();
    let (mut latencies, errors) = drive(addr, connections, window, echo_call()).await;
    let seconds = start.elapsed().as_secs_f64();
    server.abort();
    let calls = latencies.len() as u64;
    Ok(ServeFigure {
        connections,
        seconds,
        calls,
        errors,
        calls_per_second: calls as f64 / seconds,
        p50_ms: super::percentile(&mut latencies, 50.0) * 1e3,
        p99_ms: super::percentile(&mut latencies, 99.0) * 1e3,
    })
}

/// `POST /api/tools/echo/call` as the bench tenant, answered when the
/// result is not an error.
fn echo_call() -> Arc<Load> {
    Arc::new(Load {
        path: "/api/tools/echo/call",
        headers: vec![
            ("host", "bench".to_owned()),
            ("authorization", format!("Bearer {KEY}")),
            ("content-type", "application/json".to_owned()),
        ],
        body: Bytes::from_static(br#"{"text": "hi"}"#),
        answered: |body| {
            serde_json::from_slice::<serde_json::Value>(body)
                .is_ok_and(|v| v["is_error"] == serde_json::Value::Bool(false))
        },
    })
}
