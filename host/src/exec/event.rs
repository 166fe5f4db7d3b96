//! The events of a turn's tool calls (spec §16). Events of different calls
//! interleave; correlate them by call id. For one call, `ToolCallStarted`
//! always precedes its `ToolCallCompleted`.

use super::ToolCall;
use crate::approval::ApprovalTicket;
use serde_json::Value;
use tokio::sync::mpsc;

/// One event.
#[derive(Debug)]
pub enum ToolEvent {
    /// A gated call waits for a decision. Decide with the ticket, or drop it
    /// (take the next event) to leave the call to the approval handler.
    ApprovalRequired {
        /// The call.
        call: ToolCall,
        /// The decision handle.
        ticket: ApprovalTicket,
    },
    /// The call passed preflight and runs.
    ToolCallStarted {
        /// The call.
        call: ToolCall,
    },
    /// The call (or its approval check, or its renderer) failed; a
    /// `ToolCallCompleted` with the error result follows.
    ToolCallFailed {
        /// The call.
        call: ToolCall,
        /// What failed.
        error: String,
    },
    /// The call's one result.
    ToolCallCompleted {
        /// The call.
        call: ToolCall,
        /// The raw value on success; the error text otherwise.
        result: Value,
        /// Whether `output` is an error result.
        is_error: bool,
        /// The final string the model sees.
        output: String,
    },
    /// The tool reported progress.
    ToolProgress {
        /// The call.
        call: ToolCall,
        /// The message.
        message: String,
    },
}

impl ToolEvent {
    /// The call the event is about.
    pub fn call(&self) -> &ToolCall {
        match self {
            ToolEvent::ApprovalRequired { call, .. }
            | ToolEvent::ToolCallStarted { call }
            | ToolEvent::ToolCallFailed { call, .. }
            | ToolEvent::ToolCallCompleted { call, .. }
            | ToolEvent::ToolProgress { call, .. } => call,
        }
    }
}

/// Where events go. Without a receiver they are dropped, and an
/// `ApprovalRequired` is then left to the handler at once.
#[derive(Debug, Clone, Default)]
pub struct EventSink {
    tx: Option<mpsc::UnboundedSender<ToolEvent>>,
}

impl EventSink {
    /// Events go to the returned receiver.
    pub fn channel() -> (EventSink, mpsc::UnboundedReceiver<ToolEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (EventSink { tx: Some(tx) }, rx)
    }

    /// Events are dropped.
    pub fn none() -> EventSink {
        EventSink { tx: None }
    }

    pub(crate) fn emit(&self, event: ToolEvent) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(event);
        }
    }
}
