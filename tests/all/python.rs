//! Tools written in Python (docs/python.md): `tests/python/tools.py`, built
//! with `python -m lovia build` into a real component and run by the real
//! host. Without componentize-py each test fails and says how to provide it
//! (`scripts/test` installs it), unless `LOVIA_SKIP=python` opts out.

use super::exec::executor;
use lovia_host::{
    CallContext, CallOutcome, CallRequest, ContentPart, ExecSettings, Failure, MemoryStore, Plugin, RunState,
    SessionStore, Tool, TurnError,
};
use lovia_tests::parts::{self, Part};
use lovia_tests::turn::{call, run};
use lovia_tests::{fixtures, load, python};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LOVIA: &str = env!("CARGO_BIN_EXE_lovia");

async fn py() -> Option<Plugin> {
    python::plugin(LOVIA).await
}

async fn invoke(plugin: &Plugin, tool: &str, arguments: &str) -> CallOutcome {
    plugin.invoke(&CallRequest::new(tool, arguments)).await
}

#[tokio::test]
async fn schemas_are_byte_identical_to_the_rust_twins() {
    let Some(py) = py().await else { return };
    let rust = load(fixtures::PY_TWINS).await;
    assert_eq!(rust.tools().len(), 7);
    for spec in rust.tools() {
        let twin = py.tool(&spec.name).unwrap_or_else(|| panic!("no Python twin of {}", spec.name));
        assert_eq!(
            serde_json::to_string(&twin.parameters).expect("json"),
            serde_json::to_string(&spec.parameters).expect("json"),
            "{}: the parameters schemas differ",
            spec.name
        );
        // Everything else the model and the host see: description, strict, flags, hints.
        assert_eq!(
            serde_json::to_string(twin).expect("json"),
            serde_json::to_string(spec).expect("json"),
            "{}: the specs differ",
            spec.name
        );
    }
}

/// example-tools/python: the Python `orders` and `docs` declare the same
/// specs as the Rust ones and answer the same calls with the same strings.
#[tokio::test]
async fn the_python_examples_match_the_rust_examples() {
    let Some(py) = py().await else { return };
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
            let twin = py.tool(&spec.name).unwrap_or_else(|| panic!("no Python {}", spec.name));
            assert_eq!(
                serde_json::to_string(twin).expect("json"),
                serde_json::to_string(spec).expect("json"),
                "{}: the specs differ",
                spec.name
            );
        }
        for (tool, args) in calls.iter().filter(|(t, _)| rust.tool(t).is_some()) {
            let (r, p) = (invoke(&rust, tool, args).await, invoke(&py, tool, args).await);
            assert_eq!(p.model_output(), r.model_output(), "{tool} {args}");
            assert_eq!(p, r, "{tool} {args}");
        }
        let ctx = CallContext::default();
        let big = r#"{"order_id": "A-1002", "amount_cents": 6000}"#;
        if rust.tool("refund").is_some() {
            assert_eq!(py.needs_approval("refund", big, &ctx).await, rust.needs_approval("refund", big, &ctx).await);
        }
    }
}

#[tokio::test]
async fn the_plugin_is_named_by_the_tool_file() {
    let Some(py) = py().await else { return };
    assert_eq!(py.info().name, "pytools");
    assert_eq!(py.info().version, "0.2.0");
    assert_eq!(py.info().instructions.as_deref(), Some("Python fixture tools."));
}

#[tokio::test]
async fn the_build_command_packs_the_manifest() {
    let Some(py) = py().await else { return };
    let path = python::component(LOVIA).expect("built, since it loaded");
    let bytes = std::fs::read(path).expect("read the component");
    let view = lovia_host::plugin::manifest::read_static(&bytes).expect("a component");
    let manifest = view.manifest.expect("a manifest section").expect("a readable manifest");
    assert_eq!(
        serde_json::to_value(&manifest).expect("json"),
        serde_json::to_value(py.manifest()).expect("json"),
        "the embedded manifest is what the plugin itself reports"
    );
    assert_eq!(py.tools().len(), 35, "the twins, the examples and the behaviour tools");
}

