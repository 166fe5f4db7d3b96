//! An `ask_human` question asked on one replica is answered through
//! another: the answer travels as an order (docs/replicas.md, "Run
//! ownership"), on real `lovia serve` binaries sharing one PostgreSQL.

use super::takeover::{LEASE_MS, POLL_MS, RENEW_MS};
use super::{fresh_database, kill_all};
use crate::cli::spawn_serve_with;
use crate::serve::{Sse, json, request};
use std::path::Path;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_asked_on_one_replica_is_answered_through_another() {
    let Some(url) = fresh_database("questions") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script.json");
    let ask = serde_json::json!({"question": "Which size?", "options": [{"label": "Small"}, {"label": "Large"}]});
    std::fs::write(
        &script,
        serde_json::json!([
            {"tool_calls": [{"id": "q1", "name": "ask_human", "arguments": ask.to_string()}]},
            {"content": "A large one, then."}
        ])
        .to_string(),
    )
    .expect("script");
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[[tenants]]\nname = \"demo\"\napi_keys = [\"{}\"]\nagent = {{ name = \"support\", ask_human = true }}\n",
            lovia_serve::hash_key("demo-key")
        ),
    )
    .expect("config");
    let script = script.to_string_lossy().into_owned();
    let env = [("LOVIA_PROVIDER", "scripted"), ("LOVIA_SCRIPT", script.as_str()), ("RUST_LOG", "warn")];
    let flags = ["--run-lease-ms", &LEASE_MS.to_string(), "--lease-renew-ms", &RENEW_MS.to_string()]
        .map(|s| s.to_owned())
        .into_iter()
        .chain(["--poll-interval-ms".to_owned(), POLL_MS.to_string()])
        .collect::<Vec<_>>();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let a = spawn_serve_with(&config, Path::new(&url), &env, &flags).await;
    let b = spawn_serve_with(&config, Path::new(&url), &env, &flags).await;

    let mut sse = Sse::post(a.1, "/api/chat", "demo-key", r#"{"session_id": "s1", "input": "a coffee"}"#).await;
    assert_eq!(sse.status, 200);
    let asked = sse.until("question").await;
    assert_eq!(asked.last().expect("question").1["question"], "Which size?");
    let body = r#"{"session_id": "s1", "answer": "Large"}"#;
    let (status, answered) = request(b.1, "POST", "/api/chat/answer", Some("demo-key"), body).await;
    assert_eq!((status, json(&answered)), (200, serde_json::json!({"ok": true})), "{answered}");
    let rest = sse.rest().await;
    let result = rest.iter().find(|(n, _)| n == "tool_result").expect("the call's result");
    assert_eq!(result.1["result"], "Large");
    assert_eq!(rest.last().expect("end").1["output"], "A large one, then.");
    kill_all(vec![a, b]).await;
}
