//! `lovia mcp` driven by the official Python MCP client (PyPI `mcp`, in a
//! virtual environment under target/) over stdio and streamable HTTP, on
//! both protocol revisions: tests/mcp/client.py makes the calls and prints
//! what it saw; these tests assert on it.

mod changes;
mod code_mode;
mod hints;
mod questions;
mod startup;
pub(crate) mod tasks;
mod withdraw;

use lovia_host::Tool;
use lovia_host::call::text;
use lovia_tests::fixtures;
use lovia_tests::parts::{self, Part};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The default per-attempt timeout the server runs with: long enough that
/// the cancellation check (1 to 3 s after the call started) is over before
/// it could stop the spinning call itself.
const TIMEOUT_MS: &str = "4000";

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The requirement `scripts/test` installs too.
const MCP_REQUIREMENT: &str = "mcp>=2.3,<3";

/// The venv's python, made on first use (`scripts/test` makes it up front);
/// `None` when the `mcp-client` part is opted out (`LOVIA_SKIP`), a failed
/// test when it cannot be made on this machine.
pub(crate) fn python() -> Option<PathBuf> {
    parts::require(Part::McpClient, made_python)
}

fn made_python() -> Result<PathBuf, String> {
    static MADE: Mutex<Option<Result<PathBuf, String>>> = Mutex::new(None);
    let mut made = MADE.lock().unwrap_or_else(|p| p.into_inner());
    made.get_or_insert_with(|| {
        let venv = root().join("target/mcp-venv");
        let py = venv.join("bin/python");
        let has_mcp = |py: &Path| Command::new(py).args(["-c", "import mcp"]).status().is_ok_and(|s| s.success());
        if has_mcp(&py) {
            return Ok(py);
        }
        let ok = |c: &mut Command| c.status().is_ok_and(|s| s.success());
        if !ok(Command::new("python3").arg("-m").arg("venv").arg(&venv)) {
            return Err(format!("python3 -m venv {} failed", venv.display()));
        }
        if !ok(Command::new(venv.join("bin/pip")).args(["install", "-q", MCP_REQUIREMENT])) {
            return Err(format!("pip install '{MCP_REQUIREMENT}' failed"));
        }
        if has_mcp(&py) { Ok(py) } else { Err("the mcp package does not import".into()) }
    })
    .clone()
}

/// The `lovia` arguments of every server here: one plugin of each kind,
/// the hostile one for its stdout flood.
fn server_args() -> Vec<String> {
    let mut args: Vec<String> = ["--no-cache", "mcp"].map(String::from).to_vec();
    args.extend(
        [
            fixtures::DIAGNOSTICS,
            fixtures::DOCS,
            fixtures::ORDERS,
            fixtures::OPS,
            fixtures::HOSTILE,
            fixtures::CHARTS,
            fixtures::CONTRACT_0_1,
        ]
        .map(String::from),
    );
    args.extend(["--timeout-ms", TIMEOUT_MS].map(String::from));
    args
}

pub(crate) fn client(py: &Path, args: &[String]) -> Value {
    client_logged(py, args).0
}

/// The client's observations and its stderr, where a `lovia mcp` it spawned
/// on stdio writes its log.
pub(crate) fn client_logged(py: &Path, args: &[String]) -> (Value, String) {
    let out = Command::new(py).arg(root().join("tests/mcp/client.py")).args(args).output().expect("run the client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "client failed:\n{stdout}\n{stderr}");
    let value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("client output {stdout:?}: {e}"));
    (value, stderr)
}

fn over_stdio(mode: &str) -> Option<Value> {
    let py = python()?;
    let mut args = vec![mode.to_owned(), "stdio".to_owned(), env!("CARGO_BIN_EXE_lovia").to_owned()];
    args.extend(server_args());
    Some(client(&py, &args))
}

/// Kills the server this test started, however the test ends.
pub(crate) struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `lovia <args> --http 127.0.0.1:0`; returns it with its URL and pid.
pub(crate) fn start_http(args: Vec<String>) -> (Server, String, u32) {
    let (server, url, pid, _) = start_http_logged(args);
    (server, url, pid)
}

