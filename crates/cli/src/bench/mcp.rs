//! `lovia bench --only mcp`: `tools/call` of `echo` round trips through
//! `lovia mcp`, beside the same call through the executor directly:
//!
//! - stdio: a real `lovia mcp PLUGIN` child process (this executable),
//!   driven by rmcp's client over its stdin and stdout: one call at a time
//!   for the latency, then `--connections` calls in flight on the one
//!   session for calls/s;
//! - streamable HTTP: `lovia mcp`'s HTTP service in this process on a
//!   loopback socket, driven by load.rs (one keep-alive connection for the
//!   latency, then `--connections`) posting stateless 2026-07-28
//!   `tools/call` requests, as a 2026-07-28 client sends them.
//!
//! A lone call's floor is the direct call plus the transport's own floor
//! (floor.rs): a line through a `cat` child, or a fixed HTTP answer.

use super::load::{Load, drive, serve_loopback};
use super::{Latency, percentile};
use crate::CliError;
use bytes::Bytes;
use lovia_host::Executor;
use lovia_mcp::{HttpOptions, McpServer};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The figures of one `mcp` run.
#[derive(Serialize)]
pub(super) struct McpFigure {
    /// The same call through the executor, one at a time.
    pub direct: Latency,
    pub stdio: Transport,
    pub http: Transport,
    /// One line to a `cat` child and back, one at a time.
    pub stdio_floor: Latency,
    /// A fixed answer from an HTTP server in this process, one connection.
    pub http_floor: super::floor::HttpFloor,
}

/// One transport: one call at a time, then `concurrent` in flight.
#[derive(Serialize)]
pub(super) struct Transport {
    pub lone: Latency,
    pub concurrent: u32,
    pub seconds: f64,
    pub calls: u64,
    pub errors: u64,
    pub calls_per_second: f64,
    pub loaded_p50_us: f64,
    pub loaded_p99_us: f64,
}

/// Lone calls measured on each transport after the warm-up.
const LONE_CALLS: u32 = 5_000;

pub(super) async fn mcp(
    exec: &Executor,
    plugin: &Path,
    concurrent: u32,
    window: Duration,
) -> Result<McpFigure, CliError> {
    let direct = super::latency(exec).await;
    let stdio = stdio(plugin, concurrent, window).await?;
    let http = http(exec, concurrent, window).await?;
    let stdio_floor = super::floor::stdio_echo(LONE_CALLS).await?;
    let http_floor = super::floor::http(1, Duration::from_secs(2)).await?;
    Ok(McpFigure { direct, stdio, http, stdio_floor, http_floor })
}

fn transport(lone: Latency, concurrent: u32, seconds: f64, mut latencies: Vec<f64>, errors: u64) -> Transport {
    Transport {
        lone,
        concurrent,
        seconds,
        calls: latencies.len() as u64,
        errors,
        calls_per_second: latencies.len() as f64 / seconds,
        loaded_p50_us: percentile(&mut latencies, 50.0) * 1e6,
        loaded_p99_us: percentile(&mut latencies, 99.0) * 1e6,
    }
}

fn echo() -> CallToolRequestParams {
    let mut arguments = serde_json::Map::new();
    arguments.insert("text".into(), Value::from("hi"));
    CallToolRequestParams::new("echo").with_arguments(arguments)
}

async fn stdio(plugin: &Path, concurrent: u32, window: Duration) -> Result<Transport, CliError> {
    let exe = std::env::current_exe().map_err(|e| CliError::new(format!("cannot find this executable: {e}")))?;
    let mut command = tokio::process::Command::new(exe);
    command.arg("mcp").arg(plugin);
    let (child, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| CliError::new(format!("cannot start lovia mcp: {e}")))?;
    let client = ().serve(child).await.map_err(|e| CliError::new(format!("lovia mcp did not start: {e}")))?;
    let peer = client.peer().clone();
    let call = |peer: rmcp::service::Peer<rmcp::RoleClient>| async move {
        let sent = Instant::now();
        let ok = peer.call_tool(echo()).await.is_ok_and(|r| r.is_error != Some(true));
        (ok, sent.elapsed().as_secs_f64())
    };
    for _ in 0..200 {
        call(peer.clone()).await;
    }
    let mut lone = Vec::with_capacity(LONE_CALLS as usize);
    let mut errors = 0u64;
    for _ in 0..LONE_CALLS {
        match call(peer.clone()).await {
            (true, t) => lone.push(t),
            (false, _) => errors += 1,
        }
    }
    let start = Instant::now();
    let until = start + window;
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrent {
        let peer = peer.clone();
        workers.spawn(async move {
            let (mut times, mut errors) = (Vec::new(), 0u64);
            while Instant::now() < until {
                match call(peer.clone()).await {
                    (true, t) => times.push(t),
                    (false, _) => errors += 1,
                }
            }
            (times, errors)
        });
    }
    let mut loaded = Vec::new();
    while let Some(done) = workers.join_next().await {
        match done {
            Ok((times, e)) => {
                loaded.extend(times);
                errors += e;
            }
            Err(_) => errors += 1,
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    // Closing stdin ends the child; rmcp then reaps it.
    let _ = client.cancel().await;
    Ok(transport(Latency::of_seconds(lone), concurrent, seconds, loaded, errors))
}

async fn http(exec: &Executor, concurrent: u32, window: Duration) -> Result<Transport, CliError> {
    let server = McpServer::new(exec.clone()).map_err(|e| CliError::new(e.to_string()))?;
    let options = HttpOptions::default();
    let shutdown = options.shutdown.clone();
    let router = axum::Router::new().route_service("/mcp", server.http_service(options));
    let (addr, served) = serve_loopback(router).await?;

    let load = Arc::new(stateless_echo());
    let _ = drive(addr, concurrent, Duration::from_millis(300), load.clone()).await;
    // One connection, one call at a time: the lone latency, for as long as
    // the stdio lone calls take at most.
    let (lone, lone_errors) = drive(addr, 1, Duration::from_secs(2), load.clone()).await;
    let start = Instant::now();
    let (loaded, errors) = drive(addr, concurrent, window, load).await;
    let seconds = start.elapsed().as_secs_f64();
    shutdown.cancel();
    served.abort();
    Ok(transport(Latency::of_seconds(lone), concurrent, seconds, loaded, errors + lone_errors))
}

/// A 2026-07-28 `tools/call` of `echo`: no session, the revision and the
/// client's capabilities in `_meta` and the headers, as the revision asks.
fn stateless_echo() -> Load {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "echo",
            "arguments": {"text": "hi"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "lovia-bench", "version": env!("CARGO_PKG_VERSION")},
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    Load {
        path: "/mcp",
        headers: vec![
            ("host", "127.0.0.1".to_owned()),
            ("content-type", "application/json".to_owned()),
            ("accept", "application/json, text/event-stream".to_owned()),
            ("mcp-protocol-version", "2026-07-28".to_owned()),
            ("mcp-method", "tools/call".to_owned()),
            ("mcp-name", "echo".to_owned()),
        ],
        body: Bytes::from(body.to_string()),
        answered: answered_without_error,
    }
}

/// Whether the response (JSON, or an SSE stream of JSON messages) carries
/// a `tools/call` result that is not an error.
fn answered_without_error(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    let good = |json: &str| {
        serde_json::from_str::<Value>(json.trim()).is_ok_and(|v| v["result"]["isError"] == Value::Bool(false))
    };
    if text.trim_start().starts_with('{') {
        return good(&text);
    }
    text.lines().filter_map(|line| line.strip_prefix("data:")).any(good)
}