#[tokio::test]
async fn values_arrive_as_dataclasses_enums_and_typed_dicts() {
    let Some(py) = py().await else { return };
    let args = json!({
        "point": {"x": 1, "y": 2.5, "tags": ["a"], "rank": 3},
        "order": "desc",
        "priority": 2,
        "route": {"stops": [{"x": 0, "y": 0, "tags": [], "rank": 0}], "name": "r", "order": "asc"},
        "tags": [{"key": "k", "value": 1}],
        "size": "big",
    });
    let out = invoke(&py, "describe", &args.to_string()).await;
    assert_eq!(
        out.model_output(),
        "point=Point(x=1.0, y=2.5, label=None, tags=['a']); order=Order.DESC; priority=Priority.HIGH; \
         route=Route(stops=['Point'], order=<Order.ASC: 'asc'>); tags=[('dict', 'k', 1)]; mode=fast size=str:'big'"
    );
    // The host coerces before the SDK converts: "2" is the integer enum value 2, "3" the integer 3.
    let out = invoke(
        &py,
        "describe",
        r#"{"point": {"x": "1", "y": 0, "tags": [], "rank": "3"}, "order": "asc", "priority": "1", "size": 7}"#,
    )
    .await;
    assert_eq!(
        out.model_output(),
        "point=Point(x=1.0, y=0.0, label=None, tags=[]); order=Order.ASC; priority=Priority.LOW; mode=fast size=int:7"
    );
    let bad = invoke(&py, "describe", r#"{"point": {"x": 1}, "order": "sideways", "priority": 1}"#).await;
    assert!(bad.is_error());
    assert!(
        bad.model_output().starts_with("Tool error: Invalid arguments for tool 'describe'"),
        "{}",
        bad.model_output()
    );
}

/// Python writes docstrings of its own on a dataclass (its signature) and,
/// in some versions, on an Enum; only an author's docstring is a description.
#[tokio::test]
async fn only_written_docstrings_become_descriptions() {
    let Some(py) = py().await else { return };
    let defs = &py.tool("describe").expect("tool").parameters["$defs"];
    assert_eq!(defs["Priority"], json!({"enum": [1, 2], "type": "integer"}));
    assert_eq!(
        defs["Tag"],
        json!({"properties": {"key": {"type": "string"}, "value": {"type": "integer"}}, "required": ["key", "value"], "type": "object"})
    );
    assert_eq!(
        defs["Box"],
        json!({"properties": {"h": {"default": 1, "type": "integer"}, "w": {"type": "integer"}}, "required": ["w"], "type": "object"})
    );
    assert_eq!(defs["Point"]["description"], "A point on the map.");
}

#[tokio::test]
async fn results_become_text_or_json() {
    let Some(py) = py().await else { return };
    let out = invoke(&py, "report", r#"{"point": {"x": 1, "y": 2, "tags": ["t"], "rank": 3}}"#).await;
    assert_eq!(
        out,
        CallOutcome::Json(json!({
            "kind": "report", "order": "desc", "count": 1,
            "point": {"x": 1.0, "y": 2.0, "tags": ["t"], "rank": 3, "label": null},
        }))
    );
    assert_eq!(
        invoke(&py, "scalars", r#"{"text": "a", "count": 2, "ratio": 0.5, "flag": true}"#).await,
        CallOutcome::Text("a 2 0.5 True".into())
    );
    assert_eq!(
        invoke(&py, "bad_result", "{}").await.model_output(),
        "Tool error: the result could not be serialised as JSON: a value of type object is not JSON-serialisable"
    );
}

#[tokio::test]
async fn each_error_type_reads_as_the_contract_says() {
    let Some(py) = py().await else { return };
    let out = |tool: &'static str, args: &'static str| {
        let py = py.clone();
        async move { invoke(&py, tool, args).await }
    };
    assert_eq!(
        out("fail_hint", "{}").await,
        CallOutcome::Failed(Failure::Tool { message: "db down".into(), hint: Some("retry later".into()), kind: None })
    );
    // A ToolError subclass names its failure (contract 0.2), as the class name the reference reads.
    assert_eq!(
        out("fail_named", r#"{"message": ""}"#).await,
        CallOutcome::Failed(Failure::Tool { message: String::new(), hint: None, kind: Some("ConnectError".into()) })
    );
    assert_eq!(out("fail_named", r#"{"message": ""}"#).await.model_output(), "Tool error: ConnectError");
    assert_eq!(out("fail_named", r#"{"message": "refused"}"#).await.model_output(), "Tool error: refused");
    assert_eq!(py.tool("fail_named").and_then(|t| t.title.as_deref()), Some("Fail with a named error"));
    assert_eq!(out("fail_hint", "{}").await.model_output(), "Tool error: db down\n  hint: retry later");
    assert_eq!(out("fail_only_hint", "{}").await.model_output(), "Tool error: only a hint");
    assert_eq!(out("fail_empty", "{}").await.model_output(), "Tool error: ValueError", "the class name");
    assert_eq!(out("fail_plain", r#"{"message": "disk full"}"#).await.model_output(), "Tool error: disk full");
    let invalid = out("fail_invalid", r#"{"amount": 5000}"#).await;
    assert_eq!(
        invalid,
        CallOutcome::Failed(Failure::InvalidArguments("amount 5000 exceeds the order total 990".into()))
    );
    assert!(!Failure::InvalidArguments(String::new()).is_retryable());
    assert_eq!(
        out("fail_budget", "{}").await,
        CallOutcome::Failed(Failure::BudgetExceeded("total tokens 2 exceeds budget 1".into()))
    );
    assert_eq!(out("fail_budget", "{}").await.model_output(), "Tool error: total tokens 2 exceeds budget 1");
    assert_eq!(out("fail_cancel", "{}").await, CallOutcome::CancelRun("operator pressed stop".into()));
}

#[tokio::test]
async fn run_cancelled_ends_the_run_and_budget_exceeded_does_not() {
    let Some(py) = py().await else { return };
    let exec = executor(Tool::from_plugin(&py), ExecSettings::default());
    let turn = run(&exec, vec![call("b", "fail_budget", "{}")], &RunState::default(), |_| None).await;
    assert_eq!(turn.output("b"), "Tool error: total tokens 2 exceeds budget 1");
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
async fn async_tools_await_coroutines_and_timers() {
    let Some(py) = py().await else { return };
    assert_eq!(invoke(&py, "async_add", r#"{"a": 2, "b": 3}"#).await, CallOutcome::Json(json!(7)));
    // asyncio.to_thread and run_in_executor run their function inline.
    assert_eq!(invoke(&py, "offloaded", r#"{"x": 3}"#).await, CallOutcome::Json(json!([9, 16])));
    assert_eq!(
        serde_json::to_string(&py.tool("async_add").expect("tool").parameters).expect("json"),
        r#"{"properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"type":"object","additionalProperties":false}"#
    );
}

#[tokio::test]
async fn run_context_reports_the_call_and_is_not_in_the_schema() {
    let Some(py) = py().await else { return };
    assert_eq!(
        serde_json::to_string(&py.tool("whoami").expect("tool").parameters).expect("json"),
        r#"{"properties":{"greeting":{"default":"hi","type":"string"}},"type":"object","additionalProperties":false}"#
    );
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
    let out = py.invoke(&CallRequest { context, ..CallRequest::new("whoami", r#"{"greeting": "yo"}"#) }).await;
    assert_eq!(
        out,
        CallOutcome::Json(json!({
            "greeting": "yo", "run_id": "run-7", "session_id": "s-1", "call_id": "call-9", "agent": "support",
            "turn": 3, "config": {"region": "eu"}, "missing": "absent", "cancelled": false,
        }))
    );
    assert_eq!(*seen.lock().expect("lock"), ["looking"]);
}

#[tokio::test]
async fn the_store_keeps_values_across_calls_in_one_session() {
    let Some(py) = py().await else { return };
    let in_session = |id: &str| CallContext { session_id: Some(id.into()), ..CallContext::default() };
    let denied = py.invoke(&CallRequest { context: in_session("s1"), ..CallRequest::new("count_up", "{}") }).await;
    assert!(denied.model_output().starts_with("Tool error: the store is not granted"), "{denied:?}");
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::default());
    let count = |session: &str, by: u32| CallRequest {
        context: in_session(session),
        session_store: Some(store.clone()),
        ..CallRequest::new("count_up", format!(r#"{{"by": {by}}}"#))
    };
    assert_eq!(py.invoke(&count("s1", 1)).await.model_output(), "n=1 keys=['n']");
    assert_eq!(py.invoke(&count("s1", 2)).await.model_output(), "n=3 keys=['n']");
    assert_eq!(py.invoke(&count("s2", 5)).await.model_output(), "n=5 keys=['n']", "another session starts afresh");
}

#[tokio::test]
async fn retries_declared_in_python_take_effect() {
    let Some(py) = py().await else { return };
    assert_eq!(py.tool("flaky").expect("tool").retries, Some(2));
    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::default());
    let exec = executor(Tool::from_plugin_with_store(&py, Some(store)), ExecSettings::default());
    let state = RunState { session_id: Some("s".into()), ..RunState::default() };
    let turn = run(&exec, vec![call("f", "flaky", "{}")], &state, |_| None).await;
    assert_eq!(turn.output("f"), "succeeded on attempt 3", "two retries after the first attempt");
}

#[tokio::test]
async fn a_timeout_declared_in_python_stops_a_busy_loop() {
    let Some(py) = py().await else { return };
    assert_eq!(py.tool("spin").expect("tool").timeout_ms, Some(200));
    let start = Instant::now();
    let out = invoke(&py, "spin", "{}").await;
    assert_eq!(out, CallOutcome::Failed(Failure::TimedOut { ms: 200 }));
    assert_eq!(out.model_output(), "Tool error: timed out after 200 ms");
    // Generous margin: the guarantee is "stopped", not a precise figure.
    assert!(start.elapsed() < Duration::from_secs(3), "took {:?}", start.elapsed());
}

/// Process CPU time means something only with no other test running in the
/// process, so the measurement runs in a child process of this test binary
/// (as exec::timeouts does for the Rust fixture).
#[test]
fn a_python_busy_loop_stopped_by_its_timeout_burns_no_more_cpu() {
    if parts::require(Part::Python, || python::component(LOVIA)).is_none() {
        return;
    }
    lovia_tests::run_probe("python::cpu_probe", "LOVIA_PY_CPU_PROBE");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_python_busy_loop_stopped_by_its_timeout_burns_no_more_cpu in its own process"]
async fn cpu_probe() {
    if std::env::var_os("LOVIA_PY_CPU_PROBE").is_none() {
        return;
    }
    let py = py().await.expect("built by the parent test");
    let exec = executor(Tool::from_plugin(&py), ExecSettings::default());
    lovia_tests::turn::assert_no_cpu_after_timeout(&exec, "spin", "Tool error: timed out after 200 ms").await;
}

#[tokio::test]
async fn progress_from_python_reaches_the_executor_in_order_with_the_call_id() {
    let Some(py) = py().await else { return };
    let exec = executor(Tool::from_plugin(&py), ExecSettings::default());
    let calls = vec![call("p1", "steps", r#"{"n": 3}"#), call("p2", "steps", r#"{"n": 1}"#)];
    let turn = run(&exec, calls, &RunState::default(), |_| None).await;
    assert_eq!(turn.output("p1"), "done in 3 steps");
    let of = |id: &str| -> Vec<(String, String)> {
        turn.events.iter().filter(|e| e.call == id).map(|e| (e.kind.to_owned(), e.text.clone())).collect()
    };
    let progress = |t: &str| ("progress".to_owned(), t.to_owned());
    let p1 = of("p1");
    assert_eq!(p1.first().map(|e| e.0.as_str()), Some("started"));
    assert_eq!(p1[1..4], [progress("step 1 of 3"), progress("step 2 of 3"), progress("step 3 of 3")]);
    assert_eq!(p1.last(), Some(&("completed".to_owned(), "done in 3 steps".to_owned())));
    assert_eq!(of("p2")[1..], [progress("step 1 of 1"), ("completed".to_owned(), "done in 1 steps".to_owned())]);
}

#[tokio::test]
async fn content_parts_from_python_reach_the_executor_intact() {
    let Some(py) = py().await else { return };
    // The host checks that an image's bytes are its type (issue 26, item 7).
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
    let direct = invoke(&py, "rich", r#"{"label": "sales", "size": 1500}"#).await;
    assert_eq!(direct, CallOutcome::Parts(expected.clone()), "every byte of the image, in order");
    let exec = executor(Tool::from_plugin(&py), ExecSettings::default());
    let turn =
        run(&exec, vec![call("r", "rich", r#"{"label": "sales", "size": 1500}"#)], &RunState::default(), |_| None)
            .await;
    let projection = "sales: 1500 bytes\n[image: image/png, 1.5 KB]\n\
                      [resource link: a.csv, https://example.com/a.csv, text/csv]\n[resource link: x, data:,x]";
    assert_eq!(turn.output("r"), projection, "the text a model reads (docs/semantics.md §11)");
    assert_eq!(turn.results()[0].parts.as_deref(), Some(expected.as_slice()), "the parts on the result");
}

#[tokio::test]
async fn the_memory_limit_holds_for_python() {
    let Some(py) = py().await else { return };
    assert_eq!(invoke(&py, "hog", r#"{"mib": 4}"#).await.model_output(), "held 4194304 bytes");
    assert_eq!(
        invoke(&py, "hog", r#"{"mib": 200}"#).await,
        CallOutcome::Failed(Failure::OutOfMemory { limit_mib: 64 })
    );
}

#[tokio::test]
async fn output_caps_and_flags_declared_in_python_take_effect() {
    let Some(py) = py().await else { return };
    let exec = executor(Tool::from_plugin(&py), ExecSettings::default());
    let turn = run(&exec, vec![call("c", "chatty", r#"{"n": 100}"#)], &RunState::default(), |_| None).await;
    assert_eq!(
        turn.output("c"),
        format!("{}\n\n[... tool output truncated: kept 20 of 100 chars ...]\n\nxxxx", "x".repeat(16))
    );
    let refund = py.tool("gated_refund").expect("tool");
    assert!(!refund.parallel);
    assert_eq!((refund.hints.destructive, refund.hints.read_only), (Some(true), Some(false)));
    assert_eq!(py.tool("describe").expect("tool").hints.read_only, Some(true));
}

#[tokio::test]
async fn approvals_declared_in_python_are_asked_of_the_plugin() {
    let Some(py) = py().await else { return };
    let ctx = CallContext::default();
    assert_eq!(py.needs_approval("gated_refund", r#"{"amount": 500}"#, &ctx).await, Ok(true));
    assert_eq!(py.needs_approval("gated_refund", r#"{"amount": 50}"#, &ctx).await, Ok(false));
    assert!(py.needs_approval("broken_gate", "{}", &ctx).await.is_err(), "a raising predicate denies");
    let exec = executor(Tool::from_plugin(&py), ExecSettings::default());
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

/// The SDK's own unit tests (pure Python, no component): the schema rules
/// and every build-time declaration error, on the host's CPython.
#[test]
fn the_python_sdk_unit_tests_pass() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var_os("LOVIA_PYTHON").unwrap_or_else(|| "python3".into());
    let Some(out) = parts::require(Part::Python, || {
        std::process::Command::new(&python)
            .args(["-m", "unittest", "discover", "-s", "sdk/python/tests"])
            .current_dir(&root)
            .env("PYTHONPATH", root.join("sdk/python"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .map_err(|e| format!("no Python interpreter {}: {e}", python.to_string_lossy()))
    }) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the SDK's unit tests failed:\n{stderr}");
    assert!(stderr.contains("OK"), "{stderr}");
}

fn lovia_cli(dir: &std::path::Path, args: &[&std::ffi::OsStr]) -> std::process::Output {
    std::process::Command::new(LOVIA).args(args).current_dir(dir).output().expect("run lovia")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `lovia build`'s refusals, none of which builds anything: each says what
/// to do, with the documented exit status and no backtrace or traceback.
#[test]
fn lovia_build_says_what_is_wrong_before_building() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path();
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    std::fs::write(dir.join("lib.rs"), "fn main() {}").expect("write");
    std::fs::create_dir(dir.join("proj")).expect("mkdir");
    let good = "from lovia import tool\n\n@tool\ndef hello(name: str) -> str:\n    return name\n";
    std::fs::write(dir.join("good.py"), good).expect("write");
    let clean = |out: &std::process::Output| {
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("panicked") && !stderr.contains("Traceback") && !stderr.contains("RUST_BACKTRACE"));
        stderr
    };

    for (input, says) in [
        ("lib.rs", "takes a Python (.py), TypeScript (.ts, .mts) or JavaScript (.js, .mjs) tool file"),
        ("proj", "is a directory"),
    ] {
        let out = lovia_cli(dir, &[os("build"), os(input)]);
        assert_eq!(out.status.code(), Some(2), "{input}");
        let stderr = clean(&out);
        assert!(stderr.contains(says) && stderr.contains("cargo build --release --target wasm32-wasip2"), "{stderr}");
    }

    // No componentize-py on PATH: the install line, exit status 2.
    let out = std::process::Command::new(LOVIA)
        .args(["build", "good.py"])
        .current_dir(dir)
        .env("PATH", dir.join("proj"))
        .output()
        .expect("run lovia");
    assert_eq!(out.status.code(), Some(2));
    let stderr = clean(&out);
    assert!(stderr.contains("componentize-py is not installed"), "{stderr}");
    assert!(stderr.contains("pip install 'componentize-py==0.25.1'"), "{stderr}");
    assert!(!dir.join("good.wasm").exists());

    let Some(componentize) = parts::require(Part::Python, python::componentize_py) else { return };
    // A declaration error: the function and the parameter, from the check that runs before componentize-py.
    let bad = "from lovia import tool\n\n@tool\ndef greet(name: str, when: complex) -> str:\n    return name\n";
    std::fs::write(dir.join("bad.py"), bad).expect("write");
    let start = Instant::now();
    let out = lovia_cli(dir, &[os("build"), os("bad.py"), os("--componentize-py"), componentize.as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = clean(&out);
    assert!(
        stderr.contains("error: tool function 'greet', parameter 'when': unsupported annotation complex"),
        "{stderr}"
    );
    assert!(start.elapsed() < Duration::from_secs(15), "stopped before componentize-py: {:?}", start.elapsed());
    assert!(!dir.join("bad.wasm").exists() && !dir.join("bad.wasm.partial").exists());
    assert!(!dir.join("__pycache__").exists(), "the check leaves no .pyc to be bundled");
}

/// The declaration check of `lovia build` imports the author's file in a
/// host Python, confined by the kernel: code at import time reads no file
/// outside its grants, writes nothing outside its private temporary
/// directory and reaches no socket, and the check still names the bad
/// declaration. The same lines, run unconfined, reach all three.
#[test]
fn a_tool_file_that_misbehaves_at_import_reaches_nothing_during_lovia_build() {
    let Some(componentize) = parts::require(Part::Python, python::componentize_py) else { return };
    let work = tempfile::tempdir().expect("tempdir");
    let (dir, outside) = (work.path().join("tool"), work.path().join("outside"));
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "the outside secret").expect("secret");
    let mark = std::env::temp_dir().join(format!("lovia-build-escape-{}", std::process::id()));
    let _ = std::fs::remove_file(&mark);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let file = format!(
        r#"import socket, sys
from lovia import tool

def attempt(what, act):
    try:
        act()
        print(f"{{what}}: reached", file=sys.stderr)
    except OSError as e:
        print(f"{{what}}: refused ({{type(e).__name__}})", file=sys.stderr)

attempt("read", lambda: print(open({secret:?}).read(), file=sys.stderr))
attempt("write", lambda: open({mark:?}, "w").write("x"))
attempt("connect", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"x"))

@tool
def greet(name: str, when: complex) -> str:
    return name
"#,
        secret = secret.display().to_string(),
        mark = mark.display().to_string(),
    );
    std::fs::write(dir.join("app.py"), file).expect("write");
    // Unconfined, the same lines reach all three (so the attempts are real).
    let python = componentize.with_file_name("python3");
    let sdk = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sdk/python");
    let free = std::process::Command::new(&python)
        .args(["-c", "exec(open('app.py').read().split('@tool')[0])"])
        .current_dir(&dir)
        .env("PYTHONPATH", sdk)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python");
    let free_err = text(&free.stderr);
    for what in ["read", "write", "connect"] {
        assert!(free_err.contains(&format!("{what}: reached")), "unconfined {what}:\n{free_err}");
    }
    assert!(mark.exists() && listener.accept().is_ok());
    std::fs::remove_file(&mark).expect("cleanup");

    let os = std::ffi::OsStr::new;
    let out = lovia_cli(&dir, &[os("build"), os("app.py"), os("--componentize-py"), componentize.as_os_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error: tool function 'greet', parameter 'when': unsupported annotation complex"),
        "{stderr}"
    );
    for what in ["read", "write", "connect"] {
        assert!(stderr.contains(&format!("{what}: refused (")), "{what} was not refused:\n{stderr}");
    }
    assert!(!stderr.contains("the outside secret"), "{stderr}");
    assert!(!mark.exists(), "the file wrote {}", mark.display());
    assert!(listener.accept().is_err(), "a connection arrived");
    assert!(!dir.join("app.wasm").exists());
}

#[test]
fn lovia_new_refuses_bad_names_and_existing_directories() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path();
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    for bad in ["../escape", "9lives", "has space", "fn"] {
        let out = lovia_cli(dir, &[os("new"), std::ffi::OsStr::new(bad)]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(text(&out.stderr).contains("invalid project name"), "{bad}: {}", text(&out.stderr));
    }
    assert_eq!(std::fs::read_dir(dir).expect("ls").count(), 0, "nothing written");
    std::fs::create_dir(dir.join("taken")).expect("mkdir");
    std::fs::write(dir.join("taken/app.py"), "mine").expect("write");
    let out = lovia_cli(dir, &[os("new"), os("--lang"), os("python"), os("taken")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("taken already exists"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(dir.join("taken/app.py")).expect("read"), "mine", "never overwritten");
    let out = lovia_cli(dir, &[os("new"), os("--lang"), os("cobol"), os("x")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("rust") && text(&out.stderr).contains("python"), "the allowed values");
}

/// `lovia new NAME` (Rust) on a machine with nothing of lovia but its
/// binary: the exact sequence a new user runs, `lovia new weather && cd
/// weather && cargo build --release --target wasm32-wasip2`, builds against
/// the guest SDK the binary writes into the project (no registry has a
/// `lovia` crate), with nothing from this repository and no lockfile, and
/// the component answers `lovia call`. Its target directory is kept under
/// target/ so that a second run compiles only the new crate.
#[test]
fn a_rust_project_from_lovia_new_builds_as_it_is_and_answers_lovia_call() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path();
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = lovia_cli(dir, &[os("new"), os("weather")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let next = text(&out.stdout);
    assert!(next.contains("next: cd weather && cargo build --release --target wasm32-wasip2 && lovia call"), "{next}");
    let project = dir.join("weather");
    let cargo: toml::Table =
        std::fs::read_to_string(project.join("Cargo.toml")).expect("Cargo.toml").parse().expect("valid TOML");
    assert_eq!(cargo["package"]["name"].as_str(), Some("weather"));
    assert_eq!(cargo["lib"]["crate-type"][0].as_str(), Some("cdylib"));
    assert_eq!(cargo["dependencies"]["lovia"]["path"].as_str(), Some("vendor/lovia"));
    let lib = std::fs::read_to_string(project.join("src/lib.rs")).expect("lib.rs");
    assert!(lib.contains("#[lovia::tool(read_only)]") && lib.contains("lovia::export!(hello);"), "{lib}");

    let target = root.join("target/lovia-new");
    let built = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", &target)
        // What this test process inherited from cargo test, not what a user has.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .expect("run cargo");
    assert!(built.status.success(), "cargo build of the new project failed:\n{}", text(&built.stderr));
    let wasm = target.join("wasm32-wasip2/release/weather.wasm");
    let out = std::process::Command::new(LOVIA)
        .args([os("--no-cache"), os("call"), wasm.as_os_str(), os("hello"), os(r#"{"name": "Ada"}"#)])
        .output()
        .expect("run lovia call");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim_end(), "Hello, Ada!");

    // With --sdk the project names a checkout's SDK instead, and carries none.
    let out = lovia_cli(dir, &[os("new"), os("by_path"), os("--sdk"), root.join("guest-sdk").as_os_str()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let cargo: toml::Table =
        std::fs::read_to_string(dir.join("by_path/Cargo.toml")).expect("Cargo.toml").parse().expect("valid TOML");
    let path = cargo["dependencies"]["lovia"]["path"].as_str().expect("a path dependency");
    assert!(std::path::Path::new(path).join("Cargo.toml").is_file(), "{path}");
    assert!(!dir.join("by_path/vendor").exists());
}

/// The whole Python path of a new user: `lovia new --lang python`, `lovia
/// build` (the real binary and componentize-py; cached by its inputs, the
/// template included), then `lovia inspect` and `lovia call` on the result.
#[test]
fn a_python_project_from_lovia_new_builds_with_lovia_build_and_answers_lovia_call() {
    let Some(componentize) = parts::require(Part::Python, python::componentize_py) else { return };
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path();
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let out = lovia_cli(dir, &[os("new"), os("--lang"), os("python"), os("greeter")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("lovia build greeter/app.py"), "{}", text(&out.stdout));
    let app = dir.join("greeter/app.py");
    let readme = std::fs::read_to_string(dir.join("greeter/README.md")).expect("README.md");
    assert!(readme.contains("lovia build app.py -o greeter.wasm"), "{readme}");

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let inputs = [
        app.clone(),
        root.join("crates/cli/src/build/mod.rs"),
        root.join("crates/cli/src/build/python.rs"),
        root.join("crates/cli/src/pack.rs"),
    ];
    let cache = root.join("target/python/cli-cache");
    let built = python::cached("greeter", &inputs, |out| {
        // A new component: the artifact of the previous one (tens of MiB) is never loaded again.
        let _ = std::fs::remove_dir_all(&cache);
        // Named relative to the working directory, as a person types it
        // (the build itself runs elsewhere, so lovia must resolve it).
        let (venv, relative) = match (componentize.parent().and_then(|bin| bin.parent()), componentize.file_name()) {
            (Some(venv), Some(name)) => (venv.to_path_buf(), std::path::Path::new("bin").join(name)),
            _ => panic!("componentize-py is not in a virtual environment: {}", componentize.display()),
        };
        let done = std::process::Command::new(LOVIA)
            .args([os("build"), app.as_os_str(), os("-o"), out.as_os_str(), os("--componentize-py")])
            .arg(&relative)
            .current_dir(&venv)
            .env("LOVIA_CACHE_DIR", &cache)
            .output()
            .expect("run lovia build");
        assert!(done.status.success(), "lovia build failed:\n{}{}", text(&done.stdout), text(&done.stderr));
        // The one long wait says so; the component is compiled once, by the
        // build, and kept for the packed component the calls below load.
        assert_eq!(text(&done.stderr).matches("lovia: compiling ").count(), 1, "{}", text(&done.stderr));
        assert!(text(&done.stdout).contains("greeter 0.1.0, 1 tool(s): hello"), "{}", text(&done.stdout));
        assert!(!text(&done.stderr).contains("Traceback"), "{}", text(&done.stderr));
        // Neither interpreter leaves a .pyc beside the tool file (the next build would bundle it).
        assert!(!dir.join("greeter/__pycache__").exists(), "a __pycache__ beside app.py");
    })
    .expect("built");
    let bytes = std::fs::read(&built).expect("read the component");
    let view = lovia_host::plugin::manifest::read_static(&bytes).expect("a component");
    let manifest = view.manifest.expect("lovia build packs the manifest").expect("a readable manifest");
    assert_eq!((manifest.info.name.as_str(), manifest.info.version.as_str()), ("greeter", "0.1.0"));
    assert_eq!(manifest.tools.len(), 1);
    assert_eq!(manifest.tools[0].description, "Greets someone by name.");

    // The compiled artifact is kept under target/python so a second run does not compile 19 MiB again.
    let call = |args: &str| {
        std::process::Command::new(LOVIA)
            .args([os("call"), built.as_os_str(), os("hello"), std::ffi::OsStr::new(args)])
            .env("LOVIA_CACHE_DIR", &cache)
            .output()
            .expect("run lovia call")
    };
    let out = call(r#"{"name": "Ada"}"#);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim_end(), "Hello, Ada!");
    assert!(!text(&out.stderr).contains("lovia: compiling"), "the build compiled it already: {}", text(&out.stderr));
    let out = call(r#"{"name": ""}"#);
    assert_eq!(out.status.code(), Some(1), "an error result");
    assert!(
        text(&out.stdout).starts_with("Tool error: Invalid arguments for tool 'hello': name:"),
        "{}",
        text(&out.stdout)
    );
}

/// The seed's first example (`tests/python/seed/orders.py`): an `async def`
/// tool in a file that imports nothing but `lovia`, built with `lovia build`
/// as docs/python.md says. Every module the SDK needs during a call must be in
/// the component, not only those the tool file happens to import.
#[test]
fn an_async_tool_whose_file_imports_only_lovia_answers() {
    let Some(componentize) = parts::require(Part::Python, python::componentize_py) else { return };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tool_file = root.join("tests/python/seed/orders.py");
    let inputs = [
        tool_file.clone(),
        root.join("crates/cli/src/build/mod.rs"),
        root.join("crates/cli/src/build/python.rs"),
        root.join("crates/cli/src/pack.rs"),
    ];
    let cache = root.join("target/python/seed-cache");
    let os = std::ffi::OsStr::new;
    let built = python::cached("seed-orders", &inputs, |out| {
        let _ = std::fs::remove_dir_all(&cache);
        let done = std::process::Command::new(LOVIA)
            .args([os("build"), tool_file.as_os_str(), os("-o"), out.as_os_str(), os("--componentize-py")])
            .arg(&componentize)
            .output()
            .expect("run lovia build");
        assert!(done.status.success(), "lovia build failed:\n{}{}", text(&done.stdout), text(&done.stderr));
    })
    .expect("built");
    let out = std::process::Command::new(LOVIA)
        .args([os("call"), built.as_os_str(), os("lookup_order"), os(r#"{"order_id": "A-1001"}"#)])
        .env("LOVIA_CACHE_DIR", &cache)
        .output()
        .expect("run lovia call");
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(text(&out.stdout).trim_end(), "Order A-1001: shipped");
}
