//! The floors each figure of `lovia bench` is printed against, measured in
//! the same run on the same machine: what a user could not beat with the
//! same engine configuration and the same load generator.
//!
//! - fresh call: bare wasmtime instantiate + call + drop of the same
//!   component in a store with nothing granted (`Plugin::floor_fresh_call`);
//! - warm call: a bare call on one live instance (`Plugin::floor_warm`);
//! - cached load: wasmtime's `Component::deserialize_file` of the same
//!   artifact (`Plugin::floor_cached_load`);
//! - `lovia serve` and MCP over HTTP: an HTTP server in this process that
//!   answers every POST with a fixed body, driven by the same load.rs;
//! - MCP over stdio: a child process that echoes each line back (`cat`),
//!   one JSON-RPC-sized line at a time.

use super::load::{Load, drive, serve_loopback};
use super::{Latency, percentile};
use crate::CliError;
use bytes::Bytes;
use lovia_host::Plugin;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

fn failed(e: lovia_host::plugin::floor::FloorError) -> CliError {
    CliError::new(format!("the floor could not be measured: {e}"))
}

/// `call` run `warm_up` times untimed, then `samples` times: each sample's
/// seconds. Every floor below is timed with it.
async fn timed(
    warm_up: u32,
    samples: u32,
    mut call: impl AsyncFnMut() -> Result<(), CliError>,
) -> Result<Vec<f64>, CliError> {
    for _ in 0..warm_up {
        call().await?;
    }
    let mut times = Vec::with_capacity(samples as usize);
    for _ in 0..samples {
        let start = Instant::now();
        call().await?;
        times.push(start.elapsed().as_secs_f64());
    }
    Ok(times)
}

/// `n` bare fresh calls of `tool`, as concurrent tasks the way a turn of
/// `n` calls runs them: the median of 25 batches after 5, per call, in µs.
pub(super) async fn fresh_per_call(plugin: &Plugin, tool: &str, arguments: &str, n: u32) -> Result<f64, CliError> {
    plugin.floor_check_tool(tool).map_err(failed)?;
    let batch = async || {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..n {
            let (plugin, tool, arguments) = (plugin.clone(), tool.to_owned(), arguments.to_owned());
            tasks.spawn(async move { plugin.floor_fresh_call(&tool, &arguments).await });
        }
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok(result) => result.map_err(failed)?,
                Err(e) => return Err(CliError::new(format!("a floor call panicked: {e}"))),
            }
        }
        Ok(())
    };
    let mut times = timed(5, 25, batch).await?;
    Ok(percentile(&mut times, 50.0) * 1e6 / f64::from(n))
}

/// `samples` bare fresh calls one after another, after `warm_up`.
pub(super) async fn fresh_latency(
    plugin: &Plugin,
    tool: &str,
    arguments: &str,
    warm_up: u32,
    samples: u32,
) -> Result<Latency, CliError> {
    plugin.floor_check_tool(tool).map_err(failed)?;
    let times =
        timed(warm_up, samples, async || plugin.floor_fresh_call(tool, arguments).await.map_err(failed)).await?;
    Ok(Latency::of_seconds(times))
}

/// `samples` bare calls on one live instance, after `warm_up`.
pub(super) async fn warm_latency(
    plugin: &Plugin,
    tool: &str,
    arguments: &str,
    warm_up: u32,
    samples: u32,
) -> Result<Latency, CliError> {
    plugin.floor_check_tool(tool).map_err(failed)?;
    let mut warm = plugin.floor_warm().await.map_err(failed)?;
    let times = timed(warm_up, samples, async || warm.call(tool, arguments).await.map_err(failed)).await?;
    Ok(Latency::of_seconds(times))
}

/// The median of `n` bare deserialisations of `plugin`'s cached artifact,
/// in ms.
pub(super) fn cached_load_ms(plugin: &Plugin, n: usize) -> Result<f64, CliError> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        times.push(plugin.floor_cached_load().map_err(failed)?.as_secs_f64());
    }
    Ok(percentile(&mut times, 50.0) * 1e3)
}

/// The HTTP floor of one run: a fixed answer to every POST, from a server
/// in this process, driven like the service it stands beside.
#[derive(Serialize)]
pub(super) struct HttpFloor {
    pub connections: u32,
    pub calls_per_second: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub errors: u64,
}

