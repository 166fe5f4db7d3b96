//! What a host adds around each `tools/call` (`lovia serve` puts its tenant's
//! quotas, metrics and approval listing there): a hook admits or refuses
//! the call before it runs, and the permit it gives is told how the call
//! ended. `lovia mcp` has no hook, and every call is admitted.

use lovia_host::{BoxFuture, RunState, ToolCall, ToolResultEntry};
use std::time::Duration;

/// Admits each `tools/call` before it runs ([`McpOptions::hook`](crate::McpOptions::hook)).
pub trait CallHook: Send + Sync {
    /// Called once per `tools/call` (each round of a 2026-07-28 approval
    /// round trip is a call), before the executor sees it: `Ok` runs it and
    /// the permit is held until the call ends; `Err(message)` does not run
    /// it, and the client gets an `isError` result whose one text block is
    /// `message`.
    fn admit<'a>(&'a self, call: &'a CallStart<'a>) -> BoxFuture<'a, Result<Box<dyn CallPermit>, String>>;
}

/// What the hook sees of a call before it runs.
#[derive(Debug)]
#[non_exhaustive]
pub struct CallStart<'a> {
    /// The call: its lovia id (`mcp_<n>`), the tool's name as the client
    /// sent it, and the argument text.
    pub call: &'a ToolCall,
    /// The call's own run: its id, the tenant ([`McpOptions::tenant`](crate::McpOptions::tenant)),
    /// and the approval channel where a call waiting for approval is pending
    /// (deciding it there decides the call, whoever answers first).
    pub run: &'a RunState,
    /// The tool the call would run, as the catalog of the call's start
    /// lists it; `None` when the client named no such tool.
    pub tool: Option<&'a lovia_host::Tool>,
}

/// Held while an admitted call runs.
pub trait CallPermit: Send + Sync {
    /// The call waits for its client's answer to an elicitation (2025-11-25)
    /// until its run's approval channel is decided, by the client or by the
    /// host. Never called on 2026-07-28, where nothing waits between the
    /// two requests of the round trip. Default: nothing.
    fn approval_asked(&self) {}

    /// The call is over; the permit is dropped right after.
    fn finished(self: Box<Self>, outcome: &CallOutcome<'_>);
}

/// How an admitted call ended.
#[derive(Debug)]
#[non_exhaustive]
pub struct CallOutcome<'a> {
    /// The tool's name as the client sent it.
    pub tool: &'a str,
    /// From admission to the result (an approval's wait included).
    pub elapsed: Duration,
    /// lovia's result; `None` when the call was cancelled before it
    /// recorded one (the client got the run-cancelled text).
    pub result: Option<&'a ToolResultEntry>,
    /// The call did not run: it answered `input_required` (2026-07-28), and
    /// the client's retry is another call.
    pub input_required: bool,
}

/// The permit of a host without a hook.
pub(crate) struct Unhooked;

impl CallPermit for Unhooked {
    fn finished(self: Box<Self>, _outcome: &CallOutcome<'_>) {}
}
