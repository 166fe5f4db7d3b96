//! The loop with a scripted model: every call id answered before the next
//! request (docs/semantics.md D8), max_turns, budgets, cancellation, provider errors.

use super::{call, runner, tool_answers};
use lovia_host::RunState;
use lovia_host::exec::Usage;
use lovia_runner::{Agent, Message, ModelReply, RunError};

use std::time::Duration;

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
    // The agent's instructions, then the orders plugin's `info().instructions`
    // (the diagnostics plugin has none), joined by a blank line.
    assert_eq!(
        requests[0].messages[0],
        Message::System { content: "Be brief.\n\nAmounts are in cents. Look an order up before refunding it.".into() }
    );
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
    agent.budget.max_tool_calls = Some(1);
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
    let err = runner.run_with(Some("go"), state).await.expect_err("cancelled");
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

#[tokio::test]
async fn token_budgets_trip_after_the_reply_and_leave_no_call_unanswered() {
    let mut agent = Agent::new("tokens");
    agent.budget.max_total_tokens = Some(100);
    let mut costly = ModelReply::calls([call("t1", "echo", r#"{"text": "x"}"#)]);
    costly.usage = Some(Usage { input_tokens: 80, output_tokens: 40 });
    let (runner, model) = runner(agent, vec![costly, ModelReply::text("unreached")]).await;
    let err = runner.run("go").await.expect_err("budget");
    let RunError::BudgetExceeded { message, messages } = err else { panic!("not a budget error: {err:?}") };
    assert_eq!(message, "total tokens 120 exceeds budget 100");
    assert_eq!(tool_answers(&messages), [("t1".to_owned(), "Tool error: not run: budget exceeded".to_owned())]);
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn a_reply_cut_off_at_the_token_limit_reports_incomplete_arguments() {
    let mut cut = ModelReply::calls([call("c1", "echo", r#"{"text": "hel"#)]);
    cut.finish_reason = Some("length".into());
    let (runner, _) = runner(Agent::new("cut"), vec![cut, ModelReply::text("sorry")]).await;
    let result = runner.run("go").await.expect("run");
    assert_eq!(
        tool_answers(&result.messages),
        [(
            "c1".to_owned(),
            "Tool echo arguments are incomplete: the response was cut off at the output token limit (finish_reason=length) mid-call."
                .to_owned()
        )]
    );
}

#[tokio::test]
async fn a_name_clash_fails_before_anything_runs() {
    let mut agent = super::agent("dup").await;
    agent.tools.push(lovia_tests::native::echo_json("echo"));
    let (runner, model) = runner(agent, vec![ModelReply::text("unreached")]).await;
    let err = runner.run("go").await.expect_err("clash");
    assert!(err.to_string().starts_with("Tool name conflict for 'echo' from plugin."), "{err}");
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_stored_and_resent_as_raw() {
    // docs/semantics.md D11: the executor reads the text as sent; the stored and
    // re-sent assistant message carries only JSON objects.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = std::sync::Arc::new(lovia_runner::SqliteRunStore::open(dir.path().join("runs.db")).expect("store"));
    let (runner, model) = runner(
        Agent::new("raw"),
        vec![
            ModelReply::calls([
                call("m", "echo", r#"{"text": 1"#),
                call("a", "echo", "[1, 2]"),
                call("n", "echo", "5"),
                call("o", "echo", r#"{"text": "fine"}"#),
            ]),
            ModelReply::text("done"),
        ],
    )
    .await;
    let runner = runner.with_store(store.clone());
    let state = RunState { session_id: Some("s1".into()), ..RunState::default() };
    let result = runner.run_with(Some("go"), state).await.expect("run");
    let answers = tool_answers(&result.messages);
    assert!(answers[0].1.starts_with("Invalid JSON in tool arguments: "), "{answers:?}");
    let expected = [r#"{"_raw":"{\"text\": 1"}"#, r#"{"_raw":"[1, 2]"}"#, r#"{"_raw":"5"}"#, r#"{"text": "fine"}"#];
    let stored_args = |messages: &[Message]| -> Vec<String> {
        messages
            .iter()
            .find_map(|m| match m {
                Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                    Some(tool_calls.iter().map(|c| c.arguments.clone()).collect())
                }
                _ => None,
            })
            .expect("an assistant message with calls")
    };
    assert_eq!(stored_args(&result.messages), expected, "in the transcript");
    assert_eq!(stored_args(&model.requests()[1].messages), expected, "re-sent to the model");
    let checkpoint = lovia_runner::RunStore::load(&*store, "", "s1").await.expect("load").expect("saved");
    assert_eq!(stored_args(&checkpoint.messages), expected, "in the checkpoint");
    for args in expected {
        assert!(serde_json::from_str::<serde_json::Value>(args).is_ok_and(|v| v.is_object()));
    }
}
