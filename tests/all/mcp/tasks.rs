//! Tasks served by `lovia mcp` (2025-11-25, "Tasks"), read by the official
//! TypeScript SDK's task client (tests/mcp-fs/task_client.mjs, with its
//! capabilities enforced strictly) over stdio and streamable HTTP: a long
//! tool and a gated one offer `execution.taskSupport: "optional"`, a task
//! is polled, read, listed and cancelled, a task waiting for its approval
//! reads `input_required`, and a fast tool offers no task.

use super::{Server, root, start_http_logged};
use lovia_host::call::text;
use lovia_tests::fixtures;
use lovia_tests::parts::{self, Part};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

/// A script of tests/mcp-fs, run with node; `None` when the `mcp-fs` part
/// (which installs the TypeScript SDK in tests/mcp-fs/node_modules) is
/// opted out.
pub(crate) fn mcp_fs_script(name: &str) -> Option<PathBuf> {
    parts::require(Part::McpFs, || {
        if !root().join("tests/mcp-fs/node_modules/@modelcontextprotocol/sdk").exists() {
            return Err("no tests/mcp-fs/node_modules (cd tests/mcp-fs && npm ci)".into());
        }
        if !Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Err("no node on PATH".into());
        }
        Ok(root().join("tests/mcp-fs").join(name))
    })
}

/// The task client's script.
pub(crate) fn task_client() -> Option<PathBuf> {
    mcp_fs_script("task_client.mjs")
}

/// Runs the client with `args`; the one JSON line it printed.
pub(crate) fn run_client(script: &PathBuf, args: &[String], env: &[(&str, &str)]) -> Value {
    let output = Command::new("node").arg(script).args(args).envs(env.iter().copied()).output().expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stdout.lines().last().unwrap_or_else(|| panic!("no output; stderr: {stderr}"));
    let out: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"));
    assert_eq!(out.get("failure"), None, "the client failed: {out}\nstderr: {stderr}");
    out
}

fn lovia_args(plugins: &[&str], extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["--no-cache", "mcp"].map(String::from).to_vec();
    args.extend(plugins.iter().map(|p| p.to_string()));
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// What a client reads on either transport: the capability, the listing,
/// a completed task, a cancelled one, and a plain call of the same tool.
fn check_long(out: &Value) {
    assert_eq!(out["capability"], json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}), "{out}");
    // No timeout: every tool may run long, and offers a task.
    assert_eq!(out["execution"]["sleep_ms"], "optional", "{out}");
    let completed = out["completed"].as_array().expect("messages");
    assert_eq!(completed[0]["type"], "taskCreated", "{out}");
    assert_eq!((completed[0]["ttl"].as_u64(), completed[0]["pollInterval"].as_u64()), (Some(3_600_000), Some(500)));
    assert!(completed.iter().any(|m| m["type"] == "taskStatus" && m["status"] == "working"), "{out}");
    let last = completed.last().expect("a result");
    assert_eq!((last["type"].as_str(), last["text"].as_str()), (Some("result"), Some("slept 1200 ms")), "{out}");
    let id = completed[0]["taskId"].as_str().expect("an id");
    assert!(id.starts_with("task-") && id.len() == 37, "{id}");
    assert_eq!(out["get"]["status"], "completed");
    assert_eq!(out["result"]["meta"]["io.modelcontextprotocol/related-task"]["taskId"], id, "{out}");
    assert!(out["list"].as_array().expect("list").contains(&json!([id, "completed"])), "{out}");
    assert_eq!(out["longCreated"], json!({"status": "working", "ttl": 120_000}));
    assert_eq!(out["longRunning"], "working");
    assert_eq!(out["cancelled"], "cancelled");
    let cancelled = &out["cancelledResult"];
    assert_eq!((cancelled["text"].as_str(), cancelled["isError"].as_bool()), (Some(text::RUN_CANCELLED), Some(true)));
    assert_eq!(out["cancelAgain"]["code"], -32602, "{out}");
    assert_eq!(out["unknown"]["code"], -32602, "{out}");
    assert_eq!(out["plain"], "slept 10 ms");
}

/// The gated tool's tasks: asked while `input_required`, run on accept,
/// not run on decline; a tool with a short timeout offers no task.
fn check_gated(out: &Value) {
    assert_eq!(out["execution"]["launch"], "optional", "{out}");
    assert_eq!(out["execution"]["echo"], Value::Null, "a 5 s tool runs plainly: {out}");
    assert_eq!(out["forbidden"]["code"], -32601, "{out}");
    let accepted = out["accepted"].as_array().expect("messages");
    assert_eq!(accepted.last().expect("a result")["text"], "launched a", "{out}");
    let asked = &out["askedAccept"][0];
    assert_eq!(asked["statuses"], json!(["input_required"]), "{out}");
    assert_eq!(asked["messages"], json!(["waiting for approval to run launch"]), "{out}");
    let declined = out["declined"].as_array().expect("messages");
    assert_eq!(declined.last().expect("a result")["text"], text::not_approved("launch"), "{out}");
}

#[test]
fn a_long_call_runs_as_a_task_over_stdio() {
    let Some(script) = task_client() else { return };
    let mut args = vec!["long".to_owned(), "stdio".to_owned(), env!("CARGO_BIN_EXE_lovia").to_owned()];
    args.extend(lovia_args(&[fixtures::DIAGNOSTICS], &[]));
    check_long(&run_client(&script, &args, &[]));
}

