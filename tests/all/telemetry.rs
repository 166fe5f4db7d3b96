//! Traces against a real OpenTelemetry backend: Arize Phoenix (the
//! `telemetry` part, started once for this binary on ports of its own),
//! which takes OTLP and serves the spans back through its REST API. Each
//! test finds its own spans by a trace id or an id only it used.

use lovia_tests::parts::{Part, require};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The backend of this test binary.
struct Phoenix {
    port: u16,
    /// Its OTLP/gRPC port.
    grpc: u16,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Phoenix, started on first use; `None` when the `telemetry` part is opted out.
fn phoenix() -> Option<&'static Phoenix> {
    static PHOENIX: OnceLock<Option<Phoenix>> = OnceLock::new();
    PHOENIX.get_or_init(|| require(Part::Telemetry, start)).as_ref()
}

fn start() -> Result<Phoenix, String> {
    let bin = root().join("target/phoenix-venv/bin/phoenix");
    if !bin.exists() {
        return Err(format!("{} does not exist", bin.display()));
    }
    let (port, grpc) = (free_port(), free_port());
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?.keep();
    // A watchdog ends Phoenix with this test binary: the binary exits
    // without running destructors of statics.
    let script = "\"$@\" & p=$!; while kill -0 \"$LOVIA_TEST_PID\" 2>/dev/null && kill -0 $p 2>/dev/null; do sleep 1; done; kill $p 2>/dev/null";
    Command::new("sh")
        .args(["-c", script, "phoenix"])
        .arg(&bin)
        .arg("serve")
        .env("LOVIA_TEST_PID", std::process::id().to_string())
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", grpc.to_string())
        .env("PHOENIX_WORKING_DIR", &dir)
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .stdout(std::fs::File::create(dir.join("phoenix.log")).map_err(|e| e.to_string())?)
        .stderr(std::fs::File::create(dir.join("phoenix.err")).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let until = Instant::now() + Duration::from_secs(90);
    while Instant::now() < until {
        if get(port, "/healthz").is_some_and(|(status, _)| status == 200) {
            return Ok(Phoenix { port, grpc });
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let err = std::fs::read_to_string(dir.join("phoenix.err")).unwrap_or_default();
    Err(format!("Phoenix did not answer on port {port} within 90 s: {err}"))
}

/// One HTTP/1.0 GET on loopback: (status, body).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).ok()?;
    let status = raw.split(' ').nth(1)?.parse().ok()?;
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Some((status, body))
}

impl Phoenix {
    /// The OTLP/HTTP endpoint.
    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every span Phoenix holds, newest first.
    fn all_spans(&self) -> Vec<Value> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("/v1/projects/default/spans?limit=1000&cursor={c}"),
                None => "/v1/projects/default/spans?limit=1000".to_owned(),
            };
            let Some((200, body)) = get(self.port, &path) else { return out };
            let page: Value = serde_json::from_str(&body).unwrap_or_default();
            out.extend(page["data"].as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return out,
            }
        }
    }

    /// The spans of the trace that `pick` finds a span of, once at least
    /// `count` of them arrived (export is asynchronous); panics after 30 s.
    fn trace(&self, count: usize, pick: impl Fn(&Value) -> bool) -> Vec<Value> {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let spans = self.all_spans();
            let mut found = Vec::new();
            if let Some(trace) = spans.iter().find(|s| pick(s)).map(|s| s["context"]["trace_id"].clone()) {
                found = spans.into_iter().filter(|s| s["context"]["trace_id"] == trace).collect();
                if found.len() >= count {
                    return found;
                }
            }
            assert!(
                Instant::now() < until,
                "no trace of {count} spans arrived within 30 s; the trace found:\n{}",
                summary(&found)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

/// The spans named `name`.
fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

/// The one span named `name`.
fn one<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one span {name}: {}", summary(spans));
    found[0]
}

fn id(span: &Value) -> &str {
    span["context"]["span_id"].as_str().unwrap_or_default()
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

/// The trace as lines of "name <- parent name", for failure messages.
fn summary(spans: &[Value]) -> String {
    let names: HashMap<&str, &str> = spans.iter().map(|s| (id(s), s["name"].as_str().unwrap_or_default())).collect();
    spans
        .iter()
        .map(|s| format!("{} <- {}", s["name"], s["parent_id"].as_str().and_then(|p| names.get(p)).unwrap_or(&"?")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `lovia <args>` exporting to `phoenix`, with `env` added.
fn lovia(phoenix: &Phoenix, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(args)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.endpoint())
        .envs(env.iter().copied())
        .output()
        .expect("run lovia")
}

fn script(dir: &std::path::Path, script: &Value) -> String {
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).expect("write script");
    path.display().to_string()
}

fn calls(list: &[(&str, &str, Value)]) -> Value {
    json!({"tool_calls": list.iter().map(|(id, name, args)| json!({"id": id, "name": name, "arguments": args.to_string()})).collect::<Vec<_>>()})
}

#[test]
fn a_run_with_a_retried_call_and_an_approval_is_one_trace() {
    let Some(phoenix) = phoenix() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let agent = format!("agent-{}", free_port());
    let turns = json!({
        "agent": {"name": agent, "approval_handler": "deny", "approvals": {"r": "approve"}},
        "turns": [
            calls(&[("f", "fail_first", json!({"failures": 1})), ("r", "refund", json!({"order_id": "A-1002", "amount_cents": 9000}))]),
            {"text": "done"}
        ]
    });
    let o = lovia(
        phoenix,
        &[
            "run",
            "--plugin",
            lovia_tests::fixtures::FLAKY,
            "--plugin",
            lovia_tests::fixtures::ORDERS,
            "--script",
            &script(dir.path(), &turns),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let spans = phoenix.trace(9, |s| {
        attr(s, "gen_ai.agent.name") == agent.as_str()
            && s["name"].as_str().is_some_and(|n| n.starts_with("invoke_agent"))
    });
    let run = one(&spans, &format!("invoke_agent {agent}"));
    assert!(run["parent_id"].is_null(), "the run is the root: {}", summary(&spans));
    assert_eq!(attr(run, "gen_ai.operation.name"), "invoke_agent");
    let chats: Vec<_> = spans.iter().filter(|s| attr(s, "gen_ai.operation.name") == "chat").collect();
    assert_eq!(chats.len(), 2, "{}", summary(&spans));
    assert!(chats.iter().all(|c| c["parent_id"] == id(run)), "{}", summary(&spans));
    let flaky = one(&spans, "execute_tool fail_first");
    assert_eq!(flaky["parent_id"], id(run));
    assert_eq!(attr(flaky, "gen_ai.tool.call.id"), "f");
    assert_eq!(attr(flaky, "gen_ai.tool.type"), "function");
    assert_eq!(attr(flaky, "lovia.plugin.name"), "flaky");
    // A fresh instance per attempt (lovia run's default) forgets the failed
    // attempts, so each of the three (retries = 2) fails, each in a span of its own.
    let attempts: Vec<_> = named(&spans, "lovia.attempt").into_iter().filter(|a| a["parent_id"] == id(flaky)).collect();
    assert_eq!(attempts.len(), 3, "{}", summary(&spans));
    for k in 1..=3 {
        let attempt = attempts.iter().find(|a| attr(a, "lovia.attempt") == k).expect("each attempt");
        assert_eq!(attempt["status_code"], "ERROR", "{attempt}");
        assert_eq!(attr(attempt, "error.type"), "tool_error");
    }
    assert_eq!(flaky["status_code"], "ERROR", "{flaky}");
    assert_eq!(attr(flaky, "error.type"), "tool_error");
    assert_eq!(attr(flaky, "lovia.tool.error_kind"), "Unavailable");
    let refund = one(&spans, "execute_tool refund");
    let approval = one(&spans, "lovia.approval");
    assert_eq!(approval["parent_id"], id(refund));
    assert_eq!(attr(approval, "lovia.approval.decision"), "approved");
    assert_eq!(attr(approval, "lovia.approval.via"), "consumer");
    assert_eq!(attr(approval, "lovia.approval.by"), "script");
    // Content is off by default.
    assert!(spans.iter().all(|s| attr(s, "gen_ai.tool.call.arguments").is_null()), "{}", summary(&spans));
    assert!(spans.iter().all(|s| attr(s, "gen_ai.input.messages").is_null()));
}

#[test]
fn spans_go_over_grpc_too() {
    let Some(phoenix) = phoenix() else { return };
    let session = format!("grpc-{}", free_port());
    let o = Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["call", "--session", &session, lovia_tests::fixtures::DOCS, "search_docs", r#"{"query": "timeouts"}"#])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{}", phoenix.grpc))
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .output()
        .expect("lovia call");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let spans = phoenix.trace(1, |s| attr(s, "gen_ai.conversation.id") == session.as_str());
    assert_eq!(attr(one(&spans, "execute_tool search_docs"), "lovia.plugin.name"), "docs");
}

#[test]
fn a_protocol_lovia_does_not_export_with_is_refused_by_name() {
    let o = Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["call", lovia_tests::fixtures::DOCS, "search_docs", r#"{"query": "timeouts"}"#])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .output()
        .expect("lovia call");
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(
            "unknown protocol 'http/json' (from OTEL_EXPORTER_OTLP_PROTOCOL); the protocols are: http/protobuf, grpc"
        ),
        "{stderr}"
    );
}

#[test]
fn content_is_recorded_only_when_turned_on() {
    let Some(phoenix) = phoenix() else { return };
    for (capture, session) in [(false, format!("quiet-{}", free_port())), (true, format!("loud-{}", free_port()))] {
        let env: &[(&str, &str)] =
            if capture { &[("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")] } else { &[] };
        let o = lovia(
            phoenix,
            &["call", "--session", &session, lovia_tests::fixtures::DOCS, "search_docs", r#"{"query": "timeouts"}"#],
            env,
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let spans = phoenix.trace(1, |s| attr(s, "gen_ai.conversation.id") == session.as_str());
        let call = one(&spans, "execute_tool search_docs");
        assert!(attr(call, "lovia.memory.bytes").as_i64().is_some_and(|b| b > 0), "{call}");
        if capture {
            assert_eq!(attr(call, "gen_ai.tool.call.arguments"), r#"{"query": "timeouts"}"#);
            assert_eq!(attr(call, "gen_ai.tool.call.result"), "[\"Timeouts\"]");
        } else {
            assert!(attr(call, "gen_ai.tool.call.arguments").is_null(), "{call}");
            assert!(attr(call, "gen_ai.tool.call.result").is_null(), "{call}");
        }
    }
}

#[test]
fn a_program_s_nested_calls_are_children_of_its_call() {
    let Some(phoenix) = phoenix() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let agent = format!("coder-{}", free_port());
    let program = "const a = await tools.lookup_order({ order_id: 'A-1001' });\nconst b = await tools.lookup_order({ order_id: 'A-1002' });\nreturn [a.id, b.id];";
    let turns = json!({
        "agent": {"name": agent},
        "turns": [calls(&[("p", "run_code", json!({"code": program}))]), {"text": "done"}]
    });
    let o = lovia(
        phoenix,
        &["run", "--code-mode", "--plugin", lovia_tests::fixtures::ORDERS, "--script", &script(dir.path(), &turns)],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let spans =
        phoenix.trace(6, |s| attr(s, "gen_ai.agent.name") == agent.as_str() && s["name"] == "execute_tool run_code");
    let program = one(&spans, "execute_tool run_code");
    let nested = named(&spans, "execute_tool lookup_order");
    assert_eq!(nested.len(), 2, "{}", summary(&spans));
    for call in nested {
        assert_eq!(call["parent_id"], id(program), "{}", summary(&spans));
        assert!(attr(call, "gen_ai.tool.call.id").as_str().is_some_and(|c| c.starts_with("p/")), "{call}");
    }
}

#[test]
fn an_mcp_source_call_continues_in_the_server_s_trace() {
    let Some(phoenix) = phoenix() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let agent = format!("mcp-{}", free_port());
    // The source is another lovia, `lovia mcp --http`, exporting its own
    // spans from its own process; it runs until the test has read them.
    let port = free_port();
    let mut server = Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["mcp", lovia_tests::fixtures::DOCS, "--http", &format!("127.0.0.1:{port}")])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.endpoint())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("lovia mcp --http");
    let until = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "lovia mcp --http did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    let servers = format!("[[mcp_servers]]\nname = \"inner\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n");
    let servers_path = dir.path().join("servers.toml");
    std::fs::write(&servers_path, servers).expect("servers");
    let turns = json!({
        "agent": {"name": agent},
        "turns": [calls(&[("s", "inner__search_docs", json!({"query": "timeouts"}))]), {"text": "done"}]
    });
    let o = lovia(
        phoenix,
        &["run", "--mcp-servers", &servers_path.display().to_string(), "--script", &script(dir.path(), &turns)],
        &[],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let spans = phoenix
        .trace(7, |s| attr(s, "gen_ai.agent.name") == agent.as_str() && s["name"] == "execute_tool inner__search_docs");
    let _ = server.kill();
    let _ = server.wait();
    let outer = one(&spans, "execute_tool inner__search_docs");
    assert_eq!(attr(outer, "gen_ai.tool.type"), "extension");
    let sent: Vec<_> = named(&spans, "tools/call search_docs");
    let client = sent.iter().find(|s| s["parent_id"] == id(outer)).unwrap_or_else(|| panic!("{}", summary(&spans)));
    assert_eq!(attr(client, "mcp.method.name"), "tools/call");
    assert_eq!(attr(client, "network.transport"), "tcp");
    // The server's span, made by the other process from the `_meta` the
    // request carried, is the client span's child.
    let served = sent.iter().find(|s| s["parent_id"] == id(client)).unwrap_or_else(|| panic!("{}", summary(&spans)));
    assert!(attr(served, "mcp.session.id").is_string(), "{served}");
    let inner = one(&spans, "execute_tool search_docs");
    assert_eq!(inner["parent_id"], id(served), "{}", summary(&spans));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_continues_its_trace() {
    if phoenix_in_background().await.is_none() {
        return;
    }
    use lovia_host::{RunState, ToolCall, ToolEvent};
    use lovia_runner::{Agent, ModelReply, RunEvent, Runner, SqliteRunStore, scripted::ScriptedProvider};
    use std::sync::Arc;
    let endpoint = phoenix().expect("started").endpoint();
    let export = export_to(&endpoint);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SqliteRunStore::open(dir.path().join("runs.db")).expect("store"));
    let session = format!("takeover-{}", free_port());
    let plugin = lovia_tests::load(lovia_tests::fixtures::ORDERS).await;
    let agent = || {
        let mut agent = Agent::new("resumer").with_plugin(&plugin);
        agent.tool_settings.telemetry = export.telemetry();
        agent
    };
    let state = || RunState { session_id: Some(session.clone()), ..RunState::default() };
    let refund = ToolCall::new("r", "refund", r#"{"order_id": "A-1002", "amount_cents": 9000}"#);
    // The first replica stops while the refund waits for its approval.
    let model = Arc::new(ScriptedProvider::new([ModelReply::calls(vec![refund])]));
    let first = Runner::new(agent(), model).with_store(store.clone());
    let mut handle = first.stream_with(Some("refund A-1002".into()), state());
    while let Some(event) = handle.next_event().await {
        if let RunEvent::Tool(ToolEvent::ApprovalRequired { ticket, .. }) = event {
            std::mem::forget(ticket);
            break;
        }
    }
    handle.abort();
    let _ = handle.result().await;
    // The second resumes it from the store, where the checkpoint keeps the trace.
    let model = Arc::new(ScriptedProvider::new([ModelReply::text("done")]));
    let second = Runner::new(agent(), model).with_store(store);
    let mut handle = second.stream_with(None, state());
    while let Some(event) = handle.next_event().await {
        if let RunEvent::Tool(ToolEvent::ApprovalRequired { ticket, .. }) = event {
            assert!(ticket.approve());
        }
    }
    handle.result().await.expect("the resumed run ends");
    export.shutdown();
    let spans = tokio::task::spawn_blocking(move || {
        phoenix()
            .expect("started")
            .trace(2, |s| attr(s, "gen_ai.conversation.id") == session.as_str() && attr(s, "lovia.run.resumed") == true)
    })
    .await
    .expect("spans");
    let runs = named(&spans, "invoke_agent resumer");
    assert_eq!(runs.len(), 2, "{}", summary(&spans));
    let resumed = runs.iter().find(|r| attr(r, "lovia.run.resumed") == true).expect("resumed");
    let interrupted = runs.iter().find(|r| attr(r, "lovia.run.resumed").is_null()).expect("interrupted");
    assert_eq!(resumed["parent_id"], id(interrupted), "{}", summary(&spans));
    assert_eq!(attr(resumed, "lovia.run.id"), attr(interrupted, "lovia.run.id"));
    // The refund the second replica ran is in the same trace, under it
    // (the first one's, cut short by the stop, under the interrupted run).
    let refunds = named(&spans, "execute_tool refund");
    assert!(refunds.iter().any(|r| r["parent_id"] == id(resumed)), "{}", summary(&spans));
}

/// [`phoenix`] from an async test: its start blocks.
async fn phoenix_in_background() -> Option<()> {
    tokio::task::spawn_blocking(|| phoenix().map(|_| ())).await.expect("phoenix")
}

fn export_to(endpoint: &str) -> lovia_telemetry::export::Export {
    let mut section = lovia_telemetry::export::TelemetrySection::default();
    section.endpoint = Some(endpoint.to_owned());
    let tls = lovia_host::sandbox::tls_client_config().expect("tls");
    let client = reqwest::Client::builder().tls_backend_preconfigured((*tls).clone()).build().expect("client");
    lovia_telemetry::export::Export::start(&section, client).expect("export").expect("an endpoint")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_costs_a_call_nothing() {
    use lovia_host::{ExecSettings, Executor, RunState, Tool, ToolCall, ToolSource, Toolset};
    // No backend: this collector is the test's own, and it never answers.
    // A collector that takes connections and never answers one.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
    let _held = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(64) {
            held.push(stream);
        }
        std::thread::sleep(Duration::from_secs(60));
    });
    let mut section = lovia_telemetry::export::TelemetrySection::default();
    section.endpoint = Some(endpoint);
    section.queue = Some(4);
    let tls = lovia_host::sandbox::tls_client_config().expect("tls");
    let client = reqwest::Client::builder().tls_backend_preconfigured((*tls).clone()).build().expect("client");
    let export = lovia_telemetry::export::Export::start(&section, client).expect("export").expect("on");
    let echo = Tool::builder("echo")
        .parameters(json!({"type": "object"}))
        .invoke(|_args, _ctx| async { Ok(lovia_host::ToolOutput::Text("ok".into())) })
        .expect("tool");
    let tools = Toolset::new().with(ToolSource::AgentTools, [echo]).expect("tools");
    let exec = Executor::new(tools, ExecSettings::default().with_telemetry(export.telemetry()));
    // The first batch (512 spans) waits on the silent collector; the queue
    // holds 4 more; every span after is dropped and counted, and every call
    // still answers.
    let n = 2_000;
    for i in 0..n {
        let call = ToolCall::new(format!("c{i}"), "echo", "{}");
        let entry = exec.call(&call, &RunState::default(), &lovia_host::EventSink::none()).await.expect("answered");
        assert_eq!(entry.output, "ok");
    }
    let until = Instant::now() + Duration::from_secs(10);
    while export.dropped() < n - 512 - 4 - 1 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(export.dropped() >= n - 512 - 4 - 1, "dropped {} of {n}", export.dropped());
    assert_eq!(export.exported(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_s_traceparent_is_honoured_at_the_service_s_doors() {
    if phoenix_in_background().await.is_none() {
        return;
    }
    use crate::serve::{Sse, request, request_with, tenant};
    let export = export_to(&phoenix().expect("started").endpoint());
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script.json");
    let turn = calls(&[
        ("l", "lookup_order", json!({"order_id": "A-1001"})),
        ("r", "refund", json!({"order_id": "A-1002", "amount_cents": 9000})),
    ]);
    std::fs::write(&script, json!([turn, {"content": "refunded"}]).to_string()).expect("script");
    let mut t = tenant("acme", "acme-key", &[lovia_tests::fixtures::ORDERS]);
    t.provider = lovia_serve::ProviderConfig::scripted(script);
    let mut config = lovia_serve::ServeConfig::new(vec![t]);
    config.telemetry.trace_url = Some("https://traces.example/trace/{trace_id}".into());
    config.listen = "127.0.0.1:0".parse().expect("addr");
    config.store = Some(dir.path().join("sessions.db").into());
    config.resolve(std::path::Path::new(".")).expect("valid config");
    let service =
        lovia_serve::Service::new_traced(&lovia_tests::host(), &config, export.telemetry()).await.expect("service");
    let listener = tokio::net::TcpListener::bind(config.listen).await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(service.listener(listener), service.app()).await.expect("serve") });

    // A direct call and a chat, each inside a trace of the client's.
    let (direct_trace, chat_trace) = ("4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c");
    let parent = "00f067aa0ba902b7";
    let header = |trace: &str| format!("traceparent: 00-{trace}-{parent}-01\r\n");
    let (status, body) = request_with(
        addr,
        "POST",
        "/api/tools/lookup_order/call",
        Some("acme-key"),
        &header(direct_trace),
        r#"{"order_id": "A-1001"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut sse = Sse::post_with(
        addr,
        "/api/chat",
        "acme-key",
        r#"{"session_id": "traced", "input": "find A-1001"}"#,
        &header(chat_trace),
    )
    .await;
    assert_eq!(sse.status, 200);
    // The refund is approved as the console approves it.
    sse.until("approval_required").await;
    let decision = r#"{"session_id": "traced", "call_id": "r", "decision": "approve"}"#;
    assert_eq!(request(addr, "POST", "/api/chat/approve", Some("acme-key"), decision).await.0, 200);
    sse.rest().await;
    // An MCP request over HTTP whose `traceparent` is a header (no `_meta`).
    let mcp_trace = "5af7651916cd43dd8448eb211c80319d";
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let (status, head, body) = crate::serve::mcp::post(addr, "acme-key", "", init).await;
    assert_eq!(status, 200, "{body}");
    let session = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:").then(|| l[15..].trim().to_owned()))
        .expect("a session");
    let headers = format!("Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(crate::serve::mcp::post(addr, "acme-key", &headers, initialized).await.0, 202);
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lookup_order","arguments":{"order_id":"A-1001"}}}"#;
    let (status, _, body) =
        crate::serve::mcp::post(addr, "acme-key", &format!("{headers}{}", header(mcp_trace)), call).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("A-1001"), "{body}");
    // The transcript names the run's trace and its address in the trace UI.
    let (status, body) = request(addr, "GET", "/api/chat/traced", Some("acme-key"), "").await;
    assert_eq!(status, 200, "{body}");
    let transcript: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(transcript["trace_id"], chat_trace, "{transcript}");
    assert_eq!(transcript["trace_url"], format!("https://traces.example/trace/{chat_trace}"));
    export.shutdown();

    let spans = tokio::task::spawn_blocking(move || {
        let phoenix = phoenix().expect("started");
        (
            phoenix.trace(1, |s| s["context"]["trace_id"] == direct_trace),
            phoenix.trace(6, |s| s["context"]["trace_id"] == chat_trace),
            phoenix.trace(2, |s| s["context"]["trace_id"] == mcp_trace),
        )
    })
    .await
    .expect("spans");
    let (direct, chat, mcp) = spans;
    let served = one(&mcp, "tools/call lookup_order");
    assert_eq!(served["parent_id"], parent, "{}", summary(&mcp));
    assert_eq!(attr(served, "network.transport"), "tcp");
    assert_eq!(attr(served, "mcp.session.id"), session.as_str());
    assert_eq!(attr(served, "lovia.tenant"), "acme");
    assert_eq!(one(&mcp, "execute_tool lookup_order")["parent_id"], id(served));
    let call = one(&direct, "execute_tool lookup_order");
    assert_eq!(call["parent_id"], parent, "the call's span is the client's span's child");
    assert_eq!(attr(call, "lovia.tenant"), "acme");
    let run = one(&chat, "invoke_agent assistant");
    assert_eq!(run["parent_id"], parent, "{}", summary(&chat));
    assert_eq!(attr(run, "lovia.tenant"), "acme");
    assert_eq!(one(&chat, "execute_tool lookup_order")["parent_id"], id(run));
    let approval = one(&chat, "lovia.approval");
    assert_eq!(approval["parent_id"], id(one(&chat, "execute_tool refund")));
    assert_eq!(attr(approval, "lovia.approval.decision"), "approved");
    assert_eq!(attr(approval, "lovia.approval.via"), "consumer");
    assert_eq!(attr(approval, "lovia.approval.by"), "http_api");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_nobody_decided_in_time_is_traced_as_a_timeout() {
    if phoenix_in_background().await.is_none() {
        return;
    }
    use lovia_host::{ApprovalRequest, CallContext, ExecSettings, Executor, HandlerAnswer, RunState, ToolCall};
    let export = export_to(&phoenix().expect("started").endpoint());
    let plugin = lovia_tests::load(lovia_tests::fixtures::ORDERS).await;
    let tools = lovia_host::Toolset::new()
        .with(lovia_host::ToolSource::Plugin, lovia_host::Tool::from_plugin(&plugin))
        .expect("tools");
    // `lovia serve`'s handler answers this once approval_timeout_secs pass.
    let expired = |_: &ApprovalRequest, _: &CallContext| Ok(HandlerAnswer::TimedOut);
    let settings = ExecSettings::default()
        .with_approval_handler(Some(std::sync::Arc::new(expired)))
        .with_telemetry(export.telemetry());
    let run_id = format!("expired-{}", free_port());
    let run = RunState { run_id: run_id.clone(), ..RunState::default() };
    let call = ToolCall::new("r", "refund", r#"{"order_id": "A-1002", "amount_cents": 9000}"#);
    let entry =
        Executor::new(tools, settings).call(&call, &run, &lovia_host::EventSink::none()).await.expect("a result");
    assert_eq!(entry.output, "Tool refund was not approved.");
    export.shutdown();
    let spans = tokio::task::spawn_blocking(move || {
        phoenix().expect("started").trace(2, |s| attr(s, "lovia.run.id") == run_id.as_str())
    })
    .await
    .expect("spans");
    let call = one(&spans, "execute_tool refund");
    assert_eq!(attr(call, "error.type"), "denied");
    let approval = one(&spans, "lovia.approval");
    assert_eq!(attr(approval, "lovia.approval.decision"), "denied");
    assert_eq!(attr(approval, "lovia.approval.via"), "timeout");
}

#[test]
fn grpc_outside_a_runtime_is_refused_not_a_panic() {
    let mut section = lovia_telemetry::export::TelemetrySection::default();
    section.endpoint = Some("http://127.0.0.1:9".into());
    section.protocol = Some("grpc".into());
    let tls = lovia_host::sandbox::tls_client_config().expect("tls");
    let client = reqwest::Client::builder().tls_backend_preconfigured((*tls).clone()).build().expect("client");
    let refused = lovia_telemetry::export::Export::start(&section, client).expect_err("no runtime here");
    assert!(matches!(refused, lovia_telemetry::TelemetryError::NoRuntime), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_s_request_carries_the_trace_only_to_an_origin_granted_it() {
    if phoenix_in_background().await.is_none() {
        return;
    }
    use lovia_host::plugin::config::PluginConfig;
    use lovia_host::sandbox::Grants;
    use lovia_host::{ExecSettings, Executor, HttpOrigin, RunState, ToolCall};
    let export = export_to(&phoenix().expect("started").endpoint());
    let (carried, plain) = (lovia_tests::http::Server::start().await, lovia_tests::http::Server::start().await);
    let origin = |s: &lovia_tests::http::Server| s.origin().parse::<HttpOrigin>().expect("origin");
    let grants = Grants {
        http: vec![origin(&carried), origin(&plain)],
        http_trace_context: vec![origin(&carried)],
        ..Grants::default()
    };
    let plugin = lovia_tests::host()
        .load_file_with(lovia_tests::fixtures::HOSTILE, PluginConfig::default().with_grants(grants))
        .await
        .expect("load");
    let tools = lovia_host::Toolset::new()
        .with(lovia_host::ToolSource::Plugin, lovia_host::Tool::from_plugin(&plugin))
        .expect("tools");
    let exec = Executor::new(tools, ExecSettings::default().with_telemetry(export.telemetry()));
    let run_id = format!("outbound-{}", free_port());
    let run = RunState { run_id: run_id.clone(), ..RunState::default() };
    for (id, server) in [("to-carried", &carried), ("to-plain", &plain)] {
        let args = json!({"url": format!("{}/x", server.origin())});
        let call = ToolCall::new(id, "fetch", args.to_string());
        let entry = exec.call(&call, &run, &lovia_host::EventSink::none()).await.expect("a result");
        assert!(!entry.is_error, "{}", entry.output);
    }
    export.shutdown();
    let header = |server: &lovia_tests::http::Server| {
        let seen = server.seen();
        assert_eq!(seen.len(), 1, "{seen:?}");
        seen[0].headers.iter().find(|(k, _)| k == "traceparent").map(|(_, v)| v.clone())
    };
    let sent = header(&carried).expect("the granted origin gets the trace");
    let spans = tokio::task::spawn_blocking(move || {
        phoenix()
            .expect("started")
            .trace(1, |s| attr(s, "gen_ai.tool.call.id") == "to-carried" && attr(s, "lovia.run.id") == run_id.as_str())
    })
    .await
    .expect("spans");
    let call = one(&spans, "execute_tool fetch");
    assert_eq!(sent.split('-').nth(1), call["context"]["trace_id"].as_str(), "{sent}");
    assert_eq!(sent.split('-').nth(2), Some(id(call)), "the request is the call's child: {sent}");
    // The other origin, granted the request but not the trace, gets none.
    assert_eq!(header(&plain), None);
}
