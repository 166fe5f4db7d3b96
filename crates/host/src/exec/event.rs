//! The events of a turn's tool calls (docs/semantics.md §16). Events of different calls
//! interleave; correlate them by call id. For one call, `ToolCallStarted`
//! always precedes its `ToolCallCompleted`.

use super::{JournaledCall, ToolCall};
use crate::approval::ApprovalTicket;
use crate::call::ErrorKind;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::mpsc;

/// One event.
#[derive(Debug)]
#[non_exhaustive]
pub enum ToolEvent {
    /// A gated call waits for a decision. Decide with the ticket, or drop it
    /// (take the next event) to leave the call to the approval handler.
    ApprovalRequired {
        /// The call.
        call: ToolCall,
        /// The decision handle.
        ticket: ApprovalTicket,
    },
    /// A gated call approved without asking: a person allowed its tool for
    /// the rest of the session ([`ApprovalChannel::approve_always`](crate::ApprovalChannel::approve_always)).
    AutoApproved {
        /// The call.
        call: ToolCall,
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
        /// Why it is an error result; `None` for a successful one.
        error_kind: Option<ErrorKind>,
        /// The final string the model sees.
        output: String,
        /// The content parts of a rich result, as [`super::ToolResultEntry::parts`].
        parts: Option<Vec<crate::call::ContentPart>>,
        /// The tool's name for its failure, as [`super::ToolResultEntry::tool_error_kind`].
        tool_error_kind: Option<String>,
    },
    /// The tool reported progress.
    ToolProgress {
        /// The call.
        call: ToolCall,
        /// The message.
        message: String,
    },
    /// The tool wrote a log line (bounded, control characters escaped).
    ToolLog {
        /// The call.
        call: ToolCall,
        /// Its level.
        level: crate::call::LogLevel,
        /// The line.
        message: String,
    },
    /// An attempt of the call failed and another follows after `retry_in`
    /// (docs/semantics.md §9). The last attempt's failure is not one: it
    /// is the call's result.
    AttemptFailed {
        /// The call.
        call: ToolCall,
        /// The attempt that failed, from 1.
        attempt: u32,
        /// Why it failed.
        error: String,
        /// The pause before the next attempt.
        retry_in: std::time::Duration,
    },
    /// An event of a call that a running tool made (code mode's `run_code`
    /// calling a tool from its program). It is not a call of the model's: a
    /// transcript records only the parent's result. An `ApprovalRequired`
    /// inside is decided like any other, by its ticket or by its call id.
    Nested {
        /// The call id of the tool that made the call.
        parent: String,
        /// The nested call's event.
        event: Box<ToolEvent>,
    },
}

impl ToolEvent {
    /// The call the event is about.
    pub fn call(&self) -> &ToolCall {
        match self {
            ToolEvent::ApprovalRequired { call, .. }
            | ToolEvent::AutoApproved { call }
            | ToolEvent::ToolCallStarted { call }
            | ToolEvent::ToolCallFailed { call, .. }
            | ToolEvent::ToolCallCompleted { call, .. }
            | ToolEvent::ToolProgress { call, .. }
            | ToolEvent::ToolLog { call, .. }
            | ToolEvent::AttemptFailed { call, .. } => call,
            ToolEvent::Nested { event, .. } => event.call(),
        }
    }
}

/// What keeps an event before it is emitted ([`EventSink::keeping`]).
type Keep = Arc<dyn Fn(&ToolEvent) -> crate::BoxFuture<'static, ()> + Send + Sync>;

/// Where events go. Without a receiver they are dropped, and an
/// `ApprovalRequired` is then left to the handler at once.
#[derive(Clone, Default)]
pub struct EventSink {
    tx: Option<Arc<dyn Fn(ToolEvent) + Send + Sync>>,
    keep: Option<Keep>,
    journal: Option<JournalHook>,
}

type JournalHook = Arc<dyn Fn(&JournaledCall) -> crate::BoxFuture<'static, Result<(), String>> + Send + Sync>;

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink")
            .field("connected", &self.tx.is_some())
            .field("keeping", &self.keep.is_some())
            .field("journaling", &self.journal.is_some())
            .finish()
    }
}

impl EventSink {
    /// Events go to the returned receiver.
    pub fn channel() -> (EventSink, mpsc::UnboundedReceiver<ToolEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (EventSink::from_fn(move |event| drop(tx.send(event))), rx)
    }

    /// Events go to `f`, called on whichever task emits them. Dropping an
    /// `ApprovalRequired` there hands the call to the approval handler.
    pub fn from_fn(f: impl Fn(ToolEvent) + Send + Sync + 'static) -> EventSink {
        EventSink { tx: Some(Arc::new(f)), keep: None, journal: None }
    }

    /// Events are dropped.
    pub fn none() -> EventSink {
        EventSink { tx: None, keep: None, journal: None }
    }

    /// Whether events go anywhere: the executor makes none that nobody
    /// would read (a call's progress and log sinks).
    pub(crate) fn is_connected(&self) -> bool {
        self.tx.is_some()
    }

    /// Before an event the run's state depends on (`ApprovalRequired`,
    /// `ToolCallCompleted`) is emitted, the executor awaits `keep` for it:
    /// a run store writes its checkpoint there, so a completed call is
    /// durable before a call after a barrier, or the next turn, can depend
    /// on it. The other events are not kept.
    #[must_use]
    pub fn keeping(
        mut self,
        keep: impl Fn(&ToolEvent) -> crate::BoxFuture<'static, ()> + Send + Sync + 'static,
    ) -> Self {
        self.keep = Some(Arc::new(keep));
        self
    }

    /// Each nested call a program makes (code mode's `run_code`, a call of
    /// this sink's turn) is given to `journal` once it completes, and the
    /// program waits for the returned future before it reads the result: a
    /// run store appends it to the checkpoint there, so that the program,
    /// resumed after its host died, is answered from the journal
    /// ([`RunState::journal`](super::RunState::journal)) instead of calling
    /// again. An `Err` (the journal is full, say) stops the program with its
    /// text: a program whose calls are not all kept could repeat them.
    #[must_use]
    pub fn journaling(
        mut self,
        journal: impl Fn(&JournaledCall) -> crate::BoxFuture<'static, Result<(), String>> + Send + Sync + 'static,
    ) -> Self {
        self.journal = Some(Arc::new(journal));
        self
    }

    /// [`EventSink::journaling`]'s hook.
    pub(crate) async fn journal(&self, call: &JournaledCall) -> Result<(), String> {
        match &self.journal {
            Some(journal) => journal(call).await,
            None => Ok(()),
        }
    }

    pub(crate) fn emit(&self, event: ToolEvent) {
        if let Some(tx) = &self.tx {
            tx(event);
        }
    }

    /// [`EventSink::keeping`]'s hook, then the event.
    pub(crate) async fn emit_kept(&self, event: ToolEvent) {
        if let Some(keep) = &self.keep {
            keep(&event).await;
        }
        self.emit(event);
    }
}
