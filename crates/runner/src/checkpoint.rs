//! What a run persists so that it survives a crash or a restart (docs/semantics.md §8
//! "Checkpointing"): the session's transcript, the calls of the last
//! assistant message that have no result yet, and the approvals it waits on.
//! It is saved after each assistant message and after each completed call.

use super::provider::Message;
use lovia_host::exec::{ToolCall, Usage};
use serde::{Deserialize, Serialize};

/// Where a session's run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// Running, or the process died while it ran: resumable.
    Running,
    /// Stopped by a cancel or a budget trip with calls left: resumable.
    Interrupted,
    /// Ended with output.
    Completed,
    /// Ended with an error that a resume would repeat (max_turns, provider).
    Failed,
}

/// A gated call waiting for a decision, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The call id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The exact argument text.
    pub arguments: String,
}

/// A session's persisted state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The current (or last) run.
    pub run_id: String,
    /// The active agent's name.
    pub agent: String,
    /// Where the run stands.
    pub status: RunStatus,
    /// The run's current turn.
    pub turn: u32,
    /// Tool calls the run requested so far.
    pub tool_calls: u64,
    /// Tokens the run spent so far.
    pub usage: Usage,
    /// The transcript without the system message: user input, assistant
    /// messages, and one tool message per completed call. Append-only: the
    /// stores write only the messages added since the last save.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// Calls of the last assistant message that have no result yet.
    pub pending_calls: Vec<ToolCall>,
    /// Whether that message was cut off at the output token limit.
    #[serde(default)]
    pub cut_off: bool,
    /// Approvals the run waits on. Decisions are not persisted: a resumed
    /// run asks again.
    #[serde(default)]
    pub pending_approvals: Vec<PendingApproval>,
    /// The error a failed run ended with.
    #[serde(default)]
    pub error: Option<String>,
}

impl Checkpoint {
    /// An empty session about to start run `run_id` with `agent`.
    pub fn new(run_id: impl Into<String>, agent: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            agent: agent.into(),
            status: RunStatus::Running,
            turn: 0,
            tool_calls: 0,
            usage: Usage::default(),
            messages: Vec::new(),
            pending_calls: Vec::new(),
            cut_off: false,
            pending_approvals: Vec::new(),
            error: None,
        }
    }

    /// The checkpoint without its transcript, as JSON: what a store rewrites
    /// on every save. Its size does not grow with the transcript.
    pub(crate) fn head_json(&self) -> serde_json::Result<String> {
        #[derive(Serialize)]
        struct Head<'a> {
            run_id: &'a str,
            agent: &'a str,
            status: RunStatus,
            turn: u32,
            tool_calls: u64,
            usage: &'a Usage,
            pending_calls: &'a [ToolCall],
            cut_off: bool,
            pending_approvals: &'a [PendingApproval],
            error: &'a Option<String>,
        }
        serde_json::to_string(&Head {
            run_id: &self.run_id,
            agent: &self.agent,
            status: self.status,
            turn: self.turn,
            tool_calls: self.tool_calls,
            usage: &self.usage,
            pending_calls: &self.pending_calls,
            cut_off: self.cut_off,
            pending_approvals: &self.pending_approvals,
            error: &self.error,
        })
    }

    /// A checkpoint from its head and its stored messages. A head written
    /// before transcripts were stored apart carries its messages itself;
    /// they count when no message row exists yet.
    pub(crate) fn from_parts(head: &str, messages: Vec<Message>) -> serde_json::Result<Self> {
        let mut checkpoint: Checkpoint = serde_json::from_str(head)?;
        if !messages.is_empty() {
            checkpoint.messages = messages;
        }
        Ok(checkpoint)
    }

    /// Whether a resume has something to finish.
    pub fn is_unfinished(&self) -> bool {
        matches!(self.status, RunStatus::Running | RunStatus::Interrupted)
    }
}

/// Why the run store failed. The run that hit it fails with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database failed.
    #[error("run store {location}: {message}")]
    Database {
        /// The file or URL.
        location: String,
        /// What failed.
        message: String,
    },
    /// A saved checkpoint does not decode.
    #[error("the checkpoint of session '{session}' does not decode: {message}")]
    Corrupt {
        /// The session.
        session: String,
        /// The decoder's message.
        message: String,
    },
}

/// Sessions, transcripts, checkpoints and pending approvals, keyed by
/// tenant and session id. Implementations must be safe to call from any
/// task; each call is one short transaction, which may block: async callers
/// go through [`without_stalling`].
pub trait RunStore: Send + Sync {
    /// The session's checkpoint, if it exists.
    fn load(&self, tenant: &str, session: &str) -> Result<Option<Checkpoint>, StoreError>;
    /// Replaces the session's checkpoint.
    fn save(&self, tenant: &str, session: &str, checkpoint: &Checkpoint) -> Result<(), StoreError>;
    /// Every (tenant, session) whose run is unfinished, oldest first.
    fn unfinished(&self) -> Result<Vec<(String, String)>, StoreError>;
    /// Forgets the session; false when there was none.
    fn delete(&self, tenant: &str, session: &str) -> Result<bool, StoreError>;
}

/// Runs a store call from async code without stalling the runtime. A store
/// call is one short transaction, and it must finish before the run goes on
/// (a completed call is durable before anything depends on it), so it is not
/// queued to a writer task; on a multi-thread runtime tokio moves the
/// worker's other tasks to another thread while this one waits
/// (`block_in_place`). On a current-thread runtime, or outside one, it runs
/// inline.
pub fn without_stalling<T>(call: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(call)
        }
        _ => call(),
    }
}
