//! Outbound HTTP: nothing by default; granted origins only; loopback,
//! private and metadata addresses only through an exactly written host,
//! checked after DNS resolution. A real server on a loopback socket records
//! what reached it, so a refused request is proven never to have left.

use lovia_host::plugin::config::PluginConfig;
use lovia_host::sandbox::Grants;
use lovia_host::{CallOutcome, CallRequest, Failure, HttpOrigin, Plugin};
use lovia_tests::http::Server;
use lovia_tests::{fixtures, host, load};
use serde_json::json;

async fn with_http(origins: &[&str]) -> Plugin {
    let http = origins.iter().map(|o| o.parse::<HttpOrigin>().expect("origin")).collect();
    let grants = Grants { http, ..Default::default() };
    host().load_file_with(fixtures::HOSTILE, PluginConfig::default().with_grants(grants)).await.expect("load")
}

async fn fetch(plugin: &Plugin, args: serde_json::Value) -> String {
    plugin.invoke(&CallRequest::new("fetch", args.to_string())).await.model_output()
}

fn denied(url: &str) -> String {
    format!("Tool error: HTTP request to {url} denied: origin not granted to this plugin")
}

fn prohibited(url: &str) -> String {
    format!("Tool error: HTTP request to {url} denied: the address is loopback, private, link-local or metadata")
}

#[tokio::test]
async fn no_request_leaves_without_a_grant() {
    let server = Server::start().await;
    let plugin = load(fixtures::HOSTILE).await;
    let url = format!("{}/secret", server.origin());
    assert_eq!(fetch(&plugin, json!({ "url": url })).await, denied(&url));
    assert_eq!(
        fetch(&plugin, json!({ "url": "http://169.254.169.254/latest/meta-data/" })).await,
        denied("http://169.254.169.254/latest/meta-data/")
    );
    assert!(server.seen().is_empty(), "{:?}", server.seen());
}

#[tokio::test]
async fn a_granted_origin_is_reached_with_method_body_and_host() {
    let server = Server::start().await;
    let plugin = with_http(&[&server.origin()]).await;
    let url = format!("{}/orders?id=7", server.origin());
    assert_eq!(fetch(&plugin, json!({ "url": url })).await, "200 GET /orders?id=7 ");
    let post = fetch(&plugin, json!({ "url": url, "method": "POST", "body": "{\"qty\":2}" })).await;
    assert_eq!(post, "200 POST /orders?id=7 {\"qty\":2}");
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].host, server.addr.to_string());
}

#[tokio::test]
async fn only_the_granted_origin_is_reachable() {
    let server = Server::start().await;
    let port = server.addr.port();
    // Same host, other port; other scheme; other host: all refused.
    let plugin = with_http(&[&format!("http://127.0.0.1:{}", port.wrapping_add(1)), "https://127.0.0.1:*"]).await;
    let url = format!("{}/x", server.origin());
    assert_eq!(fetch(&plugin, json!({ "url": url })).await, denied(&url));
    let by_name = format!("http://localhost:{port}/x");
    assert_eq!(fetch(&plugin, json!({ "url": by_name })).await, denied(&by_name));
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn wildcard_grants_never_reach_loopback_or_metadata_even_by_name() {
    let server = Server::start().await;
    let port = server.addr.port();
    let plugin = with_http(&["http://*:*"]).await;
    for url in [
        format!("http://127.0.0.1:{port}/"),
        // A name that resolves to loopback: refused after DNS resolution.
        format!("http://localhost:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.0.0.1/".to_owned(),
    ] {
        assert_eq!(fetch(&plugin, json!({ "url": url })).await, prohibited(&url));
    }
    assert!(server.seen().is_empty(), "{:?}", server.seen());
}

#[tokio::test]
async fn an_exact_host_grant_reaches_loopback_by_name() {
    let server = Server::start().await;
    let port = server.addr.port();
    let plugin = with_http(&[&format!("http://localhost:{port}")]).await;
    let url = format!("http://localhost:{port}/by-name");
    assert_eq!(fetch(&plugin, json!({ "url": url })).await, "200 GET /by-name ");
    assert_eq!(server.seen()[0].host, format!("localhost:{port}"));
}

#[tokio::test]
async fn bad_origins_in_a_config_file_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wasm = dir.path().join("tool.wasm");
    std::fs::copy(fixtures::HOSTILE, &wasm).expect("copy");
    std::fs::write(dir.path().join("tool.toml"), "[grants]\nhttp = [\"api.example.com\"]\n").expect("write");
    let err = host().load_file(&wasm).await.expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("invalid HTTP origin \"api.example.com\": expected http:// or https:// followed by a host"),
        "{text}"
    );
    std::fs::write(dir.path().join("tool.toml"), "[grants]\nhttp = [\"https://api.example.com\"]\n").expect("write");
    let plugin = host().load_file(&wasm).await.expect("load");
    assert_eq!(plugin.config().grants.describe(), ["http https://api.example.com"]);
}

#[tokio::test]
async fn a_call_waiting_on_the_network_is_stopped_by_its_timeout() {
    // A listener that accepts and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let _hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let plugin = with_http(&[&format!("http://{addr}")]).await;
    let started = std::time::Instant::now();
    let request = CallRequest {
        timeout: Some(std::time::Duration::from_millis(200)),
        ..CallRequest::new("fetch", json!({ "url": format!("http://{addr}/hang") }).to_string())
    };
    let out = plugin.invoke(&request).await;
    assert_eq!(out, CallOutcome::Failed(Failure::TimedOut { ms: 200 }));
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
