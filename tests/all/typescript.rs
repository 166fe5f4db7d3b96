//! Tools written in TypeScript (docs/typescript.md): `tests/js/tools.ts`
//! and the examples of `example-tools/js`, built with `lovia build`
//! (esbuild and componentize-qjs) into a real component of the
//! `async-plugin` export and run by the real host. Without the toolchain
//! each test fails and says how to provide it (`scripts/test` installs it),
//! unless `LOVIA_SKIP=ts` opts out.

use super::exec::executor;
use lovia_host::{
    CallContext, CallOutcome, CallRequest, ContentPart, ContractVersion, ExecSettings, Failure, Host, HostConfig,
    MemoryStore, Plugin, RunState, SessionStore, Tool, TurnError,
};
use lovia_tests::parts::{self, Part};
use lovia_tests::turn::{call, run};
use lovia_tests::{fixtures, js, load, python};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LOVIA: &str = env!("CARGO_BIN_EXE_lovia");

async fn ts() -> Option<Plugin> {
    js::plugin(LOVIA).await
}

async fn invoke(plugin: &Plugin, tool: &str, arguments: &str) -> CallOutcome {
    plugin.invoke(&CallRequest::new(tool, arguments)).await
}

#[tokio::test]
async fn the_plugin_is_declared_by_the_tool_file_and_exports_async_plugin() {
    let Some(ts) = ts().await else { return };
    assert_eq!(ts.info().name, "tstools");
    assert_eq!(ts.info().version, "0.2.0");
    assert_eq!(ts.info().instructions.as_deref(), Some("TypeScript fixture tools."));
    assert_eq!(ts.contract_version(), ContractVersion::V0_2);
    let path = js::component(LOVIA).expect("built, since it loaded");
    let bytes = std::fs::read(path).expect("read the component");
    let view = lovia_host::plugin::manifest::read_static(&bytes).expect("a component");
    let manifest = view.manifest.expect("a manifest section").expect("a readable manifest");
    assert_eq!(
        serde_json::to_value(&manifest).expect("json"),
        serde_json::to_value(ts.manifest()).expect("json"),
        "the embedded manifest is what the plugin itself reports"
    );
}

/// The golden signature: `scalars(text, count, ratio, flag)` declared in each
/// SDK gives one schema, byte for byte.
#[tokio::test]
async fn one_signature_gives_one_schema_in_rust_python_and_typescript() {
    let Some(ts) = ts().await else { return };
    let rust = load(fixtures::PY_TWINS).await;
    let schema = |p: &Plugin| serde_json::to_string(&p.tool("scalars").expect("scalars").parameters).expect("json");
    assert_eq!(schema(&ts), schema(&rust), "TypeScript and Rust");
    assert_eq!(
        schema(&ts),
        r#"{"properties":{"text":{"type":"string"},"count":{"type":"integer"},"ratio":{"type":"number"},"flag":{"type":"boolean"}},"required":["text","count","ratio","flag"],"type":"object","additionalProperties":false}"#
    );
    if let Some(py) = python::plugin(LOVIA).await {
        assert_eq!(schema(&ts), schema(&py), "TypeScript and Python");
    }
}

