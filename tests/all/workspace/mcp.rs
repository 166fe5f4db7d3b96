//! `lovia mcp --workspace DIR`: a scripted coding session through the
//! official Python MCP client (tests/mcp/client.py, mode `workspace`), with
//! the ask decisions answered as elicitation.

use super::dirs;
use crate::mcp::{against, python};
use serde_json::Value;

fn text(out: &Value, key: &str) -> String {
    out[key]["text"][0].as_str().unwrap_or_else(|| panic!("{key}: {}", out[key])).to_owned()
}

#[test]
fn a_coding_session_over_lovia_mcp() {
    let Some(py) = python() else { return };
    let d = dirs();
    let root = d.root.to_string_lossy().into_owned();
    let args =
        ["mcp", lovia_tests::fixtures::ORDERS, "--workspace", &root, "--mode", "coding", "--shell-sandbox", "off"]
            .map(String::from)
            .to_vec();
    let (out, log) = against(&py, "auto", "workspace", "stdio", args);
    // Where MCP puts text for the model: the workspace's section, then the
    // plugin's instructions, as in the runner's system message.
    let instructions = out["instructions"].as_str().unwrap_or_else(|| panic!("instructions: {log}"));
    assert!(
        instructions.starts_with("Tools running as sandboxed WebAssembly components under lovia.\n\n## Workspace\n"),
        "{instructions}"
    );
    assert!(
        instructions.ends_with("\n\nAmounts are in cents. Look an order up before refunding it."),
        "{instructions}"
    );
    let tools: Vec<&Value> = out["tools"].as_array().expect("tools").iter().collect();
    assert!(tools.iter().any(|t| *t == "lookup_order"), "{tools:?}");
    assert_eq!(
        serde_json::json!(tools[tools.len() - 9..]),
        serde_json::json!([
            "read_file",
            "view_image",
            "list_files",
            "grep_files",
            "write_file",
            "edit_file",
            "shell",
            "read_process_output",
            "kill_process"
        ]),
        "{log}"
    );
    assert_eq!(text(&out, "write"), "created src/app.py (25 bytes)");
    assert_eq!(text(&out, "list"), "src/app.py  (25 bytes)");
    assert_eq!(text(&out, "grep"), "src/app.py:2: return 1");
    assert_eq!(text(&out, "read"), "src/app.py (lines 2-2 of 2)\n    return 1");
    assert_eq!(text(&out, "edit"), "edited src/app.py (1 replacement)");
    assert_eq!(text(&out, "test"), "exit code: 0\n1");
    let started = text(&out, "background");
    let id = started.split_whitespace().nth(3).expect("an id").to_owned();
    assert!(started.starts_with("started background process bg-"), "{started}");
    assert_eq!(text(&out, "poll"), format!("process {id}: running\nserving\n"));
    assert_eq!(text(&out, "kill"), format!("process {id}: killed\n(no new output)"));
    let outside = d.root.parent().expect("parent").join("outside.txt");
    assert_eq!(out["denied_write"]["is_error"], true);
    assert!(
        text(&out, "denied_write")
            .starts_with(&format!("Tool error: Writing outside the workspace is not permitted: {}", outside.display())),
        "{}",
        text(&out, "denied_write")
    );
    let asked = out["asked"].as_array().expect("asked");
    assert_eq!(asked.len(), 2, "the two commands were asked, nothing else: {asked:?}");
    assert_eq!(text(&out, "declined"), "Tool shell was not approved.");
    assert_eq!(std::fs::read_to_string(d.root.join("src/app.py")).expect("read"), "def main():\n    return 2\n");
    assert!(!d.root.join("declined.txt").exists());
    assert!(!outside.exists());
}
