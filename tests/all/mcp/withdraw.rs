//! A client that cancels a call whose approval or `ask_human` question is
//! still open on its screen gets that elicitation withdrawn: lovia sends
//! `notifications/cancelled` for its `elicitation/create`, as it does when
//! its own wait times out (the official Python MCP client cancels the
//! callback it was running).

use super::{against, python};
use lovia_tests::fixtures;
use serde_json::json;

#[test]
fn a_cancelled_calls_open_elicitation_is_withdrawn() {
    let Some(py) = python() else { return };
    let args = ["--no-cache", "mcp", fixtures::OPS, "--ask-human"].map(String::from).to_vec();
    let (out, log) = against(&py, "legacy", "withdraw", "stdio", args);
    assert_eq!(out, json!({"approval": true, "question": true}), "{log}");
}
