//! "Always allow this tool in this chat": an approval that holds for the
//! rest of the session, across its runs (kept in its checkpoint), shown as
//! `approval_auto`, and never for another session or tenant.

use super::{Sse, json, request, start_with, tenant};
use lovia_serve::{ProviderConfig, ServeConfig};
use lovia_tests::fixtures;
use serde_json::json as j;

const REFUND: &str = r#"{"order_id": "A-1002", "amount_cents": 9000}"#;

fn refund(id: &str) -> serde_json::Value {
    j!({"tool_calls": [{"id": id, "name": "refund", "arguments": REFUND}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_allow_holds_for_the_rest_of_the_chat_and_no_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script.json");
    let replies = j!([refund("c1"), refund("c2"), {"content": "Two refunds."}, refund("c3"), {"content": "A third."}]);
    std::fs::write(&script, replies.to_string()).expect("script");
    let mut t = tenant("acme", "acme-key", &[fixtures::ORDERS]);
    t.provider = ProviderConfig::scripted(script);
    let config = ServeConfig::new(vec![t, tenant("globex", "globex-key", &[fixtures::ORDERS])]);
    let addr = start_with(config).await;

    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1", "input": "refund twice"}"#).await;
    sse.until("approval_required").await;
    let deny_always = r#"{"session_id": "s1", "call_id": "c1", "decision": "deny", "always": true}"#;
    let (status, body) = request(addr, "POST", "/api/chat/approve", Some("acme-key"), deny_always).await;
    assert_eq!((status, json(&body)["error"].as_str()), (400, Some("always is for approve only")));
    let other_tenant = r#"{"session_id": "s1", "call_id": "c1", "decision": "approve", "always": true}"#;
    assert_eq!(request(addr, "POST", "/api/chat/approve", Some("globex-key"), other_tenant).await.0, 404);
    let (status, _) = request(addr, "POST", "/api/chat/approve", Some("acme-key"), other_tenant).await;
    assert_eq!(status, 200);
    let rest = sse.rest().await;
    let names: Vec<&str> = rest.iter().map(|(n, _)| n.as_str()).collect();
    assert!(!names.contains(&"approval_required"), "c2 is not asked: {names:?}");
    let auto = rest.iter().find(|(n, _)| n == "approval_auto").expect("c2 shows as auto-approved");
    assert_eq!((auto.1["id"].as_str(), auto.1["name"].as_str()), (Some("c2"), Some("refund")));
    assert_eq!(auto.1["reason"], "allowed for this chat");
    assert_eq!(rest.last().expect("end").1["output"], "Two refunds.");

    // A later run of the same chat: still allowed (kept with the session).
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1", "input": "once more"}"#).await;
    let rest = sse.rest().await;
    assert!(rest.iter().any(|(n, d)| n == "approval_auto" && d["id"] == "c3"), "{rest:?}");
    assert_eq!(rest.last().expect("end").1["output"], "A third.");
    let (_, body) = request(addr, "GET", "/api/chat/s1", Some("acme-key"), "").await;
    assert!(body.contains("\"allowed_tools\""), "the session's checkpoint keeps it: {body}");

    // Another chat of the same tenant asks. (The scripted model answers by
    // position in the transcript, so this chat's first call is c1 again.)
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s2", "input": "refund"}"#).await;
    let asked = sse.until("approval_required").await;
    assert_eq!(asked.last().expect("asked").1["id"], "c1");
    let deny = r#"{"session_id": "s2", "call_id": "c1", "decision": "deny"}"#;
    assert_eq!(request(addr, "POST", "/api/chat/approve", Some("acme-key"), deny).await.0, 200);
    let cancel = r#"{"session_id": "s2"}"#;
    let _ = sse.until("approval_required").await;
    assert_eq!(request(addr, "POST", "/api/chat/cancel", Some("acme-key"), cancel).await.0, 200);
    let (_, body) = request(addr, "GET", "/api/chat/s2", Some("acme-key"), "").await;
    assert_eq!(json(&body)["allowed_tools"], j!([]), "{body}");
}