/// example-tools/js: the TypeScript `orders` and `docs` answer the same calls
/// with the same results as the Rust ones, and declare the same tools.
#[tokio::test]
async fn the_typescript_examples_match_the_rust_examples() {
    let Some(ts) = ts().await else { return };
    let calls: &[(&str, &str)] = &[
        ("lookup_order", r#"{"order_id": "A-1001"}"#),
        ("lookup_order", r#"{"order_id": "A-9999"}"#),
        ("lookup_order", r#"{"order_id": "B-1"}"#),
        ("refund", r#"{"order_id": "A-1003", "amount_cents": 5000}"#),
        ("refund", r#"{"order_id": "A-1003", "amount_cents": 500, "reason": "late"}"#),
        ("refund", r#"{"order_id": "A-0000", "amount_cents": 5}"#),
        ("top_customers", "{}"),
        ("top_customers", r#"{"limit": 2, "by": "orders"}"#),
        ("search_docs", r#"{"query": "wasm32-wasip2 tool"}"#),
        (
            "search_docs",
            r#"{"query": "limits approval", "limit": 1, "filter": {"section": "reference", "since_year": 2026}}"#,
        ),
        ("search_docs", r#"{"query": ""}"#),
    ];
    for fixture in [fixtures::ORDERS, fixtures::DOCS] {
        let rust = load(fixture).await;
        for spec in rust.tools() {
            let twin = ts.tool(&spec.name).unwrap_or_else(|| panic!("no TypeScript {}", spec.name));
            assert_eq!(
                (&twin.description, twin.strict, twin.parallel, &twin.hints),
                (&spec.description, spec.strict, spec.parallel, &spec.hints),
                "{}",
                spec.name
            );
            assert_eq!(twin.approval, spec.approval, "{}", spec.name);
        }
        for (tool, args) in calls.iter().filter(|(t, _)| rust.tool(t).is_some()) {
            let (r, t) = (invoke(&rust, tool, args).await, invoke(&ts, tool, args).await);
            assert_eq!(t.model_output(), r.model_output(), "{tool} {args}");
        }
        let ctx = CallContext::default();
        let big = r#"{"order_id": "A-1002", "amount_cents": 6000}"#;
        if rust.tool("refund").is_some() {
            assert_eq!(ts.needs_approval("refund", big, &ctx).await, rust.needs_approval("refund", big, &ctx).await);
        }
    }
}

#[tokio::test]
async fn promises_settle_inside_the_call_and_results_become_text_or_json() {
    let Some(ts) = ts().await else { return };
    assert_eq!(invoke(&ts, "async_add", r#"{"a": 2, "b": 3}"#).await, CallOutcome::Json(json!(7)));
    assert_eq!(
        invoke(&ts, "scalars", r#"{"text": "a", "count": 2, "ratio": 0.5, "flag": true}"#).await,
        CallOutcome::Text("a 2 0.5 true".into())
    );
    // A plain JSON Schema: closed, and its top-level defaults filled in.
    assert_eq!(invoke(&ts, "plain_schema", r#"{"word": "ab"}"#).await, CallOutcome::Text("abab".into()));
    assert_eq!(
        serde_json::to_string(&ts.tool("plain_schema").expect("tool").parameters).expect("json"),
        r#"{"properties":{"word":{"type":"string"},"times":{"default":2,"type":"integer"}},"required":["word"],"type":"object","additionalProperties":false}"#
    );
    assert_eq!(
        invoke(&ts, "bad_result", "{}").await.model_output(),
        "Tool error: the result could not be serialised as JSON: BigInt are forbidden in JSON.stringify"
    );
}

#[tokio::test]
async fn each_error_type_reads_as_the_contract_says() {
    let Some(ts) = ts().await else { return };
    let out = |tool: &'static str, args: &'static str| {
        let ts = ts.clone();
        async move { invoke(&ts, tool, args).await }
    };
    assert_eq!(
        out("fail_hint", "{}").await,
        CallOutcome::Failed(Failure::Tool { message: "db down".into(), hint: Some("retry later".into()), kind: None })
    );
    assert_eq!(out("fail_hint", "{}").await.model_output(), "Tool error: db down\n  hint: retry later");
    // A ToolError subclass names its failure, as in Python.
    assert_eq!(
        out("fail_named", r#"{"message": ""}"#).await,
        CallOutcome::Failed(Failure::Tool { message: String::new(), hint: None, kind: Some("ConnectError".into()) })
    );
    assert_eq!(out("fail_named", r#"{"message": ""}"#).await.model_output(), "Tool error: ConnectError");
    assert_eq!(out("fail_named", r#"{"message": "refused"}"#).await.model_output(), "Tool error: refused");
    assert_eq!(ts.tool("fail_named").and_then(|t| t.title.as_deref()), Some("Fail with a named error"));
    assert_eq!(
        out("fail_kind", "{}").await,
        CallOutcome::Failed(Failure::Tool { message: "quota".into(), hint: None, kind: Some("QuotaError".into()) })
    );
    assert_eq!(out("fail_empty", "{}").await.model_output(), "Tool error: RangeError", "the class name");
    assert_eq!(out("fail_plain", r#"{"message": "disk full"}"#).await.model_output(), "Tool error: disk full");
    assert_eq!(out("fail_value", "{}").await.model_output(), "Tool error: a bare string");
    assert_eq!(
        out("fail_invalid", r#"{"amount": 5000}"#).await,
        CallOutcome::Failed(Failure::InvalidArguments("amount 5000 exceeds the order total 990".into()))
    );
    // A zod refinement JSON Schema cannot say is checked by zod in the call.
    assert_eq!(
        out("fail_refined", r#"{"even": 3}"#).await,
        CallOutcome::Failed(Failure::InvalidArguments(
            "Invalid arguments for tool 'fail_refined': even: must be even".into()
        ))
    );
    assert_eq!(out("fail_refined", r#"{"even": 4}"#).await.model_output(), "4");
    // An async refinement is awaited too.
    assert_eq!(out("async_refined", r#"{"word": "yes"}"#).await.model_output(), "yes");
    assert_eq!(
        out("async_refined", r#"{"word": "no"}"#).await,
        CallOutcome::Failed(Failure::InvalidArguments(
            "Invalid arguments for tool 'async_refined': word: must not be no".into()
        ))
    );
    assert_eq!(
        out("fail_budget", "{}").await,
        CallOutcome::Failed(Failure::BudgetExceeded("total tokens 2 exceeds budget 1".into()))
    );
    assert_eq!(out("fail_cancel", "{}").await, CallOutcome::CancelRun("operator pressed stop".into()));
}

#[tokio::test]
async fn run_cancelled_ends_the_run() {
    let Some(ts) = ts().await else { return };
    let exec = executor(Tool::from_plugin(&ts), ExecSettings::default());
    let turn = run(
        &exec,
        vec![
            call("c", "fail_cancel", "{}"),
            call("s", "scalars", r#"{"text": "a", "count": 1, "ratio": 1, "flag": false}"#),
        ],
        &RunState::default(),
        |_| None,
    )
    .await;
    match turn.result {
        Err(TurnError::Cancelled { reason, results }) => {
            assert_eq!(reason, "operator pressed stop");
            assert!(results.iter().all(|r| r.call_id != "c"), "the cancelling call leaves no result");
        }
        other => panic!("expected the run to end cancelled, got {other:?}"),
    }
}

#[tokio::test]
async fn the_context_reports_the_call_and_progress_arrives() {
    let Some(ts) = ts().await else { return };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let context = CallContext {
        run_id: "run-7".into(),
        session_id: Some("s-1".into()),
        call_id: "call-9".into(),
        agent: "support".into(),
        turn: 3,
        dependencies: Arc::new(HashMap::from([("config".to_owned(), r#"{"region": "eu"}"#.to_owned())])),
        progress: Some(Arc::new(move |m: &str| sink.lock().expect("lock").push(m.to_owned()))),
        ..CallContext::default()
    };
    let out = ts.invoke(&CallRequest { context, ..CallRequest::new("whoami", r#"{"greeting": "yo"}"#) }).await;
    assert_eq!(
        out,
        CallOutcome::Json(json!({
            "greeting": "yo", "run_id": "run-7", "session_id": "s-1", "call_id": "call-9", "agent": "support",
            "turn": 3, "config": {"region": "eu"}, "missing": "absent", "cancelled": false,
        }))
    );
    assert_eq!(*seen.lock().expect("lock"), ["looking"]);
    // zod's default, applied in the call (the model sent no greeting).
    let out = invoke(&ts, "whoami", "{}").await;
    assert!(out.model_output().contains(r#""greeting": "hi""#), "{}", out.model_output());

    let exec = executor(Tool::from_plugin(&ts), ExecSettings::default());
    let turn = run(&exec, vec![call("p1", "steps", r#"{"n": 3}"#)], &RunState::default(), |_| None).await;
    assert_eq!(turn.output("p1"), "done in 3 steps");
    let progress: Vec<String> =
        turn.events.iter().filter(|e| e.call == "p1" && e.kind == "progress").map(|e| e.text.clone()).collect();
    assert_eq!(progress, ["step 1 of 3", "step 2 of 3", "step 3 of 3"]);
}

#[tokio::test]
async fn the_store_keeps_values_across_calls_in_one_session() {
    let Some(ts) = ts().await else { return };
    let in_session = |id: &str| CallContext { session_id: Some(id.into()), ..CallContext::default() };
    let denied = ts.invoke(&CallRequest { context: in_session("s1"), ..CallRequest::new("count_up", "{}") }).await;
    assert!(denied.model_output().starts_with("Tool error: the store is not granted"), "{denied:?}");
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::default());
    let count = |session: &str, by: u32| CallRequest {
        context: in_session(session),
        session_store: Some(store.clone()),
        ..CallRequest::new("count_up", format!(r#"{{"by": {by}}}"#))
    };
    assert_eq!(ts.invoke(&count("s1", 1)).await.model_output(), r#"n=1 keys=["n"]"#);
    assert_eq!(ts.invoke(&count("s1", 2)).await.model_output(), r#"n=3 keys=["n"]"#);
    assert_eq!(ts.invoke(&count("s2", 5)).await.model_output(), r#"n=5 keys=["n"]"#, "another session starts afresh");

    // Retries declared in TypeScript take effect (the attempts are counted in the store).
    assert_eq!(ts.tool("flaky").expect("tool").retries, Some(2));
    let exec = executor(Tool::from_plugin_with_store(&ts, Some(store)), ExecSettings::default());
    let state = RunState { session_id: Some("s".into()), ..RunState::default() };
    let turn = run(&exec, vec![call("f", "flaky", "{}")], &state, |_| None).await;
    assert_eq!(turn.output("f"), "succeeded on attempt 3", "two retries after the first attempt");
}

#[tokio::test]
async fn a_timeout_declared_in_typescript_stops_a_busy_loop() {
    let Some(ts) = ts().await else { return };
    assert_eq!(ts.tool("spin").expect("tool").timeout_ms, Some(200));
    let start = Instant::now();
    let out = invoke(&ts, "spin", "{}").await;
    assert_eq!(out, CallOutcome::Failed(Failure::TimedOut { ms: 200 }));
    assert!(start.elapsed() < Duration::from_secs(3), "took {:?}", start.elapsed());
}

/// Process CPU time means something only with no other test running in the
/// process, so the measurement runs in a child process of this test binary.
#[test]
fn a_typescript_busy_loop_stopped_by_its_timeout_burns_no_more_cpu() {
    if parts::require(Part::Ts, || js::component(LOVIA)).is_none() {
        return;
    }
    lovia_tests::run_probe("typescript::cpu_probe", "LOVIA_TS_CPU_PROBE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_typescript_busy_loop_stopped_by_its_timeout_burns_no_more_cpu in its own process"]
async fn cpu_probe() {
    if std::env::var_os("LOVIA_TS_CPU_PROBE").is_none() {
        return;
    }
    let ts = ts().await.expect("built by the parent test");
    let exec = executor(Tool::from_plugin(&ts), ExecSettings::default());
    lovia_tests::turn::assert_no_cpu_after_timeout(&exec, "spin", "Tool error: timed out after 200 ms").await;
}

#[tokio::test]
async fn content_parts_from_typescript_reach_the_executor_intact() {
    let Some(ts) = ts().await else { return };
    let data: Vec<u8> = b"\x89PNG\r\n\x1a\n".iter().copied().chain((0..1492u32).map(|i| (i % 256) as u8)).collect();
    let expected = vec![
        ContentPart::Text { text: "sales: 1500 bytes".into() },
        ContentPart::Image { mime_type: "image/png".into(), data },
        ContentPart::ResourceLink {
            uri: "https://example.com/a.csv".into(),
            name: "a.csv".into(),
            mime_type: Some("text/csv".into()),
        },
        ContentPart::ResourceLink { uri: "data:,x".into(), name: "x".into(), mime_type: None },
    ];
    assert_eq!(invoke(&ts, "rich", r#"{"label": "sales", "size": 1500}"#).await, CallOutcome::Parts(expected));
}

#[tokio::test]
async fn the_memory_limit_holds_for_typescript() {
    let Some(ts) = ts().await else { return };
    assert_eq!(invoke(&ts, "hog", r#"{"mib": 4}"#).await.model_output(), "held 4194304 bytes");
    assert_eq!(
        invoke(&ts, "hog", r#"{"mib": 200}"#).await,
        CallOutcome::Failed(Failure::OutOfMemory { limit_mib: 64 })
    );
}

#[tokio::test]
async fn caps_flags_and_approvals_declared_in_typescript_take_effect() {
    let Some(ts) = ts().await else { return };
    let exec = executor(Tool::from_plugin(&ts), ExecSettings::default());
    let turn = run(&exec, vec![call("c", "chatty", r#"{"n": 100}"#)], &RunState::default(), |_| None).await;
    assert_eq!(
        turn.output("c"),
        format!("{}\n\n[... tool output truncated: kept 20 of 100 chars ...]\n\nxxxx", "x".repeat(16))
    );
    let refund = ts.tool("gated_refund").expect("tool");
    assert!(!refund.parallel);
    assert_eq!((refund.hints.destructive, refund.hints.read_only), (Some(true), Some(false)));

    let ctx = CallContext::default();
    assert_eq!(ts.needs_approval("gated_refund", r#"{"amount": 500}"#, &ctx).await, Ok(true));
    assert_eq!(ts.needs_approval("gated_refund", r#"{"amount": 50}"#, &ctx).await, Ok(false));
    assert!(ts.needs_approval("broken_gate", "{}", &ctx).await.is_err(), "a throwing predicate denies");
    let calls = vec![
        call("small", "gated_refund", r#"{"amount": 50}"#),
        call("big", "gated_refund", r#"{"amount": 500}"#),
        call("always", "always_gated", "{}"),
        call("broken", "broken_gate", "{}"),
    ];
    let turn = run(&exec, calls, &RunState::default(), |_| Some(false)).await;
    assert_eq!(turn.output("small"), "refunded 50");
    assert_eq!(turn.output("big"), "Tool gated_refund was not approved.");
    assert_eq!(turn.output("always"), "Tool always_gated was not approved.");
    assert_eq!(turn.output("broken"), "Tool broken_gate was not approved (approval check failed).");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `lovia build app.ts`'s refusals and a declaration error: each says what
/// to do, with the documented exit status, and writes nothing.
#[test]
fn lovia_build_of_typescript_says_what_is_wrong() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path();
    std::fs::write(dir.join("app.ts"), "import { tool } from \"lovia\";\ntool({ name: \"x\" }, () => 1);\n")
        .expect("write");
    // No toolchain above the file: the install line, exit status 2.
    let out = std::process::Command::new(LOVIA).args(["build", "app.ts"]).current_dir(dir).output().expect("run lovia");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("esbuild and componentize-qjs are not installed"), "{stderr}");
    assert!(stderr.contains("npm install --save-dev esbuild@0.28.2 componentize-qjs@0.4.5"), "{stderr}");
    let out = std::process::Command::new(LOVIA)
        .args(["build", "app.ts", "--componentize-py", "x"])
        .current_dir(dir)
        .output()
        .expect("run lovia");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--componentize-py is for Python tool files"), "{}", text(&out.stderr));

    let Some(_) = parts::require(Part::Ts, js::node_modules) else { return };
    // A bad declaration stops the build, naming the tool and the option.
    std::fs::write(
        dir.join("bad.ts"),
        "import { tool } from \"lovia\";\ntool({ name: \"greet\", retrys: 2 }, () => \"hi\");\n",
    )
    .expect("write");
    let done = js::build(LOVIA, &dir.join("bad.ts"), &dir.join("bad.wasm")).expect("ran");
    assert_eq!(done.status.code(), Some(1), "{}", text(&done.stderr));
    let stderr = text(&done.stderr);
    assert!(
        stderr.contains("tool 'greet': unknown tool option 'retrys'; expected one of: name, title, description"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!dir.join("bad.wasm").exists() && !dir.join("bad.wasm.partial").exists());
}

/// `lovia new --lang ts` starts a project that builds as it is and answers `lovia call`.
#[test]
fn a_typescript_project_from_lovia_new_builds_and_answers_lovia_call() {
    let Some(node_modules) = parts::require(Part::Ts, js::node_modules) else { return };
    let work = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(LOVIA)
        .args(["new", "--lang", "ts", "Greeter"])
        .current_dir(work.path())
        .output()
        .expect("run lovia new");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let project = work.path().join("Greeter");
    for file in ["app.ts", "package.json", "tsconfig.json", "types/lovia/index.d.ts", "README.md", ".gitignore"] {
        assert!(project.join(file).is_file(), "{file}");
    }
    let package: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(project.join("package.json")).expect("read")).expect("json");
    assert_eq!(package["name"], "greeter", "npm refuses capitals");
    assert_eq!(package["devDependencies"]["componentize-qjs"], "0.4.5");
    // `npm install` would fetch the same pinned packages; the suite's copy stands in for it.
    std::os::unix::fs::symlink(&node_modules, project.join("node_modules")).expect("link node_modules");
    let wasm = project.join("greeter.wasm");
    let out = std::process::Command::new(LOVIA)
        .arg("build")
        .arg(project.join("app.ts"))
        .arg("-o")
        .arg(&wasm)
        .env("LOVIA_CACHE_DIR", work.path().join("cache"))
        .output()
        .expect("run lovia build");
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(text(&out.stdout).contains("Greeter 0.1.0, 1 tool(s): hello"), "{}", text(&out.stdout));
    let out = std::process::Command::new(LOVIA)
        .arg("call")
        .arg(&wasm)
        .args(["hello", r#"{"name": "Ada"}"#])
        .env("LOVIA_CACHE_DIR", work.path().join("cache"))
        .output()
        .expect("run lovia call");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "Hello, Ada!");
}

/// One TypeScript plugin through the two doors: `lovia serve`'s direct call
/// route and `lovia mcp` over stdio, driven by the official Python MCP client.
#[tokio::test]
async fn a_typescript_plugin_answers_through_serve_and_mcp() {
    let Some(path) = parts::require(Part::Ts, || js::component(LOVIA)) else { return };
    let path = path.to_str().expect("a UTF-8 path");
    let addr = super::serve::start(vec![super::serve::tenant("acme", "acme-key", &[path])]).await;
    let key = Some("acme-key");
    let (status, body) =
        super::serve::request(addr, "POST", "/api/tools/lookup_order/call", key, r#"{"order_id": "A-1001"}"#).await;
    assert_eq!(status, 200, "{body}");
    assert!(super::serve::json(&body)["output"].as_str().expect("output").contains(r#""customer": "ada""#), "{body}");
    let (status, body) =
        super::serve::request(addr, "POST", "/api/tools/fail_named/call", key, r#"{"message": ""}"#).await;
    assert_eq!(
        (status, super::serve::json(&body)["output"].as_str()),
        (200, Some("Tool error: ConnectError")),
        "{body}"
    );
    assert_eq!(super::serve::json(&body)["tool_error_kind"], "ConnectError", "{body}");

    let Some(py) = super::mcp::python() else { return };
    let wanted = json!([["async_add", {"a": 1, "b": 2}], ["fail_hint", {}], ["search_docs", {"query": "timeouts"}]]);
    let args: Vec<String> =
        ["auto", "calls", &wanted.to_string(), "stdio", LOVIA, "--no-cache", "mcp", path].map(String::from).to_vec();
    let out = super::mcp::client(&py, &args);
    assert_eq!(out["protocol"], "2026-07-28");
    assert_eq!((&out["results"][0]["is_error"], &out["results"][0]["text"][0]), (&json!(false), &json!("5")), "{out}");
    assert_eq!(out["results"][1]["is_error"], true, "{out}");
    assert_eq!(out["results"][1]["text"][0], "Tool error: db down\n  hint: retry later", "{out}");
    assert_eq!(out["results"][2]["text"][0], r#"["Timeouts"]"#, "{out}");
}

/// An async plugin's artifact is cached for the engine of async plugins,
/// and noted so that a new host probes that engine: the second load, in a
/// new host, reads the artifact instead of compiling and writing it again.
#[tokio::test]
async fn a_typescript_plugin_loads_from_the_cache_in_a_new_host() {
    let Some(path) = parts::require(Part::Ts, || js::component(LOVIA)) else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let host = || Host::new(HostConfig::default().with_cache_dir(Some(cache.clone()))).expect("host");
    let first = host().load_file(path).await.expect("compiled and cached");
    let artifacts = || -> Vec<(std::path::PathBuf, std::time::SystemTime)> {
        std::fs::read_dir(&cache)
            .expect("the cache")
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
            .map(|e| (e.path(), e.metadata().and_then(|m| m.modified()).expect("mtime")))
            .collect()
    };
    let written = artifacts();
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(cache.join(format!("{}.async-plugin", first.digest())).exists(), "the note");
    let second = host().load_file(path).await.expect("from the cache");
    assert_eq!(artifacts(), written, "read, not compiled and written again");
    assert_eq!(invoke(&second, "async_add", r#"{"a": 1, "b": 1}"#).await, CallOutcome::Json(json!(4)));
}
