//! `lovia mcp` as its tools change (`--watch`), as a tool reports progress
//! in a tight loop (throttled), and for arguments that are not a JSON object
//! (lovia's own message, never a protocol error): the Python client on both
//! revisions, over stdio and HTTP.

use super::{against, against_with, python, result};
use lovia_host::call::text;
use lovia_host::{EventSink, ExecSettings, Executor, RunState, Tool, ToolCall, ToolSource, Toolset};
use lovia_tests::fixtures;
use serde_json::{Value, json};

/// The tool names of a fixture, in its order.
async fn names(path: &str) -> Vec<String> {
    let plugin = lovia_tests::load(path).await;
    Tool::from_plugin(&plugin).into_iter().map(|t| t.spec().name.clone()).collect()
}

/// What the executor itself answers for `echo` with this argument text.
async fn direct_echo(arguments: &str) -> String {
    let plugin = lovia_tests::load(fixtures::DIAGNOSTICS).await;
    let tools = Toolset::new().with(ToolSource::Plugin, Tool::from_plugin(&plugin)).expect("toolset");
    let exec = Executor::new(tools, ExecSettings::default());
    let results = exec
        .run_turn(&[ToolCall::new("c", "echo", arguments)], &RunState::default(), &EventSink::none())
        .await
        .expect("turn");
    assert!(results[0].is_error, "{arguments} was refused");
    results[0].output.clone()
}

fn diagnostics() -> Vec<String> {
    ["--no-cache", "mcp", fixtures::DIAGNOSTICS].map(String::from).to_vec()
}

async fn check_loose(out: &Value, protocol: &str) {
    assert_eq!(out["protocol"], protocol);
    for (case, arguments) in [("array", r#"[1,"a"]"#), ("string", r#""hi""#), ("number", "5"), ("boolean", "true")] {
        assert_eq!(out[case], result(true, &direct_echo(arguments).await, Value::Null), "{case}");
    }
    let bad = out["bad_name"].as_str().expect("a name that is not a string is a protocol error");
    assert!(bad.contains("invalid tools/call params"), "{bad}");
    assert_eq!(out["after"], result(false, "still here", Value::Null));
}

#[tokio::test]
async fn arguments_that_are_not_an_object_get_lovias_message() {
    let Some(py) = python() else { return };
    for (mode, protocol) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        for transport in ["stdio", "http"] {
            let (out, _) = against(&py, mode, "loose", transport, diagnostics());
            check_loose(&out, protocol).await;
        }
    }
}

/// The progress a client saw from 1,000 messages sent in a tight loop (the
/// per-call events budget): far fewer, numbered 1, 2, 3… without gaps, the
/// first and the last message among them, at most one per 100 ms.
fn check_burst(out: &Value, protocol: &str) {
    assert_eq!(out["protocol"], protocol);
    assert_eq!(out["result"], result(false, "done in 1000 steps", Value::Null));
    let seen = out["progress"].as_array().expect("progress");
    let numbers: Vec<f64> = seen.iter().map(|p| p[0].as_f64().unwrap_or_default()).collect();
    let want: Vec<f64> = (1..=seen.len()).map(|n| n as f64).collect();
    assert_eq!(numbers, want, "counted without gaps: {seen:?}");
    assert_eq!(seen.first().map(|p| &p[1]), Some(&json!("step 1 of 1000")));
    assert_eq!(seen.last().map(|p| &p[1]), Some(&json!("step 1000 of 1000")), "the last one always arrives");
    let call_ms = out["call_ms"].as_f64().expect("call_ms");
    // One at once, one per 100 ms window the call lasted, and the last.
    let most = 2 + (call_ms / 100.0).ceil() as usize;
    println!("{protocol}: 1000 progress messages in {call_ms:.0} ms reached the client as {}", seen.len());
    assert!(seen.len() <= most, "{} notifications in {call_ms} ms: {seen:?}", seen.len());
}

