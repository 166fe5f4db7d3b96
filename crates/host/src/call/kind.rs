//! The kind of an error result, decided where the error happens and carried
//! with the result to the transcript, the events, SSE and metrics, so that
//! nothing downstream has to read the model-facing text to classify it.

use serde::{Deserialize, Serialize};

/// Why a call's result is an error result.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The model named a tool the toolset does not have.
    UnknownTool,
    /// The arguments were not JSON, not an object, or failed the schema or the tool's own check.
    InvalidArguments,
    /// The call was not approved, or its approval check failed.
    Denied,
    /// An attempt's timeout or the host's wall-clock ceiling passed.
    Timeout,
    /// The sandbox stopped the guest: out of memory, stack overflow, CPU budget, a panic or another trap.
    Trap,
    /// The run was cancelled, or its budget left the call unrun.
    Cancelled,
    /// The tool itself reported an error (or a renderer, a policy or a sub-run did).
    ToolError,
}

impl ErrorKind {
    /// Every kind, in the order metrics list them.
    pub const ALL: [ErrorKind; 7] = [
        ErrorKind::UnknownTool,
        ErrorKind::InvalidArguments,
        ErrorKind::Denied,
        ErrorKind::Timeout,
        ErrorKind::Trap,
        ErrorKind::Cancelled,
        ErrorKind::ToolError,
    ];

    /// The kind's name in metrics and events: `unknown_tool`, `invalid_arguments`,
    /// `denied`, `timeout`, `trap`, `cancelled` or `tool_error`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::UnknownTool => "unknown_tool",
            ErrorKind::InvalidArguments => "invalid_arguments",
            ErrorKind::Denied => "denied",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Trap => "trap",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::ToolError => "tool_error",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
