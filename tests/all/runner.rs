//! The runner with a scripted model: the loop, every call id answered before
//! the next request (Part 0 D8), max_turns, budget, cancellation.

use lovia_host::exec::ToolCall;
use lovia_host::runner::{Agent, Message, ModelReply, RunError, Runner, ScriptedProvider};
use lovia_host::{RunState, Tool, ToolSource, Toolset};
use lovia_tests::{fixtures, load};
use std::sync::Arc;
use std::time::Duration;

async fn runner(agent: Agent, replies: Vec<ModelReply>) -> (Runner, Arc<ScriptedProvider>) {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let orders = load(fixtures::ORDERS).await;
    let mut tools = Toolset::new();
    tools.add(ToolSource::Plugin, Tool::from_plugin(&diag)).expect("unique");
    tools.add(ToolSource::Plugin, Tool::from_plugin(&orders)).expect("unique");
    let model = Arc::new(ScriptedProvider::new(replies));
    (Runner::new(agent, tools, model.clone()), model)
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall::new(id, name, args)
}

fn tool_answers(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, content, .. } => Some((tool_call_id.clone(), content.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_model_sees_every_result_before_it_answers() {
    let mut agent = Agent::new("support");
    agent.instructions = Some("Be brief.".into());
    let (runner, model) = runner(
        agent,
        vec![
            ModelReply::calls([
                call("c1", "lookup_order", r#"{"order_id": "A-1001"}"#),
                call("c2", "echo", r#"{"text": "hi"}"#),
                call("c3", "no_such_tool", "{}"),
            ]),
            ModelReply::calls([call("c4", "echo", r#"{"text": "again"}"#)]),
            ModelReply::text("Order A-1001 has shipped."),
        ],
    )
    .await;
    let result = runner.run("Where is A-1001?").await.expect("run");
    assert_eq!(result.output, "Order A-1001 has shipped.");
    assert_eq!(result.turns, 3);
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].messages[0], Message::System { content: "Be brief.".into() });
    assert!(requests[0].tools.iter().any(|t| t.name == "lookup_order"));
    // The second request answers c1, c2 and c3 exactly once each.
    let mut answered: Vec<String> = tool_answers(&requests[1].messages).into_iter().map(|(id, _)| id).collect();
    answered.sort();
    assert_eq!(answered, ["c1", "c2", "c3"]);
    let answers = tool_answers(&result.messages);
    assert!(answers.contains(&("c3".into(), "Tool 'no_such_tool' is not available.".into())), "{answers:?}");
    assert!(answers.contains(&("c4".into(), "again".into())));
}

#[tokio::test]
async fn a_model_that_never_answers_hits_max_turns() {
    let mut agent = Agent::new("looper");
    agent.max_turns = 2;
    let replies = (0..5).map(|i| ModelReply::calls([call(&format!("c{i}"), "echo", r#"{"text": "x"}"#)])).collect();
    let (runner, _) = runner(agent, replies).await;
    let err = runner.run("go").await.expect_err("max turns");
    assert_eq!(err.to_string(), "Run exceeded max_turns=2 without producing output");
    assert!(matches!(err, RunError::MaxTurns { max: 2, .. }));
}

#[tokio::test]
async fn a_budget_trip_still_answers_every_call_id() {
    let mut agent = Agent::new("budget");
    agent.tool_settings.max_tool_calls = Some(1);
    let calls = [call("a", "echo", r#"{"text": "1"}"#), call("b", "echo", r#"{"text": "2"}"#)];
    let (runner, _) = runner(agent, vec![ModelReply::calls(calls), ModelReply::text("unreached")]).await;
    let err = runner.run("go").await.expect_err("budget");
    let RunError::BudgetExceeded { message, messages } = err else { panic!("not a budget error") };
    assert_eq!(message, "tool call count 2 exceeds budget 1");
    assert_eq!(
        tool_answers(&messages),
        [("a".to_owned(), "1".to_owned()), ("b".to_owned(), "Tool error: not run: budget exceeded".to_owned())]
    );
}

#[tokio::test]
async fn cancelling_interrupts_the_turn_and_answers_every_call_id() {
    let (runner, model) = runner(
        Agent::new("cancel"),
        vec![ModelReply::calls([call("slow", "sleep_ms", r#"{"ms": 30000}"#)]), ModelReply::text("unreached")],
    )
    .await;
    let state = RunState::default();
    let token = state.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        token.cancel(Some("user pressed stop"));
    });
    let started = std::time::Instant::now();
    let err = runner.run_with("go", state, &lovia_host::EventSink::none()).await.expect_err("cancelled");
    assert!(started.elapsed() < Duration::from_secs(10));
    let RunError::Cancelled { reason, messages } = err else { panic!("not cancelled") };
    assert_eq!(reason, "user pressed stop");
    assert_eq!(tool_answers(&messages), [("slow".to_owned(), "Tool error: run cancelled".to_owned())]);
    assert_eq!(model.requests().len(), 1, "no request after the cancel");
}

#[tokio::test]
async fn a_provider_failure_ends_the_run_with_its_reason() {
    let (runner, _) = runner(Agent::new("empty"), vec![]).await;
    let err = runner.run("go").await.expect_err("no replies");
    assert_eq!(err.to_string(), "scripted: the script has no more replies");
}
