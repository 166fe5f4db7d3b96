//! The `lovia` binary, black-box: exit codes, output, and every bad-input case.

use lovia_tests::{fixtures, packed};
use serde_json::json;
use std::process::{Command, Output};

fn lovia(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lovia"))
        .arg("--no-cache")
        .args(args)
        // User-facing output must never carry a backtrace, even with this set.
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run lovia")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_usage_error(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "stderr: {}", stderr(o));
    let err = stderr(o);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains(needle), "{err:?} lacks {needle:?}");
    assert!(err.contains("\n  hint: "), "no hint in {err:?}");
    assert!(!err.contains("backtrace") && !err.contains("panicked"), "{err}");
}

#[tokio::test]
async fn call_prints_the_model_string_and_exits_0() {
    let o = lovia(&["call", fixtures::DOCS, "search_docs", r#"{"query": "timeouts"}"#]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "[\"Timeouts\"]\n");
}

#[tokio::test]
async fn an_error_result_is_printed_and_exits_1() {
    let o = lovia(&["call", fixtures::ORDERS, "lookup_order", r#"{"order_id": "A-0000"}"#]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "Tool error: no order A-0000\n  hint: ids look like A-1001\n");
    let o = lovia(&["call", fixtures::DOCS, "search_docs", r#"{"limit": 99}"#]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("Tool error: Invalid arguments for tool 'search_docs': query: Field required"));
    let o = lovia(&["call", fixtures::DOCS, "search_docs", "[1, 2]"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "Invalid tool arguments: expected a JSON object, got array.\n");
}

#[tokio::test]
async fn a_timeout_interrupts_the_call() {
    let o = lovia(&["call", fixtures::DIAGNOSTICS, "spin_ms", r#"{"ms": 20000}"#, "--timeout-ms", "50"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "Tool error: timed out after 50 ms\n");
}

// Multi-threaded: the server answers on one worker while this one blocks on the child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_http_grants_one_origin_for_one_call() {
    let server = lovia_tests::http::Server::start().await;
    let url = format!("{}/ping", server.origin());
    let args = serde_json::json!({ "url": url }).to_string();
    let o = lovia(&["call", fixtures::HOSTILE, "fetch", &args, "--allow-http", &server.origin()]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "200 GET /ping \n".to_owned()), "{}", stderr(&o));
    let o = lovia(&["call", fixtures::HOSTILE, "fetch", &args]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), format!("Tool error: HTTP request to {url} denied: origin not granted to this plugin\n"));
    assert_eq!(server.seen().len(), 1, "the refused call never reached the server");
    let o = lovia(&["call", fixtures::HOSTILE, "fetch", &args, "--allow-http", "ftp://example.com"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("expected http:// or https:// followed by a host"), "{}", stderr(&o));
}

const BIG_REFUND: &str = r#"{"order_id": "A-1002", "amount_cents": 6000, "reason": "late"}"#;

// refund asks the plugin whether it needs approval: over 5000 cents it does.
// Without a terminal and without --approve, nobody can approve: denied
// (docs/semantics.md §13).
#[tokio::test]
async fn call_denies_a_call_that_needs_approval_without_approve() {
    let o = lovia(&["call", fixtures::ORDERS, "refund", BIG_REFUND]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Tool refund was not approved.\n");
    // The person who piped it learns why, and what to do.
    assert!(stderr(&o).contains("hint: pass --approve to approve it"), "{}", stderr(&o));
    let small = lovia(&["call", fixtures::ORDERS, "refund", r#"{"order_id": "A-1002", "amount_cents": 100}"#]);
    assert_eq!((small.status.code(), stdout(&small)), (Some(0), "Refunded 100 cents on A-1002\n".to_owned()));
}

#[tokio::test]
async fn call_runs_a_call_that_needs_approval_with_approve() {
    let o = lovia(&["call", fixtures::ORDERS, "refund", BIG_REFUND, "--approve"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Refunded 6000 cents on A-1002 (late)\n");
}

// A "y" piped in is not a person at a terminal: no prompt, and the call is denied.
#[test]
fn call_never_reads_an_approval_from_a_pipe() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["--no-cache", "call", fixtures::ORDERS, "refund", BIG_REFUND])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    child.stdin.take().expect("stdin").write_all(b"y\n").expect("write");
    let o = child.wait_with_output().expect("wait");
    assert_eq!((o.status.code(), stdout(&o)), (Some(1), "Tool refund was not approved.\n".to_owned()));
    assert!(!stderr(&o).contains("[y/N]"), "no prompt without a terminal: {}", stderr(&o));
}

#[test]
fn call_help_documents_approve_and_its_default() {
    let help = stdout(&lovia(&["call", "--help"]));
    assert!(help.contains("--approve"), "{help}");
    assert!(help.contains("[default: deny]"), "{help}");
}

#[tokio::test]
async fn bad_input_is_one_clear_line_with_a_hint() {
    assert_usage_error(&lovia(&["call", "/no/such.wasm", "x"]), "cannot read /no/such.wasm");
    assert_usage_error(&lovia(&["call", env!("CARGO_MANIFEST_PATH"), "x"]), "is not a WebAssembly file");
    let dir = tempfile::tempdir().expect("tempdir");
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").expect("write");
    assert_usage_error(
        &lovia(&["call", core.to_str().expect("utf8"), "x"]),
        "is a core WebAssembly module, not a component",
    );
    let empty = dir.path().join("empty.wasm");
    std::fs::write(&empty, b"\0asm\x0d\0\x01\0").expect("write");
    assert_usage_error(
        &lovia(&["call", empty.to_str().expect("utf8"), "x"]),
        "does not implement the lovia:tools/tool-plugin world",
    );
    let o = lovia(&["call", fixtures::ORDERS, "nope"]);
    assert_usage_error(&o, "has no tool named `nope`");
    assert!(stderr(&o).contains("available tools: lookup_order, refund, top_customers"));
    assert_usage_error(&lovia(&["call", fixtures::DOCS, "search_docs", "{query: x}"]), "ARGS_JSON is not valid JSON");
    assert_eq!(lovia(&["call"]).status.code(), Some(2), "missing arguments are a usage error");
    assert_eq!(lovia(&["call", fixtures::DOCS, "search_docs", "{}", "--memory-mib", "0"]).status.code(), Some(2));
    // A shell grant means nothing unconfined, and a grant must name a path.
    let root = dir.path().to_str().expect("utf8");
    let o = lovia(&["mcp", "--workspace", root, "--shell-sandbox", "off", "--shell-network"]);
    assert_usage_error(&o, "--shell-network, --shell-read and --shell-write grant a confined shell more");
    assert_usage_error(
        &lovia(&["mcp", "--workspace", root, "--shell-read", "/no/such/dir"]),
        "--shell-read /no/such/dir",
    );
}

#[tokio::test]
async fn inspect_reads_the_manifest_without_running_the_plugin() {
    let docs = packed(fixtures::DOCS).await;
    let docs = docs.to_str().expect("utf8");
    let o = lovia(&["inspect", docs]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("docs 0.1.0\n"));
    assert!(stdout(&o).contains("search_docs  [strict]"));

    let json: serde_json::Value =
        serde_json::from_slice(&lovia(&["inspect", docs, "--format", "json"]).stdout).expect("json");
    assert_eq!(json[0]["name"], "search_docs");
    let openai: serde_json::Value =
        serde_json::from_slice(&lovia(&["inspect", docs, "--format", "openai"]).stdout).expect("json");
    assert_eq!(openai[0]["type"], "function");
    assert_eq!(openai[0]["function"]["strict"], true);
    assert_eq!(openai[0]["function"]["parameters"], json[0]["parameters"]);
    let anthropic: serde_json::Value =
        serde_json::from_slice(&lovia(&["inspect", docs, "--format", "anthropic"]).stdout).expect("json");
    assert_eq!(anthropic[0]["input_schema"], json[0]["parameters"]);
    assert_eq!(anthropic[0].as_object().map(|o| o.len()), Some(3));

    let o = lovia(&["inspect", docs, "--verify"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("verified"));
}

// An unpacked plugin is inspected by loading it; the note says how to make
// the manifest that lets inspect read it statically.
#[tokio::test]
async fn inspect_without_a_manifest_says_how_to_make_one() {
    let o = lovia(&["inspect", fixtures::DOCS]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("docs 0.1.0\n"), "{}", stdout(&o));
    assert!(stdout(&o).contains("search_docs  [strict]"));
    let err = stderr(&o);
    assert!(err.contains("has no embedded manifest"), "{err}");
    assert!(err.contains(&format!("`lovia pack {}` embeds the manifest", fixtures::DOCS)), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let packed = packed(fixtures::DOCS).await;
    let statically = lovia(&["inspect", packed.to_str().expect("utf8"), "--format", "json"]);
    let loaded = lovia(&["inspect", fixtures::DOCS, "--format", "json"]);
    assert_eq!(loaded.status.code(), Some(0), "{}", stderr(&loaded));
    assert_eq!(stdout(&loaded), stdout(&statically), "loading reads the same specs pack embeds");
    assert!(!stderr(&statically).contains("note:"), "a packed plugin needs no note");

    assert_usage_error(&lovia(&["inspect", fixtures::DOCS, "--verify"]), "has no embedded manifest");
}

#[tokio::test]
async fn pack_embeds_a_manifest_that_verify_accepts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("ops.wasm");
    let out = out.to_str().expect("utf8");
    let o = lovia(&["pack", fixtures::OPS, "-o", out]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let again = lovia(&["pack", out]);
    assert_eq!(again.status.code(), Some(0), "packing twice replaces the manifest: {}", stderr(&again));
    let o = lovia(&["inspect", out, "--verify", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let tools: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(tools[0]["parallel"], false);
    assert_eq!(tools[1]["retries"], 2);
    assert_eq!(tools[1]["timeout_ms"], 10000);
}

#[test]
fn every_subcommand_has_help() {
    for sub in ["inspect", "call", "pack", "run", "bench", "serve", "build", "new"] {
        let o = lovia(&[sub, "--help"]);
        assert_eq!(o.status.code(), Some(0));
        let help = stdout(&o);
        assert!(help.contains("Usage: lovia"), "{sub}");
        // The options every command takes come last, under their own
        // heading, each said once.
        let global = help.find("Global options:").unwrap_or_else(|| panic!("{sub}: no global heading:\n{help}"));
        for flag in ["--no-cache", "--cache-dir", "--signatures", "--trusted-key", "--insecure-registry"] {
            let listed: Vec<usize> = help
                .lines()
                .scan(0, |at, line| {
                    let start = *at;
                    *at += line.len() + 1;
                    Some((start, line))
                })
                .filter(|(_, line)| line.trim_start().starts_with(&format!("{flag} ")) || line.trim() == flag)
                .map(|(at, _)| at)
                .collect();
            assert_eq!(listed.len(), 1, "{sub}: {flag} is listed once:\n{help}");
            assert!(listed[0] > global, "{sub}: {flag} before the heading:\n{help}");
        }
        assert!(!help.contains("development] [default"), "{sub}: a default said twice");
    }
    // What a user without the repository needs to know: the one install line and the lookup order.
    let build = stdout(&lovia(&["build", "--help"])).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(build.contains("pip install 'componentize-py==0.25.1'"), "{build}");
    assert!(build.contains("--componentize-py") && build.contains("`componentize-py` on PATH"), "{build}");
    assert!(stdout(&lovia(&["new", "--help"])).contains("[default: rust]"));
}

#[test]
fn serve_hash_key_prints_what_api_keys_hold() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["serve", "--hash-key"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    child.stdin.take().expect("stdin").write_all(b"demo-key\n").expect("write");
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), format!("{}\n", lovia_serve::hash_key("demo-key")));
    let o = lovia(&["serve", "--config", "/no/such/serve.toml"]);
    assert_usage_error(&o, "cannot read /no/such/serve.toml");
}

#[test]
fn bench_without_the_plugin_says_how_to_build_it() {
    assert_usage_error(&lovia(&["bench", "--plugin", "/no/such.wasm"]), "cannot read /no/such.wasm");
}

fn run_script(script: &str, extra: &[&str]) -> (Output, Vec<serde_json::Value>) {
    let mut args = vec![
        "run",
        "--plugin",
        fixtures::ORDERS,
        "--plugin",
        fixtures::DOCS,
        "--plugin",
        fixtures::DIAGNOSTICS,
        "--script",
        script,
    ];
    args.extend_from_slice(extra);
    let o = lovia(&args);
    let events = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect();
    (o, events)
}

#[tokio::test]
async fn run_plays_the_example_script() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/support-turns.json");
    let (o, events) = run_script(script, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().expect("event")).collect();
    assert_eq!(kinds.first(), Some(&"turn_started"));
    assert_eq!(kinds.last(), Some(&"run_completed"));
    assert!(events.iter().all(|e| e["t_ms"].is_f64()), "every event has t_ms");
    let find = |kind: &str, id: &str| {
        events.iter().find(|e| e["event"] == kind && e["id"] == id).unwrap_or_else(|| panic!("{kind} {id}"))
    };
    assert_eq!(find("tool_result", "call_unknown")["result"], "Tool 'delete_everything' is not available.");
    assert_eq!(find("approval_required", "call_refund_big")["decision"], "approve");
    assert_eq!(find("tool_result", "call_refund_big")["result"], "Refunded 6000 cents on A-1002 (late)");
    assert_eq!(find("tool_result", "call_refund_other")["result"], "Tool refund was not approved.");
    assert_eq!(find("tool_result", "call_spin")["result"], "Tool error: timed out after 100 ms");
    let turn1 = events.iter().find(|e| e["event"] == "tool_messages" && e["turn"] == 1).expect("turn 1 messages");
    assert_eq!(turn1["messages"].as_array().map(Vec::len), Some(4), "one message per call id");
}

/// `lovia run` and the chat stream share one vocabulary
/// (lovia_runner::wire, tests/golden/events.txt): every event the run
/// prints is one of its names or one of the run's own three.
#[tokio::test]
async fn run_prints_the_shared_event_vocabulary_in_both_formats() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/support-turns.json");
    let (o, events) = run_script(script, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let golden = include_str!("../golden/events.txt");
    let shared: Vec<&str> = golden.lines().collect();
    for e in &events {
        let name = e["event"].as_str().expect("event");
        assert!(
            shared.contains(&name) || ["turn_started", "tool_messages", "turn_ended"].contains(&name),
            "{name} is in neither tests/golden/events.txt nor the run's own: {e}"
        );
    }
    let text = stdout(&run_script_text(script));
    let refund =
        text.lines().find(|l| l.contains("tool_result") && l.contains("call_refund_big")).expect("a result line");
    assert!(refund.ends_with("call_refund_big Refunded 6000 cents on A-1002 (late)"), "{refund}");
    assert!(text.lines().any(|l| l.contains("approval_required") && l.contains("call_refund_big refund(")), "{text}");
}

fn run_script_text(script: &str) -> Output {
    let args = ["run", "--plugin", fixtures::ORDERS, "--plugin", fixtures::DOCS, "--plugin", fixtures::DIAGNOSTICS];
    let o = lovia(&[&args[..], &["--script", script, "--events", "text"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    o
}

#[tokio::test]
async fn run_plays_the_code_mode_script() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/code-mode.json");
    let (o, events) = run_script(script, &["--code-mode"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The program's calls are printed with their parent; the approval the
    // script gives by the nested call's id lets the refund run.
    let nested: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["parent"] == "call_program" && e["event"] == "tool_result").collect();
    assert_eq!(nested.len(), 6, "five lookups and a refund");
    let approval = events.iter().find(|e| e["event"] == "approval_required").expect("the refund is asked about");
    assert_eq!(
        (&approval["id"], &approval["decision"]),
        (&serde_json::json!("call_program/6"), &serde_json::json!("approve"))
    );
    let done =
        events.iter().find(|e| e["event"] == "tool_result" && e["id"] == "call_program").expect("the program's result");
    assert_eq!(done["result"], "3 orders over $30, 19350 cents in all\nRefunded 6000 cents on A-1002 (late)");
    // The model's transcript has the program's one result, not its calls.
    let turn1 = events.iter().find(|e| e["event"] == "tool_messages" && e["turn"] == 1).expect("turn 1 messages");
    assert_eq!(turn1["messages"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn run_answers_every_call_id_when_the_budget_trips() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("budget.json");
    std::fs::write(
        &script,
        r#"{"agent": {"max_tool_calls": 1}, "turns": [{"tool_calls": [
            {"id": "a", "name": "echo", "arguments": "{\"text\": \"x\"}"},
            {"id": "b", "name": "echo", "arguments": "{\"text\": \"y\"}"}]}]}"#,
    )
    .expect("write");
    let (o, events) = run_script(script.to_str().expect("utf8"), &[]);
    assert_eq!(o.status.code(), Some(1));
    let messages = &events.iter().find(|e| e["event"] == "tool_messages").expect("messages")["messages"];
    assert_eq!(messages[0]["content"], "x");
    assert_eq!(messages[1]["tool_call_id"], "b");
    assert_eq!(messages[1]["content"], "Tool error: not run: budget exceeded");
    let failed = events.last().expect("last");
    assert_eq!(
        (&failed["event"], &failed["type"], &failed["fatal"]),
        (&json!("error"), &json!("budget_exceeded"), &json!(true))
    );
    assert_eq!(failed["message"], "tool call count 2 exceeds budget 1");
}

#[tokio::test]
async fn run_rejects_a_bad_script_with_a_hint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("bad.json");
    std::fs::write(&script, r#"{"agent": {"retries": 1}, "turns": []}"#).expect("write");
    let (o, _) = run_script(script.to_str().expect("utf8"), &[]);
    assert_usage_error(&o, "is not a valid script: unknown field `retries`");
}

#[tokio::test]
async fn run_scripts_reach_overrides_policies_and_cancellation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("overrides.json");
    std::fs::write(
        &script,
        r#"{"agent": {"tools": {
              "echo": {"policies": [{"redact": {"patterns": ["sk-[a-z0-9]+"]}}, {"cache": {"ttl_ms": 60000}}]},
              "sleep_ms": {"parallel": false}}},
            "turns": [
              {"tool_calls": [
                {"id": "s1", "name": "sleep_ms", "arguments": "{\"ms\": 10}"},
                {"id": "s2", "name": "sleep_ms", "arguments": "{\"ms\": 10}"},
                {"id": "e", "name": "echo", "arguments": "{\"text\": \"key sk-abc1\"}"}]},
              {"tool_calls": [{"id": "long", "name": "sleep_ms", "arguments": "{\"ms\": 30000}"}], "cancel_after_ms": 100}]}"#,
    )
    .expect("write");
    let (o, events) = run_script(script.to_str().expect("utf8"), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let seq: Vec<String> = events
        .iter()
        .filter(|e| e["id"] == "s1" || e["id"] == "s2")
        .map(|e| format!("{}:{}", e["event"].as_str().unwrap_or(""), e["id"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        seq,
        ["tool_call:s1", "tool_result:s1", "tool_call:s2", "tool_result:s2"],
        "the override made sleep_ms a barrier"
    );
    let echo = events.iter().find(|e| e["event"] == "tool_result" && e["id"] == "e").expect("echo");
    assert_eq!(echo["result"], "key [REDACTED]");
    let last = events.last().expect("last");
    assert_eq!((&last["event"], &last["type"]), (&json!("error"), &json!("cancelled")));
    assert_eq!(last["message"], "cancelled by the script");
    let messages = events.iter().rev().find(|e| e["event"] == "tool_messages").expect("messages");
    assert_eq!(messages["messages"][0]["content"], "Tool error: run cancelled");
    assert!(last["t_ms"].as_f64().expect("t_ms") < 5_000.0, "the 30 s sleep was interrupted");

    let unknown = dir.path().join("unknown.json");
    std::fs::write(&unknown, r#"{"agent": {"tools": {"nope": {"retries": 1}}}, "turns": []}"#).expect("write");
    assert_usage_error(&run_script(unknown.to_str().expect("utf8"), &[]).0, "configures tool `nope`");
}

/// The environment that makes `lovia serve` play the README's scripted refund chat.
pub(crate) const SCRIPTED_REFUND: [(&str, &str); 2] = [
    ("LOVIA_PROVIDER", "scripted"),
    ("LOVIA_SCRIPT", concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/chat-refund.json")),
];

/// `lovia serve` as a child process with `env` added; returns it with the
/// address it printed.
pub(crate) async fn spawn_serve(
    config: &std::path::Path,
    store: &std::path::Path,
    env: &[(&str, &str)],
) -> (tokio::process::Child, std::net::SocketAddr) {
    spawn_serve_with(config, store, env, &[]).await
}

/// [`spawn_serve`] with more `lovia serve` flags.
pub(crate) async fn spawn_serve_with(
    config: &std::path::Path,
    store: &std::path::Path,
    env: &[(&str, &str)],
    flags: &[&str],
) -> (tokio::process::Child, std::net::SocketAddr) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["--no-cache", "serve", "--listen", "127.0.0.1:0"])
        .arg("--config")
        .arg(config)
        .arg("--store")
        .arg(store)
        .args(flags)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn lovia serve");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next_line().await.expect("read").expect("a first line");
    let addr = first
        .strip_prefix("lovia serve listening on http://")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("unexpected first line: {first}"));
    // Keep reading so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr.parse().expect("address"))
}

// The README's main flow on the real binary: a chat asks for an approval,
// the service is killed with SIGKILL, and the restarted service resumes the
// run from its SQLite file, asks again, and finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_resumes_a_chat_after_a_kill_9() {
    use crate::serve::{Sse, json, request};
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[[tenants]]\nname = \"demo\"\napi_keys = [\"{}\"]\nagent = {{ name = \"support\" }}\n\
             [[tenants.plugins]]\npath = \"{}\"\n[[tenants.plugins]]\npath = \"{}\"\n",
            lovia_serve::hash_key("demo-key"),
            fixtures::ORDERS,
            fixtures::DIAGNOSTICS
        ),
    )
    .expect("config");
    let store = dir.path().join("sessions.db");
    let (mut first, addr) = spawn_serve(&config, &store, &SCRIPTED_REFUND).await;
    let direct =
        request(addr, "POST", "/api/tools/lookup_order/call", Some("demo-key"), r#"{"order_id": "A-1002"}"#).await;
    assert_eq!(direct.0, 200, "{}", direct.1);
    let body = r#"{"session_id": "s1", "input": "Refund 90 dollars on A-1002"}"#;
    let mut sse = Sse::post(addr, "/api/chat", "demo-key", body).await;
    let asked = sse.until("approval_required").await;
    assert_eq!(asked.last().expect("asked").1["id"], "call_refund");
    first.start_kill().expect("SIGKILL");
    first.wait().await.expect("reaped");
    drop(sse);

    let (_second, addr) = spawn_serve(&config, &store, &SCRIPTED_REFUND).await;
    let mut sse = Sse::post(addr, "/api/chat", "demo-key", r#"{"session_id": "s1"}"#).await;
    let asked = sse.until("approval_required").await;
    assert_eq!(asked.last().expect("asked again").1["id"], "call_refund");
    let approve = r#"{"session_id": "s1", "call_id": "call_refund", "decision": "approve"}"#;
    assert_eq!(request(addr, "POST", "/api/chat/approve", Some("demo-key"), approve).await.0, 200);
    let rest = sse.rest().await;
    let (name, data) = rest.last().expect("the end");
    assert_eq!(name, "run_completed", "{rest:?}");
    assert_eq!(data["output"], "I looked up A-1002 and refunded $90.00 for the damaged item.");
    let (_, transcript) = request(addr, "GET", "/api/chat/s1", Some("demo-key"), "").await;
    let messages = json(&transcript)["messages"].clone();
    let answered: Vec<&str> =
        messages.as_array().expect("messages").iter().filter_map(|m| m["tool_call_id"].as_str()).collect();
    assert_eq!(answered.len(), 2, "each call answered exactly once: {messages}");
    assert!(answered.contains(&"call_lookup") && answered.contains(&"call_refund"));
}

#[test]
fn the_example_serve_config_is_valid() {
    let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/serve.toml"));
    let config = lovia_serve::ServeConfig::load(path).expect("examples/serve.toml loads");
    assert_eq!(config.tenants.len(), 2);
    assert_eq!(config.tenants[0].agent.name, "support");
}

// Every kind of mistake in a script is refused before anything runs, naming
// the key and what it may hold.
#[tokio::test]
async fn run_refuses_every_kind_of_script_mistake_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let echo = r#"{"id": "a", "name": "echo", "arguments": "{\"text\": \"x\"}"}"#;
    let calls = format!(r#"{{"tool_calls": [{echo}]}}"#);
    let cases = [
        (
            format!(r#"{{"agent": {{"approval_handler": "approve"}}, "turns": [{calls}]}}"#),
            "`agent.approval_handler` is \"approve\", expected one of `allow`, `deny`, `ask`",
        ),
        (
            format!(r#"{{"agent": {{"approval_handler": "Allow"}}, "turns": [{calls}]}}"#),
            "`agent.approval_handler` is \"Allow\", expected one of `allow`, `deny`, `ask`",
        ),
        (
            format!(r#"{{"agent": {{"approvals": {{"a": "yes"}}}}, "turns": [{calls}]}}"#),
            "`agent.approvals.a` is \"yes\", expected one of `approve`, `always`, `deny`",
        ),
        (
            format!(r#"{{"agent": {{"approvals": {{"b": "approve"}}}}, "turns": [{calls}]}}"#),
            "`agent.approvals.b` names a call no turn makes, expected one of the script's call ids: a",
        ),
        (
            format!(
                r#"{{"agent": {{"tools": {{"echo": {{"policies": [{{"cach": {{"ttl_ms": 1}}}}]}}}}}}, "turns": [{calls}]}}"#
            ),
            "unknown variant `cach`, expected one of `cache`, `rate_limit`, `redact`",
        ),
        (
            format!(
                r#"{{"agent": {{"tools": {{"echo": {{"policies": [{{"cache": {{"ttl": 1}}}}]}}}}}}, "turns": [{calls}]}}"#
            ),
            "unknown field `ttl`, expected `ttl_ms`",
        ),
        (
            r#"{"turns": [{"txt": "done"}]}"#.to_owned(),
            "`turns[0]` has unknown key `txt`, expected `tool_calls` and `cancel_after_ms` (a turn of calls) or `text` (the final answer)",
        ),
        (r#"{"turns": [{}]}"#.to_owned(), "`turns[0]` has neither `tool_calls` nor `text`"),
        (
            format!(r#"{{"turns": [{{"tool_calls": [{echo}], "text": "done"}}]}}"#),
            "`turns[0]` has both `tool_calls` and `text`",
        ),
        (r#"{"turns": ["done"]}"#.to_owned(), "`turns[0]` is \"done\", expected an object"),
        (r#"{"turns": [{"text": 1}]}"#.to_owned(), "`turns[0].text` is 1, expected a string"),
        (
            r#"{"turns": [{"text": "done", "cancel_after_ms": 5}]}"#.to_owned(),
            "`turns[0].cancel_after_ms` applies to a turn of calls, not to a text turn",
        ),
        (
            format!(r#"{{"turns": [{{"tool_calls": [{echo}], "cancel_after_ms": "soon"}}]}}"#),
            "`turns[0].cancel_after_ms` is \"soon\", expected a whole number of milliseconds",
        ),
        (r#"{"turns": [{"tool_calls": []}]}"#.to_owned(), "`turns[0].tool_calls` is empty"),
        (
            r#"{"turns": [{"tool_calls": [{"id": "a", "name": "echo", "args": "{}"}]}]}"#.to_owned(),
            "`turns[0].tool_calls[0]`: unknown field `args`, expected one of `id`, `name`, `arguments`",
        ),
        (
            format!(r#"{{"turns": [{calls}, {calls}]}}"#),
            "`turns[1].tool_calls[0].id` is \"a\", already the id of `turns[0].tool_calls[0].id`",
        ),
        (
            format!(r#"{{"turns": [{{"text": "done"}}, {calls}]}}"#),
            "`turns[0]` is a text turn, which ends the run, but 1 more turn(s) follow it",
        ),
    ];
    for (i, (script, needle)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.json"));
        std::fs::write(&path, script).expect("write");
        let (o, events) = run_script(path.to_str().expect("utf8"), &[]);
        assert_usage_error(&o, needle);
        assert!(stderr(&o).contains("is not a valid script: "), "{}", stderr(&o));
        assert!(events.is_empty(), "nothing ran for {script}");
    }
    let ok = dir.path().join("ok.json");
    std::fs::write(&ok, r#"{"turns": [{"text": "done"}]}"#).expect("write");
    let o = lovia(&["run", "--plugin", fixtures::DOCS, "--script", ok.to_str().expect("utf8"), "--events", "xml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("invalid value 'xml' for '--events <EVENTS>'"), "{}", stderr(&o));
    assert!(stderr(&o).contains("possible values: jsonl, text"), "{}", stderr(&o));
}

// The runner asks the scripted model once per script turn: a script that
// ends while the model still calls tools fails without starting a turn it
// has no reply for.
#[tokio::test]
async fn run_reports_a_script_that_ends_without_a_text_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("short.json");
    std::fs::write(
        &script,
        r#"{"agent": {"approval_handler": "allow", "tools": {"echo": {"needs_approval": true}}},
            "turns": [{"tool_calls": [{"id": "a", "name": "echo", "arguments": "{\"text\": \"x\"}"}]}]}"#,
    )
    .expect("write");
    let (o, events) = run_script(script.to_str().expect("utf8"), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().expect("event")).collect();
    assert_eq!(
        kinds,
        ["turn_started", "approval_required", "tool_call", "tool_result", "tool_messages", "turn_ended", "error"]
    );
    assert_eq!(events[1]["decision"], "undecided", "the handler allowed it");
    assert_eq!(events[3]["result"], "x");
    let failed = events.last().expect("last");
    assert_eq!((&failed["type"], &failed["fatal"]), (&json!("max_turns"), &json!(true)));
    assert_eq!(failed["message"], "the script ended without a text turn");
}

// The example requests `lovia serve` prints at its start come from the
// config it runs: its first tenant's first tool with arguments of the
// tool's shape, and chat requests only when chats have a model.
#[test]
fn serve_shows_example_requests_for_its_own_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("serve.toml");
    let toml = format!(
        "listen = \"127.0.0.1:0\"\nstore = \"{}\"\n[[tenants]]\nname = \"acme\"\napi_keys = [\"{}\"]\n[[tenants.plugins]]\npath = \"{}\"\n",
        dir.path().join("s.db").display(),
        lovia_serve::hash_key("acme-key"),
        fixtures::DOCS,
    );
    std::fs::write(&config, toml).expect("config");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["--no-cache", "serve", "--config"])
        .arg(&config)
        // No model: the tenant's chats answer 503.
        .env_remove("LOVIA_PROVIDER")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("lovia serve");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().expect("stdout")));
    let mut shown = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("read");
        let done = line.contains("/call");
        shown.push(line);
        if done {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let shown = shown.join("\n");
    assert!(shown.contains("-d '{\"query\":\"...\",\"limit\":5,"), "{shown}");
    assert!(shown.contains("/api/tools/search_docs/call"), "{shown}");
    assert!(shown.contains("Bearer <api key of acme>"), "{shown}");
    assert!(!shown.contains("lookup_order") && !shown.contains("/api/chat"), "nothing this config lacks:\n{shown}");
}

// `lovia run --ask-human`: a question is answered from the script by its
// call id (labels joined as a chat's are); one without an answer, with no
// terminal to ask at, gets the reason; and `always` approves a refund and
// every later refund of the run without asking (`approval_auto`).
#[tokio::test]
async fn run_answers_questions_from_the_script_and_always_allows_a_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ask =
        |q: &str| serde_json::json!({"question": q, "options": [{"label": "Tea"}, {"label": "Coffee"}]}).to_string();
    let other = r#"{"order_id": "A-1004", "amount_cents": 5500, "reason": "late"}"#;
    let script = serde_json::json!({
        "agent": {"approvals": {"r1": "always"}, "answers": {"q1": ["Tea"]}},
        "turns": [
            {"tool_calls": [{"id": "q1", "name": "ask_human", "arguments": ask("Tea or coffee?")}]},
            {"tool_calls": [{"id": "q2", "name": "ask_human", "arguments": ask("Milk?")}]},
            {"tool_calls": [{"id": "r1", "name": "refund", "arguments": BIG_REFUND}]},
            {"tool_calls": [{"id": "r2", "name": "refund", "arguments": other}]},
            {"text": "done"}
        ]
    });
    let path = dir.path().join("script.json");
    std::fs::write(&path, script.to_string()).expect("script");
    let (o, events) = run_script(path.to_str().expect("utf8"), &["--ask-human"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let find = |kind: &str, id: &str| {
        events.iter().find(|e| e["event"] == kind && e["id"] == id).unwrap_or_else(|| panic!("{kind} {id}: {events:?}"))
    };
    assert_eq!(find("tool_result", "q1")["result"], "Tea");
    let unanswered = find("tool_result", "q2")["result"].as_str().unwrap_or_default().to_owned();
    assert!(unanswered.starts_with("Tool error: nobody can answer:"), "{unanswered}");
    assert_eq!(find("approval_required", "r1")["decision"], "always");
    assert_eq!(find("tool_result", "r1")["result"], "Refunded 6000 cents on A-1002 (late)");
    find("approval_auto", "r2");
    assert_eq!(find("tool_result", "r2")["result"], "Refunded 5500 cents on A-1004 (late)");

    // Answers without the tool are a mistake the script states.
    let (o, _) = run_script(path.to_str().expect("utf8"), &[]);
    assert_usage_error(&o, "the script has `agent.answers`, but the agent has no ask_human");
}
