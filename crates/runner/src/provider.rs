//! What a model provider is to the runner: a request of messages and tool
//! specs in, one assistant reply out.

use lovia_host::BoxFuture;
use lovia_host::exec::{ToolCall, Usage};
use lovia_host::{ErrorKind, ToolSpec};
use serde::{Deserialize, Serialize};

/// One message of the conversation the model sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
#[non_exhaustive]
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
        /// Why it is an error result; absent for a successful one (and in
        /// transcripts saved before the kind was recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_kind: Option<ErrorKind>,
        /// The content parts of a rich result (contract 0.2); `content` is
        /// their text rendering, which providers without image input send.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parts: Option<Vec<lovia_host::ContentPart>>,
        /// The tool's own name for its failure (contract 0.2), such as `ConnectError`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_error_kind: Option<String>,
    },
}

/// One request to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The model; `None` is the provider's default.
    pub model: Option<String>,
    /// The conversation so far, the system message first if there is one.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Sampling and parallelism settings.
    pub settings: ModelSettings,
}

/// The model's reply.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ModelReply {
    /// Text, if any.
    pub content: Option<String>,
    /// Tool calls, if any; none ends the run with `content` as its output.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Tokens the reply cost, when the provider reports them.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Why the model stopped, in the provider's words (`length` means the
    /// output token limit cut the reply off).
    #[serde(default)]
    pub finish_reason: Option<String>,
}

impl ModelReply {
    /// A reply with text only: the run's final answer.
    pub fn text(content: impl Into<String>) -> Self {
        Self { content: Some(content.into()), ..Self::default() }
    }

    /// A reply asking for `calls`.
    pub fn calls(calls: impl IntoIterator<Item = ToolCall>) -> Self {
        Self { tool_calls: calls.into_iter().collect(), ..Self::default() }
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
    /// The HTTP status, when the API answered with an error.
    pub status: Option<u16>,
}

impl ProviderError {
    /// An error of `provider` with no HTTP status.
    pub fn new(provider: impl Into<String>, message: impl Into<String>) -> Self {
        Self { provider: provider.into(), message: message.into(), status: None }
    }
}

/// Receives text as the model streams it.
pub type TextSink = dyn Fn(&str) + Send + Sync;

/// A model behind some API (or a script).
pub trait ModelProvider: Send + Sync {
    /// A short name for errors and logs.
    fn name(&self) -> &str;

    /// Answers one request; streaming providers pass text to `on_text` as
    /// it arrives, before the reply is complete.
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest,
        on_text: &'a TextSink,
    ) -> BoxFuture<'a, Result<ModelReply, ProviderError>>;
}

/// What the runner asks of the model besides the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    /// Whether the model may ask for several calls in one reply. Default: true.
    #[serde(default = "yes")]
    pub parallel_tool_calls: bool,
    /// Sampling temperature. Default: the provider's.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// Output tokens per reply. Default: the provider's (Anthropic requires
    /// one and gets 4,096).
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
}

fn yes() -> bool {
    true
}

impl Default for ModelSettings {
    fn default() -> Self {
        Self { parallel_tool_calls: true, temperature: None, max_output_tokens: None }
    }
}
