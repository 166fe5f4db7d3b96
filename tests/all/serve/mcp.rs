//! `/mcp` of `lovia serve`, driven by the official Python MCP client
//! (tests/mcp/serve_client.py) on both revisions: each tenant sees and
//! calls only its own tools, behind its key, under its quotas, with its
//! metrics and approvals.

use super::{json, request, start, start_with, tenant};
use crate::mcp::{python, root};
use lovia_host::call::text;
use lovia_serve::{ServeConfig, TenantConfig};
use lovia_tests::fixtures;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// Runs the client with `args`; its observations.
pub(super) async fn client(py: &Path, args: &[&str]) -> Value {
    let out = tokio::process::Command::new(py)
        .arg(root().join("tests/mcp/serve_client.py"))
        .args(args)
        .output()
        .await
        .expect("run the client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "client failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("client output {stdout:?}: {e}"))
}

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}/mcp")
}

/// Tenant `a` (echo and the gated `launch`) and tenant `b` (the orders).
fn tenants() -> Vec<TenantConfig> {
    vec![tenant("a", "a-key", &[fixtures::DIAGNOSTICS, fixtures::GATED]), tenant("b", "b-key", &[fixtures::ORDERS])]
}

fn result(is_error: bool, text: &str) -> Value {
    json!({"is_error": is_error, "text": [text]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_on_mcp_cannot_see_or_call_each_others_tools() {
    let Some(py) = python() else { return };
    let addr = start(tenants()).await;
    let url = url(addr);
    for mode in ["auto", "legacy"] {
        let a = client(&py, &[mode, "tenant", &url, "a-key", "lookup_order"]).await;
        let protocol = if mode == "auto" { "2026-07-28" } else { "2025-11-25" };
        assert_eq!(a["protocol"], protocol);
        let names: Vec<&str> = a["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
        assert!(names.contains(&"echo") && names.contains(&"launch"), "{names:?}");
        assert!(!names.contains(&"lookup_order"), "a sees b's tool: {names:?}");
        assert_eq!(a["echo"], result(false, "mine"));
        // b's tool does not exist for a: the same answer as a made-up name.
        assert_eq!(a["other"], result(true, &text::unknown_tool("lookup_order")));

        let b = client(&py, &[mode, "tenant", &url, "b-key", "echo"]).await;
        let names: Vec<&str> = b["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
        assert!(names.contains(&"lookup_order"), "{names:?}");
        assert!(!names.contains(&"echo") && !names.contains(&"launch"), "b sees a's tools: {names:?}");
        assert_eq!(b["other"], result(true, &text::unknown_tool("echo")));
    }
    // a's calls are a's in its metrics (two echo calls, one per revision), and
    // none of them is b's.
    let (_, body) = request(addr, "GET", "/api/metrics", Some("a-key"), "").await;
    let metrics = json(&body);
    let echo = metrics["tools"].as_array().expect("tools").iter().find(|t| t["tool"] == "echo").cloned();
    assert_eq!(echo.as_ref().map(|e| e["calls"].clone()), Some(json!(2)), "{metrics}");
    let (_, body) = request(addr, "GET", "/api/metrics", Some("b-key"), "").await;
    let b = json(&body);
    assert!(b["tools"].as_array().expect("tools").iter().all(|t| t["tool"] != "echo"), "{b}");
}

#[tokio::test]
async fn mcp_without_a_tenant_key_is_401_before_the_body_is_read() {
    let addr = start(tenants()).await;
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    for key in [None, Some("wrong-key")] {
        for method in ["POST", "GET", "DELETE"] {
            let (status, body) = request(addr, method, "/mcp", key, initialize).await;
            assert_eq!(status, 401, "{method} {key:?}: {body}");
            assert_eq!(json(&body)["error"], "missing or unknown API key");
        }
    }
    // A body announced but never sent: the answer comes without it.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 500000\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut answer = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut answer))
        .await
        .expect("answered before the body")
        .expect("read");
    assert_eq!(&answer, b"HTTP/1.1 401");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenants_calls_per_minute_hold_over_mcp() {
    let Some(py) = python() else { return };
    let mut a = tenant("a", "a-key", &[fixtures::DIAGNOSTICS]);
    a.calls_per_minute = 3;
    let addr = start(vec![a]).await;
    // Minute boundaries reset the count: start early in a minute.
    let into_minute = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() % 60;
    if into_minute > 40 {
        tokio::time::sleep(Duration::from_secs(61 - into_minute)).await;
    }
    let out = client(&py, &["auto", "calls", &url(addr), "a-key", "5"]).await;
    let results = out["results"].as_array().expect("results");
    for (i, r) in results.iter().enumerate() {
        // The same message the HTTP route gives in its 429 body.
        let want =
            if i < 3 { result(false, &format!("n{i}")) } else { result(true, "calls per minute quota exceeded") };
        assert_eq!(*r, want, "call {i}");
    }
    let (status, body) = request(addr, "POST", "/api/tools/echo/call", Some("a-key"), r#"{"text":"x"}"#).await;
    assert_eq!((status, json(&body)["error"].clone()), (429, json!("calls per minute quota exceeded")));
    let (_, body) = request(addr, "GET", "/api/metrics", Some("a-key"), "").await;
    let metrics = json(&body);
    assert_eq!(metrics["refused"]["calls_per_minute"], 3, "{metrics}");
}

/// `/mcp` calls run for their tenant: its `fuel_per_minute` is charged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_calls_burn_their_tenants_fuel() {
    let Some(py) = python() else { return };
    let mut a = tenant("a", "a-key", &[fixtures::DIAGNOSTICS]);
    a.fuel_per_minute = Some(1_000_000_000);
    let mut config = ServeConfig::new(vec![a]);
    config.metrics_public = true;
    let dir = tempfile::tempdir().expect("tempdir");
    config.store = Some(dir.path().join("s.db").into());
    config.resolve(Path::new(".")).expect("config");
    let metered = lovia_host::Host::new(lovia_host::HostConfig::default().with_fuel_metering(true)).expect("host");
    let service = lovia_serve::Service::new(&metered, &config).await.expect("service");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(service.listener(listener), service.app()).await });
    let fuel = || async {
        let (_, text) = request(addr, "GET", "/metrics", None, "").await;
        text.lines()
            .find_map(|l| l.strip_prefix("lovia_fuel_used_total{tenant=\"a\"} "))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no fuel metric: {text}"))
    };
    assert_eq!(fuel().await, 0);
    let out = client(&py, &["auto", "calls", &url(addr), "a-key", "1"]).await;
    assert_eq!(out["results"][0], result(false, "n0"));
    assert!(fuel().await > 0, "the call's fuel was charged to its tenant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_approval_is_answered_by_elicitation_or_by_the_approve_route() {
    let Some(py) = python() else { return };
    let addr = start(tenants()).await;
    let url = url(addr);
    let elicited = client(&py, &["legacy", "elicit", &url, "a-key"]).await;
    assert_eq!(elicited["result"], result(false, "launched elicited"));
    assert!(elicited["asked"][0].as_str().is_some_and(|m| m.contains("the tool launch.")), "{elicited}");
    // The same on 2026-07-28, through an input_required round trip.
    let round_trip = client(&py, &["auto", "elicit", &url, "a-key"]).await;
    assert_eq!(
        (round_trip["protocol"].clone(), round_trip["result"].clone()),
        (json!("2026-07-28"), result(false, "launched elicited"))
    );

    // The client would decline after 60 s; the approve route decides first.
    let waiting = tokio::spawn({
        let (py, url) = (py.clone(), url.clone());
        async move { client(&py, &["legacy", "wait", &url, "a-key"]).await }
    });
    let started = Instant::now();
    let pending = loop {
        let (_, body) = request(addr, "GET", "/api/approvals", Some("a-key"), "").await;
        let listed = json(&body)["approvals"].as_array().expect("approvals").clone();
        if let Some(p) = listed.into_iter().next() {
            break p;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no approval listed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(pending["tool"], "launch", "{pending}");
    assert_eq!(pending["arguments"], r#"{"target":"routed"}"#, "{pending}");
    // Another tenant neither sees it nor decides it.
    let (_, body) = request(addr, "GET", "/api/approvals", Some("b-key"), "").await;
    assert_eq!(json(&body)["approvals"], json!([]));
    let decide =
        json!({"session_id": pending["session_id"], "call_id": pending["call_id"], "decision": "approve"}).to_string();
    let (status, _) = request(addr, "POST", "/api/chat/approve", Some("b-key"), &decide).await;
    assert_eq!(status, 404);
    let (status, body) = request(addr, "POST", "/api/chat/approve", Some("a-key"), &decide).await;
    assert_eq!((status, json(&body)), (200, json!({"ok": true})));
    let out = waiting.await.expect("client");
    assert_eq!(out["result"], result(false, "launched routed"));
    assert!(out["seconds"].as_f64().is_some_and(|s| s < 30.0), "the route's decision did not end the wait: {out}");
    // Decided once: a second decision finds nothing.
    let (status, _) = request(addr, "POST", "/api/chat/approve", Some("a-key"), &decide).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_reaches_connected_mcp_clients_with_list_changed() {
    let Some(py) = python() else { return };
    for mode in ["legacy", "auto"] {
        // A fresh service each time: the upload is kept.
        let addr = start(tenants()).await;
        let out = client(&py, &[mode, "upload", &url(addr), "a-key", fixtures::ORDERS]).await;
        assert_eq!(out["upload_status"], 201, "{mode}: {out}");
        let before: Vec<&str> = out["before"].as_array().expect("before").iter().filter_map(Value::as_str).collect();
        let after: Vec<&str> = out["after"].as_array().expect("after").iter().filter_map(Value::as_str).collect();
        assert!(!before.contains(&"lookup_order") && after.contains(&"lookup_order"), "{mode}: {out}");
        assert!(after.contains(&"echo"), "{mode}: {out}");
        assert_eq!(out["new_tool"]["is_error"], false, "{mode}: {out}");
        // Only a's: b lists what it had.
        let b = client(&py, &[mode, "tenant", &url(addr), "b-key", "echo"]).await;
        assert!(b["tools"].as_array().expect("tools").iter().all(|t| t != "launch"), "{b}");
    }
}

/// An `initialize` of 2025-11-25 sent by hand: (status, the session id, body).
async fn initialize(addr: SocketAddr, key: &str) -> (u16, Option<String>, String) {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let (status, head, body) = post(addr, key, "", body).await;
    let session = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:").then(|| l[15..].trim().to_owned()));
    (status, session, body)
}

/// One POST to `/mcp` sent by hand as the tenant of `key`, with more header
/// lines (each ending in `\r\n`): (status, the response head, its body).
pub(crate) async fn post(addr: SocketAddr, key: &str, headers: &str, body: &str) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n{headers}Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    // The answer is an SSE stream that ends with the response.
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw)).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status line");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (status, head.to_owned(), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_holds_at_most_max_mcp_sessions() {
    let Some(py) = python() else { return };
    let mut a = tenant("a", "a-key", &[fixtures::DIAGNOSTICS]);
    a.max_mcp_sessions = 2;
    let mut config = ServeConfig::new(vec![a, tenant("b", "b-key", &[fixtures::ORDERS])]);
    config.metrics_public = true;
    let addr = start_with(config).await;
    // The official client: two sessions open, the third refused.
    let out = client(&py, &["legacy", "sessions", &url(addr), "a-key", "3"]).await;
    assert_eq!(out["opened"], 2, "{out}");
    assert!(out["refused"].is_string(), "{out}");
    // They were closed when it left: their places are free again.
    let (first, second) = (initialize(addr, "a-key").await, initialize(addr, "a-key").await);
    assert_eq!((first.0, second.0), (200, 200), "{first:?} {second:?}");
    assert!(first.1.is_some(), "{first:?}");
    let (status, _, body) = initialize(addr, "a-key").await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(
        json(&body)["error"],
        "2 MCP sessions are open already, the most allowed; close one (DELETE /mcp with its Mcp-Session-Id) or wait until one has been idle for 5 minutes"
    );
    // Another tenant's sessions are its own; 2026-07-28 needs none.
    assert_eq!(initialize(addr, "b-key").await.0, 200);
    let out = client(&py, &["auto", "calls", &url(addr), "a-key", "1"]).await;
    assert_eq!(out["results"][0], result(false, "n0"));
    let (_, body) = request(addr, "GET", "/api/metrics", Some("a-key"), "").await;
    assert_eq!(json(&body)["refused"]["max_mcp_sessions"], 2, "{body}");
}

/// With PostgreSQL, a 2026-07-28 approval sealed on one replica is redeemed
/// on another (no sticky sessions), and only once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_mcp_approval_opens_once_on_another_replica() {
    let Some(py) = python() else { return };
    let Some(db) = crate::replicas::fresh_database("mcp_sealed") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[[tenants]]\nname = \"a\"\napi_keys = [\"{}\"]\n[[tenants.plugins]]\npath = \"{}\"\n",
            lovia_serve::hash_key("a-key"),
            fixtures::GATED
        ),
    )
    .expect("config");
    let (mut one, addr_one) = crate::cli::spawn_serve(&config, Path::new(&db), &[]).await;
    let (mut two, addr_two) = crate::cli::spawn_serve(&config, Path::new(&db), &[]).await;
    let out = client(&py, &["auto", "sealed", &url(addr_one), &url(addr_two), "a-key"]).await;
    assert_eq!(out["protocol"], "2026-07-28");
    assert_eq!(out["on_b"], result(false, "launched across"), "{out}");
    assert_eq!(out["replayed_on_a"]["error"]["code"], -32602, "{out}");
    assert_eq!(out["replayed_on_a"]["error"]["message"], "request state refused: already used", "{out}");
    for child in [&mut one, &mut two] {
        child.start_kill().expect("SIGKILL");
        child.wait().await.expect("reaped");
    }
}

/// `sse_keep_alive_secs` reaches the SSE streams of `/mcp` as it does the
/// chats' (rmcp's own default is 15 s), so that a proxy in front, or
/// `idle_connection_secs`, does not cut a stream that waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_streams_keep_alive_at_the_services_interval() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut config = ServeConfig::new(tenants());
    config.sse_keep_alive_secs = 1;
    let addr = start_with(config).await;
    let (status, session, body) = initialize(addr, "a-key").await;
    assert_eq!(status, 200, "{body}");
    let session = session.expect("a session id");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let mut post = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer a-key\r\nMcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{initialized}",
        initialized.len()
    );
    post.write_all(head.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), post.read_to_end(&mut answer)).await;
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 202"), "{}", String::from_utf8_lossy(&answer));

    // The session's own stream: nothing to say, so only keep-alives.
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer a-key\r\nMcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-11-25\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_millis(3_500);
    let mut chunk = [0u8; 4096];
    while let Ok(Ok(n)) = tokio::time::timeout_at(until, stream.read(&mut chunk)).await {
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    // At 1 s, at least two in 3.5 s; at rmcp's 15 s, none.
    let comments = text.lines().filter(|l| l.starts_with(':')).count();
    assert!(comments >= 2, "{comments} keep-alive comments in 3.5 s:\n{text}");
}

/// A tenant's `/mcp` offers what its chats offer that makes sense without a
/// model: its web tools and `ask_human` (asked of the client), before its
/// plugins' tools, and `run_code`, and calls them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_mcp_offers_its_chats_web_tools_and_questions() {
    let Some(py) = python() else { return };
    let mut c = tenant("c", "c-key", &[fixtures::DIAGNOSTICS]);
    let mut web = lovia_serve::TenantWeb::default();
    web.read_page = true;
    c.web = Some(web);
    c.agent.ask_human = true;
    c.agent.code_mode = true;
    let addr = start(vec![c]).await;
    for mode in ["auto", "legacy"] {
        let out = client(&py, &[mode, "tenant", &url(addr), "c-key", "read_page"]).await;
        let names: Vec<&str> = out["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
        // The host's single tools lead the table, as in a chat (docs/architecture.md).
        let head: Vec<&str> = names.iter().take(2).copied().collect();
        assert_eq!(head, ["read_page", "ask_human"], "{names:?}");
        assert!(names.contains(&"run_code"), "{names:?}");
        assert_eq!(out["echo"], result(false, "mine"));
        // read_page ran: its own refusal of arguments it does not take.
        let other = out["other"]["text"][0].as_str().unwrap_or_default();
        assert!(other.contains("read_page"), "{other}");
    }
}

/// `[tenants.workspace]` on `/mcp`: one root for the tenant's MCP clients
/// (`<workspaces_dir>/<tenant>/mcp`, on both revisions), apart from its
/// chats' roots, confined as theirs are; a file one client writes, a client
/// of another session reads; the instructions carry the workspace's section.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_mcp_clients_share_one_workspace_root_apart_from_its_chats() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut acme = tenant("acme", "acme-key", &[fixtures::DIAGNOSTICS]);
    acme.workspace = Some(lovia_serve::TenantWorkspace::default());
    let mut config = ServeConfig::new(vec![acme]);
    config.workspaces_dir = Some(dir.path().to_owned());
    let addr = start_with(config).await;
    for mode in ["auto", "legacy"] {
        let out = client(&py, &[mode, "workspace", &url(addr), "acme-key"]).await;
        let instructions = out["instructions"].as_str().unwrap_or_default();
        assert!(instructions.contains("## Workspace\nYou work in a workspace named 'mcp'."), "{instructions}");
        assert_eq!(out["write"]["is_error"], false, "{mode}: {}", out["write"]);
        assert_eq!(out["read"]["is_error"], false, "{mode}: {}", out["read"]);
        assert!(out["read"]["text"][0].as_str().unwrap_or_default().contains("ship it"), "{}", out["read"]);
        let outside = out["outside"]["text"][0].as_str().unwrap_or_default();
        assert!(out["outside"]["is_error"] == true && outside.contains("outside"), "{mode}: {outside}");
    }
    let written = std::fs::read_to_string(dir.path().join("acme/mcp/notes/plan.md")).expect("in /mcp's root");
    assert_eq!(written, "ship it");
    assert!(!dir.path().join("escape.md").exists() && !dir.path().join("acme/escape.md").exists());
    // No chat session has that root: a chat's ids are `s-<id>` directories.
    let roots: Vec<String> = std::fs::read_dir(dir.path().join("acme"))
        .expect("the tenant's roots")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(roots, ["mcp"]);
}
