//! View-only compaction and `recall_tool_result` with a scripted model:
//! the reference's two tests (the stored session never changes; clearing
//! that meets the budget needs no summary call and keeps the last result
//! verbatim), a recall of a cleared result, and the summary stage.

use super::{call, tool_answers};
use lovia_host::{Tool, ToolOutput};
use lovia_runner::{Agent, ContextPolicy, MemoryRunStore, Message, ModelReply, RunEvent, Runner, ScriptedProvider};
use serde_json::{Value, json};
use std::sync::Arc;

/// `fetch`: `n` characters of words, tagged, from small arguments, so the
/// results (not the calls) fill the window.
fn fetch() -> Tool {
    Tool::builder("fetch")
        .parameters(json!({"type": "object", "properties": {"tag": {"type": "string"}, "n": {"type": "integer"}}, "required": ["tag", "n"]}))
        .invoke(|args: Value, _| async move {
            let tag = args["tag"].as_str().unwrap_or_default().to_owned();
            let n = args["n"].as_u64().unwrap_or(0) as usize;
            let mut text = format!("{tag}:");
            while text.len() < n {
                text.push_str(&format!(" {tag}-{}", text.len()));
            }
            Ok(ToolOutput::Text(text))
        })
        .expect("tool")
}

fn fetching(id: &str, n: u64) -> ModelReply {
    ModelReply::calls([call(id, "fetch", &json!({"tag": id, "n": n}).to_string())])
}

/// An agent with `fetch` and an 8,000-token window: 2,000 reserved for the
/// reply, compaction from 5,100 tokens (about 20,400 characters) to 3,600.
fn agent() -> Agent {
    let mut agent = Agent::new("researcher");
    agent.tools.push(fetch());
    agent.context_policy = Some(ContextPolicy::for_window(8_000));
    agent
}

fn content_of(messages: &[Message], id: &str) -> String {
    tool_answers(messages).into_iter().find(|(i, _)| i == id).map(|(_, c)| c).unwrap_or_else(|| panic!("no {id}"))
}

async fn run(runner: &Runner, session: &str) -> (lovia_runner::RunResult, Vec<RunEvent>) {
    let state = lovia_host::RunState { session_id: Some(session.into()), ..lovia_host::RunState::default() };
    let mut handle = runner.stream_with(Some("Research tea.".into()), state);
    let mut events = Vec::new();
    while let Some(event) = handle.next_event().await {
        events.push(event);
    }
    (handle.result().await.expect("run"), events)
}

#[tokio::test]
async fn clearing_that_meets_the_budget_needs_no_summary_and_the_store_keeps_every_result() {
    let replies = vec![
        fetching("c1", 5_500),
        fetching("c2", 5_500),
        fetching("c3", 5_500),
        fetching("c4", 5_500),
        ModelReply::calls([call("r", "recall_tool_result", r#"{"ref": "c1"}"#)]),
        ModelReply::text("Done."),
    ];
    let model = Arc::new(ScriptedProvider::new(replies));
    let store = Arc::new(MemoryRunStore::default());
    let runner = Runner::new(agent(), model.clone()).with_store(store.clone());
    let (result, events) = run(&runner, "s1").await;
    assert_eq!(result.output, "Done.");

    // One request per turn: no summary was asked for.
    let requests = model.requests();
    assert_eq!(requests.len(), 6);
    assert!(requests[0].tools.iter().any(|t| t.name == "recall_tool_result"), "the policy offers the tool");
    // The fifth request was compacted: the oldest result is a marker, the
    // last one is verbatim, and the request fits the target.
    let fifth = &requests[4].messages;
    let full = content_of(&result.messages, "c1");
    let shown = content_of(fifth, "c1");
    assert_ne!(shown, full);
    assert!(
        shown.starts_with("[Tool result (5,5")
            || shown
                == "[Earlier tool result cleared to save context. Call recall_tool_result(\"c1\") to retrieve the full output.]",
        "{shown}"
    );
    assert_eq!(content_of(fifth, "c4"), content_of(&result.messages, "c4"), "the last result is verbatim");
    let compacted: Vec<(String, u64, u64)> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::ContextCompacted { reason, tokens_before, tokens_after } => {
                Some((reason.clone(), *tokens_before, *tokens_after))
            }
            _ => None,
        })
        .collect();
    assert!(!compacted.is_empty(), "a context_compacted event");
    for (reason, before, after) in &compacted {
        assert!(reason == "offload" || reason == "clear", "{reason}");
        assert!(*before > 5_100 && *after <= 3_600, "{before} → {after}");
    }

    // The stored session has every result whole, and recall_tool_result
    // returned the cleared one in full.
    let stored = lovia_runner::RunStore::load(&*store, "", "s1").await.expect("load").expect("a session").messages;
    for id in ["c1", "c2", "c3", "c4"] {
        let content = content_of(&stored, id);
        assert!(content.len() >= 5_500 && content.starts_with(&format!("{id}:")), "{id}: {}", &content[..40]);
    }
    assert_eq!(content_of(&stored, "r"), full);
}

#[tokio::test]
async fn a_request_still_over_after_clearing_is_summarised_by_the_model() {
    // A long question that no clearing shortens: the model summarises it.
    let question = "Explain the history of tea. ".repeat(570);
    let replies = vec![
        fetching("c1", 3_000),
        fetching("c2", 3_000),
        ModelReply::text("SUMMARY: the user asked about the history of tea; c1 and c2 were fetched."),
        ModelReply::text("Done."),
    ];
    let model = Arc::new(ScriptedProvider::new(replies));
    let runner = Runner::new(agent(), model.clone());
    let result = runner.run(&question).await.expect("run");
    assert_eq!(result.output, "Done.");
    let requests = model.requests();
    assert_eq!(requests.len(), 4, "three turns and one summary request");
    let summary_request = &requests[2];
    assert!(summary_request.tools.is_empty());
    assert!(
        matches!(&summary_request.messages[1], Message::User { content } if content.contains("[user] Explain the history"))
    );
    let last = &requests[3].messages;
    assert!(
        last.iter().any(|m| matches!(m, Message::User { content } if content.starts_with("<context_summary>\nSUMMARY: the user asked"))),
        "{last:?}"
    );
    // The transcript still has the question whole.
    assert!(matches!(&result.messages[0], Message::User { content } if *content == question));
}
