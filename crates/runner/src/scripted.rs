//! A provider that replays canned replies: the model of tests, of
//! `lovia run`, and of offline evaluations.

use super::provider::{Message, ModelProvider, ModelReply, ModelRequest, ProviderError, TextSink};
use lovia_host::BoxFuture;
use std::collections::VecDeque;
use std::sync::Mutex;

/// Replays `replies` in order, one per request, and records every request.
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
    seen: Mutex<Vec<ModelRequest>>,
}

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
    /// file: an array of `{"content": "…"}` and
    /// `{"tool_calls": [{"id", "name", "arguments"}]}` objects.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ProviderError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ProviderError::new("scripted", format!("cannot read {}: {e}", path.display())))?;
        let replies: Vec<ModelReply> = serde_json::from_str(&text)
            .map_err(|e| ProviderError::new("scripted", format!("{}: {e}", path.display())))?;
        Ok(Self::by_position(replies))
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
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
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).push(request.clone());
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