/// What the echo server answers: about the size of a tool result.
const ECHO_ANSWER: &str = r#"{"is_error":false,"content":[{"type":"text","text":"hi"}]}"#;

/// The floor's server: [`ECHO_ANSWER`] to every POST.
fn echo_router() -> axum::Router {
    axum::Router::new().fallback(axum::routing::post(|| async {
        ([(axum::http::header::CONTENT_TYPE, "application/json")], ECHO_ANSWER)
    }))
}

/// Serves the echo on `addr` (no Nagle delay, as `lovia serve`) until
/// Ctrl-C or SIGTERM: `lovia bench --serve-floor`.
pub(super) async fn serve_until_stopped(addr: std::net::SocketAddr) -> Result<(), CliError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::new(format!("cannot listen on {addr}: {e}")).hint("pick another port"))?;
    let local = listener.local_addr().map_err(|e| CliError::new(e.to_string()))?;
    eprintln!("the HTTP floor answers every POST on http://{local}/ (Ctrl-C to stop)");
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let stopped = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
    };
    axum::serve(listener, echo_router())
        .with_graceful_shutdown(stopped)
        .await
        .map_err(|e| CliError::new(format!("the HTTP floor: {e}")))
}

/// Serves the echo on loopback, and drives it with `connections`
/// connections for `window` (after a 300 ms warm-up).
pub(super) async fn http(connections: u32, window: Duration) -> Result<HttpFloor, CliError> {
    let (addr, served) = serve_loopback(echo_router()).await?;
    let load = Arc::new(Load {
        path: "/echo",
        headers: vec![("host", "127.0.0.1".to_owned()), ("content-type", "application/json".to_owned())],
        body: Bytes::from_static(br#"{"text": "hi"}"#),
        answered: |body| body == ECHO_ANSWER.as_bytes(),
    });
    let _ = drive(addr, connections, Duration::from_millis(300), load.clone()).await;
    let start = Instant::now();
    let (mut latencies, errors) = drive(addr, connections, window, load).await;
    let seconds = start.elapsed().as_secs_f64();
    served.abort();
    Ok(HttpFloor {
        connections,
        calls_per_second: latencies.len() as f64 / seconds,
        p50_us: percentile(&mut latencies, 50.0) * 1e6,
        p99_us: percentile(&mut latencies, 99.0) * 1e6,
        errors,
    })
}

/// One line of about a `tools/call` request's size to `cat` and back, one
/// at a time: `samples` round trips after 200.
pub(super) async fn stdio_echo(samples: u32) -> Result<Latency, CliError> {
    let mut child = tokio::process::Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| CliError::new(format!("cannot start `cat` for the stdio floor: {e}")))?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(CliError::new("`cat` has no pipes"));
    };
    let mut stdout = tokio::io::BufReader::new(stdout);
    let line = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
        "\n"
    );
    let mut answer = String::new();
    let mut times = Vec::with_capacity(samples as usize);
    for i in 0..200 + samples {
        answer.clear();
        let start = Instant::now();
        stdin.write_all(line.as_bytes()).await.map_err(|e| CliError::new(format!("stdio floor: {e}")))?;
        stdin.flush().await.map_err(|e| CliError::new(format!("stdio floor: {e}")))?;
        stdout.read_line(&mut answer).await.map_err(|e| CliError::new(format!("stdio floor: {e}")))?;
        if answer != line {
            return Err(CliError::new("the stdio floor's `cat` did not echo the line"));
        }
        if i >= 200 {
            times.push(start.elapsed().as_secs_f64());
        }
    }
    drop(stdin);
    let _ = child.wait().await;
    Ok(Latency::of_seconds(times))
}

/// `n` bare calls one after another on one live instance, the way a
/// session's turn of `n` calls runs them: the median of 25 batches after
/// 5, per call, in µs.
pub(super) async fn warm_per_call(plugin: &Plugin, tool: &str, arguments: &str, n: u32) -> Result<f64, CliError> {
    plugin.floor_check_tool(tool).map_err(failed)?;
    let mut warm = plugin.floor_warm().await.map_err(failed)?;
    let batch = async || {
        for _ in 0..n {
            warm.call(tool, arguments).await.map_err(failed)?;
        }
        Ok(())
    };
    let mut times = timed(5, 25, batch).await?;
    Ok(percentile(&mut times, 50.0) * 1e6 / f64::from(n))
}
