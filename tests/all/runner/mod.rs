//! The agent runner with a scripted model playing the LLM: the loop and its
//! limits, handoffs and agents as tools, the event stream with approvals
//! and cancel, and resuming a run killed mid-turn from its SQLite file.

mod compaction;
mod handoffs;
mod resume;
mod store;
mod stream;
mod turns;

use lovia_host::exec::ToolCall;
use lovia_runner::{Agent, Message, ModelReply, Runner, ScriptedProvider};
use lovia_tests::{fixtures, load};
use std::sync::Arc;

/// An agent with the diagnostics and orders plugins.
pub(crate) async fn agent(name: &str) -> Agent {
    Agent::new(name).with_plugin(&load(fixtures::DIAGNOSTICS).await).with_plugin(&load(fixtures::ORDERS).await)
}

/// A runner for `agent` (given the two plugins if it has no capability)
/// with a model replaying `replies`.
pub(crate) async fn runner(mut agent: Agent, replies: Vec<ModelReply>) -> (Runner, Arc<ScriptedProvider>) {
    if agent.capabilities.is_empty() {
        let with = self::agent(&agent.name).await;
        agent.capabilities = with.capabilities;
    }
    let model = Arc::new(ScriptedProvider::new(replies));
    (Runner::new(agent, model.clone()), model)
}

pub(crate) fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall::new(id, name, args)
}

/// (call id, content) of every tool message.
pub(crate) fn tool_answers(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, content, .. } => Some((tool_call_id.clone(), content.clone())),
            _ => None,
        })
        .collect()
}
