//! `lovia bench --only web`: `read_page` of a 20 KiB HTML page and
//! `web_search` of a SearXNG-compatible answer with ten results, both served
//! by a server on loopback in this process, through the executor; beside the
//! floor of the same GET with a bare HTTP client in the same run
//! (docs/performance.md, "The web tools").

use super::{Latency, turn};
use crate::CliError;
use lovia_host::{ExecSettings, Executor, HttpOrigin, RunState, ToolCall, ToolSource, Toolset};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// The web rows.
#[derive(Serialize)]
pub(super) struct WebFigure {
    /// `read_page` of the page: the egress checks, the fetch, HTML to text,
    /// paging and the fence. Each call's URL differs, so the reader's cache
    /// never answers.
    read_page: Latency,
    /// A bare GET of the same page, the body read whole: the floor.
    page_get: Latency,
    /// `web_search` of ten results: the fetch, the JSON, rendering, fencing.
    web_search: Latency,
    /// A bare GET of the same JSON, parsed: the floor.
    search_get: Latency,
}

/// 20 KiB of HTML (20,673 bytes): a title, 200 paragraphs with a link each.
fn page() -> String {
    let mut html = String::from("<!doctype html><html><head><title>Bench page</title></head><body><h1>Bench</h1>");
    for i in 0..200 {
        html += &format!(
            "<p>Paragraph {i}: the quick brown fox jumps over the lazy dog, twice over. <a href=\"/p/{i}\">more</a></p>"
        );
    }
    html + "</body></html>"
}

fn results() -> serde_json::Value {
    let results: Vec<_> = (0..10)
        .map(|i| {
            serde_json::json!({
                "title": format!("Result {i}"),
                "url": format!("https://example.org/{i}"),
                "content": "A snippet of about a hundred characters, as a search engine gives for each of its results."
            })
        })
        .collect();
    serde_json::json!({"query": "bench", "results": results})
}

pub(super) async fn web() -> Result<WebFigure, CliError> {
    let html = page();
    let json = results();
    let app = axum::Router::new()
        .route(
            "/page",
            axum::routing::get(move || {
                let html = html.clone();
                async move { ([("content-type", "text/html; charset=utf-8")], html) }
            }),
        )
        .route(
            "/search",
            axum::routing::get(move || {
                let json = json.clone();
                async move { axum::Json(json) }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| CliError::new(format!("the benchmark's web server: {e}")))?;
    let addr = listener.local_addr().map_err(|e| CliError::new(e.to_string()))?;
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let base = format!("http://{addr}");

    // Loopback is reachable only through an exact origin, as a test's is.
    let origin: HttpOrigin = base.parse().map_err(|e| CliError::new(format!("{base}: {e}")))?;
    let reader = lovia_web::read_page_allowing(&[origin], lovia_web::DEFAULT_MAX_CONCURRENT)
        .map_err(|e| CliError::new(e.to_string()))?;
    let searxng = lovia_web::SearxngSearch::new(&base).map_err(|e| CliError::new(e.to_string()))?;
    let search = lovia_web::web_search(Arc::new(searxng), lovia_web::DEFAULT_SEARCH_NAME)
        .map_err(|e| CliError::new(e.to_string()))?;
    let tools =
        Toolset::new().with(ToolSource::AgentTools, [reader, search]).map_err(|e| CliError::new(e.to_string()))?;
    let exec = Executor::new(tools, ExecSettings::default());
    let run = RunState::default();

    let read_page = sample(
        20,
        500,
        |i| ToolCall::new("r", "read_page", serde_json::json!({"url": format!("{base}/page?n={i}")}).to_string()),
        &exec,
        &run,
    )
    .await;
    let web_search = sample(
        20,
        500,
        |i| ToolCall::new("s", "web_search", serde_json::json!({"query": format!("bench {i}")}).to_string()),
        &exec,
        &run,
    )
    .await;

    let tls = lovia_host::sandbox::tls_client_config().map_err(|e| CliError::new(format!("TLS setup: {e}")))?;
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured((*tls).clone())
        .no_proxy()
        .build()
        .map_err(|e| CliError::new(e.to_string()))?;
    let page_get = floor(&client, 20, 500, |i| format!("{base}/page?n={i}"), false).await;
    let search_get = floor(&client, 20, 500, |i| format!("{base}/search?q=bench+{i}&format=json"), true).await;
    server.abort();
    Ok(WebFigure { read_page, page_get, web_search, search_get })
}

/// `samples` one-call turns after `warm_up` ones; turn `i` runs `call(i)`.
async fn sample(
    warm_up: usize,
    samples: usize,
    call: impl Fn(usize) -> ToolCall,
    exec: &Executor,
    run: &RunState,
) -> Latency {
    let mut times = Vec::with_capacity(samples);
    for i in 0..warm_up + samples {
        let (elapsed, _) = turn(exec, &[call(i)], run).await;
        if i >= warm_up {
            times.push(elapsed.as_secs_f64());
        }
    }
    Latency::of_seconds(times)
}

/// The same requests with a bare client: the body read whole (and parsed,
/// for JSON).
async fn floor(
    client: &reqwest::Client,
    warm_up: usize,
    samples: usize,
    url: impl Fn(usize) -> String,
    json: bool,
) -> Latency {
    let mut times = Vec::with_capacity(samples);
    for i in 0..warm_up + samples {
        let start = Instant::now();
        let body = match client.get(url(i)).send().await {
            Ok(response) => response.bytes().await.ok(),
            Err(_) => None,
        };
        if json {
            let _ = body.as_ref().map(|b| serde_json::from_slice::<serde_json::Value>(b));
        }
        if i >= warm_up && body.is_some() {
            times.push(start.elapsed().as_secs_f64());
        }
    }
    Latency::of_seconds(times)
}

pub(super) fn rows(w: &WebFigure) -> String {
    let row = |name: &str, l: &Latency| {
        format!("web         {name:<38} p50 {:>8.1} µs   p99 {:>8.1} µs\n", l.p50_us, l.p99_us)
    };
    let mut out = row("read_page (20 KiB HTML, loopback)", &w.read_page);
    out += &row("floor: GET the same page, bare client", &w.page_get);
    out += &row("web_search (10 results, SearXNG JSON)", &w.web_search);
    out += &row("floor: GET the same JSON, bare client", &w.search_get);
    out
}
