//! `lovia bench --only serve`: `POST /api/tools/echo/call` through a real
//! `lovia serve` service on a loopback socket, driven by N keep-alive
//! connections for a bounded time, like `wrk -c N` would.
//!
//! The service runs in this process, on the same runtime as the load, so the
//! figure is what one machine serves while it also generates the load (as
//! wrk on the same machine would). The driver is hyper's HTTP/1 client on
//! one connection per worker rather than a pooled client: a pool would open
//! and close connections as it sees fit, and the figure is defined per
//! connection count.

use crate::CliError;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use lovia_host::Host;
use lovia_serve::{ServeConfig, Service};
use serde::Serialize;
use std::path::Path;
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
    let service = Service::new(host, &config).await.map_err(|e| CliError::new(e.to_string()))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| CliError::new(format!("cannot listen on loopback: {e}")))?;
    let addr = listener.local_addr().map_err(|e| CliError::new(e.to_string()))?;
    let server = tokio::spawn(axum::serve(service.listener(listener), service.router()).into_future());

    // Warm up every connection path once, then measure.
    let _ = drive(addr, connections, Duration::from_millis(300)).await;
    let start = Instant::now();
    let (mut latencies, errors) = drive(addr, connections, window).await;
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

/// Runs `connections` workers, each on its own keep-alive connection,
/// sending calls back to back until `window` has passed. Returns the
/// latency of every call answered with a result that is not an error
/// (seconds), and the count of everything else: HTTP errors, error results,
/// lost connections (a worker reconnects and goes on).
async fn drive(addr: std::net::SocketAddr, connections: u32, window: Duration) -> (Vec<f64>, u64) {
    let until = Instant::now() + window;
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..connections {
        workers.spawn(async move {
            let mut latencies = Vec::with_capacity(64 * 1024);
            let mut errors = 0u64;
            let authorization = format!("Bearer {KEY}");
            while Instant::now() < until {
                let Ok(stream) = tokio::net::TcpStream::connect(addr).await else {
                    errors += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let Ok((mut sender, conn)) =
                    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await
                else {
                    errors += 1;
                    continue;
                };
                tokio::spawn(conn);
                while Instant::now() < until {
                    let request = hyper::Request::post("/api/tools/echo/call")
                        .header("host", "bench")
                        .header("authorization", &authorization)
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from_static(br#"{"text": "hi"}"#)));
                    let Ok(request) = request else { return (latencies, errors + 1) };
                    let sent = Instant::now();
                    if sender.ready().await.is_err() {
                        errors += 1;
                        break;
                    }
                    let Ok(response) = sender.send_request(request).await else {
                        errors += 1;
                        break;
                    };
                    let ok = response.status().is_success();
                    let answered = match response.into_body().collect().await {
                        Ok(body) => serde_json::from_slice::<serde_json::Value>(&body.to_bytes())
                            .is_ok_and(|v| v["is_error"] == serde_json::Value::Bool(false)),
                        Err(_) => false,
                    };
                    if ok && answered {
                        latencies.push(sent.elapsed().as_secs_f64());
                    } else {
                        errors += 1;
                    }
                }
            }
            (latencies, errors)
        });
    }
    let mut all = Vec::new();
    let mut errors = 0;
    while let Some(done) = workers.join_next().await {
        match done {
            Ok((latencies, e)) => {
                all.extend(latencies);
                errors += e;
            }
            Err(_) => errors += 1,
        }
    }
    (all, errors)
}
