//! The agent loop around the executor: ask the model, run the tool calls it
//! asks for, answer every call id, ask again, until the model answers with
//! text (spec §6, §7, Part 0 D8).
//!
//! Model providers plug in through [`ModelProvider`]; [`ScriptedProvider`]
//! replays canned replies. Not yet here: handoffs, agents as tools, token
//! and time budgets, streaming text, persistence.

mod provider;
mod scripted;

pub use provider::{Message, ModelProvider, ModelReply, ModelRequest, ProviderError};
pub use scripted::ScriptedProvider;

use crate::exec::{EventSink, ExecSettings, Executor, RunState, ToolCall, ToolResultEntry, TurnError};
use crate::tool::registry::Toolset;
use std::sync::Arc;

/// The run's turn limit unless the agent sets one.
pub const DEFAULT_MAX_TURNS: u32 = 50;

/// An agent: immutable configuration of a run.
#[derive(Clone, Debug)]
pub struct Agent {
    /// Its name (tools see it as the requesting agent).
    pub name: String,
    /// The system message, if any.
    pub instructions: Option<String>,
    /// Model turns before the run fails. Default: 50.
    pub max_turns: u32,
    /// Whether the model may ask for several calls at once. Default: true.
    pub parallel_tool_calls: bool,
    /// Tool defaults: retries, timeout, output cap, renderer, approval
    /// handler, `max_tool_calls`. Default: [`ExecSettings::default`].
    pub tool_settings: ExecSettings,
}

impl Agent {
    /// An agent named `name` with the defaults.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        Self {
            tool_settings: ExecSettings { agent: name.clone(), ..ExecSettings::default() },
            name,
            instructions: None,
            max_turns: DEFAULT_MAX_TURNS,
            parallel_tool_calls: true,
        }
    }
}

/// A finished run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// The model's final text.
    pub output: String,
    /// The whole conversation, the final reply included.
    pub messages: Vec<Message>,
    /// Model turns taken.
    pub turns: u32,
}

/// Why a run ended without output. Each carries the conversation so far,
/// in which every call id has its one answer (Part 0 D8).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    /// The model kept calling tools.
    #[error("Run exceeded max_turns={max} without producing output")]
    MaxTurns {
        /// The limit.
        max: u32,
        /// The conversation.
        messages: Vec<Message>,
    },
    /// The run was cancelled (by the token or by a tool).
    #[error("{reason}")]
    Cancelled {
        /// Why.
        reason: String,
        /// The conversation.
        messages: Vec<Message>,
    },
    /// The run's `max_tool_calls` was exceeded.
    #[error("{message}")]
    BudgetExceeded {
        /// The spec's message, e.g. `tool call count 3 exceeds budget 2`.
        message: String,
        /// The conversation.
        messages: Vec<Message>,
    },
    /// The provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

/// Runs an agent with its tools against a model.
pub struct Runner {
    agent: Agent,
    executor: Executor,
    provider: Arc<dyn ModelProvider>,
}

impl Runner {
    /// A runner for `agent` with `tools`, asking `provider`.
    pub fn new(agent: Agent, tools: Toolset, provider: Arc<dyn ModelProvider>) -> Self {
        let executor = Executor::new(tools, agent.tool_settings.clone());
        Self { agent, executor, provider }
    }

    /// Runs until the model answers with text, with a fresh run state and
    /// no event consumer.
    pub async fn run(&self, input: &str) -> Result<RunResult, RunError> {
        self.run_with(input, RunState::default(), &EventSink::none()).await
    }

    /// Runs with `state` (ids, tenant, cancel token, approvals) and sends
    /// every tool event to `events`.
    pub async fn run_with(&self, input: &str, mut state: RunState, events: &EventSink) -> Result<RunResult, RunError> {
        let mut messages = Vec::new();
        if let Some(text) = &self.agent.instructions {
            messages.push(Message::System { content: text.clone() });
        }
        messages.push(Message::User { content: input.to_owned() });
        let tools: Vec<_> = self.executor.tools().iter().map(|t| t.spec().clone()).collect();
        let mut turn = 0;
        loop {
            turn += 1;
            if turn > self.agent.max_turns {
                return Err(RunError::MaxTurns { max: self.agent.max_turns, messages });
            }
            if state.cancel.is_cancelled() {
                return Err(RunError::Cancelled { reason: state.cancel.reason(), messages });
            }
            let request = ModelRequest {
                messages: messages.clone(),
                tools: tools.clone(),
                parallel_tool_calls: self.agent.parallel_tool_calls,
            };
            let reply = self.provider.respond(&request).await?;
            messages.push(Message::Assistant { content: reply.content.clone(), tool_calls: reply.tool_calls.clone() });
            if reply.tool_calls.is_empty() {
                return Ok(RunResult { output: reply.content.unwrap_or_default(), messages, turns: turn });
            }
            state.turn = turn;
            match self.executor.run_turn(&reply.tool_calls, &state, events).await {
                Ok(results) => messages.extend(answer_every_call(&reply.tool_calls, &results, "Tool error: no result")),
                Err(TurnError::Cancelled { reason, results }) => {
                    messages.extend(answer_every_call(&reply.tool_calls, &results, "Tool error: run cancelled"));
                    return Err(RunError::Cancelled { reason, messages });
                }
                Err(TurnError::BudgetExceeded { message, results }) => {
                    let filler = "Tool error: not run: budget exceeded";
                    messages.extend(answer_every_call(&reply.tool_calls, &results, filler));
                    return Err(RunError::BudgetExceeded { message, messages });
                }
            }
        }
    }
}

/// The tool messages that answer a turn: one per result, in completion
/// order, then `filler` for every call id left without one, in request
/// order (Part 0 D8: no provider ever sees a dangling call).
pub fn answer_every_call(calls: &[ToolCall], results: &[ToolResultEntry], filler: &str) -> Vec<Message> {
    let mut out: Vec<Message> = results
        .iter()
        .map(|r| Message::Tool { tool_call_id: r.call_id.clone(), content: r.output.clone(), is_error: r.is_error })
        .collect();
    for call in calls {
        if !results.iter().any(|r| r.call_id == call.id) {
            out.push(Message::Tool { tool_call_id: call.id.clone(), content: filler.to_owned(), is_error: true });
        }
    }
    out
}