#[tokio::test]
async fn progress_in_a_tight_loop_is_throttled() {
    let Some(py) = python() else { return };
    for (mode, protocol) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        for transport in ["stdio", "http"] {
            let (out, _) = against(&py, mode, "progress", transport, diagnostics());
            check_burst(&out, protocol);
        }
    }
}

/// A watched plugin replaced by another component, then by garbage.
async fn check_watch(out: &Value, log: &str, protocol: &str) {
    assert_eq!(out["protocol"], protocol);
    if protocol == "2026-07-28" {
        assert_eq!(out["honored"], true, "the listen stream was granted toolsListChanged");
    }
    assert_eq!(out["before"], json!(names(fixtures::ORDERS).await));
    assert!(out["notifications"].as_u64().unwrap_or_default() >= 1, "{out}");
    let after = out["notified_after_s"].as_f64().expect("notified");
    println!("{protocol}: tools/list_changed {after:.2} s after the file was replaced");
    assert_eq!(out["after"], json!(names(fixtures::DOCS).await));
    // The executor was swapped with the listing: the new tool runs, the old one is gone.
    assert_eq!(out["new_tool"], result(false, r#"["Timeouts"]"#, json!({"result": ["Timeouts"]})));
    assert_eq!(out["old_tool"], result(true, &text::unknown_tool("lookup_order"), Value::Null));
    // A file that does not load keeps what is served, announces nothing, and says why.
    assert_eq!(out["after_broken"], out["after"]);
    assert_eq!(out["notifications_after_broken"], out["notifications"]);
    assert_eq!(out["still_works"], out["new_tool"]);
    assert!(log.contains("not reloaded, the old version is still served"), "{log}");
}

async fn watch_over(transport: &str, mode: &str, protocol: &str) {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("served.wasm");
    std::fs::copy(fixtures::ORDERS, &target).expect("copy the first version");
    let target = target.display().to_string();
    let args = ["--no-cache", "mcp", &target, "--watch"].map(String::from).to_vec();
    let extra = [target.clone(), fixtures::DOCS.to_owned()];
    let (out, log) = against_with(&py, mode, "watch", &extra, transport, args);
    check_watch(&out, &log, protocol).await;
}

#[tokio::test]
async fn watch_over_stdio_on_2026_07_28() {
    watch_over("stdio", "auto", "2026-07-28").await;
}

#[tokio::test]
async fn watch_over_stdio_on_2025_11_25() {
    watch_over("stdio", "legacy", "2025-11-25").await;
}

#[tokio::test]
async fn watch_over_http_on_2026_07_28() {
    watch_over("http", "auto", "2026-07-28").await;
}

#[tokio::test]
async fn watch_over_http_on_2025_11_25() {
    watch_over("http", "legacy", "2025-11-25").await;
}

#[tokio::test]
async fn watch_reloads_a_plugin_whose_config_changes() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("served.wasm");
    std::fs::copy(fixtures::DIAGNOSTICS, &target).expect("copy the plugin");
    // No config beside it at first: the host's limits. The one that appears
    // cuts the wall clock below the call's sleep.
    let config = dir.path().join("served.toml");
    let replacement = dir.path().join("next.toml");
    std::fs::write(&replacement, "[limits]\nmax_wall_clock_ms = 100\n").expect("write the config");
    let target = target.display().to_string();
    let args = ["--no-cache", "mcp", &target, "--watch"].map(String::from).to_vec();
    let extra = [
        config.display().to_string(),
        replacement.display().to_string(),
        "sleep_ms".to_owned(),
        r#"{"ms": 400}"#.to_owned(),
    ];
    let (out, log) = against_with(&py, "legacy", "watch_call", &extra, "stdio", args);
    assert_eq!(out["before"], result(false, "slept 400 ms", Value::Null), "{log}");
    let after = &out["after"];
    assert_eq!(after["is_error"], true, "the new limit holds: {after}");
    let text = after["text"][0].as_str().unwrap_or_default();
    assert!(text.contains("100"), "the 100 ms limit is named: {text}");
    assert!(log.contains("served.wasm reloaded"), "{log}");
}
