//! `lovia mcp --http`: one client's hostile component cannot hold another
//! client's calls, and a request naming a foreign Host (DNS rebinding from a
//! web page) is refused before anything runs; an `input_required` request
//! state the server did not issue for this very call (forged, tampered,
//! moved to other arguments, replayed) approves nothing. The guest that floods stdout
//! on stdio is in tests/all/mcp.rs (`stdout_flood`).

use crate::mcp::{against, approval_args, client, python, result, start_http};
use lovia_host::call::text;
use lovia_tests::fixtures;
use serde_json::Value;
use std::io::{Read, Write};

#[tokio::test]
async fn a_component_that_never_yields_does_not_hold_another_mcp_client() {
    let Some(py) = python() else { return };
    let args = ["--no-cache", "mcp", fixtures::DIAGNOSTICS, fixtures::HOSTILE, "--timeout-ms", "3000"];
    let (server, url, _) = start_http(args.map(String::from).to_vec());
    let out = client(&py, &["auto".to_owned(), "neighbour".to_owned(), url]);
    drop(server);
    // The attacker's own call ends with lovia's timeout, at its bound.
    assert_eq!(out["attack"], result(true, "Tool error: timed out after 3000 ms", Value::Null));
    // Its neighbour, on another session, got every answer right meanwhile.
    let answers = out["neighbour"].as_array().expect("answers");
    assert_eq!(answers.len(), 10);
    for (i, answer) in answers.iter().enumerate() {
        assert_eq!(*answer, result(false, &format!("b{i}"), Value::Null));
    }
    let slowest = out["neighbour_slowest_ms"].as_f64().expect("ms");
    println!("neighbour's slowest echo while a component spun: {slowest:.1} ms");
    assert!(slowest < 1000.0, "a neighbour's call took {slowest} ms");
}

/// One raw HTTP/1.1 request over a real socket; the status line and body.
fn post(addr: &str, host: &str) -> String {
    post_raw(addr, "/mcp", &format!("Host: {host}\r\n"))
}

/// An `initialize` POST to `target` with the header lines `headers` (each
/// ending in CRLF), over a real socket; the status line and body.
fn post_raw(addr: &str, target: &str, headers: &str) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    let req = format!(
        "POST {target} HTTP/1.1\r\n{headers}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("write");
    s.set_read_timeout(Some(std::time::Duration::from_secs(3))).expect("timeout");
    let mut out = Vec::new();
    // An SSE answer may stay open; what arrived by the timeout is enough.
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_foreign_host_header_is_refused() {
    let args = ["--no-cache", "mcp", fixtures::DIAGNOSTICS];
    let (server, url, _) = start_http(args.map(String::from).to_vec());
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let refused = post(&addr, "evil.example");
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert!(refused.ends_with("Forbidden: Host header is not allowed"), "{refused}");
    let port = addr.rsplit(':').next().unwrap_or_default();
    let served = post(&addr, &format!("localhost:{port}"));
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    assert!(served.contains(r#""serverInfo":{"name":"lovia""#), "{served}");
    drop(server);
}

/// The rest of the head (2025-11-25 transport: servers MUST validate
/// `Origin`): a browser `Origin` of another site is 403, as are a second
/// `Host` header (400) and an absolute-form target naming a foreign host
/// (403); the loopback origins a local client uses are served.
#[tokio::test]
async fn a_foreign_origin_a_second_host_or_a_foreign_target_is_refused() {
    let args = ["--no-cache", "mcp", fixtures::DIAGNOSTICS];
    let (server, url, _) = start_http(args.map(String::from).to_vec());
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let port = addr.rsplit(':').next().unwrap_or_default().to_owned();
    let host = format!("Host: localhost:{port}\r\n");
    let served = |reply: &str| reply.starts_with("HTTP/1.1 200") && reply.contains(r#""serverInfo":{"name":"lovia""#);

    let evil = post_raw(&addr, "/mcp", &format!("{host}Origin: http://evil.example\r\n"));
    assert!(evil.starts_with("HTTP/1.1 403"), "{evil}");
    assert!(evil.ends_with("Forbidden: Origin header is not allowed"), "{evil}");
    let null = post_raw(&addr, "/mcp", &format!("{host}Origin: null\r\n"));
    assert!(null.starts_with("HTTP/1.1 403"), "a sandboxed page's null origin: {null}");
    for origin in [format!("http://localhost:{port}"), format!("http://127.0.0.1:{port}"), "http://[::1]:8080".into()] {
        let own = post_raw(&addr, "/mcp", &format!("{host}Origin: {origin}\r\n"));
        assert!(served(&own), "{origin}: {own}");
    }

    let two = post_raw(&addr, "/mcp", &format!("{host}Host: evil.example\r\n"));
    assert!(two.starts_with("HTTP/1.1 400"), "{two}");
    assert!(two.ends_with("Bad Request: more than one Host header"), "{two}");
    let foreign = post_raw(&addr, "http://evil.example/mcp", &host);
    assert!(foreign.starts_with("HTTP/1.1 403"), "{foreign}");
    assert!(foreign.ends_with("Forbidden: the request target names a host that is not allowed"), "{foreign}");
    let own_target = post_raw(&addr, &format!("http://localhost:{port}/mcp"), &host);
    assert!(served(&own_target), "{own_target}");
    drop(server);
}

fn check_forged(out: &Value, log: &str) {
    let first = &out["first"];
    assert_eq!(first["resultType"], "input_required", "{first}");
    assert_eq!(first["inputRequests"]["approval"]["method"], "elicitation/create", "{first}");
    assert!(first["requestState"].as_str().is_some_and(|s| !s.is_empty()), "{first}");
    let not_approved = result(true, &text::not_approved("launch"), Value::Null);
    // A state that does not open is a JSON-RPC error (-32602), not a decline:
    // the client can tell "start over" from "the person said no".
    for case in ["tampered", "made_up", "moved", "replayed"] {
        assert_eq!(out[case]["error"]["code"], -32602, "{case}: {}", out[case]);
        let message = out[case]["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("request state refused: "), "{case}: {message}");
    }
    for case in ["declined", "unanswered"] {
        assert_eq!(out[case], not_approved, "{case}");
    }
    assert_eq!(out["genuine"], result(false, "launched once", Value::Null));
    // The genuine state ran the call once; nothing else ran at all.
    assert_eq!(log.matches("launch ran for ").count(), 1, "{log}");
    assert_eq!(log.matches("launch ran for once").count(), 1, "{log}");
    for why in ["failed integrity verification", "already used"] {
        assert!(log.contains(why), "no refusal logged for {why:?}:\n{log}");
    }
}

#[tokio::test]
async fn a_forged_or_replayed_request_state_is_refused_over_stdio() {
    let Some(py) = python() else { return };
    let (out, log) = against(&py, "auto", "forged", "stdio", approval_args());
    check_forged(&out, &log);
}

#[tokio::test]
async fn a_forged_or_replayed_request_state_is_refused_over_http() {
    let Some(py) = python() else { return };
    let (out, log) = against(&py, "auto", "forged", "http", approval_args());
    check_forged(&out, &log);
}
