//! `lovia mcp --code-mode` with the official Python MCP client: `run_code`
//! is listed with the orders tools declared in TypeScript, and a program's
//! refund that needs approval is asked about by elicitation (2025-11-25),
//! runs when accepted, and throws lovia's string inside the program when
//! declined. On 2026-07-28, where asking means the client retries the whole
//! call, a program's gated call is denied without asking.

use super::{against, python, result};
use lovia_tests::fixtures;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// A compiled-artifact cache of these tests' own, warmed once by a `lovia
/// mcp --code-mode` whose client leaves at once: a cold start compiles the
/// code-mode engine (seconds, more in a loaded test run), and the Python
/// SDK gives up on `server/discover` after 10 s and falls back to
/// 2025-11-25, which is not what these tests are about.
fn cache() -> &'static Path {
    static CACHE: OnceLock<tempfile::TempDir> = OnceLock::new();
    CACHE
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("tempdir");
            let status = Command::new(env!("CARGO_BIN_EXE_lovia"))
                .arg("--cache-dir")
                .arg(dir.path())
                .args(["mcp", fixtures::ORDERS, "--code-mode"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("lovia mcp starts");
            assert!(status.success(), "the warming start ended with {status}");
            dir
        })
        .path()
}

fn args() -> Vec<String> {
    let cache = cache().display().to_string();
    ["--cache-dir", &cache, "mcp", fixtures::ORDERS, "--code-mode"].map(String::from).to_vec()
}

const DENIED: &str = "not refunded: Tool refund was not approved.";

#[tokio::test]
async fn a_programs_gated_call_is_asked_by_elicitation_on_2025_11_25() {
    let Some(py) = python() else { return };
    let (out, log) = against(&py, "legacy", "code", "http", args());
    assert_eq!(out["protocol"], "2025-11-25", "{log}");
    // The host's single tools lead the table, at every door (docs/architecture.md).
    assert_eq!(out["tools"], serde_json::json!(["run_code", "lookup_order", "refund", "top_customers"]));
    let description = out["description"].as_str().unwrap_or_default();
    assert!(description.contains("lookup_order(args: {"), "{description}");
    assert_eq!(out["accepted"], result(false, "Refunded 12000 cents on A-1002", Value::Null), "{log}");
    let asked = out["asked"].as_array().cloned().unwrap_or_default();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let prompt = asked[0].as_str().unwrap_or_default();
    assert!(prompt.contains("refund") && prompt.contains("12000"), "the person sees the nested call: {prompt}");
    assert_eq!(out["declined"], result(false, DENIED, Value::Null), "{log}");
}

#[tokio::test]
async fn a_programs_gated_call_is_denied_unasked_on_2026_07_28() {
    let Some(py) = python() else { return };
    let (out, log) = against(&py, "auto", "code", "stdio", args());
    assert_eq!(out["protocol"], "2026-07-28", "{log}");
    assert_eq!(out["accepted"], result(false, DENIED, Value::Null), "{log}");
    assert_eq!(out["asked"], serde_json::json!([]));
}

// A program's `ask_human` asks the client through the call that runs the
// program (elicitation, 2025-11-25), and the program goes on with the
// answer; on 2026-07-28, where asking would run the program again, the
// program is told to ask outside `run_code`.
#[tokio::test]
async fn a_programs_question_is_asked_by_elicitation_on_2025_11_25() {
    let Some(py) = python() else { return };
    let mut args = args();
    args.push("--ask-human".into());
    let (out, log) = against(&py, "legacy", "program_asks", "stdio", args.clone());
    assert_eq!(out["protocol"], "2025-11-25", "{log}");
    assert_eq!(out["result"], result(false, "making tea", Value::Null), "{log}");
    assert_eq!(out["asked"], serde_json::json!(["Tea or coffee?"]), "{log}");
    let (out, log) = against(&py, "auto", "program_asks", "stdio", args);
    assert_eq!(out["protocol"], "2026-07-28", "{log}");
    let text = out["result"]["text"][0].as_str().unwrap_or_default();
    assert!(text.contains("a program cannot ask on this MCP revision"), "{text}");
}
