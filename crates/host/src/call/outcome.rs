//! What a call produced, and the exact string the model sees (docs/semantics.md §5, D5, D6, D8).

use super::{ErrorKind, text};

/// Why a call failed, as the model reads it after `Tool error: `.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// The tool returned `tool-error`.
    Tool {
        /// The message (may be empty).
        message: String,
        /// The hint, if any.
        hint: Option<String>,
        /// The tool's name for this kind of failure, such as `ConnectError`
        /// (contract 0.2); already checked against [`is_valid_error_kind`].
        kind: Option<String>,
    },
    /// The arguments failed the host's schema check or the tool's own check; never retried.
    InvalidArguments(String),
    /// A host-native tool refused the call for a reason no retry can change
    /// (a URL scheme it does not fetch, a destination its egress rules
    /// refuse); never retried. The model reads it as it reads
    /// [`Failure::Tool`]: the message, then the hint.
    Refused {
        /// The message.
        message: String,
        /// The hint, if any.
        hint: Option<String>,
    },
    /// A sub-run's budget inside the tool; never retried.
    BudgetExceeded(String),
    /// The attempt's timeout passed; the instance was interrupted.
    TimedOut {
        /// The timeout.
        ms: u64,
    },
    /// The host's wall-clock ceiling passed.
    WallClockCap {
        /// The ceiling.
        ms: u64,
    },
    /// The instance tried to grow memory past its limit; never retried.
    OutOfMemory {
        /// The limit in MiB.
        limit_mib: usize,
    },
    /// The wasm or shadow stack overflowed; never retried.
    StackOverflow,
    /// The fuel budget ran out; never retried.
    CpuBudget,
    /// The result was larger than the boundary allows; never retried.
    ResultTooLarge {
        /// Its size in bytes.
        bytes: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The tool returned a result the host refuses (JSON that is not JSON,
    /// content parts outside their bounds). Deterministic, so never retried;
    /// it reads as a trap.
    InvalidResult(String),
    /// The guest panicked, with its message.
    Panicked(String),
    /// Any other trap, with wasmtime's description.
    Trap(String),
    /// The tool asked to end the whole run (`cancel-run`). The executor never
    /// shows it to the model: the run ends, and the call leaves no result.
    RunCancelled(String),
}

impl Failure {
    /// The kind of error result this failure makes.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Failure::Tool { .. }
            | Failure::Refused { .. }
            | Failure::BudgetExceeded(_)
            | Failure::ResultTooLarge { .. } => ErrorKind::ToolError,
            Failure::InvalidArguments(_) => ErrorKind::InvalidArguments,
            Failure::TimedOut { .. } | Failure::WallClockCap { .. } => ErrorKind::Timeout,
            Failure::OutOfMemory { .. }
            | Failure::StackOverflow
            | Failure::CpuBudget
            | Failure::InvalidResult(_)
            | Failure::Panicked(_)
            | Failure::Trap(_) => ErrorKind::Trap,
            Failure::RunCancelled(_) => ErrorKind::Cancelled,
        }
    }

    /// The limit that ended the attempt, as traces name it: `timeout`,
    /// `wall_clock`, `memory`, `stack`, `fuel` or `result_size`; `None` for
    /// a failure that is not a limit's.
    pub fn limit(&self) -> Option<&'static str> {
        match self {
            Failure::TimedOut { .. } => Some("timeout"),
            Failure::WallClockCap { .. } => Some("wall_clock"),
            Failure::OutOfMemory { .. } => Some("memory"),
            Failure::StackOverflow => Some("stack"),
            Failure::CpuBudget => Some("fuel"),
            Failure::ResultTooLarge { .. } => Some("result_size"),
            _ => None,
        }
    }

    /// Deterministic resource-limit failures and argument errors are never
    /// retried (docs/semantics.md §9, D6).
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            Failure::InvalidArguments(_)
                | Failure::Refused { .. }
                | Failure::BudgetExceeded(_)
                | Failure::OutOfMemory { .. }
                | Failure::StackOverflow
                | Failure::CpuBudget
                | Failure::ResultTooLarge { .. }
                | Failure::InvalidResult(_)
                | Failure::RunCancelled(_)
        )
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // An empty message falls back to the error's kind, as the
            // reference falls back to its class name (docs/semantics.md §5).
            Failure::Tool { message, hint: None, kind } if message.is_empty() => {
                f.write_str(kind.as_deref().unwrap_or("ToolError"))
            }
            Failure::Tool { message, hint: None, .. } => f.write_str(message),
            Failure::Tool { message, hint: Some(h), .. } if message.is_empty() => f.write_str(h),
            Failure::Tool { message, hint: Some(h), .. } => write!(f, "{message}\n  hint: {h}"),
            Failure::Refused { message, hint: None } => f.write_str(message),
            Failure::Refused { message, hint: Some(h) } => write!(f, "{message}\n  hint: {h}"),
            Failure::InvalidArguments(m) | Failure::BudgetExceeded(m) => f.write_str(m),
            Failure::TimedOut { ms } => write!(f, "timed out after {ms} ms"),
            Failure::WallClockCap { ms } => write!(f, "timed out after {ms} ms (the host's wall-clock limit)"),
            Failure::OutOfMemory { limit_mib } => write!(f, "out of memory (limit {limit_mib} MiB)"),
            Failure::StackOverflow => f.write_str("stack overflow"),
            Failure::CpuBudget => f.write_str("CPU budget exhausted"),
            Failure::ResultTooLarge { bytes, limit } => {
                write!(f, "result too large ({bytes} bytes; the limit is {limit} bytes)")
            }
            Failure::Panicked(m) => write!(f, "tool panicked: {m}"),
            Failure::Trap(m) | Failure::InvalidResult(m) => write!(f, "trap: {m}"),
            Failure::RunCancelled(_) => f.write_str("run cancelled"),
        }
    }
}

