//! `/api/chat` with a scripted model: SSE over a real socket, approvals
//! round-trip (decided, timed out, kept pending across a disconnect,
//! re-emitted on reconnect), cancel, transcripts, plugin upload, tenant isolation on
//! every route, and a run resumed after its service died.

use super::{Sse, json, request, start_with, tenant};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use lovia_runner::SqliteRunStore;
use lovia_serve::{ProviderConfig, ServeConfig, Service, TenantConfig};
use lovia_tests::{fixtures, host};
use serde_json::{Value, json as j};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::ServiceExt;

const REFUND: &str = r#"{"order_id": "A-1002", "amount_cents": 9000}"#;

/// Writes the model's replies where a scripted provider reads them.
fn script(dir: &Path, replies: Value) -> PathBuf {
    let path = dir.join(format!("script-{}.json", replies.to_string().len()));
    std::fs::write(&path, replies.to_string()).expect("write script");
    path
}

fn calls(list: &[(&str, &str, &str)]) -> Value {
    j!({"tool_calls": list.iter().map(|(id, name, args)| j!({"id": id, "name": name, "arguments": args})).collect::<Vec<_>>()})
}

fn chat_tenant(name: &str, key: &str, script: PathBuf) -> TenantConfig {
    let mut t = tenant(name, key, &[fixtures::ORDERS, fixtures::DIAGNOSTICS]);
    t.provider = ProviderConfig::scripted(script);
    t
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(n, _)| n.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_holds_an_approval_round_trip_over_sse() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = j!([
        calls(&[("c1", "lookup_order", r#"{"order_id": "A-1002"}"#), ("c2", "refund", REFUND)]),
        {"content": "Refunded 90 dollars."}
    ]);
    let mut config = ServeConfig::new(vec![
        chat_tenant("acme", "acme-key", script(dir.path(), replies.clone())),
        chat_tenant("globex", "globex-key", script(dir.path(), replies)),
    ]);
    config.metrics_token = Some(lovia_serve::hash_key("scraper-token"));
    let addr = start_with(config).await;
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1", "input": "refund A-1002"}"#).await;
    assert_eq!(sse.status, 200);
    let first = sse.until("approval_required").await;
    assert_eq!(first[0].0, "run_started");
    assert_eq!(first[0].1["session_id"], "s1");
    let (_, asked) = first.last().expect("approval");
    let at = asked["at_ms"].as_u64().expect("each event says when it happened");
    assert_eq!(asked, &j!({"id": "c2", "name": "refund", "arguments": REFUND, "at_ms": at}));

    // Only the session's tenant can decide, and only what is pending.
    let approve = |key: &'static str, call: &'static str| {
        let body = format!(r#"{{"session_id": "s1", "call_id": "{call}", "decision": "approve"}}"#);
        async move { request(addr, "POST", "/api/chat/approve", Some(key), &body).await }
    };
    let (status, body) = approve("globex-key", "c2").await;
    assert_eq!((status, json(&body)["detail"].as_str()), (404, Some("no pending approval matches")));
    assert_eq!(approve("acme-key", "c9").await.0, 404);
    let (status, body) = approve("acme-key", "c2").await;
    assert_eq!((status, json(&body)), (200, j!({"ok": true})));
    assert_eq!(approve("acme-key", "c2").await.0, 404, "a decision lands once");

    // The parallel lookup's events may surface before or after the prompt (docs/semantics.md §8).
    let rest = sse.rest().await;
    let all: Vec<(String, Value)> = first.iter().chain(&rest).cloned().collect();
    // Each event says when it happened; the rest of a result is exact.
    let results: Vec<Value> = all
        .iter()
        .filter(|(n, d)| n == "tool_result" && d["at_ms"].is_u64())
        .map(|(_, d)| {
            let mut d = d.clone();
            d.as_object_mut().map(|o| o.remove("at_ms"));
            d
        })
        .collect();
    assert_eq!(results.len(), 2, "{all:?}");
    assert!(
        results.contains(
            &j!({"id": "c2", "name": "refund", "result": "Refunded 9000 cents on A-1002", "is_error": false})
        )
    );
    assert_eq!(names(&rest)[rest.len() - 2..], ["text_delta", "run_completed"], "{rest:?}");
    assert_eq!(rest.last().expect("end").1["output"], "Refunded 90 dollars.");

    let (status, body) = request(addr, "GET", "/api/chat/s1", Some("acme-key"), "").await;
    assert_eq!((status, json(&body)["status"].as_str()), (200, Some("completed")));
    assert_eq!(json(&body)["messages"].as_array().expect("messages").len(), 5);
    assert_eq!(request(addr, "GET", "/api/chat/s1", Some("globex-key"), "").await.0, 404);
    let (_, metrics) = request(addr, "GET", "/metrics", Some("scraper-token"), "").await;
    assert!(metrics.contains("lovia_runs_total{tenant=\"acme\",outcome=\"completed\"} 1"), "{metrics}");
    assert!(metrics.contains("lovia_approvals_pending{tenant=\"acme\"} 0"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecided_approvals_are_denied_by_timeout_and_re_emitted_to_a_second_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = j!([calls(&[("c1", "refund", REFUND)]), {"content": "Not refunded."}]);
    let mut config = ServeConfig::new(vec![chat_tenant("acme", "acme-key", script(dir.path(), replies))]);
    config.approval_timeout_secs = 1;
    let addr = start_with(config).await;

    // Nobody decides: denied after the timeout.
    let started = Instant::now();
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "t1", "input": "refund"}"#).await;
    let events = sse.rest().await;
    let result = events.iter().find(|(n, _)| n == "tool_result").expect("a result");
    assert_eq!(result.1["result"], "Tool refund was not approved.");
    assert!(started.elapsed() >= Duration::from_millis(900) && started.elapsed() < Duration::from_secs(20));

    // A second reader attaching to the live run is shown the pending approval
    // again, in the replay of the run's events so far.
    let mut first = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "t2", "input": "refund"}"#).await;
    first.until("approval_required").await;
    let mut second = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "t2"}"#).await;
    let (name, data) = second.until("approval_required").await.pop().expect("re-emitted");
    assert_eq!((name.as_str(), data["id"].as_str()), ("approval_required", Some("c1")));
    let rest = second.rest().await;
    let result = rest.iter().find(|(n, _)| n == "tool_result").expect("a result");
    assert_eq!(result.1["result"], "Tool refund was not approved.", "the timeout still denies");
    drop(first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_approval_outlives_its_readers_and_is_decided_after_a_reconnect() {
    // docs/semantics.md D12: a disconnect never decides anything.
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = j!([calls(&[("c1", "refund", REFUND)]), {"content": "Refunded."}]);
    let addr = start_with(ServeConfig::new(vec![chat_tenant("acme", "acme-key", script(dir.path(), replies))])).await;
    let mut first = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "p1", "input": "refund"}"#).await;
    first.until("approval_required").await;
    let mut second = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "p1"}"#).await;
    second.until("approval_required").await;
    drop(first);
    drop(second);
    // Both readers are gone; the approval stays pending.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, body) = request(addr, "GET", "/api/chat/p1", Some("acme-key"), "").await;
    let transcript = json(&body);
    assert_eq!(transcript["status"], "running", "{transcript}");
    assert_eq!(transcript["pending_approvals"][0]["id"], "c1", "{transcript}");

    let mut back = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "p1"}"#).await;
    let (name, data) = back.until("approval_required").await.pop().expect("re-emitted");
    assert_eq!((name.as_str(), data["id"].as_str()), ("approval_required", Some("c1")));
    let body = r#"{"session_id": "p1", "call_id": "c1", "decision": "approve"}"#;
    assert_eq!(request(addr, "POST", "/api/chat/approve", Some("acme-key"), body).await.0, 200);
    let rest = back.rest().await;
    let result = rest.iter().find(|(n, _)| n == "tool_result").expect("a result");
    assert_eq!(result.1["result"], "Refunded 9000 cents on A-1002");
    assert_eq!(rest.last().map(|(n, _)| n.as_str()), Some("run_completed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_run_and_its_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = j!([calls(&[("c1", "sleep_ms", r#"{"ms": 30000}"#)]), {"content": "unreached"}]);
    let addr = start_with(ServeConfig::new(vec![
        chat_tenant("acme", "acme-key", script(dir.path(), replies.clone())),
        chat_tenant("globex", "globex-key", script(dir.path(), replies)),
    ]))
    .await;
    let started = Instant::now();
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "c", "input": "wait"}"#).await;
    sse.until("tool_call").await;
    let cancel = r#"{"session_id": "c"}"#;
    assert_eq!(request(addr, "POST", "/api/chat/cancel", Some("globex-key"), cancel).await.0, 404);
    let (status, body) = request(addr, "POST", "/api/chat/cancel", Some("acme-key"), cancel).await;
    assert_eq!((status, json(&body)), (200, j!({"ok": true})));
    let rest = sse.rest().await;
    let (name, data) = rest.last().expect("an end");
    assert_eq!(
        (name.as_str(), data["type"].as_str(), data["fatal"].as_bool()),
        ("error", Some("cancelled"), Some(true))
    );
    assert!(started.elapsed() < Duration::from_secs(10), "the 30 s call was interrupted");
    assert_eq!(request(addr, "POST", "/api/chat/cancel", Some("acme-key"), cancel).await.0, 404, "nothing runs now");
}

#[tokio::test]
async fn chat_routes_refuse_bad_requests_and_other_tenants_through_the_router() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = j!([{"content": "hi"}]);
    let mut config = ServeConfig::new(vec![
        chat_tenant("acme", "acme-key", script(dir.path(), replies.clone())),
        chat_tenant("globex", "globex-key", script(dir.path(), replies)),
    ]);
    config.max_plugin_bytes = 4 << 20;
    config.resolve(Path::new(".")).expect("config");
    let store = Arc::new(SqliteRunStore::open(dir.path().join("s.db")).expect("store"));
    let router = Service::with_store(&host(), &config, store).await.expect("service").router();
    let send = |method: &str, path: &str, key: Option<&str>, body: Body| {
        let mut r = Request::builder().method(method).uri(path);
        if let Some(k) = key {
            r = r.header("authorization", format!("Bearer {k}"));
        }
        let request = r.body(body).expect("request");
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await.expect("infallible");
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("body");
            (status, String::from_utf8_lossy(&bytes).into_owned())
        }
    };
    for (method, path) in [
        ("POST", "/api/chat"),
        ("POST", "/api/chat/approve"),
        ("POST", "/api/chat/cancel"),
        ("GET", "/api/chat/s1"),
        ("POST", "/api/plugins"),
    ] {
        assert_eq!(send(method, path, None, Body::empty()).await.0, StatusCode::UNAUTHORIZED, "{path}");
    }
    // acme finishes a chat in session s1; globex cannot see or touch it.
    let (status, body) =
        send("POST", "/api/chat", Some("acme-key"), Body::from(r#"{"session_id": "s1", "input": "hi"}"#)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("event: run_completed"), "{body}");
    assert_eq!(send("GET", "/api/chat/s1", Some("acme-key"), Body::empty()).await.0, StatusCode::OK);
    assert_eq!(send("GET", "/api/chat/s1", Some("globex-key"), Body::empty()).await.0, StatusCode::NOT_FOUND);
    let approve = r#"{"session_id": "s1", "call_id": "c1", "decision": "approve"}"#;
    assert_eq!(
        send("POST", "/api/chat/approve", Some("globex-key"), Body::from(approve)).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        send("POST", "/api/chat/cancel", Some("globex-key"), Body::from(r#"{"session_id": "s1"}"#)).await.0,
        StatusCode::NOT_FOUND
    );
    // globex's own session s1 is another session: a fresh transcript.
    send("POST", "/api/chat", Some("globex-key"), Body::from(r#"{"session_id": "s1", "input": "hello"}"#)).await;
    let (_, theirs) = send("GET", "/api/chat/s1", Some("globex-key"), Body::empty()).await;
    assert_eq!(json(&theirs)["messages"][0]["content"], "hello");
    // Bad bodies say what is wrong.
    let (status, body) = send("POST", "/api/chat", Some("acme-key"), Body::from(r#"{"input": 3}"#)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(json(&body)["error"].as_str().expect("error").starts_with("invalid request body"), "{body}");
    let (status, body) = send("POST", "/api/chat", Some("acme-key"), Body::from(r#"{"session_id": "new"}"#)).await;
    assert_eq!(
        (status, json(&body)["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("input is required (there is no run to resume in this session)"))
    );
    let resume_with_input = r#"{"session_id": "s1", "input": "x", "resume": true}"#;
    let (status, body) = send("POST", "/api/chat", Some("acme-key"), Body::from(resume_with_input)).await;
    assert_eq!(
        (status, json(&body)["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("resume goes without input: a chat with input starts a new run"))
    );
    let (status, _) =
        send("POST", "/api/chat", Some("acme-key"), Body::from(r#"{"input": "x", "agent": "other"}"#)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Plugin upload: validated, added to the tenant only, granted nothing.
    let notes = std::fs::read(fixtures::NOTES).expect("notes.wasm");
    let (status, body) = send("POST", "/api/plugins", Some("globex-key"), Body::from(notes.clone())).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(json(&body)["tools"].as_array().expect("tools").iter().any(|t| t == "save_note"), "{body}");
    let (_, tools) = send("GET", "/api/tools", Some("globex-key"), Body::empty()).await;
    assert!(tools.contains("save_note"));
    let (_, tools) = send("GET", "/api/tools", Some("acme-key"), Body::empty()).await;
    assert!(!tools.contains("save_note"), "another tenant does not get it");
    let (status, body) = send("POST", "/api/plugins", Some("globex-key"), Body::from(notes)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("Tool name conflict for 'save_note' from plugin."), "{body}");
    let (status, _) = send("POST", "/api/plugins", Some("globex-key"), Body::from(vec![0u8; (4 << 20) + 10])).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let (status, body) = send("POST", "/api/plugins", Some("globex-key"), Body::from("not wasm")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[test]
fn a_chat_killed_with_its_service_resumes_when_the_service_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replies =
        j!([calls(&[("c1", "echo", r#"{"text": "before"}"#), ("c2", "refund", REFUND)]), {"content": "Refunded."}]);
    let mut config = ServeConfig::new(vec![chat_tenant("acme", "acme-key", script(dir.path(), replies))]);
    config.store = Some(dir.path().join("sessions.db").into());
    // The first service dies (its runtime is dropped) while the refund waits
    // for approval and its reader is still connected (a reader that leaves
    // would deny it).
    {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let reader = rt.block_on(async {
            let addr = start_with(config.clone()).await;
            let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "k", "input": "refund"}"#).await;
            sse.until("approval_required").await;
            // Die only once the parallel c1 is saved, so that the resume has a completed call to skip.
            let t = Instant::now();
            loop {
                let (_, body) = request(addr, "GET", "/api/chat/k", Some("acme-key"), "").await;
                if json(&body)["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["tool_call_id"] == "c1")) {
                    break;
                }
                assert!(t.elapsed() < Duration::from_secs(20), "c1 never completed: {body}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            sse
        });
        drop(rt);
        drop(reader);
    }

    // The second resumes the run at start; a reader attaching sees the approval asked again.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let addr = start_with(config).await;
        let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "k"}"#).await;
        let asked = sse.until("approval_required").await;
        assert_eq!(asked.last().expect("asked").1["id"], "c2");
        assert!(!asked.iter().any(|(n, d)| n == "tool_call" && d["id"] == "c1"), "c1 is not re-run: {asked:?}");
        let body = r#"{"session_id": "k", "call_id": "c2", "decision": "approve"}"#;
        assert_eq!(request(addr, "POST", "/api/chat/approve", Some("acme-key"), body).await.0, 200);
        let rest = sse.rest().await;
        assert_eq!(rest.last().expect("end").0, "run_completed", "{rest:?}");
        let (_, transcript) = request(addr, "GET", "/api/chat/k", Some("acme-key"), "").await;
        let messages = json(&transcript)["messages"].clone();
        let answers: Vec<&str> =
            messages.as_array().expect("messages").iter().filter_map(|m| m["tool_call_id"].as_str()).collect();
        assert_eq!(answers, ["c1", "c2"], "each call answered exactly once: {messages}");
    });
}

// Bounded load through the model loop: 40 chats at once over SSE, each
// asking for ten calls of which two are hostile (a loop past its 200 ms
// limit, a panic). Every call id is answered exactly once, in the stream and
// in the transcript.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_load_test_with_hostile_calls_answers_every_call_id_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut list: Vec<(String, &str, String)> =
        (0..8).map(|i| (format!("e{i}"), "echo", format!(r#"{{"text": "call {i}"}}"#))).collect();
    list.push(("h1".into(), "loop_forever", "{}".into()));
    list.push(("h2".into(), "panic_now", "{}".into()));
    let refs: Vec<(&str, &str, &str)> = list.iter().map(|(a, b, c)| (a.as_str(), *b, c.as_str())).collect();
    let replies = j!([calls(&refs), {"content": "done"}]);
    let mut acme = chat_tenant("acme", "acme-key", script(dir.path(), replies));
    let mut hostile = super::plugin(fixtures::HOSTILE);
    hostile.limits.max_wall_clock_ms = Some(200);
    acme.plugins.push(hostile);
    acme.max_concurrent_runs = 64;
    acme.max_concurrent_calls = 400;
    acme.calls_per_minute = 100_000;
    let addr = start_with(ServeConfig::new(vec![acme])).await;

    let chats = 40usize;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..chats {
        tasks.spawn(async move {
            let t = Instant::now();
            let body = format!(r#"{{"session_id": "load-{n}", "input": "go"}}"#);
            let mut sse = Sse::post(addr, "/api/chat", "acme-key", &body).await;
            assert_eq!(sse.status, 200);
            let events = sse.rest().await;
            (n, events, t.elapsed())
        });
    }
    let mut latencies = Vec::new();
    let mut errors = 0;
    while let Some(done) = tasks.join_next().await {
        let (n, events, elapsed) = done.expect("chat");
        assert_eq!(events.last().map(|e| e.0.as_str()), Some("run_completed"), "chat {n}: {events:?}");
        for (id, _, _) in &list {
            let results: Vec<&Value> = events
                .iter()
                .filter(|(name, d)| name == "tool_result" && d["id"] == id.as_str())
                .map(|(_, d)| d)
                .collect();
            assert_eq!(results.len(), 1, "chat {n}, call {id}: {events:?}");
            let is_error = results[0]["is_error"].as_bool().expect("is_error");
            assert_eq!(is_error, id.starts_with('h'), "chat {n}, call {id}: {}", results[0]);
            errors += usize::from(is_error);
        }
        latencies.push(elapsed.as_secs_f64());
        let (_, transcript) = request(addr, "GET", &format!("/api/chat/load-{n}"), Some("acme-key"), "").await;
        let answered =
            json(&transcript)["messages"].as_array().expect("messages").iter().filter(|m| m["role"] == "tool").count();
        assert_eq!(answered, list.len(), "chat {n}: the transcript answers each call once");
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    let p99 = latencies[(latencies.len() * 99).div_ceil(100) - 1];
    let calls = chats * list.len();
    println!(
        "chat load: {chats} chats, {calls} calls ({errors} hostile) in {seconds:.2} s = {:.0} calls/s; chat p99 {:.0} ms",
        calls as f64 / seconds,
        p99 * 1e3
    );
    assert_eq!(errors, chats * 2);
    assert!(seconds < 90.0, "bounded in time");
}

/// `store = "postgres://…"` keeps sessions in PostgreSQL: the server
/// `LOVIA_TEST_POSTGRES_URL` names (`scripts/test` starts a throwaway one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_can_live_in_postgres() {
    let Some(url) = lovia_tests::parts::postgres_url() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let tenant_name = lovia_runner::new_id("pg");
    let replies = j!([calls(&[("c1", "echo", r#"{"text": "kept"}"#)]), {"content": "Kept."}]);
    let mut config = ServeConfig::new(vec![chat_tenant(&tenant_name, "pg-key", script(dir.path(), replies))]);
    config.store = Some(url.into());
    let addr = start_with(config).await;
    let mut sse = Sse::post(addr, "/api/chat", "pg-key", r#"{"session_id": "p1", "input": "keep it"}"#).await;
    assert_eq!(sse.rest().await.last().expect("end").0, "run_completed");
    let (status, body) = request(addr, "GET", "/api/chat/p1", Some("pg-key"), "").await;
    assert_eq!((status, json(&body)["status"].as_str()), (200, Some("completed")), "{body}");
    assert_eq!(json(&body)["messages"][2]["content"], "kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_chat_stream_gets_keep_alive_comments() {
    // A chat waiting on an approval sends nothing; a keep-alive comment after
    // each interval of silence keeps proxies from cutting it.
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = j!([calls(&[("c1", "refund", REFUND)]), {"content": "done"}]);
    let mut config = ServeConfig::new(vec![chat_tenant("acme", "acme-key", script(dir.path(), replies))]);
    config.sse_keep_alive_secs = 1;
    let addr = start_with(config).await;
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "k1", "input": "refund"}"#).await;
    assert_eq!(sse.status, 200);
    sse.until("approval_required").await;
    let lines = sse.lines_for(Duration::from_millis(2_600)).await;
    let comments = lines.iter().filter(|l| l.starts_with(':')).count();
    assert!(comments >= 2, "two intervals of silence give at least two keep-alive comments: {lines:?}");
    assert!(
        lines.iter().all(|l| l.is_empty() || l.starts_with(':')),
        "nothing but keep-alives while waiting: {lines:?}"
    );
}

// A script is the same list of turns as `lovia run`'s: `text` ends the
// chat (`content` is its older spelling), and a reply with a key no reply
// has stops the service from starting, naming the reply and the key,
// instead of ending every chat with empty output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_shares_lovia_runs_turns_and_refuses_an_unknown_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = j!([calls(&[("c1", "lookup_order", r#"{"order_id": "A-1002"}"#)]), {"text": "Looked it up."}]);
    let addr = start_with(ServeConfig::new(vec![chat_tenant("acme", "acme-key", script(dir.path(), replies))])).await;
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1", "input": "A-1002?"}"#).await;
    let events = sse.rest().await;
    assert_eq!(events.last().expect("end").1["output"], "Looked it up.", "{events:?}");

    for (replies, expected) in [
        (j!([{"txt": "Done."}]), "reply 1: unknown key `txt`; a reply has `tool_calls`"),
        (
            j!([calls(&[("c1", "lookup_order", "{}")]), {"content": "a", "text": "b"}]),
            "reply 2: has both `text` and `content`",
        ),
        (
            j!([{"tool_calls": [{"id": "c1", "name": "x", "args": "{}"}]}]),
            "reply 1: `tool_calls`: unknown field `args`",
        ),
        (j!({"content": "Done."}), "a script is a JSON array of replies"),
    ] {
        let mut config = ServeConfig::new(vec![chat_tenant("acme", "acme-key", script(dir.path(), replies))]);
        // The store is opened before the model is read: one of the test's own.
        config.store = Some(dir.path().join("refused.db").into());
        config.resolve(Path::new(".")).expect("config");
        let err = Service::new(&host(), &config).await.err().expect("refused").to_string();
        assert!(err.starts_with("tenant acme: the scripted model: [tenants.provider] script: "), "{err}");
        assert!(err.contains(expected), "{err}");
    }
}