#[test]
fn a_long_call_runs_as_a_task_over_http() {
    let Some(script) = task_client() else { return };
    let (server, url, _, _): (Server, _, _, _) = start_http_logged(lovia_args(&[fixtures::DIAGNOSTICS], &[]));
    check_long(&run_client(&script, &["long".into(), "http".into(), url], &[]));
    drop(server);
}

#[test]
fn a_gated_call_waits_as_an_input_required_task_over_stdio() {
    let Some(script) = task_client() else { return };
    let mut args = vec!["gated".to_owned(), "stdio".to_owned(), env!("CARGO_BIN_EXE_lovia").to_owned()];
    args.extend(lovia_args(&[fixtures::DIAGNOSTICS, fixtures::GATED], &["--timeout-ms", "5000"]));
    check_gated(&run_client(&script, &args, &[]));
}

#[test]
fn a_gated_call_waits_as_an_input_required_task_over_http() {
    let Some(script) = task_client() else { return };
    let (server, url, _, log) =
        start_http_logged(lovia_args(&[fixtures::DIAGNOSTICS, fixtures::GATED], &["--timeout-ms", "5000"]));
    check_gated(&run_client(&script, &["gated".into(), "http".into(), url], &[]));
    let log = log.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(log.contains("launch ran for a"), "{log}");
    assert!(!log.contains("launch ran for b"), "a declined task ran: {log}");
    drop(server);
}

#[test]
fn no_tasks_are_offered_with_max_tasks_zero() {
    let Some(script) = task_client() else { return };
    let (server, url, _, _) = start_http_logged(lovia_args(&[fixtures::DIAGNOSTICS], &["--max-tasks", "0"]));
    let out = run_client(&script, &["long".into(), "http".into(), url], &[]);
    assert_eq!(out["capability"], Value::Null, "{out}");
    assert_eq!(out["execution"]["sleep_ms"], Value::Null, "{out}");
    // The strict client refuses to ask for a task the server does not offer.
    assert!(out["refused"]["message"].as_str().is_some_and(|m| m.contains("task")), "{out}");
    assert_eq!(out["plain"], "slept 10 ms");
    drop(server);
}

/// A 2026-07-28 client that declares the tasks extension (SEP-2663),
/// rmcp's own client: the server answers a long call with a task, which
/// `tasks/get` reads until its result is inline, and `tasks/cancel` stops;
/// a client without the extension gets the plain result.
#[tokio::test]
async fn a_long_call_of_a_2026_07_28_client_runs_as_a_server_directed_task() {
    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig, GetTaskParams,
        Implementation, ProtocolVersion, TaskPayload,
    };
    use rmcp::{ClientLifecycleMode, ClientServiceExt};
    let discover = || ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    let start = || {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_lovia"));
        command.args(lovia_args(&[fixtures::DIAGNOSTICS], &[]));
        let (child, _) = rmcp::transport::TokioChildProcess::builder(command)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("lovia mcp starts");
        child
    };
    let sleep = |ms: u64| {
        let mut arguments = serde_json::Map::new();
        arguments.insert("ms".into(), json!(ms));
        CallToolRequestParams::new("sleep_ms").with_arguments(arguments)
    };
    let info =
        ClientConfig::new(ClientCapabilities::builder().enable_tasks().build(), Implementation::new("lovia-test", "1"));
    let client = info.serve_with_lifecycle(start(), discover()).await.expect("discovered");
    let CallToolResponse::Task(created) = client.call_tool_once(sleep(1200)).await.expect("answered") else {
        panic!("a long call of a client with the tasks extension is a task");
    };
    assert_eq!(created.task.poll_interval_ms, Some(500));
    let id = created.task.task_id.clone();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let result = loop {
        let got = client.get_task(GetTaskParams::new(id.clone())).await.expect("tasks/get");
        match got.task.payload {
            TaskPayload::Completed { result } => break result,
            TaskPayload::Working => {}
            other => panic!("unexpected {other:?}"),
        }
        assert!(std::time::Instant::now() < deadline, "the task never completed");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(result["content"][0]["text"], "slept 1200 ms", "{result:?}");
    let CallToolResponse::Task(long) = client.call_tool_once(sleep(60_000)).await.expect("answered") else {
        panic!("a task");
    };
    let cancelled_at = std::time::Instant::now();
    client.cancel_task(CancelTaskParams::new(long.task.task_id.clone())).await.expect("tasks/cancel");
    let got = client.get_task(GetTaskParams::new(long.task.task_id.clone())).await.expect("tasks/get");
    assert_eq!(got.task.payload, TaskPayload::Cancelled);
    assert!(cancelled_at.elapsed() < std::time::Duration::from_secs(5));
    let unknown = client.get_task(GetTaskParams::new("task-unknown")).await.expect_err("unknown");
    assert!(unknown.to_string().contains("unknown task"), "{unknown}");
    client.cancel().await.expect("closed");
    // Without the extension: the plain result, as before.
    let plain = ClientConfig::new(ClientCapabilities::default(), Implementation::new("lovia-test", "1"));
    let client = plain.serve_with_lifecycle(start(), discover()).await.expect("discovered");
    let result = client.call_tool(sleep(10)).await.expect("a plain result");
    assert_eq!(result.content[0].as_text().map(|t| t.text.as_str()), Some("slept 10 ms"));
    client.cancel().await.expect("closed");
}
