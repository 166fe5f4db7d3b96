//! Code mode in `lovia serve` (`agent.code_mode`): a chat's program calls
//! the tenant's plugin tools; each call streams as `tool_call` and
//! `tool_result` with `parent`, its approval is decided over
//! `/api/chat/approve` by the nested call's id, and the program goes on.

use super::{Sse, json, request, start, tenant, tool_result};
use lovia_serve::ProviderConfig;
use lovia_tests::fixtures;
use serde_json::json as j;

const PROGRAM: &str = r#"
const order = await tools.lookup_order({ order_id: "A-1002" });
try { return await tools.refund({ order_id: order.id, amount_cents: 6000 }); }
catch (e) { return `not refunded: ${e.message}`; }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chats_program_streams_its_calls_under_it_and_waits_for_their_approval() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = j!([
        {"tool_calls": [{"id": "p1", "name": "run_code", "arguments": j!({"code": PROGRAM}).to_string()}]},
        {"content": "Done."}
    ]);
    let path = dir.path().join("script.json");
    std::fs::write(&path, replies.to_string()).expect("script");
    let mut acme = tenant("acme", "acme-key", &[fixtures::ORDERS]);
    acme.provider = ProviderConfig::scripted(path);
    acme.agent.code_mode = true;
    let addr = start(vec![acme]).await;
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1", "input": "refund A-1002"}"#).await;
    let first = sse.until("approval_required").await;
    let (_, asked) = first.last().expect("approval");
    assert_eq!((&asked["id"], &asked["name"], &asked["parent"]), (&j!("p1/2"), &j!("refund"), &j!("p1")));
    let lookup = first.iter().find(|(n, d)| n == "tool_result" && d["id"] == "p1/1").expect("the lookup's result");
    assert_eq!(lookup.1["parent"], "p1");
    let body = r#"{"session_id": "s1", "call_id": "p1/2", "decision": "approve"}"#;
    let (status, body) = request(addr, "POST", "/api/chat/approve", Some("acme-key"), body).await;
    assert_eq!(status, 200, "{body}");
    let rest = sse.rest().await;
    assert_eq!(tool_result(&rest, "p1/2"), "Refunded 6000 cents on A-1002");
    assert_eq!(tool_result(&rest, "p1"), "Refunded 6000 cents on A-1002");
    assert_eq!(rest.last().expect("end").0, "run_completed");
    // The stored transcript has the program's one result, not its calls.
    let (_, body) = request(addr, "GET", "/api/chat/s1", Some("acme-key"), "").await;
    let messages = json(&body)["messages"].as_array().cloned().unwrap_or_default();
    let tool_messages: Vec<_> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 1, "{messages:?}");
}

// A program can ask the person too: its `ask_human` call is the chat's
// question like the model's own, answered over `/api/chat/answer`, and the
// program goes on with the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chats_program_asks_the_person_and_goes_on_with_the_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = r#"const drink = await tools.ask_human({ question: "Tea or coffee?" }); return `making ${drink}`;"#;
    let replies = j!([
        {"tool_calls": [{"id": "p1", "name": "run_code", "arguments": j!({"code": program}).to_string()}]},
        {"content": "Done."}
    ]);
    let path = dir.path().join("script.json");
    std::fs::write(&path, replies.to_string()).expect("script");
    let mut acme = tenant("acme", "acme-key", &[]);
    acme.provider = ProviderConfig::scripted(path);
    acme.agent.code_mode = true;
    acme.agent.ask_human = true;
    let addr = start(vec![acme]).await;
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1", "input": "a drink"}"#).await;
    let asked = sse.until("question").await;
    let (_, question) = asked.last().expect("a question");
    assert_eq!((&question["call_id"], &question["question"]), (&j!("p1/1"), &j!("Tea or coffee?")));
    let body = r#"{"session_id": "s1", "answer": "tea"}"#;
    let (status, body) = request(addr, "POST", "/api/chat/answer", Some("acme-key"), body).await;
    assert_eq!(status, 200, "{body}");
    let rest = sse.rest().await;
    assert_eq!(tool_result(&rest, "p1"), "making tea");
    assert_eq!(rest.last().expect("end").0, "run_completed");
}

/// A direct call of `run_code` (and `/mcp`'s, built the same way) is
/// admitted at the door, and each call its program makes passes the
/// tenant's quota as a chat's do: with 3 calls a minute, the program's third
/// call is refused, and the program reads the refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_programs_calls_pass_the_tenants_quota_one_by_one() {
    let mut acme = tenant("acme", "acme-key", &[fixtures::DIAGNOSTICS]);
    acme.agent.code_mode = true;
    acme.calls_per_minute = 3;
    let addr = start(vec![acme]).await;
    let program = r#"
const seen = [];
for (const text of ["one", "two", "three"]) {
  try { seen.push(await tools.echo({ text })); } catch (e) { seen.push(`refused: ${e.message}`); }
}
return seen.join(" | ");
"#;
    let body = j!({ "code": program }).to_string();
    let (status, answer) = request(addr, "POST", "/api/tools/run_code/call", Some("acme-key"), &body).await;
    assert_eq!(status, 200, "{answer}");
    let output = json(&answer)["output"].as_str().unwrap_or_default().to_owned();
    assert!(output.starts_with("one | two | refused: "), "{output}");
    assert!(output.contains("calls per minute"), "{output}");
}
