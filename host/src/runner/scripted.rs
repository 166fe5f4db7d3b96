//! A provider that replays canned replies: the model of tests, of
//! `lovia run`, and of offline evaluations.

use super::provider::{ModelProvider, ModelReply, ModelRequest, ProviderError};
use crate::tool::def::BoxFuture;
use std::collections::VecDeque;
use std::sync::Mutex;

/// Replays `replies` in order, one per request, and records every request.
///
/// ```
/// use lovia_host::runner::{ModelReply, ScriptedProvider};
/// let model = ScriptedProvider::new([ModelReply::text("Done.")]);
/// assert_eq!(model.requests().len(), 0);
/// ```
#[derive(Debug, Default)]
pub struct ScriptedProvider {
    replies: Mutex<VecDeque<ModelReply>>,
    seen: Mutex<Vec<ModelRequest>>,
}

impl ScriptedProvider {
    /// A provider that answers with `replies`, then fails.
    pub fn new(replies: impl IntoIterator<Item = ModelReply>) -> Self {
        Self { replies: Mutex::new(replies.into_iter().collect()), seen: Mutex::default() }
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

    fn respond<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelReply, ProviderError>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).push(request.clone());
        let next = self.replies.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        Box::pin(async move {
            next.ok_or_else(|| ProviderError {
                provider: "scripted".into(),
                message: "the script has no more replies".into(),
            })
        })
    }
}
