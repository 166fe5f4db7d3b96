//! The MCP annotations of lovia's own tools, read by the official Python MCP
//! client: a client that runs read-only tools without asking (as coding
//! assistants do) does so for exactly the tools that only read, and the
//! others say what they may do.

use super::{client_logged, python};
use lovia_tests::fixtures;
use serde_json::{Value, json};

#[test]
fn a_client_auto_approves_exactly_the_tools_that_only_read() {
    let Some(py) = python() else { return };
    let root = tempfile::tempdir().expect("a temporary directory");
    let mut args: Vec<String> = vec!["auto".into(), "hints".into(), "stdio".into(), env!("CARGO_BIN_EXE_lovia").into()];
    args.extend(
        [
            "--no-cache",
            "mcp",
            fixtures::ORDERS,
            "--workspace",
            &root.path().display().to_string(),
            "--mode",
            "coding",
            "--ask-human",
            "--code-mode",
        ]
        .map(String::from),
    );
    let (out, log) = client_logged(&py, &args);
    let mut auto: Vec<String> =
        serde_json::from_value(out["auto_approved"].clone()).unwrap_or_else(|e| panic!("{e}: {log}"));
    auto.sort();
    assert_eq!(
        auto,
        [
            "ask_human",
            "grep_files",
            "list_files",
            "lookup_order",
            "read_file",
            "read_process_output",
            "top_customers",
            "view_image"
        ],
        "{log}"
    );
    let hints = |tool: &str| -> Value {
        let a = &out["annotations"][tool];
        json!([a["readOnlyHint"], a["destructiveHint"], a["idempotentHint"], a["openWorldHint"]])
    };
    // [readOnly, destructive, idempotent, openWorld], every one stated.
    assert_eq!(hints("read_file"), json!([true, false, true, false]));
    assert_eq!(hints("write_file"), json!([false, true, true, false]));
    assert_eq!(hints("edit_file"), json!([false, true, false, false]));
    assert_eq!(hints("kill_process"), json!([false, true, true, false]));
    // The confined shell of a coding workspace writes and has no network.
    assert_eq!(hints("shell"), json!([false, true, false, false]));
    assert_eq!(hints("ask_human"), json!([true, false, false, true]));
    // A program may call `refund`, which is destructive, and `ask_human`,
    // which reaches a person.
    assert_eq!(hints("run_code"), json!([false, true, false, true]));
}
