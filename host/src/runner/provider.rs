//! What a model provider is to the runner: a request of messages and tool
//! specs in, one assistant reply out.

use crate::exec::ToolCall;
use crate::tool::ToolSpec;
use crate::tool::def::BoxFuture;
use serde::{Deserialize, Serialize};

/// One message of the conversation the model sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// The agent's instructions.
    System {
        /// The text.
        content: String,
    },
    /// What the user said.
    User {
        /// The text.
        content: String,
    },
    /// What the model answered: text, tool calls, or both.
    Assistant {
        /// Its text, if any.
        content: Option<String>,
        /// The calls it asked for, in order.
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
    },
    /// The answer to one tool call.
    Tool {
        /// The call it answers.
        tool_call_id: String,
        /// The string the model sees.
        content: String,
        /// Whether it is an error result.
        is_error: bool,
    },
}

/// One request to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Whether the model may ask for several calls at once.
    pub parallel_tool_calls: bool,
}

/// The model's reply.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ModelReply {
    /// Text, if any.
    pub content: Option<String>,
    /// Tool calls, if any; none ends the run with `content` as its output.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
}

impl ModelReply {
    /// A reply with text only: the run's final answer.
    pub fn text(content: impl Into<String>) -> Self {
        Self { content: Some(content.into()), tool_calls: Vec::new() }
    }

    /// A reply asking for `calls`.
    pub fn calls(calls: impl IntoIterator<Item = ToolCall>) -> Self {
        Self { content: None, tool_calls: calls.into_iter().collect() }
    }
}

/// Why a provider gave no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{provider}: {message}")]
pub struct ProviderError {
    /// Which provider.
    pub provider: String,
    /// What went wrong.
    pub message: String,
}

/// A model behind some API (or a script).
pub trait ModelProvider: Send + Sync {
    /// A short name for errors and logs.
    fn name(&self) -> &str;

    /// Answers one request.
    fn respond<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelReply, ProviderError>>;
}
