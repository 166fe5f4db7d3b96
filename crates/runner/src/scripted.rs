//! A provider that replays canned replies: the model of tests, of
//! `lovia run`, and of offline evaluations.

use super::provider::{Message, ModelProvider, ModelReply, ModelRequest, ProviderError, TextSink};
use lovia_host::BoxFuture;
use std::collections::VecDeque;
use std::sync::Mutex;

/// Replays `replies` in order, one per request, and records the last
/// [`RECORDED_REQUESTS`] requests.
///
/// ```
/// use lovia_runner::{ModelReply, ScriptedProvider};
/// let model = ScriptedProvider::new([ModelReply::text("Done.")]);
/// assert_eq!(model.requests().len(), 0);
/// ```
#[derive(Debug, Default)]
pub struct ScriptedProvider {
    replies: Mutex<VecDeque<ModelReply>>,
    /// Set by [`ScriptedProvider::by_position`].
    positional: Option<Vec<ModelReply>>,
    seen: Mutex<VecDeque<ModelRequest>>,
}

/// How many of the latest requests a [`ScriptedProvider`] keeps for
/// [`ScriptedProvider::requests`]: 64. `lovia serve` shares one provider
/// among every chat of a tenant for the life of the process; keeping every
/// request (each a whole transcript and tool list, tens of KiB) grew each
/// replica by about 100 KiB a chat, found by `bench/fault-run --soak`.
pub const RECORDED_REQUESTS: usize = 64;

impl ScriptedProvider {
    /// A provider that answers with `replies`, then fails.
    pub fn new(replies: impl IntoIterator<Item = ModelReply>) -> Self {
        Self { replies: Mutex::new(replies.into_iter().collect()), positional: None, seen: Mutex::default() }
    }

    /// A provider that answers a conversation holding *n* assistant
    /// messages with `replies[n]`: every conversation replays the script
    /// from its start, and a resumed run gets the reply it would have got.
    /// Shared by any number of runs.
    pub fn by_position(replies: impl IntoIterator<Item = ModelReply>) -> Self {
        Self { positional: Some(replies.into_iter().collect()), ..Self::default() }
    }

    /// Reads the replies of [`ScriptedProvider::by_position`] from a JSON
    /// file, as [`parse_replies`] reads them.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ProviderError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ProviderError::new("scripted", format!("cannot read {}: {e}", path.display())))?;
        let replies =
            parse_replies(&text).map_err(|e| ProviderError::new("scripted", format!("{}: {e}", path.display())))?;
        Ok(Self::by_position(replies))
    }

    /// The requests received so far, oldest first: the last
    /// [`RECORDED_REQUESTS`] of them.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect()
    }
}

impl ModelProvider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest,
        on_text: &'a TextSink,
    ) -> BoxFuture<'a, Result<ModelReply, ProviderError>> {
        {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if seen.len() == RECORDED_REQUESTS {
                seen.pop_front();
            }
            seen.push_back(request.clone());
        }
        let next = match &self.positional {
            Some(replies) => {
                let n = request.messages.iter().filter(|m| matches!(m, Message::Assistant { .. })).count();
                replies.get(n).cloned()
            }
            None => self.replies.lock().unwrap_or_else(|e| e.into_inner()).pop_front(),
        };
        // The scripted text streams as one delta, as a real provider's would in pieces.
        if let Some(text) = next.as_ref().and_then(|r| r.content.as_deref()).filter(|t| !t.is_empty()) {
            on_text(text);
        }
        Box::pin(async move { next.ok_or_else(|| ProviderError::new("scripted", "the script has no more replies")) })
    }
}

/// The keys a scripted reply may have, for error messages.
const REPLY_KEYS: &str = "`tool_calls` (the model calls tools) or `text` (its final answer; `content` is the same), and optionally `usage` and `finish_reason`";

/// Why a script's replies cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// The text is not JSON.
    #[error("not JSON: {reason}")]
    NotJson {
        /// What the parser said.
        reason: String,
    },
    /// The JSON is not an array of replies.
    #[error("a script is a JSON array of replies, each {REPLY_KEYS}")]
    NotAList,
    /// One reply is not one a script may have.
    #[error("reply {reply}: {problem}")]
    Reply {
        /// Its position, from 1.
        reply: usize,
        /// What is wrong, naming the key.
        problem: String,
    },
}

