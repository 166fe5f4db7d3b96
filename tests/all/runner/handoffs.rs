//! Handoffs (`transfer_to_<slug>`: barriers, first wins) and agents as tools
//! (`ask_<slug>`: a sub-run whose budget trip is an error result).

use super::{agent, call, tool_answers};
use lovia_runner::{Agent, Message, ModelReply, RunEvent, Runner, ScriptedProvider};
use std::sync::Arc;

#[tokio::test]
async fn the_first_handoff_of_a_turn_wins_and_the_next_turn_is_the_targets() {
    let mut billing = agent("Billing Desk").await;
    billing.instructions = Some("You handle refunds.".into());
    let support = Arc::new(Agent::new("support"));
    let mut triage = agent("triage").await;
    triage.instructions = Some("Route the user.".into());
    triage.handoffs = vec![Arc::new(billing), support];
    let model = Arc::new(ScriptedProvider::new([
        ModelReply::calls([
            call("h1", "transfer_to_billing_desk", r#"{"reason": "a refund"}"#),
            call("h2", "transfer_to_support", "{}"),
            call("e1", "echo", r#"{"text": "still runs"}"#),
        ]),
        ModelReply::text("Billing here."),
    ]));
    let mut handle = Runner::new(triage, model.clone()).stream("I want my money back");
    let mut shape = Vec::new();
    while let Some(event) = handle.next_event().await {
        shape.push(match event {
            RunEvent::TurnEnded { agent, .. } => format!("ended:{agent}"),
            RunEvent::HandoffOccurred { from_agent, to_agent } => format!("handoff:{from_agent}->{to_agent}"),
            RunEvent::RunCompleted { .. } => "completed".into(),
            _ => continue,
        });
    }
    assert_eq!(shape, ["ended:triage", "handoff:triage->Billing Desk", "ended:Billing Desk", "completed"]);
    let result = handle.result().await.expect("run");
    assert_eq!((result.output.as_str(), result.agent.as_str()), ("Billing here.", "Billing Desk"));
    let answers = tool_answers(&result.messages);
    assert!(answers.contains(&("h1".into(), "Transferred to Billing Desk (a refund)".into())), "{answers:?}");
    assert!(answers.contains(&(
        "h2".into(),
        "Handoff not performed: this turn already transferred to 'Billing Desk'. Only the first handoff in a turn takes effect."
            .into()
    )));
    assert!(answers.contains(&("e1".into(), "still runs".into())));
    // The second request is the target's: its instructions (then its orders plugin's), its tools.
    let second = &model.requests()[1];
    assert_eq!(
        second.messages[0],
        Message::System {
            content: "You handle refunds.\n\nAmounts are in cents. Look an order up before refunding it.".into()
        }
    );
    let names: Vec<&str> = second.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"refund") && !names.iter().any(|n| n.starts_with("transfer_to_")), "{names:?}");
}

#[tokio::test]
async fn an_agent_as_a_tool_answers_with_its_output_and_its_budget_trip_is_an_error_result() {
    let mut researcher = agent("Researcher").await;
    researcher.budget.max_tool_calls = Some(1);
    let researcher = Arc::new(researcher);
    let sub_model = Arc::new(ScriptedProvider::new([
        // First invocation: two calls against a budget of one.
        ModelReply::calls([call("s1", "echo", r#"{"text": "a"}"#), call("s2", "echo", r#"{"text": "b"}"#)]),
        // Second invocation: a plain answer.
        ModelReply::text("A-1001 shipped on Monday."),
    ]));
    let mut lead = Agent::new("lead");
    lead.tools.push(researcher.as_tool(sub_model.clone(), "Ask the researcher."));
    let model = Arc::new(ScriptedProvider::new([
        ModelReply::calls([call("a1", "ask_researcher", r#"{"input": "dig"}"#)]),
        ModelReply::calls([call("a2", "ask_researcher", r#"{"input": "when did A-1001 ship?"}"#)]),
        ModelReply::text("Monday."),
    ]));
    let result = Runner::new(lead, model).run("when?").await.expect("run");
    assert_eq!(
        tool_answers(&result.messages),
        [
            ("a1".to_owned(), "Tool error: tool call count 2 exceeds budget 1".to_owned()),
            ("a2".to_owned(), "A-1001 shipped on Monday.".to_owned()),
        ]
    );
    // The sub-run's own first request was its input, not the parent's
    // conversation, after its own system message (its orders plugin's instructions).
    assert_eq!(
        sub_model.requests()[1].messages,
        [
            Message::System { content: "Amounts are in cents. Look an order up before refunding it.".into() },
            Message::User { content: "when did A-1001 ship?".into() }
        ]
    );
}

#[tokio::test]
async fn a_sub_run_whose_final_reply_exceeds_its_budget_is_an_error_result() {
    // docs/semantics.md §7: the budget is checked after every reply, the last one included.
    let mut researcher = Agent::new("Researcher");
    researcher.budget.max_total_tokens = Some(1);
    let researcher = Arc::new(researcher);
    let mut answer = ModelReply::text("a costly answer");
    answer.usage = Some(lovia_host::exec::Usage { input_tokens: 1, output_tokens: 1 });
    let sub_model = Arc::new(ScriptedProvider::new([answer]));
    let mut lead = Agent::new("lead");
    lead.tools.push(researcher.as_tool(sub_model, "Ask the researcher."));
    let model = Arc::new(ScriptedProvider::new([
        ModelReply::calls([call("a1", "ask_researcher", r#"{"input": "dig"}"#)]),
        ModelReply::text("ok"),
    ]));
    let result = Runner::new(lead, model).run("go").await.expect("run");
    assert_eq!(
        tool_answers(&result.messages),
        [("a1".to_owned(), "Tool error: total tokens 2 exceeds budget 1".to_owned())]
    );
}
