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
    /// Why the model stopped, when the provider says.
    #[serde(default)]
    pub finish_reason: Option<FinishReason>,
}

/// Why the model stopped, with each provider's words for the same reason
/// made one. On the wire (scripts, transcripts) it is the string: `stop`,
/// `length`, `tool_calls`, or the provider's own word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
#[non_exhaustive]
pub enum FinishReason {
    /// The reply is complete (`stop`, Anthropic's `end_turn`).
    Stop,
    /// The output token limit cut the reply off (`length`; Anthropic's
    /// `max_tokens`; the Responses API's `max_output_tokens`). A tool call
    /// in such a reply may have incomplete arguments.
    Length,
    /// The model asked for tools (`tool_calls`, Anthropic's `tool_use`).
    ToolCalls,
    /// Any other reason, in the provider's words.
    Other(String),
}

impl From<&str> for FinishReason {
    fn from(word: &str) -> Self {
        match word {
            "stop" | "end_turn" => FinishReason::Stop,
            "length" | "max_tokens" | "max_output_tokens" => FinishReason::Length,
            "tool_calls" | "tool_use" => FinishReason::ToolCalls,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

impl From<String> for FinishReason {
    fn from(word: String) -> Self {
        FinishReason::from(word.as_str())
    }
}

impl From<FinishReason> for String {
    fn from(reason: FinishReason) -> String {
        match reason {
            FinishReason::Stop => "stop".into(),
            FinishReason::Length => "length".into(),
            FinishReason::ToolCalls => "tool_calls".into(),
            FinishReason::Other(word) => word,
        }
    }
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
#[non_exhaustive]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_providers_word_for_a_reason_is_one_reason_and_the_wire_keeps_a_string() {
        for (word, reason) in [
            ("stop", FinishReason::Stop),
            ("end_turn", FinishReason::Stop),
            ("length", FinishReason::Length),
            ("max_tokens", FinishReason::Length),
            ("max_output_tokens", FinishReason::Length),
            ("tool_use", FinishReason::ToolCalls),
            ("content_filter", FinishReason::Other("content_filter".into())),
        ] {
            assert_eq!(FinishReason::from(word), reason, "{word}");
        }
        let reply: ModelReply =
            serde_json::from_str(r#"{"content": "x", "finish_reason": "max_tokens"}"#).expect("a reply");
        assert_eq!(reply.finish_reason, Some(FinishReason::Length));
        let json = serde_json::to_value(&reply).expect("json");
        assert_eq!(json["finish_reason"], "length");
        let other = serde_json::to_value(FinishReason::Other("refusal".into())).expect("json");
        assert_eq!(other, "refusal");
    }
}
