//! [`NestedCalls`]: how a tool that runs other tools (code mode's
//! `run_code`) calls them. The executor gives it to the tools that ask for
//! it ([`crate::exec::ToolBuilder::calls_tools`]); each nested call then goes
//! through the executor exactly as a call the model made.

use super::BoxFuture;
use serde_json::Value;

/// What a nested call ended with.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NestedResult {
    /// The nested call's id: the calling tool's call id, `/`, and a 1-based
    /// counter (`call_7/3`). Its events and its approval carry this id.
    pub call_id: String,
    /// The string the model would have seen for it.
    pub output: String,
    /// The retained value, when the executor kept one (a JSON result not
    /// truncated).
    pub raw: Option<Value>,
    /// Whether it is an error result.
    pub is_error: bool,
}

/// Why no nested call can run any more: the run was cancelled or its
/// tool-call budget is spent. The text is the one the run ends with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NestedStopped(pub String);

/// Runs tool calls on behalf of a running tool, under the run's executor,
/// approvals, budget and cancel token. Calls in flight together run
/// concurrently, except that a barrier's call runs alone.
pub trait NestedCalls: Send + Sync {
    /// Calls `name` with the raw `arguments` text.
    fn call<'a>(&'a self, name: &'a str, arguments: String) -> BoxFuture<'a, Result<NestedResult, NestedStopped>>;
}
