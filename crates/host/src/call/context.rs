//! What the host tells a call about its run.

use super::CancelToken;
use std::collections::HashMap;
use std::sync::Arc;

/// Receives a call's progress messages (`ToolProgress` events).
pub type ProgressSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Receives a call's log lines (`ToolLog` events), already bounded and
/// with their control characters escaped.
pub type LogSink = Arc<dyn Fn(LogLevel, &str) + Send + Sync>;

/// The level of a tool's log line, lowest first (also the least level of
/// guest lines an operator keeps, `HostConfig::guest_logs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LogLevel {
    /// Trace.
    Trace,
    /// Debug.
    Debug,
    /// Info, the default least level kept.
    #[default]
    Info,
    /// Warn.
    Warn,
    /// Error.
    Error,
}

/// What the host tells a call about its run. Default: empty ids, agent
/// `""`, turn 0, no session, no dependencies, never cancelled.
#[derive(Clone, Default)]
pub struct CallContext {
    /// The run's id.
    pub run_id: String,
    /// The session, if the run has one.
    pub session_id: Option<String>,
    /// The model's id for this call.
    pub call_id: String,
    /// The requesting agent's name.
    pub agent: String,
    /// The tenant the run belongs to, for per-tenant limits.
    pub tenant: Option<String>,
    /// The 1-based turn (0 outside a run).
    pub turn: u32,
    /// JSON values granted to the plugin, by key.
    pub dependencies: Arc<HashMap<String, String>>,
    /// The run's cancel token; the guest polls it through `context.cancelled()`,
    /// and a native tool that starts a sub-run gives it [`CancelToken::child`].
    pub cancel: CancelToken,
    /// Where progress messages go. Default: nowhere.
    pub progress: Option<ProgressSink>,
    /// Where the tool's log lines go besides the host's log. Default: nowhere.
    pub log: Option<LogSink>,
    /// Calls other tools of the run; only a tool built with
    /// [`crate::exec::ToolBuilder::calls_tools`] gets one. Default: none.
    pub nested: Option<Arc<dyn super::NestedCalls>>,
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("run_id", &self.run_id)
            .field("session_id", &self.session_id)
            .field("call_id", &self.call_id)
            .field("agent", &self.agent)
            .field("turn", &self.turn)
            .finish_non_exhaustive()
    }
}
