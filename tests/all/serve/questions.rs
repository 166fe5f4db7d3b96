//! `ask_human` through `lovia serve`: the `question` event over a real
//! socket, `GET /api/questions`, `POST /api/chat/answer` with its exact 404s,
//! an answer surviving a reconnect, labels joined for the model, and the
//! timeout's exact words.

use super::{Sse, json, request, start_with, tenant};
use lovia_serve::{ProviderConfig, ServeConfig, TenantConfig};
use serde_json::{Value, json as j};
use std::path::Path;

fn asking(dir: &Path, name: &str, key: &str, arguments: Value, ask_human: bool) -> TenantConfig {
    let replies = j!([
        {"tool_calls": [{"id": "q1", "name": "ask_human", "arguments": arguments.to_string()}]},
        {"content": "Thanks."}
    ]);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, replies.to_string()).expect("script");
    let mut t = tenant(name, key, &[]);
    t.provider = ProviderConfig::scripted(path);
    t.agent.ask_human = ask_human;
    t
}

fn answer(session: &str, answer: Value) -> String {
    j!({"session_id": session, "answer": answer}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_goes_out_as_an_event_and_an_answer_from_another_connection_completes_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = j!({"question": "Which drink?", "options": [{"label": "Tea", "description": "hot"}, {"label": "Coffee"}, {"label": "Juice"}], "multi_select": true});
    let config = ServeConfig::new(vec![
        asking(dir.path(), "acme", "acme-key", options, true),
        asking(dir.path(), "globex", "globex-key", j!({"question": "x"}), false),
    ]);
    let addr = start_with(config).await;
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1", "input": "order a drink"}"#).await;
    let events = sse.until("question").await;
    let (_, question) = events.last().expect("a question");
    assert_eq!(question["call_id"], "q1");
    assert_eq!(question["question"], "Which drink?");
    assert_eq!(question["options"][0], j!({"label": "Tea", "description": "hot"}));
    assert_eq!(question["options"][1], j!({"label": "Coffee", "description": ""}));
    assert_eq!(question["multi_select"], true);
    assert_eq!(
        question["cancel_at_ms"].as_u64().expect("when") - question["asked_ms"].as_u64().expect("asked"),
        600_000
    );
    // The console sees it; another tenant sees nothing and has no channel.
    let (status, body) = request(addr, "GET", "/api/questions", Some("acme-key"), "").await;
    assert_eq!((status, json(&body)["questions"][0]["session_id"].as_str()), (200, Some("s1")));
    let (_, body) = request(addr, "GET", "/api/questions", Some("globex-key"), "").await;
    assert_eq!(json(&body)["questions"], j!([]));
    let (status, body) = request(addr, "POST", "/api/chat/answer", Some("globex-key"), &answer("s1", j!("Tea"))).await;
    assert_eq!((status, json(&body)["error"].as_str()), (404, Some("no question channel")));
    let (status, body) = request(addr, "POST", "/api/chat/answer", Some("acme-key"), &answer("s9", j!("Tea"))).await;
    assert_eq!((status, json(&body)["error"].as_str()), (404, Some("no pending question matches")));

    // The reader goes away; the question stays open, and a new reader sees it.
    drop(sse);
    let mut again = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1"}"#).await;
    let replayed = again.until("question").await;
    assert_eq!(replayed.last().expect("question").1["call_id"], "q1");
    let (status, body) =
        request(addr, "POST", "/api/chat/answer", Some("acme-key"), &answer("s1", j!(["Tea", "Juice"]))).await;
    assert_eq!((status, json(&body)), (200, j!({"ok": true})));
    let rest = again.rest().await;
    let result = rest.iter().find(|(n, _)| n == "tool_result").expect("the call's result");
    assert_eq!(result.1["result"], "Tea\nJuice", "chosen labels, one per line");
    assert_eq!(rest.last().expect("end").0, "run_completed");
    let (status, _) = request(addr, "POST", "/api/chat/answer", Some("acme-key"), &answer("s1", j!("late"))).await;
    assert_eq!(status, 404, "an answer lands once");
    let (_, body) = request(addr, "GET", "/api/questions", Some("acme-key"), "").await;
    assert_eq!(json(&body)["questions"], j!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_question_is_withdrawn_with_the_exact_words_and_bad_options_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let duplicate = j!({"question": "Pick", "options": [{"label": "A"}, {"label": "A"}]});
    let mut config = ServeConfig::new(vec![
        asking(dir.path(), "acme", "acme-key", j!({"question": "Anyone there?"}), true),
        asking(dir.path(), "initech", "initech-key", duplicate, true),
    ]);
    config.question_timeout_secs = 1;
    let addr = start_with(config).await;
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "t1", "input": "hello"}"#).await;
    let rest = sse.rest().await;
    let result = rest.iter().find(|(n, _)| n == "tool_result").expect("the call's result");
    assert_eq!(result.1["result"], "Tool error: no answer within 1s — continue without one");
    assert_eq!(rest.last().expect("end").0, "run_completed");

    let mut sse = Sse::post(addr, "/api/chat", "initech-key", r#"{"session_id": "t2", "input": "hello"}"#).await;
    let rest = sse.rest().await;
    assert!(!rest.iter().any(|(n, _)| n == "question"), "a refused question is never asked");
    let result = rest.iter().find(|(n, _)| n == "tool_result").expect("the call's result");
    let text = result.1["result"].as_str().expect("text");
    assert!(text.contains("the label 'A' is given twice; labels must be unique"), "{text}");
}