/// As [`start_http`], and the server's log (stderr) as it grows.
pub(crate) fn start_http_logged(mut args: Vec<String>) -> (Server, String, u32, Arc<Mutex<String>>) {
    args.extend(["--http", "127.0.0.1:0"].map(String::from));
    let mut child = Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lovia mcp --http");
    let stderr = child.stderr.take().expect("stderr");
    let pid = child.id();
    let server = Server(child);
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines.next().expect("lovia mcp printed its address").expect("stderr line");
        if let Some(at) = line.find("http://") {
            break line[at..].to_owned();
        }
    };
    // Keep reading stderr so the server never blocks on a full pipe.
    let log = Arc::new(Mutex::new(String::new()));
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let mut log = sink.lock().unwrap_or_else(|p| p.into_inner());
            log.push_str(&line);
            log.push('\n');
        }
    });
    (server, url, pid, log)
}

fn over_http(mode: &str) -> Option<Value> {
    let py = python()?;
    let (server, url, pid) = start_http(server_args());
    let out = client(&py, &[mode.to_owned(), "http".to_owned(), url, pid.to_string()]);
    drop(server);
    Some(out)
}

pub(crate) fn result(is_error: bool, text: &str, structured: Value) -> Value {
    json!({"is_error": is_error, "text": [text], "structured": structured})
}