/// Whether `kind` may name a tool's error kind: `^[A-Za-z][A-Za-z0-9_.]{0,63}$`.
/// It reaches metrics labels and the model, so nothing else is accepted.
pub fn is_valid_error_kind(kind: &str) -> bool {
    let mut bytes = kind.bytes();
    kind.len() <= 64
        && bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
}

/// The outcome of one call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CallOutcome {
    /// Text, shown verbatim.
    Text(String),
    /// A JSON value, shown through the renderer.
    Json(serde_json::Value),
    /// Content parts (contract 0.2); the model reads their projection.
    Parts(Vec<super::ContentPart>),
    /// The call ran and failed: `Tool error: <failure>`.
    Failed(Failure),
    /// Preflight refused the call before it ran (unknown tool, bad JSON, a
    /// non-object). The text is final: never rendered or truncated.
    Rejected {
        /// Why.
        kind: ErrorKind,
        /// The final text.
        text: String,
    },
    /// The tool asked to cancel the whole run. It leaves no result in the
    /// transcript; a runner answers the call with `Tool error: run cancelled` (docs/semantics.md D8).
    CancelRun(String),
}

impl CallOutcome {
    /// The kind of error result, `None` for a successful one.
    pub fn error_kind(&self) -> Option<ErrorKind> {
        match self {
            CallOutcome::Text(_) | CallOutcome::Json(_) | CallOutcome::Parts(_) => None,
            CallOutcome::Failed(f) => Some(f.kind()),
            CallOutcome::Rejected { kind, .. } => Some(*kind),
            CallOutcome::CancelRun(_) => Some(ErrorKind::Cancelled),
        }
    }

    /// True for everything but a successful result.
    pub fn is_error(&self) -> bool {
        !matches!(self, CallOutcome::Text(_) | CallOutcome::Json(_) | CallOutcome::Parts(_))
    }

    /// The string the model sees, before truncation.
    pub fn model_output(&self) -> String {
        match self {
            CallOutcome::Text(t) => t.clone(),
            CallOutcome::Json(v) => super::render_json(v),
            CallOutcome::Parts(parts) => super::render_parts(parts),
            CallOutcome::Failed(f) => text::tool_error(f),
            CallOutcome::Rejected { text, .. } => text.clone(),
            CallOutcome::CancelRun(_) => text::RUN_CANCELLED.into(),
        }
    }

    /// The string the model sees, truncated to `limit` characters (docs/semantics.md §12)
    /// unless it is a preflight rejection.
    pub fn final_output(&self, limit: Option<u64>) -> String {
        let text = self.model_output();
        match (self, limit) {
            (CallOutcome::Rejected { .. }, _) | (_, None) => text,
            (_, Some(l)) => super::truncate(&text, l).unwrap_or(text),
        }
    }
}
