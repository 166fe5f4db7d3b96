//! What a run persists so that it survives a crash or a restart (docs/semantics.md §8
//! "Checkpointing"): the session's transcript, the calls of the last
//! assistant message that have no result yet, and the approvals it waits on.
//! It is saved after each assistant message and after each completed call.

use super::provider::Message;
use lovia_host::exec::{JournaledCall, ToolCall, Usage};
use serde::{Deserialize, Serialize};

/// The most one turn's programs journal ([`Checkpoint::journal`]), in
/// bytes (ids, argument texts and results): a program whose next result
/// would pass it is stopped, since a resume could not tell what it had
/// done. A turn starts with an empty journal, or a resumed turn's. The checkpoint's head holds the journal and is written after
/// each entry, so this bounds what a tenant's programs make the store write.
/// Fixed: 1 MiB.
pub const MAX_JOURNAL_BYTES: usize = 1 << 20;

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
    /// Tools a person allowed for the rest of the session ("always allow"):
    /// their calls are approved without asking, in this run and the
    /// session's later ones. Never another session's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// The W3C `traceparent` of the run's span, when traces are on: a run
    /// resumed elsewhere continues its trace (docs/telemetry.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The nested calls that programs of the pending calls (code mode's
    /// `run_code`) completed, each saved before its program read it: a
    /// resumed program is answered from them instead of calling again. A
    /// call's entries go when the call itself completes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub journal: Vec<JournaledCall>,
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
            allowed_tools: Vec::new(),
            error: None,
            trace: None,
            journal: Vec::new(),
        }
    }

    #[cfg(any(feature = "sqlite", feature = "postgres"))]
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
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            allowed_tools: &'a [String],
            #[serde(skip_serializing_if = "Option::is_none")]
            trace: &'a Option<String>,
            #[serde(skip_serializing_if = "<[JournaledCall]>::is_empty")]
            journal: &'a [JournaledCall],
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
            allowed_tools: &self.allowed_tools,
            trace: &self.trace,
            journal: &self.journal,
        })
    }

    #[cfg(any(feature = "sqlite", feature = "postgres"))]
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
    /// The run's fence has ended (its lease may be another replica's), so
    /// nothing of it is written: the other replica's checkpoint stands.
    #[error("the checkpoint of session '{session}' was not written: the run's lease ended")]
    Fenced {
        /// The session.
        session: String,
    },
}

/// Sessions one page of [`RunStore::list`] holds when the caller names no
/// size: 50.
pub const SESSION_PAGE_DEFAULT: usize = 50;
/// The most sessions one page of [`RunStore::list`] holds, whatever the
/// caller asks: 200. A listing is one bounded query, never the whole table.
pub const SESSION_PAGE_MAX: usize = 200;
/// Characters of a session's first input that a listing carries: 200.
pub const SESSION_INPUT_PREVIEW_CHARS: usize = 200;

/// Where a page of [`RunStore::list`] starts: after the session it names,
/// in the listing's order (newest first by creation, then session id
/// descending). As text it is `<created_ms>.<session>`, which is what
/// `GET /api/chat?before=` takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCursor {
    /// When the session was created, in ms since the Unix epoch.
    pub created_ms: i64,
    /// The session id.
    pub session: String,
}

impl std::fmt::Display for SessionCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.created_ms, self.session)
    }
}

/// A cursor that is not `<created_ms>.<session>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a session cursor is <created_ms>.<session id>, not '{0}'")]
pub struct BadCursor(pub String);

impl std::str::FromStr for SessionCursor {
    type Err = BadCursor;

    fn from_str(text: &str) -> Result<Self, BadCursor> {
        let bad = || BadCursor(text.chars().take(64).collect());
        // The time is digits only, so the first dot ends it; a session id may hold dots.
        let (ms, session) = text.split_once('.').ok_or_else(bad)?;
        if session.is_empty() || !ms.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        Ok(Self { created_ms: ms.parse().map_err(|_| bad())?, session: session.to_owned() })
    }
}

/// Which page of a tenant's sessions [`RunStore::list`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionPage {
    /// Sessions on the page; [`SESSION_PAGE_DEFAULT`] by default, at most
    /// [`SESSION_PAGE_MAX`] (a larger value is cut to it, 0 counts as 1).
    pub limit: usize,
    /// Start after this session; `None` (the default) starts at the newest.
    pub before: Option<SessionCursor>,
}