/// The replies of a script file: a JSON array whose items are
/// `{"tool_calls": [{"id", "name", "arguments"}]}` (the model calls tools;
/// `arguments` is the raw text the model wrote, empty for `{}`) or
/// `{"text": "…"}` (its final answer), the same turns `lovia run`'s
/// scripts have, each optionally with `usage` and `finish_reason` as a
/// provider reports them. `content` is accepted for `text`, as earlier
/// scripts spelled it. An unknown key, a reply with neither or both, or a
/// call with a key of its own is an error naming the reply and the key: a
/// misspelt reply would otherwise end a chat with empty output.
///
/// ```
/// let replies = lovia_runner::scripted::parse_replies(r#"[{"text": "Done."}]"#).unwrap();
/// assert_eq!(replies[0].content.as_deref(), Some("Done."));
/// let error = lovia_runner::scripted::parse_replies(r#"[{"txt": "Done."}]"#).unwrap_err();
/// assert!(error.to_string().contains("reply 1: unknown key `txt`"), "{error}");
/// ```
pub fn parse_replies(text: &str) -> Result<Vec<ModelReply>, ScriptError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| ScriptError::NotJson { reason: e.to_string() })?;
    let serde_json::Value::Array(items) = value else {
        return Err(ScriptError::NotAList);
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| reply(i + 1, item).map_err(|problem| ScriptError::Reply { reply: i + 1, problem }))
        .collect()
}

fn reply(n: usize, item: serde_json::Value) -> Result<ModelReply, String> {
    let serde_json::Value::Object(mut fields) = item else {
        return Err(format!("not an object; reply {n} has {REPLY_KEYS}"));
    };
    if let Some(key) =
        fields.keys().find(|k| !matches!(k.as_str(), "tool_calls" | "text" | "content" | "usage" | "finish_reason"))
    {
        return Err(format!("unknown key `{key}`; a reply has {REPLY_KEYS}"));
    }
    let usage = match fields.remove("usage") {
        None | Some(serde_json::Value::Null) => None,
        Some(u) => Some(serde_json::from_value(u).map_err(|e| format!("`usage`: {e}"))?),
    };
    let finish_reason = match fields.remove("finish_reason") {
        None | Some(serde_json::Value::Null) => None,
        Some(f) => Some(serde_json::from_value(f).map_err(|e| format!("`finish_reason`: {e}"))?),
    };
    let text = match (fields.get("text"), fields.get("content")) {
        (Some(_), Some(_)) => return Err("has both `text` and `content`; they are one key".into()),
        (Some(t), None) | (None, Some(t)) => {
            Some(t.as_str().ok_or_else(|| format!("the text is {t}, not a string"))?.to_owned())
        }
        (None, None) => None,
    };
    let mut reply = match (fields.get("tool_calls"), text) {
        (Some(_), Some(_)) => {
            return Err("has both `tool_calls` and a text; a reply either calls tools or answers".into());
        }
        (None, None) => return Err(format!("is empty; a reply has {REPLY_KEYS}")),
        (None, Some(text)) => ModelReply::text(text),
        (Some(calls), None) => {
            let calls: Vec<ScriptCall> = serde_json::from_value(calls.clone())
                .map_err(|e| format!("`tool_calls`: {e} (a call has `id`, `name` and `arguments`)"))?;
            if calls.is_empty() {
                return Err("`tool_calls` is empty; a reply without calls is a `text`".into());
            }
            ModelReply::calls(calls.into_iter().map(lovia_host::ToolCall::from))
        }
    };
    reply.usage = usage;
    reply.finish_reason = finish_reason;
    Ok(reply)
}

/// A call as a script writes it (unknown keys are an error): the calls of
/// this module's replies and of `lovia run`'s turns.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptCall {
    id: String,
    name: String,
    /// The raw text the model produced; empty is `{}`.
    #[serde(default)]
    arguments: String,
}

impl From<ScriptCall> for lovia_host::ToolCall {
    fn from(c: ScriptCall) -> Self {
        lovia_host::ToolCall::new(c.id, c.name, c.arguments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{Message, ModelSettings};

    #[tokio::test]
    async fn a_shared_provider_keeps_only_the_latest_requests() {
        let model = ScriptedProvider::by_position([ModelReply::text("Done.")]);
        for i in 0..RECORDED_REQUESTS + 36 {
            let request = ModelRequest {
                model: None,
                messages: vec![Message::User { content: format!("request {i}") }],
                tools: Vec::new(),
                settings: ModelSettings::default(),
            };
            let reply = model.respond(&request, &|_| {}).await.expect("a reply");
            assert_eq!(reply.content.as_deref(), Some("Done."));
        }
        let kept = model.requests();
        assert_eq!(kept.len(), RECORDED_REQUESTS);
        assert_eq!(kept[0].messages, vec![Message::User { content: "request 36".into() }], "the oldest went first");
    }
}
