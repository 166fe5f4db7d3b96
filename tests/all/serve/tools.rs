//! The tool routes: auth, isolation, direct calls, quotas, config errors,
//! and a load test with hostile calls.

use super::{json, plugin, request, start, tenant};
use lovia_serve::{ServeConfig, hash_key};
use lovia_tests::fixtures;

#[tokio::test]
async fn every_api_route_needs_a_tenant_key() {
    let addr = start(vec![tenant("acme", "acme-key", &[fixtures::ORDERS])]).await;
    assert_eq!(request(addr, "GET", "/healthz", None, "").await, (200, "ok\n".into()));
    for key in [None, Some("wrong-key"), Some("")] {
        let (status, body) = request(addr, "GET", "/api/tools", key, "").await;
        assert_eq!((status, json(&body)["error"].as_str()), (401, Some("missing or unknown API key")));
        let (status, _) = request(addr, "POST", "/api/tools/lookup_order/call", key, r#"{"order_id": "A-1001"}"#).await;
        assert_eq!(status, 401);
    }
    assert_eq!(request(addr, "GET", "/nope", Some("acme-key"), "").await.0, 404);
}

#[tokio::test]
async fn a_tenant_sees_and_calls_only_its_own_tools() {
    let addr =
        start(vec![tenant("acme", "acme-key", &[fixtures::ORDERS]), tenant("globex", "globex-key", &[fixtures::DOCS])])
            .await;
    let names = |body: &str| -> Vec<String> {
        json(body)
            .as_array()
            .expect("list")
            .iter()
            .map(|t| t["function"]["name"].as_str().expect("name").to_owned())
            .collect()
    };
    let (status, body) = request(addr, "GET", "/api/tools", Some("acme-key"), "").await;
    assert_eq!((status, names(&body)), (200, vec!["lookup_order".into(), "refund".into(), "top_customers".into()]));
    assert_eq!(json(&body)[0]["type"], "function");
    let (_, body) = request(addr, "GET", "/api/tools", Some("globex-key"), "").await;
    assert_eq!(names(&body), vec!["search_docs".to_owned()]);

    let (status, body) =
        request(addr, "POST", "/api/tools/lookup_order/call", Some("acme-key"), r#"{"order_id": "A-1001"}"#).await;
    assert_eq!(status, 200);
    assert_eq!(json(&body)["is_error"], false);
    assert!(json(&body)["output"].as_str().expect("output").contains("\"customer\": \"ada\""), "{body}");

    // Another tenant's tool reads exactly like one that does not exist.
    let theirs =
        request(addr, "POST", "/api/tools/lookup_order/call", Some("globex-key"), r#"{"order_id": "A-1001"}"#).await;
    let missing = request(addr, "POST", "/api/tools/no_such_tool/call", Some("globex-key"), "{}").await;
    assert_eq!((theirs.0, missing.0), (404, 404));
    assert_eq!(json(&theirs.1)["error"], "no tool named lookup_order");
    assert_eq!(json(&missing.1)["error"], "no tool named no_such_tool");
}

#[tokio::test]
async fn a_direct_call_answers_what_the_model_would_read() {
    let addr = start(vec![tenant("acme", "acme-key", &[fixtures::DOCS])]).await;
    let call = |body: &'static str| request(addr, "POST", "/api/tools/search_docs/call", Some("acme-key"), body);
    let (status, body) = call(r#"{"query": "timeouts"}"#).await;
    assert_eq!((status, json(&body)), (200, serde_json::json!({"output": "[\"Timeouts\"]", "is_error": false})));
    let (status, body) = call(r#"{"limit": 99}"#).await;
    assert_eq!(status, 200);
    assert_eq!(json(&body)["is_error"], true);
    assert!(
        json(&body)["output"]
            .as_str()
            .expect("output")
            .starts_with("Tool error: Invalid arguments for tool 'search_docs'")
    );
    let (_, body) = call("{query: nope").await;
    assert!(json(&body)["output"].as_str().expect("output").starts_with("Invalid JSON in tool arguments:"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_refuse_with_429_and_show_in_metrics() {
    let mut limited = tenant("acme", "acme-key", &[fixtures::DIAGNOSTICS]);
    limited.max_concurrent_calls = 1;
    limited.calls_per_minute = 3;
    let addr = start(vec![limited]).await;
    let sleeper = tokio::spawn(request(addr, "POST", "/api/tools/sleep_ms/call", Some("acme-key"), r#"{"ms": 1500}"#));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (status, body) = request(addr, "POST", "/api/tools/echo/call", Some("acme-key"), r#"{"text": "hi"}"#).await;
    assert_eq!((status, json(&body)["error"].as_str()), (429, Some("too many calls in flight for this tenant")));
    assert_eq!(sleeper.await.expect("join").0, 200);
    assert_eq!(request(addr, "POST", "/api/tools/echo/call", Some("acme-key"), r#"{"text": "hi"}"#).await.0, 200);
    let (status, body) = request(addr, "POST", "/api/tools/echo/call", Some("acme-key"), r#"{"text": "hi"}"#).await;
    assert_eq!((status, json(&body)["error"].as_str()), (429, Some("calls per minute quota exceeded")));

    let (status, metrics) = request(addr, "GET", "/metrics", None, "").await;
    assert_eq!(status, 200);
    for line in [
        "lovia_calls_total{tenant=\"acme\",tool=\"echo\"} 1",
        "lovia_calls_total{tenant=\"acme\",tool=\"sleep_ms\"} 1",
        "lovia_refused_total{tenant=\"acme\",reason=\"max_concurrent_calls\"} 1",
        "lovia_refused_total{tenant=\"acme\",reason=\"calls_per_minute\"} 1",
        "lovia_calls_in_flight{tenant=\"acme\"} 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} not in\n{metrics}");
    }
}

#[test]
fn bad_configs_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("serve.toml");
    for (text, needle) in [
        ("listen = \"127.0.0.1:1\"\ntenants = []\nport = 3\n", "unknown field `port`"),
        ("[[tenants]]\nname = \"a\"\napi_keys = [\"demo-key\"]\n", "lower-case hex SHA-256"),
        ("[[tenants]]\nname = \"a b\"\napi_keys = []\n", "must be letters, digits"),
        (
            "[[tenants]]\nname = \"a\"\napi_keys = [\"c48a01f49fd0f2cc404bc3cbbc80e91457a3d41bb429a695243de4c61794155c\"]\n[[tenants]]\nname = \"a\"\napi_keys = [\"580843d03d2216ff1a275d0991bad66e4d1af871171d929e9de604b7959f9bca\"]\n",
            "is used twice",
        ),
        // The waits are bounded as at `lovia mcp`: an hour at most.
        (
            "approval_timeout_secs = 86400
tenants = []
",
            "approval_timeout_secs is 86400; it must be 1 to 3600 (an hour)",
        ),
        (
            "question_timeout_secs = 0
tenants = []
",
            "question_timeout_secs is 0; it must be 1 to 3600 (an hour)",
        ),
        (
            "[[tenants]]\nname = \"a\"\napi_keys = [\"c48a01f49fd0f2cc404bc3cbbc80e91457a3d41bb429a695243de4c61794155c\"]\nmax_mcp_tasks = 10001\n",
            "max_mcp_tasks (10001) must be 0 to 10000",
        ),
    ] {
        std::fs::write(&path, text).expect("write");
        let err = ServeConfig::load(&path).expect_err("refused").to_string();
        assert!(err.contains(needle), "{err:?} lacks {needle:?}");
    }
    // The shipped example is valid.
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/serve.toml");
    let config = ServeConfig::load(&example).expect("examples/serve.toml");
    assert_eq!(config.tenants[0].api_keys[0], hash_key("demo-key"));
}

/// A load test on loopback, bounded in count and time: 400 direct calls from
/// 16 clients, one in five hostile (spinning past the plugin's 200 ms wall-clock
/// limit, bombing memory, panicking). Every call is answered exactly once, with
/// the right result; the figures are printed (`--nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_test_with_hostile_calls_loses_no_result() {
    let mut hostile = plugin(fixtures::HOSTILE);
    hostile.limits.max_wall_clock_ms = Some(200);
    let mut acme = tenant("acme", "acme-key", &[fixtures::DIAGNOSTICS]);
    acme.plugins.push(hostile);
    acme.max_concurrent_calls = 64;
    acme.calls_per_minute = 100_000;
    let addr = start(vec![acme]).await;

    let total = 400usize;
    let clients = 16usize;
    let started = std::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for client in 0..clients {
        tasks.spawn(async move {
            let mut seen = Vec::new();
            for i in (client..total).step_by(clients) {
                let (tool, args, want): (&str, String, Option<String>) = match i % 10 {
                    0 => ("loop_forever", "{}".into(), None),
                    5 if i % 20 == 5 => ("memory_bomb", "{}".into(), None),
                    5 => ("panic_now", "{}".into(), None),
                    _ => ("echo", format!(r#"{{"text": "call {i}"}}"#), Some(format!("call {i}"))),
                };
                let t = std::time::Instant::now();
                let (status, body) =
                    request(addr, "POST", &format!("/api/tools/{tool}/call"), Some("acme-key"), &args).await;
                seen.push((i, status, json(&body), want, t.elapsed()));
            }
            seen
        });
    }
    let mut answered = vec![0u32; total];
    let mut latencies = Vec::new();
    let mut errors = 0;
    while let Some(done) = tasks.join_next().await {
        for (i, status, body, want, elapsed) in done.expect("client") {
            answered[i] += 1;
            assert_eq!(status, 200, "call {i}: {body}");
            match want {
                Some(text) => assert_eq!(body, serde_json::json!({"output": text, "is_error": false}), "call {i}"),
                None => {
                    errors += 1;
                    assert_eq!(body["is_error"], true, "call {i}: {body}");
                    assert!(body["output"].as_str().expect("output").starts_with("Tool error: "), "call {i}: {body}");
                }
            }
            latencies.push(elapsed.as_secs_f64());
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    assert!(answered.iter().all(|n| *n == 1), "every call answered exactly once");
    latencies.sort_by(f64::total_cmp);
    let p99 = latencies[(latencies.len() * 99).div_ceil(100) - 1];
    println!(
        "load: {total} calls ({errors} hostile) from {clients} clients in {seconds:.2} s = {:.0} calls/s; p99 {:.1} ms",
        total as f64 / seconds,
        p99 * 1e3
    );
    assert!(seconds < 60.0, "bounded in time");
}

#[tokio::test]
async fn a_tenant_fuel_quota_stops_its_calls_and_no_one_elses() {
    use axum::body::Body;
    use tower::ServiceExt;
    let mut hungry = tenant("hungry", "hungry-key", &[fixtures::DIAGNOSTICS]);
    hungry.fuel_per_minute = Some(1_000_000);
    let mut config = ServeConfig::new(vec![hungry, tenant("calm", "calm-key", &[fixtures::DIAGNOSTICS])]);
    config.metrics_public = true;
    config.resolve(std::path::Path::new(".")).expect("config");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = std::sync::Arc::new(lovia_runner::SqliteRunStore::open(dir.path().join("s.db")).expect("store"));
    // Without fuel metering the quota cannot be kept: refused at start.
    let err = lovia_serve::Service::with_store(&lovia_tests::host(), &config, store.clone()).await.err();
    assert_eq!(
        err.expect("refused").to_string(),
        "tenant hungry: fuel_per_minute needs a host with fuel metering (HostConfig::fuel_metering)"
    );
    let metered = lovia_host::Host::new(lovia_host::HostConfig::default().with_fuel_metering(true)).expect("host");
    let router = lovia_serve::Service::with_store(&metered, &config, store).await.expect("service").router();
    let call = |key: &str, tool: &str, body: &'static str| {
        let request = axum::http::Request::post(format!("/api/tools/{tool}/call"))
            .header("authorization", format!("Bearer {key}"))
            .body(Body::from(body))
            .expect("request");
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await.expect("infallible");
            json(&String::from_utf8_lossy(&axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("body")))
        }
    };
    // Each call holds an equal share of the minute's fuel (1/16, as the
    // tenant may run 16 calls at once): sixteen spinning calls spend it.
    for _ in 0..16 {
        let spin = call("hungry-key", "spin_ms", r#"{"ms": 2000}"#).await;
        assert_eq!(spin["output"], "Tool error: CPU budget exhausted", "{spin}");
    }
    let next = call("hungry-key", "echo", r#"{"text": "hi"}"#).await;
    assert_eq!(next["output"], "Tool error: CPU budget exhausted", "the quota is spent for the minute");
    assert_eq!(call("calm-key", "echo", r#"{"text": "hi"}"#).await["output"], "hi", "another tenant is untouched");
    let metrics = router
        .clone()
        .oneshot(axum::http::Request::get("/metrics").body(Body::empty()).expect("request"))
        .await
        .expect("infallible");
    let text =
        String::from_utf8_lossy(&axum::body::to_bytes(metrics.into_body(), 1 << 20).await.expect("body")).into_owned();
    let used: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("lovia_fuel_used_total{tenant=\"hungry\"} "))
        .and_then(|n| n.parse().ok())
        .expect("fuel metric");
    assert!(used >= 1_000_000, "{text}");
    assert!(text.contains("lovia_traps_total{tenant=\"hungry\"} 17"), "{text}");
}

#[tokio::test]
async fn metrics_count_error_kinds_from_the_outcome_not_the_text() {
    // A tool error whose message reads exactly like a timeout, and a real
    // timeout: only the second one is a timeout.
    let mut acme = tenant("acme", "acme-key", &[fixtures::HOSTILE, fixtures::DIAGNOSTICS]);
    acme.plugins[1].limits.max_wall_clock_ms = Some(50);
    let addr = start(vec![acme]).await;
    let (status, body) =
        request(addr, "POST", "/api/tools/read_env/call", Some("acme-key"), r#"{"name": "timed out after 50 ms"}"#)
            .await;
    assert_eq!(status, 200);
    let body = json(&body);
    assert!(body["output"].as_str().is_some_and(|o| o.starts_with("Tool error: timed out after 50 ms")), "{body}");
    assert_eq!(body["error_kind"], "tool_error");
    let (_, body) = request(addr, "POST", "/api/tools/spin_ms/call", Some("acme-key"), r#"{"ms": 5000}"#).await;
    let body = json(&body);
    assert_eq!(
        (body["output"].as_str(), body["error_kind"].as_str()),
        (Some("Tool error: timed out after 50 ms (the host's wall-clock limit)"), Some("timeout"))
    );

    let (_, metrics) = request(addr, "GET", "/metrics", None, "").await;
    for line in [
        "lovia_tool_errors_total{tenant=\"acme\",kind=\"tool_error\"} 1",
        "lovia_tool_errors_total{tenant=\"acme\",kind=\"timeout\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} not in\n{metrics}");
    }
}

/// `POST /api/tools/{name}/call` with `x-lovia-approval: wait`: a call that
/// needs approval waits, is listed by `GET /api/approvals` under its
/// session `direct-<n>`, and runs once `POST /api/chat/approve` approves it;
/// without the header nobody is asked and it is denied; any other value is
/// refused, naming the one there is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_call_waits_for_a_person_when_asked_to() {
    let addr = super::start(vec![super::tenant("acme", "acme-key", &[lovia_tests::fixtures::ORDERS])]).await;
    let refund = r#"{"order_id": "A-1002", "amount_cents": 6000, "reason": "late"}"#;
    let call = |approval: &'static str| async move {
        let header = format!("x-lovia-approval: {approval}\r\n");
        super::request_with(addr, "POST", "/api/tools/refund/call", Some("acme-key"), &header, refund).await
    };
    let waiting = tokio::spawn(call("wait"));
    let pending = loop {
        let (_, body) = super::request(addr, "GET", "/api/approvals", Some("acme-key"), "").await;
        let approvals = super::json(&body)["approvals"].as_array().cloned().unwrap_or_default();
        if let Some(a) = approvals.into_iter().find(|a| a["tool"] == "refund") {
            break a;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let session = pending["session_id"].as_str().expect("session").to_owned();
    assert!(session.starts_with("direct-"), "{pending}");
    // One call: there is no rest of a chat to allow its tool for.
    let always =
        serde_json::json!({"session_id": session, "call_id": pending["call_id"], "decision": "approve", "always": true})
            .to_string();
    let (status, body) = super::request(addr, "POST", "/api/chat/approve", Some("acme-key"), &always).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("always is for a chat's approvals"), "{body}");
    let decide =
        serde_json::json!({"session_id": session, "call_id": pending["call_id"], "decision": "approve"}).to_string();
    let (status, body) = super::request(addr, "POST", "/api/chat/approve", Some("acme-key"), &decide).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = waiting.await.expect("the call");
    assert_eq!((status, super::json(&body)["output"].as_str()), (200, Some("Refunded 6000 cents on A-1002 (late)")));
    let (status, body) = call("later").await;
    assert_eq!(status, 400, "{body}");
    let refusal = super::json(&body)["error"].as_str().unwrap_or_default().to_owned();
    assert!(refusal.starts_with("x-lovia-approval is \"later\"; the one value is \"wait\""), "{body}");
    let (status, body) = super::request(addr, "POST", "/api/tools/refund/call", Some("acme-key"), refund).await;
    assert_eq!((status, super::json(&body)["output"].as_str()), (200, Some("Tool refund was not approved.")));
}

/// A direct call with `Accept: text/event-stream` streams its progress:
/// `call_started` with the id to cancel it by, the tool's progress (the
/// first at once, the latest before the result), then `tool_result` with
/// what the JSON answer would hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_call_streams_its_progress_when_asked() {
    let addr = super::start(vec![super::tenant("acme", "acme-key", &[lovia_tests::fixtures::DIAGNOSTICS])]).await;
    let mut sse = super::Sse::post_with(
        addr,
        "/api/tools/progress/call",
        "acme-key",
        r#"{"steps": 3}"#,
        "Accept: text/event-stream\r\n",
    )
    .await;
    assert_eq!(sse.status, 200);
    let events = sse.rest().await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"call_started"), "{events:?}");
    assert!(events[0].1["call_id"].as_str().is_some_and(|id| id.starts_with("http_")), "{events:?}");
    let progress: Vec<&str> =
        events.iter().filter(|(n, _)| n == "tool_progress").filter_map(|(_, d)| d["message"].as_str()).collect();
    assert_eq!(progress.first(), Some(&"step 1 of 3"), "{events:?}");
    assert_eq!(progress.last(), Some(&"step 3 of 3"), "the latest before the result: {events:?}");
    let (last, result) = events.last().expect("a result");
    assert_eq!(last, "tool_result");
    assert_eq!(
        (&result["output"], &result["is_error"]),
        (&serde_json::json!("done in 3 steps"), &serde_json::json!(false))
    );
}

/// A direct call named by `x-lovia-call-id` is cancelled by
/// `DELETE /api/tools/calls/{id}` from another connection, and answers at
/// once as cancelled; an id in use is refused, an unknown one is 404, and
/// another tenant cannot cancel it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_call_is_cancelled_by_its_id() {
    let addr = super::start(vec![
        super::tenant("acme", "acme-key", &[lovia_tests::fixtures::DIAGNOSTICS]),
        super::tenant("globex", "globex-key", &[lovia_tests::fixtures::DIAGNOSTICS]),
    ])
    .await;
    let call = |id: &'static str, body: &'static str| async move {
        let header = format!("x-lovia-call-id: {id}\r\n");
        super::request_with(addr, "POST", "/api/tools/sleep_ms/call", Some("acme-key"), &header, body).await
    };
    let started = std::time::Instant::now();
    let napping = tokio::spawn(call("nap-1", r#"{"ms": 30000}"#));
    // Until it runs (the tenant's calls in flight say so), without a call
    // that could take its id first.
    loop {
        let (_, body) = super::request(addr, "GET", "/api/metrics", Some("acme-key"), "").await;
        if super::json(&body)["in_flight"].as_u64().unwrap_or(0) >= 1 {
            break;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "the call never ran: {body}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // A second call of the same id is refused while it runs.
    let twin = call("nap-1", r#"{"ms": 0}"#).await;
    assert_eq!(twin.0, 409, "{}", twin.1);
    assert!(twin.1.contains("a call with x-lovia-call-id nap-1 is running"), "{}", twin.1);
    let (status, _) = super::request(addr, "DELETE", "/api/tools/calls/nap-1", Some("globex-key"), "").await;
    assert_eq!(status, 404, "another tenant's call is not there for it");
    let (status, body) = super::request(addr, "DELETE", "/api/tools/calls/nap-1", Some("acme-key"), "").await;
    assert_eq!((status, super::json(&body)), (200, serde_json::json!({"cancelled": "nap-1"})));
    let (status, body) = napping.await.expect("the call");
    let answer = super::json(&body);
    assert_eq!(
        (status, &answer["is_error"], &answer["error_kind"]),
        (200, &serde_json::json!(true), &serde_json::json!("cancelled")),
        "{body}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "answered when cancelled");
    let (status, body) = super::request(addr, "DELETE", "/api/tools/calls/nap-1", Some("acme-key"), "").await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no direct call nap-1 is running"), "{body}");
    let bad = call("no spaces", r#"{"ms": 0}"#).await;
    assert_eq!(bad.0, 400, "{}", bad.1);
}