/// Everything the client saw, against what lovia says a model reads.
async fn check(out: &Value, protocol: &str) {
    assert_eq!(out["protocol"], protocol);

    // tools/list: every tool in plugin order, with the schema the model sees.
    let mut expected = Vec::new();
    for path in [
        fixtures::DIAGNOSTICS,
        fixtures::DOCS,
        fixtures::ORDERS,
        fixtures::OPS,
        fixtures::HOSTILE,
        fixtures::CHARTS,
        fixtures::CONTRACT_0_1,
    ] {
        let plugin = lovia_tests::load(path).await;
        expected.extend(Tool::from_plugin(&plugin).into_iter().map(|t| t.spec().clone()));
    }
    let tools = out["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap_or_default()).collect();
    let want: Vec<&str> = expected.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, want);
    for (tool, spec) in tools.iter().zip(&expected) {
        assert_eq!(tool["inputSchema"], spec.parameters, "{}", spec.name);
    }
    let echo = &tools[0];
    assert_eq!(echo["title"], "Echo");
    assert_eq!(
        echo["annotations"],
        json!({"title": "Echo", "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false})
    );
    let migration = tools.iter().find(|t| t["name"] == "apply_migration").expect("apply_migration");
    assert_eq!(migration["annotations"]["destructiveHint"], true);
    assert_eq!(migration["title"], "Apply migration");
    // outputSchema appears exactly for the tools whose spec declares one.
    for (tool, spec) in tools.iter().zip(&expected) {
        assert_eq!(tool.get("outputSchema").is_some(), spec.output_schema.is_some(), "{}", spec.name);
    }

    // tools/call through the executor.
    assert_eq!(out["text"], result(false, "hi", Value::Null));
    assert_eq!(out["json"], result(false, "1", json!({"result": 1})));
    assert_eq!(out["array"], result(false, r#"["Timeouts"]"#, json!({"result": ["Timeouts"]})));
    let invalid = out["invalid"]["text"][0].as_str().unwrap_or_default();
    assert_eq!(out["invalid"]["is_error"], true);
    assert!(
        invalid.starts_with("Tool error: Invalid arguments for tool 'search_docs': query: Field required"),
        "{invalid}"
    );
    assert_eq!(
        out["tool_error"],
        result(true, "Tool error: no order A-0000\n  hint: ids look like A-1001", Value::Null)
    );
    assert_eq!(out["unknown"], result(true, &text::unknown_tool("no_such_tool"), Value::Null));
    // This client declares no elicitation: 2026-07-28 says so with -32021.
    if protocol == "2026-07-28" {
        assert_eq!(out["approval"]["error"]["code"], -32021, "{}", out["approval"]);
    } else {
        assert_eq!(out["approval"], result(true, &text::not_approved("apply_migration"), Value::Null));
    }
    // 64 KiB printed by the guest never reached the protocol stream.
    assert_eq!(out["stdout_flood"], result(false, "flooded", Value::Null));
    assert_eq!(out["progress_result"], result(false, "done in 3 steps", Value::Null));
    // Throttled (at most one per 100 ms): the first at once, the last
    // before the result, numbered without gaps; a middle one only if the
    // machine stalled for a whole interval.
    let progress = out["progress"].as_array().expect("progress");
    assert!((2..=3).contains(&progress.len()), "{progress:?}");
    assert_eq!(progress[0], json!([1.0, "step 1 of 3"]));
    assert_eq!(progress[progress.len() - 1], json!([progress.len() as f64, "step 3 of 3"]));
    assert_eq!(out["timeout"], result(true, &format!("Tool error: timed out after {TIMEOUT_MS} ms"), Value::Null));

    // Contract 0.2: a declared title, and content parts as MCP blocks.
    let chart = tools.iter().find(|t| t["name"] == "bar_chart").expect("bar_chart");
    assert_eq!((&chart["title"], &chart["annotations"]["title"]), (&json!("Bar chart"), &json!("Bar chart")));
    let legacy = tools.iter().find(|t| t["name"] == "legacy_echo").expect("legacy_echo");
    assert_eq!(legacy["title"], "Legacy echo", "a 0.1.0 tool gets a title from its name");
    let parts = crate::contract::direct_chart().await;
    let image = match &parts[1] {
        lovia_host::ContentPart::Image { data, .. } => {
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, data)
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(
        out["chart"],
        json!([
            {"type": "text", "text": "3 bars of visits, the highest 3."},
            {"type": "image", "data": image, "mimeType": "image/png"},
            {"type": "resource_link", "uri": "data:text/csv,visits%0A3%0A1%0A2", "name": "visits.csv", "mimeType": "text/csv"},
        ])
    );
    assert_eq!(out["legacy"]["is_error"], false);
    assert!(out["legacy"]["text"][0].as_str().unwrap_or_default().starts_with("old (call "), "{}", out["legacy"]);

    // Cancellation: the client gave up at 0.5 s; the component stopped.
    assert!(out["cancel_error"].is_string(), "the abandoned call raised: {}", out["cancel_error"]);
    let cpu = out["cpu_after_cancel_s"].as_f64().expect("cpu");
    println!("{protocol}: server CPU over the 2 s after a cancelled spin: {cpu:.2} s");
    assert!(cpu < 0.5, "the cancelled spin kept running: {cpu} s of CPU in 2 s");
    assert_eq!(out["after_cancel"], result(false, "still here", Value::Null));
    let ms = out["after_cancel_ms"].as_f64().expect("ms");
    assert!(ms < Duration::from_secs(2).as_millis() as f64, "the next call took {ms} ms");
}

#[tokio::test]
async fn stdio_on_2026_07_28() {
    let Some(out) = over_stdio("auto") else { return };
    check(&out, "2026-07-28").await;
}

#[tokio::test]
async fn stdio_on_2025_11_25() {
    let Some(out) = over_stdio("legacy") else { return };
    check(&out, "2025-11-25").await;
}

#[tokio::test]
async fn http_on_2026_07_28() {
    let Some(out) = over_http("auto") else { return };
    check(&out, "2026-07-28").await;
}

#[tokio::test]
async fn http_on_2025_11_25() {
    let Some(out) = over_http("legacy") else { return };
    check(&out, "2025-11-25").await;
}

#[test]
fn mcp_help_names_both_transports() {
    let out = Command::new(env!("CARGO_BIN_EXE_lovia")).args(["mcp", "--help"]).output().expect("run lovia");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for needle in ["--http <ADDR>", "--config <FILE>", "PLUGIN.wasm", "structuredContent", "docs/mcp.md"] {
        assert!(help.contains(needle), "{needle:?} missing from:\n{help}");
    }
}

/// Two plugins with a tool of one name: the refusal names the plugin and
/// says what `lovia mcp` can do about it, not another framework's option.
#[test]
fn two_plugins_with_one_tool_name_are_refused_with_lovia_mcps_own_hint() {
    let out = Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["--no-cache", "mcp", fixtures::DOCS, fixtures::DOCS])
        .stdin(Stdio::null())
        .output()
        .expect("run lovia");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Tool name conflict for 'search_docs' from plugin."), "{stderr}");
    assert!(
        stderr.contains(
            "hint: two of what you gave have a tool of this name: give them to separate `lovia mcp` processes"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("MCPServer"), "{stderr}");
}

/// The servers of the approval tests: a migration that needs approval, a
/// gated tool that logs when it runs, and a 1 s approval timeout for the
/// client that answers late.
pub(crate) fn approval_args() -> Vec<String> {
    ["--no-cache", "mcp", fixtures::OPS, fixtures::GATED, "--approval-timeout-secs", "1"].map(String::from).to_vec()
}

/// Runs client.py `mode what` against a `lovia mcp` on `transport`; its
/// observations and the server's log.
pub(crate) fn against(py: &Path, mode: &str, what: &str, transport: &str, args: Vec<String>) -> (Value, String) {
    against_with(py, mode, what, &[], transport, args)
}

/// As [`against`], with `extra` arguments for client.py before the server.
pub(crate) fn against_with(
    py: &Path,
    mode: &str,
    what: &str,
    extra: &[String],
    transport: &str,
    args: Vec<String>,
) -> (Value, String) {
    let mut head = [mode, what].map(String::from).to_vec();
    head.extend(extra.iter().cloned());
    head.push(transport.to_owned());
    if transport == "stdio" {
        let mut all = head;
        all.push(env!("CARGO_BIN_EXE_lovia").to_owned());
        all.extend(args);
        client_logged(py, &all)
    } else {
        let (server, url, _, log) = start_http_logged(args);
        let mut all = head;
        all.push(url);
        let (out, _) = client_logged(py, &all);
        // The server logs a refusal before it answers; a moment for the pipe.
        std::thread::sleep(Duration::from_millis(200));
        let log = log.lock().unwrap_or_else(|p| p.into_inner()).clone();
        drop(server);
        (out, log)
    }
}

/// Every answer a client can give, and what ran.
async fn check_approvals(out: &Value, log: &str, protocol: &str) {
    assert_eq!(out["protocol"], protocol);
    let not_approved = result(true, &text::not_approved("launch"), Value::Null);

    // Accepted: the call ran, and the prompt named the tool, the exact
    // argument text and the plugin (name and digest).
    assert_eq!(out["accept"], result(false, "Applied migration 7", Value::Null));
    let ops = lovia_tests::load(fixtures::OPS).await;
    let asked = out["accept_asked"].as_array().expect("asked");
    assert_eq!(asked.len(), 1, "asked once: {asked:?}");
    let prompt = asked[0].as_str().unwrap_or_default();
    for needle in [
        "the tool apply_migration.".to_owned(),
        r#"Arguments (exact): {"version":7}"#.to_owned(),
        format!("plugin {}, sha256 {}", ops.info().name, ops.digest()),
    ] {
        assert!(prompt.contains(&needle), "{needle:?} missing from the prompt {prompt:?}");
    }
    assert_eq!(out["accept_launch"], result(false, "launched approved", Value::Null));
    assert!(log.contains("launch ran for approved"), "the approved call ran:\n{log}");

    // A client that cannot be asked: on 2026-07-28 the error that says so
    // (-32021, naming the capability), so it can declare elicitation and
    // retry; on 2025-11-25, which has no such error, lovia's not-approved.
    if protocol == "2026-07-28" {
        let error = &out["unable"]["error"];
        assert_eq!(error["code"], -32021, "{}", out["unable"]);
        assert_eq!(error["data"]["requiredCapabilities"], json!({"elicitation": {"form": {}}}), "{error}");
    } else {
        assert_eq!(out["unable"], not_approved, "unable");
    }
    // Declined, cancelled, an answer after the timeout: lovia's
    // not-approved result. In no case did the tool run.
    for (case, target, was_asked) in [
        ("decline", "declined", true),
        ("cancel", "cancelled", true),
        ("unable", "unasked", false),
        ("late", "late", true),
    ] {
        // On 2026-07-28 a late answer brings back a state that has expired:
        // `-32602`, as any state that does not open.
        if case == "late" && protocol == "2026-07-28" {
            assert_eq!(out[case]["error"]["code"], -32602, "{case}: {}", out[case]);
            assert_eq!(out[case]["error"]["message"], "request state refused: request state has expired", "{case}");
        } else if case != "unable" {
            assert_eq!(out[case], not_approved, "{case}");
        }
        assert_eq!(out[format!("{case}_asked")].as_array().map(Vec::len), Some(usize::from(was_asked)), "{case}");
        assert!(!log.contains(&format!("launch ran for {target}")), "{case}: the tool ran:\n{log}");
    }
}

#[tokio::test]
async fn approvals_over_stdio_on_2026_07_28() {
    let Some(py) = python() else { return };
    let (out, log) = against(&py, "auto", "approvals", "stdio", approval_args());
    check_approvals(&out, &log, "2026-07-28").await;
}

#[tokio::test]
async fn approvals_over_stdio_on_2025_11_25() {
    let Some(py) = python() else { return };
    let (out, log) = against(&py, "legacy", "approvals", "stdio", approval_args());
    check_approvals(&out, &log, "2025-11-25").await;
}

#[tokio::test]
async fn approvals_over_http_on_2026_07_28() {
    let Some(py) = python() else { return };
    let (out, log) = against(&py, "auto", "approvals", "http", approval_args());
    check_approvals(&out, &log, "2026-07-28").await;
}

#[tokio::test]
async fn approvals_over_http_on_2025_11_25() {
    let Some(py) = python() else { return };
    let (out, log) = against(&py, "legacy", "approvals", "http", approval_args());
    check_approvals(&out, &log, "2025-11-25").await;
}

/// A catalog of more than one page (120 tools of `paged` after `echo` and
/// its neighbours): pages of 100, an opaque cursor, every tool once in
/// order, and a cursor lovia did not give refused.
async fn check_pages(out: &Value) {
    let mut want = Vec::new();
    for path in [fixtures::DIAGNOSTICS, fixtures::PAGED] {
        let plugin = lovia_tests::load(path).await;
        want.extend(Tool::from_plugin(&plugin).into_iter().map(|t| t.spec().name.clone()));
    }
    assert_eq!(want.len(), 127);
    assert_eq!(out["pages"], json!([lovia_mcp::TOOLS_PAGE, 127 - lovia_mcp::TOOLS_PAGE]));
    assert_eq!(out["names"], json!(want));
    let bad = out["bad_cursor"].as_str().expect("a bad cursor is an error");
    assert!(bad.contains("unknown tools/list cursor"), "{bad}");
}

#[tokio::test]
async fn tools_list_pages_over_stdio_on_both_revisions() {
    let Some(py) = python() else { return };
    let args = ["--no-cache", "mcp", fixtures::DIAGNOSTICS, fixtures::PAGED].map(String::from).to_vec();
    for mode in ["auto", "legacy"] {
        let (out, _) = against(&py, mode, "pages", "stdio", args.clone());
        check_pages(&out).await;
    }
}

#[tokio::test]
async fn tools_list_pages_over_http() {
    let Some(py) = python() else { return };
    let args = ["--no-cache", "mcp", fixtures::DIAGNOSTICS, fixtures::PAGED].map(String::from).to_vec();
    let (out, _) = against(&py, "auto", "pages", "http", args);
    check_pages(&out).await;
}

/// A tool's log line reaches a client that asked for its level, as
/// `notifications/message` with the tool as the logger; a client that asked
/// for nothing, or for a higher level, gets none.
async fn check_logging(out: &Value, protocol: &str) {
    assert_eq!(out["protocol"], protocol);
    for case in ["asked", "unasked", "above"] {
        assert_eq!(out[format!("{case}_result")], result(false, &format!("launched {case}"), Value::Null), "{case}");
    }
    assert_eq!(out["asked"], json!([{"level": "warning", "logger": "launch", "data": "launch ran for asked"}]));
    assert_eq!(out["unasked"], json!([]));
    assert_eq!(out["above"], json!([]));
}

#[tokio::test]
async fn tool_logs_reach_mcp_clients_that_ask_on_both_revisions() {
    let Some(py) = python() else { return };
    for (mode, protocol) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        for transport in ["stdio", "http"] {
            let (out, _) = against(&py, mode, "logging", transport, approval_args());
            check_logging(&out, protocol).await;
        }
    }
}
