//! The executor, one module per section of the spec.

mod approvals;
mod cancellation;
mod naming;
mod policies;
mod preflight;
mod rendering;
mod retries;
mod scheduling;
mod timeouts;

use lovia_host::{ExecSettings, Executor, Tool, ToolSource, Toolset};

/// An executor over `tools` (as the agent's own tools) with `settings`.
pub(crate) fn executor(tools: Vec<Tool>, settings: ExecSettings) -> Executor {
    Executor::new(Toolset::new().with(ToolSource::AgentTools, tools).expect("unique names"), settings)
}