impl Default for SessionPage {
    fn default() -> Self {
        Self { limit: SESSION_PAGE_DEFAULT, before: None }
    }
}

impl SessionPage {
    /// The first `limit` sessions.
    pub fn first(limit: usize) -> Self {
        Self { limit, before: None }
    }

    /// The `limit` sessions after `cursor`.
    pub fn after(limit: usize, cursor: SessionCursor) -> Self {
        Self { limit, before: Some(cursor) }
    }

    /// The page size a store uses: the limit within 1..=[`SESSION_PAGE_MAX`].
    pub fn bounded_limit(&self) -> usize {
        self.limit.clamp(1, SESSION_PAGE_MAX)
    }
}

/// One session of a listing: what a session list shows without loading
/// its transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionInfo {
    /// The session id.
    pub session: String,
    /// Where its last run stands.
    pub status: RunStatus,
    /// When it was first saved, in ms since the Unix epoch.
    pub created_ms: i64,
    /// When it was last saved, in ms since the Unix epoch.
    pub updated_ms: i64,
    /// The first characters ([`SESSION_INPUT_PREVIEW_CHARS`]) of the user
    /// input that opened it, if its first message is one.
    pub input: Option<String>,
}

impl SessionInfo {
    /// The cursor of the page that follows this session.
    pub fn cursor(&self) -> SessionCursor {
        SessionCursor { created_ms: self.created_ms, session: self.session.clone() }
    }

    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    /// The preview of a session's first message, given as the JSON a store keeps.
    pub(crate) fn preview(first_message: Option<&str>) -> Option<String> {
        match serde_json::from_str(first_message?).ok()? {
            Message::User { content } => Some(content.chars().take(SESSION_INPUT_PREVIEW_CHARS).collect()),
            _ => None,
        }
    }
}

impl RunStatus {
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    /// The name a store keeps in its status column.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
        }
    }

    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    /// The status a store's column names, if it names one.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        [RunStatus::Running, RunStatus::Interrupted, RunStatus::Completed, RunStatus::Failed]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

/// Sessions, transcripts, checkpoints and pending approvals, keyed by
/// tenant and session id. Implementations must be safe to call from any
/// task; each call is one short transaction, and none may block the
/// runtime's workers (the SQLite store runs on the blocking pool, the
/// PostgreSQL one is asynchronous).
#[async_trait::async_trait]
pub trait RunStore: Send + Sync {
    /// The session's checkpoint, if it exists.
    async fn load(&self, tenant: &str, session: &str) -> Result<Option<Checkpoint>, StoreError>;
    /// Replaces the session's checkpoint.
    async fn save(&self, tenant: &str, session: &str, checkpoint: &Checkpoint) -> Result<(), StoreError>;
    /// Replaces the session's checkpoint only while the run's lease is the
    /// one `lease` names, checked in the same transaction as the write;
    /// otherwise [`StoreError::Fenced`] and nothing is written. A store that
    /// replicas share must check (the PostgreSQL one reads `lovia serve`'s
    /// `lovia_run_leases`). Default: [`RunStore::save`], for a store that
    /// one process owns, where no other replica can hold the run.
    async fn save_fenced(
        &self,
        tenant: &str,
        session: &str,
        checkpoint: &Checkpoint,
        lease: &lovia_host::LeaseToken,
    ) -> Result<(), StoreError> {
        let _ = lease;
        self.save(tenant, session, checkpoint).await
    }
    /// Every (tenant, session) whose run is unfinished, oldest first.
    async fn unfinished(&self) -> Result<Vec<(String, String)>, StoreError>;
    /// Forgets the session; false when there was none.
    async fn delete(&self, tenant: &str, session: &str) -> Result<bool, StoreError>;
    /// One page of the tenant's sessions, and only that tenant's: newest
    /// first by creation (ties by session id, descending), at most
    /// [`SessionPage::bounded_limit`] of them, starting after
    /// `page.before`. The next page starts at the last one's
    /// [`SessionInfo::cursor`]; a short page is the last.
    async fn list(&self, tenant: &str, page: &SessionPage) -> Result<Vec<SessionInfo>, StoreError>;
}
