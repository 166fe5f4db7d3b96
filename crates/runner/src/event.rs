//! The events of a run (docs/semantics.md §16). A turn reads `TurnStarted → TextDelta* →
//! MessageCompleted → tool events → TurnEnded → [HandoffOccurred]`, and the
//! stream always ends with exactly one `RunCompleted` or `RunFailed`.

use super::RunError;
use super::provider::Message;
use lovia_host::exec::ToolEvent;

/// One event of a run.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunEvent {
    /// The run began (or resumed).
    RunStarted {
        /// The active agent.
        agent: String,
        /// The run's id.
        run_id: String,
    },
    /// A model turn began.
    TurnStarted {
        /// The active agent.
        agent: String,
        /// The 1-based turn.
        turn: u32,
    },
    /// Text the model is streaming.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// The model's reply is complete.
    MessageCompleted {
        /// The assistant message.
        message: Message,
    },
    /// A tool call's event; an `ApprovalRequired` carries its ticket.
    Tool(ToolEvent),
    /// The turn's calls are all answered.
    TurnEnded {
        /// The agent of the turn.
        agent: String,
        /// The turn.
        turn: u32,
    },
    /// A handoff took effect; the next turn belongs to `to_agent`.
    HandoffOccurred {
        /// The agent that handed off.
        from_agent: String,
        /// The agent now active.
        to_agent: String,
    },
    /// The request of this turn was compacted to fit the model's window
    /// ([`ContextPolicy`](crate::ContextPolicy)); the stored transcript is
    /// unchanged. Comes after `TurnStarted`.
    ContextCompacted {
        /// The last stage that ran: `offload`, `clear` or `summary`.
        reason: String,
        /// The request's estimated tokens before.
        tokens_before: u64,
        /// And after.
        tokens_after: u64,
    },
    /// The run ended with the model's text.
    RunCompleted {
        /// The output.
        output: String,
    },
    /// The run ended without output.
    RunFailed {
        /// Why.
        error: RunError,
    },
}
