//! One call of a plugin's tool, as the executor gives it to the plugin (and
//! `Plugin::invoke`, with the `direct-calls` feature, takes it).

use crate::call::CallContext;
use crate::sandbox::{CallLimits, SessionStore};
use std::sync::Arc;
use std::time::Duration;

/// One call to run.
#[derive(Clone, Default)]
pub struct CallRequest {
    /// The tool's name, as the model sent it.
    pub tool: String,
    /// The raw argument text, as the model sent it (may be empty or malformed).
    pub arguments: String,
    /// Ids and run data given to the call. Default: [`CallContext::default`].
    pub context: CallContext,
    /// Overrides the tool's declared timeout. Default: `None` (the tool's
    /// `timeout_ms`, else no timeout; the host's wall-clock ceiling applies either way).
    pub timeout: Option<Duration>,
    /// Overrides the host's limits for this call. Default: `None`.
    pub limits: Option<CallLimits>,
    /// The session store granted to the call. Default: `None`, not granted.
    pub session_store: Option<Arc<dyn SessionStore>>,
}

impl std::fmt::Debug for CallRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallRequest")
            .field("tool", &self.tool)
            .field("arguments", &self.arguments)
            .field("context", &self.context)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl CallRequest {
    /// A call of `tool` with the raw `arguments` text and defaults otherwise.
    pub fn new(tool: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self { tool: tool.into(), arguments: arguments.into(), ..Self::default() }
    }
}
