//! `lovia mcp --ask-human`: the model's question reaches the person at the
//! client as a form (options as an enum, a multi-select as an array of it,
//! free text otherwise) and the answer comes back as the tool's result, on
//! both revisions (elicitation; 2026-07-28 input_required). And "always
//! allow" on an approval, which holds for the rest of a 2025-11-25 session
//! and no further.

use super::{against, approval_args, python, result};
use lovia_tests::fixtures;
use serde_json::{Value, json};

fn question_args() -> Vec<String> {
    ["--no-cache", "mcp", fixtures::DIAGNOSTICS, "--ask-human"].map(String::from).to_vec()
}

fn error(text: &str) -> Value {
    result(true, text, Value::Null)
}

fn check_questions(out: &Value, protocol: &str) {
    assert_eq!(out["protocol"], protocol);
    // The host's single tools lead the table, at every door (docs/architecture.md).
    assert_eq!(out["tools"].as_array().and_then(|t| t.first()), Some(&json!("ask_human")), "{}", out["tools"]);

    // A free answer: one text field, required; the question is the message.
    assert_eq!(out["free"], result(false, "teal, like the logo", Value::Null));
    let asked = &out["free_asked"][0];
    assert_eq!(asked["message"], "What colour should the button be?");
    assert_eq!(asked["schema"]["properties"]["answer"]["type"], "string", "{asked}");
    assert_eq!(asked["schema"]["required"], json!(["answer"]), "{asked}");

    // One option: an enum of the labels, titled with their descriptions.
    assert_eq!(out["one"], result(false, "Go", Value::Null));
    assert_eq!(
        out["one_asked"][0]["schema"]["properties"]["answer"]["oneOf"],
        json!([
            {"const": "Rust", "title": "Rust — the host's language"},
            {"const": "Go", "title": "Go"},
            {"const": "Zig", "title": "Zig"}
        ])
    );
    // Several: an array of that enum; the answer lists the labels in the
    // options' order, one per line.
    assert_eq!(out["several"], result(false, "Rust\nZig", Value::Null));
    assert_eq!(out["several_asked"][0]["schema"]["properties"]["answer"]["type"], "array");

    // Declined, and an answer outside the options: the model reads why.
    assert_eq!(out["declined"], error("Tool error: the person declined to answer"));
    assert_eq!(
        out["outside"],
        error("Tool error: the MCP client's answer was refused: 'rm -rf /' is not one of the options")
    );
    // Bad options are the ordinary invalid-arguments rejection: never asked.
    let bad = out["bad_options"]["text"][0].as_str().unwrap_or_default();
    assert!(out["bad_options"]["is_error"] == true && bad.contains("options"), "{}", out["bad_options"]);
    assert_eq!(out["bad_options_asked"], json!([]));

    // A client that cannot show a form: on 2026-07-28 the error that names
    // the capability (-32021); on 2025-11-25 the model reads it.
    if protocol == "2026-07-28" {
        assert_eq!(out["unable"]["error"]["code"], -32021, "{}", out["unable"]);
    } else {
        assert_eq!(
            out["unable"],
            error("Tool error: the MCP client cannot show a question: it declared no form elicitation")
        );
    }
}

#[tokio::test]
async fn questions_over_stdio_on_2026_07_28() {
    let Some(py) = python() else { return };
    let (out, log) = against(&py, "auto", "questions", "stdio", question_args());
    assert!(!out.is_null(), "{log}");
    check_questions(&out, "2026-07-28");
}

#[tokio::test]
async fn questions_over_http_on_2025_11_25() {
    let Some(py) = python() else { return };
    let (out, log) = against(&py, "legacy", "questions", "http", question_args());
    assert!(!out.is_null(), "{log}");
    check_questions(&out, "2025-11-25");
}

/// "Always allow launch in this MCP session", ticked on the first approval:
/// on 2025-11-25 the second call of the session runs unasked, a new session
/// is asked again; 2026-07-28 has no session, so
/// every call is asked.
async fn check_always(mode: &str, transport: &str, protocol: &str) {
    let Some(py) = python() else { return };
    let (out, log) = against(&py, mode, "always", transport, approval_args());
    assert_eq!(out["protocol"], protocol, "{log}");
    for (call, target) in [("first", "first"), ("second", "second"), ("third", "third")] {
        assert_eq!(out[call], result(false, &format!("launched {target}"), Value::Null), "{call}");
    }
    let asked = out["asked"].as_array().map(Vec::len);
    if protocol == "2025-11-25" {
        assert_eq!(out["asked_in_first_session"], 1, "{}", out["asked"]);
        assert_eq!(asked, Some(2), "the new session is asked again: {}", out["asked"]);
        assert_eq!(
            out["asked"][0]["schema"]["properties"]["always"]["title"], "Always allow launch in this MCP session",
            "{}",
            out["asked"][0]
        );
        assert!(log.contains("launch ran for second"), "the unasked call ran: {log}");
    } else {
        assert_eq!(asked, Some(3), "every call is asked: {}", out["asked"]);
        assert_eq!(out["asked"][0]["schema"]["properties"], json!({}), "no checkbox without a session");
    }
}

#[tokio::test]
async fn always_allow_holds_for_one_mcp_session_on_2025_11_25() {
    check_always("legacy", "http", "2025-11-25").await;
}

#[tokio::test]
async fn always_allow_is_not_offered_on_2026_07_28() {
    check_always("auto", "stdio", "2026-07-28").await;
}
