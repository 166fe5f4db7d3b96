//! The HTTP load generator of `lovia bench`: N workers, each on its own
//! keep-alive connection, sending one request back to back for a bounded
//! time, like `wrk -c N` would. `--only serve` and `--only mcp` drive their
//! services with it.
//!
//! hyper's HTTP/1 client on one connection per worker rather than a pooled
//! client: a pool would open and close connections as it sees fit, and the
//! figure is defined per connection count.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The one request every worker sends, and what counts as answered.
pub(super) struct Load {
    /// The request target, e.g. `/mcp`.
    pub path: &'static str,
    /// Every header of the request.
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
    /// Whether a successful response's body is a good answer.
    pub answered: fn(&[u8]) -> bool,
}

/// Runs `connections` workers for `window`. Returns the latency of every
/// request answered with a 2xx and a good body (seconds), and the count of
/// everything else: HTTP errors, bad answers, lost connections (a worker
/// reconnects and goes on).
pub(super) async fn drive(
    addr: std::net::SocketAddr,
    connections: u32,
    window: Duration,
    load: Arc<Load>,
) -> (Vec<f64>, u64) {
    let until = Instant::now() + window;
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..connections {
        let load = load.clone();
        workers.spawn(async move {
            let mut latencies = Vec::with_capacity(64 * 1024);
            let mut errors = 0u64;
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
                    let mut request = hyper::Request::post(load.path);
                    for (name, value) in &load.headers {
                        request = request.header(*name, value.as_str());
                    }
                    let Ok(request) = request.body(Full::new(load.body.clone())) else {
                        return (latencies, errors + 1);
                    };
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
                        Ok(body) => (load.answered)(&body.to_bytes()),
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

/// Serves `router` on a loopback port of its own, as `lovia mcp --http`
/// and `lovia serve` do (no Nagle delay on an answer's last segment), until
/// the returned task is aborted.
pub(super) async fn serve_loopback(
    router: axum::Router,
) -> Result<(std::net::SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>), crate::CliError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| crate::CliError::new(format!("cannot listen on loopback: {e}")))?;
    let addr = listener.local_addr().map_err(|e| crate::CliError::new(e.to_string()))?;
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    Ok((addr, tokio::spawn(axum::serve(listener, router).into_future())))
}
