//! The failures a tool reports to the model.

use crate::bindings::lovia::tools::types as wit;

/// What kind of failure a [`ToolError`] is; the host treats each differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolErrorKind {
    /// An ordinary failure: the model sees `Tool error: <message>`; retried
    /// when the tool allows retries.
    Tool,
    /// A semantic argument check failed; never retried.
    InvalidArguments,
    /// Ends the whole run; the call leaves no result.
    CancelRun,
    /// A sub-run's budget was exceeded: an error result, never retried.
    BudgetExceeded,
}

/// A failure a tool shapes for the model.
///
/// ```
/// let err = lovia::ToolError::new("db down").hint("retry in a minute");
/// assert_eq!(err.to_string(), "db down\n  hint: retry in a minute");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    kind: ToolErrorKind,
    message: String,
    hint: Option<String>,
    named_kind: Option<String>,
}

impl ToolError {
    /// An ordinary tool failure with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self { kind: ToolErrorKind::Tool, message: message.into(), hint: None, named_kind: None }
    }

    /// An ordinary tool failure known by a name only, such as
    /// `ConnectError`: the model reads `Tool error: ConnectError`.
    ///
    /// ```
    /// let err = lovia::ToolError::of_kind("ConnectError");
    /// assert_eq!(err.to_string(), "ConnectError");
    /// ```
    pub fn of_kind(kind: impl Into<String>) -> Self {
        Self::new("").with_kind(kind)
    }

    /// A failed semantic check of the arguments (never retried).
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self { kind: ToolErrorKind::InvalidArguments, ..Self::new(message) }
    }

    /// Asks the host to cancel the whole run, with `reason`.
    pub fn cancel_run(reason: impl Into<String>) -> Self {
        Self { kind: ToolErrorKind::CancelRun, ..Self::new(reason) }
    }

    /// Reports that a budget this tool manages was exceeded.
    pub fn budget_exceeded(message: impl Into<String>) -> Self {
        Self { kind: ToolErrorKind::BudgetExceeded, ..Self::new(message) }
    }

    /// Adds a hint the model sees on its own line after the message.
    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Names the kind of failure (contract 0.2), such as `ConnectError`:
    /// the host counts tool errors by it in metrics, and the model reads it
    /// when the message is empty. It must match `^[A-Za-z][A-Za-z0-9_.]{0,63}$`
    /// or the host ignores it. Only ordinary failures carry it.
    ///
    /// ```
    /// let err = lovia::ToolError::new("connection refused").with_kind("ConnectError");
    /// assert_eq!(err.named_kind(), Some("ConnectError"));
    /// assert_eq!(err.to_string(), "connection refused");
    /// ```
    #[must_use]
    pub fn with_kind(mut self, kind: impl Into<String>) -> Self {
        self.named_kind = Some(kind.into());
        self
    }

    /// The named kind, if [`ToolError::with_kind`] gave one.
    pub fn named_kind(&self) -> Option<&str> {
        self.named_kind.as_deref()
    }

    /// The category of failure (ordinary, invalid arguments, ...).
    pub fn kind(&self) -> ToolErrorKind {
        self.kind
    }

    /// The message, without the hint.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for ToolError {
    /// Renders as the host does (docs/semantics.md §5): `<message>\n  hint: <hint>`,
    /// just the hint when the message is empty, or the named kind when both are.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.hint, self.message.is_empty(), &self.named_kind) {
            (Some(h), true, _) => f.write_str(h),
            (Some(h), false, _) => write!(f, "{}\n  hint: {h}", self.message),
            (None, true, Some(kind)) => f.write_str(kind),
            (None, _, _) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ToolError {}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

impl From<ToolError> for wit::CallError {
    fn from(e: ToolError) -> Self {
        match e.kind {
            ToolErrorKind::Tool => {
                wit::CallError::Tool(wit::ToolError { message: e.message, hint: e.hint, kind: e.named_kind })
            }
            // The other kinds carry one string: fold the hint in as the host would render it.
            ToolErrorKind::InvalidArguments => wit::CallError::InvalidArguments(e.to_string()),
            ToolErrorKind::CancelRun => wit::CallError::CancelRun(e.to_string()),
            ToolErrorKind::BudgetExceeded => wit::CallError::BudgetExceeded(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_kind_reaches_the_contract_only_for_ordinary_failures() {
        let tool = wit::CallError::from(ToolError::new("refused").with_kind("ConnectError"));
        let wit::CallError::Tool(e) = tool else { panic!("an ordinary failure") };
        assert_eq!((e.message.as_str(), e.kind.as_deref()), ("refused", Some("ConnectError")));
        let invalid = wit::CallError::from(ToolError::invalid_arguments("bad").with_kind("Ignored"));
        assert!(matches!(invalid, wit::CallError::InvalidArguments(m) if m == "bad"));
        assert_eq!(ToolError::of_kind("EmptySeries").to_string(), "EmptySeries");
        assert_eq!(ToolError::of_kind("EmptySeries").hint("add values").to_string(), "add values");
    }
}
