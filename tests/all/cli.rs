//! The `lovia` binary, black-box: exit codes, output, and every bad-input case.

use lovia_tests::{fixtures, packed};
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

#[tokio::test]
async fn inspect_without_a_manifest_says_how_to_make_one() {
    assert_usage_error(&lovia(&["inspect", fixtures::DOCS]), "has no embedded manifest");
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
    for sub in ["inspect", "call", "pack"] {
        let o = lovia(&[sub, "--help"]);
        assert_eq!(o.status.code(), Some(0));
        assert!(stdout(&o).contains("Usage: lovia"), "{sub}");
    }
}
