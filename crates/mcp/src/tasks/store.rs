//! Where a server's tasks are kept: this process's memory by default
//! ([`InMemoryTasks`]); `lovia serve` on PostgreSQL keeps them in its run
//! store, so another replica answers `tasks/get`, `tasks/result`,
//! `tasks/list` and `tasks/cancel` (crates/serve/src/mcp/tasks.rs).

use lovia_host::BoxFuture;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a task stands (the 2025-11-25 statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for the client (an approval or a question it was asked).
    InputRequired,
    /// Ended with a result (an `isError` one too).
    Completed,
    /// Ended with a JSON-RPC error instead of a result.
    Failed,
    /// Cancelled by the client (`tasks/cancel`).
    Cancelled,
}

impl TaskStatus {
    /// The status as the wire and the stores spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status a store spelled, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Working, Self::InputRequired, Self::Completed, Self::Failed, Self::Cancelled]
            .into_iter()
            .find(|s| s.as_str() == text)
    }

    /// Whether the task has ended: its status changes no more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// One task as a store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskRow {
    /// The task's id: `task-` and 32 random hex digits.
    pub id: String,
    /// The tool it calls.
    pub tool: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// What the status means now, for a person (`statusMessage`).
    pub message: Option<String>,
    /// When it was made, in ms since the Unix epoch.
    pub created_ms: u64,
    /// When its status last changed, in ms since the Unix epoch.
    pub updated_ms: u64,
    /// How long it is kept from its creation, in ms (`ttl`); an ended task
    /// is kept at least [`KEPT_AFTER_END_MS`] after its end.
    pub ttl_ms: u64,
    /// How often the client should poll it, in ms (`pollInterval`).
    pub poll_ms: u64,
    /// Once ended: the `CallToolResult` as JSON, or for a failed task the
    /// JSON-RPC error (`{code, message, data?}`).
    pub result: Option<String>,
}

impl TaskRow {
    /// A new running task.
    pub fn new(id: String, tool: String, now_ms: u64, ttl_ms: u64, poll_ms: u64) -> Self {
        Self {
            id,
            tool,
            status: TaskStatus::Working,
            message: None,
            created_ms: now_ms,
            updated_ms: now_ms,
            ttl_ms,
            poll_ms,
            result: None,
        }
    }

    /// Whether a store may forget it at `now_ms`: ended, past its ttl and
    /// at least [`KEPT_AFTER_END_MS`] after its end.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.status.is_terminal()
            && now_ms > self.created_ms.saturating_add(self.ttl_ms)
            && now_ms > self.updated_ms.saturating_add(KEPT_AFTER_END_MS)
    }
}

/// How long an ended task is kept at least, whatever its ttl: a client
/// polling it once a second sees its end. 60 s.
pub const KEPT_AFTER_END_MS: u64 = 60_000;

/// Why a store did not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the task store failed: {message}")]
#[non_exhaustive]
pub struct TaskStoreError {
    /// What failed.
    pub message: String,
}

impl TaskStoreError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }
}

/// Whether a task was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Created {
    /// Kept.
    Yes,
    /// The scope keeps its most tasks already, none of them ended (an ended
    /// one, the oldest, makes room for a new one).
    Full,
}

/// Keeps tasks, each in a scope (a tenant): a scope's tasks are the only
/// ones its clients see.
pub trait TaskStore: Send + Sync {
    /// Keeps `row` in `scope` if fewer than `max` of the scope's tasks are
    /// kept, or one of them has ended (the oldest ended one goes).
    fn create<'a>(
        &'a self,
        scope: &'a str,
        row: &'a TaskRow,
        max: usize,
    ) -> BoxFuture<'a, Result<Created, TaskStoreError>>;
    /// The task without its result, if the scope keeps it (a poll reads
    /// this, so it never carries a result of up to the tool's output cap).
    fn get<'a>(&'a self, scope: &'a str, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRow>, TaskStoreError>>;
    /// The task with its result, if the scope keeps it.
    fn get_with_result<'a>(
        &'a self,
        scope: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TaskRow>, TaskStoreError>>;
    /// At most `limit` of the scope's tasks without their results, newest
    /// first, from the one after `after` (its `created_ms` and id).
    fn list<'a>(
        &'a self,
        scope: &'a str,
        after: Option<(u64, String)>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRow>, TaskStoreError>>;
    /// Sets a running task's status and message; `Ok(false)` when it has
    /// ended already (its end stands).
    fn set_status<'a>(
        &'a self,
        scope: &'a str,
        id: &'a str,
        status: TaskStatus,
        message: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, TaskStoreError>>;
    /// Ends a running task with `status` (terminal) and `result`; the first
    /// end wins: `Ok(false)` when it had ended already. An ended task is
    /// kept until its ttl has passed and a minute after its end, unless
    /// the scope's bound needs room first.
    fn finish<'a>(
        &'a self,
        scope: &'a str,
        id: &'a str,
        status: TaskStatus,
        message: Option<&'a str>,
        result: &'a str,
    ) -> BoxFuture<'a, Result<bool, TaskStoreError>>;
    /// Says that the task still runs here (a store shared by replicas marks
    /// a task whose replica stopped saying so as failed) and returns its
    /// status, so the runner sees a cancel made elsewhere; `None` when the
    /// task is gone.
    fn renew<'a>(&'a self, scope: &'a str, id: &'a str) -> BoxFuture<'a, Result<Option<TaskStatus>, TaskStoreError>>;
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The most tasks one [`InMemoryTasks`] keeps across its scopes (each
/// server of `lovia mcp`, each tenant of `lovia serve` on SQLite, has its
/// own); past it a new task is refused as if its scope were full. Also the
/// most `max_mcp_tasks` a tenant may have.
pub const MAX_TASKS_IN_MEMORY: usize = 10_000;

/// The default store: this process's memory. A task does not outlive the
/// process; at most [`MAX_TASKS_IN_MEMORY`].
#[derive(Debug, Default)]
pub struct InMemoryTasks(Mutex<HashMap<(String, String), TaskRow>>);

impl InMemoryTasks {
    /// `f` on the tasks; with `sweep`, the expired ones go first (only the
    /// calls that add or list do it, so a poll or a renewal costs no scan).
    fn with<T>(&self, sweep: bool, f: impl FnOnce(&mut HashMap<(String, String), TaskRow>) -> T) -> T {
        let mut tasks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if sweep {
            let now = now_ms();
            tasks.retain(|_, row| !row.expired(now));
        }
        f(&mut tasks)
    }
}

impl InMemoryTasks {
    /// Sets a running task's status and message (and, ending it, its
    /// result); false when it is gone or has ended.
    fn update(&self, scope: &str, id: &str, status: TaskStatus, message: Option<&str>, result: Option<&str>) -> bool {
        self.with(false, |tasks| match tasks.get_mut(&(scope.to_owned(), id.to_owned())) {
            Some(row) if !row.status.is_terminal() => {
                row.status = status;
                row.message = message.map(str::to_owned);
                row.updated_ms = now_ms().max(row.updated_ms);
                if let Some(result) = result {
                    row.result = Some(result.to_owned());
                }
                true
            }
            _ => false,
        })
    }
}

/// The row without its result.
fn head(row: &TaskRow) -> TaskRow {
    TaskRow {
        id: row.id.clone(),
        tool: row.tool.clone(),
        status: row.status,
        message: row.message.clone(),
        created_ms: row.created_ms,
        updated_ms: row.updated_ms,
        ttl_ms: row.ttl_ms,
        poll_ms: row.poll_ms,
        result: None,
    }
}

impl TaskStore for InMemoryTasks {
    fn create<'a>(
        &'a self,
        scope: &'a str,
        row: &'a TaskRow,
        max: usize,
    ) -> BoxFuture<'a, Result<Created, TaskStoreError>> {
        let created = self.with(true, |tasks| {
            let mine: Vec<&TaskRow> = tasks.iter().filter(|((s, _), _)| s == scope).map(|(_, r)| r).collect();
            if mine.len() >= max || tasks.len() >= MAX_TASKS_IN_MEMORY {
                let oldest_ended = mine
                    .iter()
                    .filter(|r| r.status.is_terminal())
                    .min_by_key(|r| (r.updated_ms, r.id.clone()))
                    .map(|r| r.id.clone());
                match oldest_ended {
                    Some(id) if max > 0 => {
                        tasks.remove(&(scope.to_owned(), id));
                    }
                    _ => return Created::Full,
                }
            }
            tasks.insert((scope.to_owned(), row.id.clone()), row.clone());
            Created::Yes
        });
        Box::pin(std::future::ready(Ok(created)))
    }

    fn get<'a>(&'a self, scope: &'a str, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRow>, TaskStoreError>> {
        let row = self.with(false, |tasks| tasks.get(&(scope.to_owned(), id.to_owned())).map(head));
        Box::pin(std::future::ready(Ok(row)))
    }

    fn get_with_result<'a>(
        &'a self,
        scope: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TaskRow>, TaskStoreError>> {
        let row = self.with(false, |tasks| tasks.get(&(scope.to_owned(), id.to_owned())).cloned());
        Box::pin(std::future::ready(Ok(row)))
    }

    fn list<'a>(
        &'a self,
        scope: &'a str,
        after: Option<(u64, String)>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRow>, TaskStoreError>> {
        let mut rows: Vec<TaskRow> = self.with(true, |tasks| {
            tasks
                .iter()
                .filter(|((s, _), r)| {
                    s == scope && after.as_ref().is_none_or(|(ms, id)| (r.created_ms, &r.id) < (*ms, id))
                })
                .map(|(_, r)| head(r))
                .collect()
        });
        rows.sort_by(|a, b| (b.created_ms, &b.id).cmp(&(a.created_ms, &a.id)));
        rows.truncate(limit);
        Box::pin(std::future::ready(Ok(rows)))
    }

    fn set_status<'a>(
        &'a self,
        scope: &'a str,
        id: &'a str,
        status: TaskStatus,
        message: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, TaskStoreError>> {
        let set = self.update(scope, id, status, message, None);
        Box::pin(std::future::ready(Ok(set)))
    }

    fn finish<'a>(
        &'a self,
        scope: &'a str,
        id: &'a str,
        status: TaskStatus,
        message: Option<&'a str>,
        result: &'a str,
    ) -> BoxFuture<'a, Result<bool, TaskStoreError>> {
        let ended = self.update(scope, id, status, message, Some(result));
        Box::pin(std::future::ready(Ok(ended)))
    }

    fn renew<'a>(&'a self, scope: &'a str, id: &'a str) -> BoxFuture<'a, Result<Option<TaskStatus>, TaskStoreError>> {
        let status = self.with(false, |tasks| tasks.get(&(scope.to_owned(), id.to_owned())).map(|r| r.status));
        Box::pin(std::future::ready(Ok(status)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now<T>(future: impl std::future::Future<Output = T>) -> T {
        let mut future = std::pin::pin!(future);
        match future.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
            std::task::Poll::Ready(value) => value,
            std::task::Poll::Pending => panic!("the in-memory store never waits"),
        }
    }

    fn row(id: &str) -> TaskRow {
        TaskRow::new(id.into(), "sleep_ms".into(), now_ms(), 60_000, 1_000)
    }

    #[test]
    fn a_full_scope_makes_room_only_by_forgetting_its_oldest_ended_task() {
        let store = InMemoryTasks::default();
        assert_eq!(now(store.create("a", &row("t1"), 2)), Ok(Created::Yes));
        assert_eq!(now(store.create("a", &row("t2"), 2)), Ok(Created::Yes));
        // Another scope has its own bound.
        assert_eq!(now(store.create("b", &row("t1"), 2)), Ok(Created::Yes));
        assert_eq!(now(store.create("a", &row("t3"), 2)), Ok(Created::Full));
        assert_eq!(now(store.finish("a", "t2", TaskStatus::Completed, None, "{}")), Ok(true));
        assert_eq!(now(store.create("a", &row("t3"), 2)), Ok(Created::Yes));
        assert_eq!(now(store.get("a", "t2")), Ok(None));
        assert!(now(store.get("a", "t1")).expect("get").is_some());
        let listed: Vec<String> = now(store.list("a", None, 10)).expect("list").into_iter().map(|r| r.id).collect();
        assert_eq!(listed.len(), 2);
        assert_eq!(now(store.get("b", "t3")), Ok(None), "a scope sees only its own tasks");
        assert_eq!(now(store.create("a", &row("t4"), 0)), Ok(Created::Full), "0 keeps none");
    }

    #[test]
    fn the_first_end_wins_and_an_ended_task_changes_no_more() {
        let store = InMemoryTasks::default();
        now(store.create("a", &row("t1"), 10)).expect("create");
        assert_eq!(now(store.set_status("a", "t1", TaskStatus::InputRequired, Some("asked"))), Ok(true));
        assert_eq!(now(store.renew("a", "t1")), Ok(Some(TaskStatus::InputRequired)));
        assert_eq!(now(store.finish("a", "t1", TaskStatus::Cancelled, Some("by the client"), "{}")), Ok(true));
        assert_eq!(now(store.finish("a", "t1", TaskStatus::Completed, None, r#"{"late":1}"#)), Ok(false));
        assert_eq!(now(store.set_status("a", "t1", TaskStatus::Working, None)), Ok(false));
        let kept = now(store.get_with_result("a", "t1")).expect("get").expect("kept");
        assert_eq!((kept.status, kept.result.as_deref()), (TaskStatus::Cancelled, Some("{}")));
        assert_eq!(now(store.get("a", "t1")).expect("get").expect("kept").result, None, "a poll reads no result");
        assert_eq!(now(store.renew("a", "gone")), Ok(None));
    }

    #[test]
    fn an_ended_task_expires_after_its_ttl_and_a_minute_after_its_end() {
        let mut ended = row("t1");
        ended.status = TaskStatus::Completed;
        ended.created_ms = 0;
        ended.updated_ms = 1_000;
        assert!(!ended.expired(1_000 + KEPT_AFTER_END_MS));
        assert!(ended.expired(1_001 + KEPT_AFTER_END_MS));
        let running = TaskRow { status: TaskStatus::Working, ..ended };
        assert!(!running.expired(u64::MAX), "a running task is kept");
    }
}

#[cfg(test)]
mod paging {
    use super::*;

    #[test]
    fn a_list_pages_newest_first_from_its_cursor() {
        let store = InMemoryTasks::default();
        for (id, created) in [("t1", 1_000), ("t2", 1_001), ("t3", 1_002)] {
            let row = TaskRow::new(id.into(), "x".into(), created, 60_000, 500);
            let mut future = std::pin::pin!(store.create("a", &row, 10));
            let _ = future.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        }
        let page = |after: Option<(u64, String)>| {
            let mut future = std::pin::pin!(store.list("a", after, 2));
            match future.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
                std::task::Poll::Ready(rows) => {
                    rows.expect("list").into_iter().map(|r| (r.created_ms, r.id)).collect::<Vec<_>>()
                }
                std::task::Poll::Pending => panic!("the in-memory store never waits"),
            }
        };
        let first = page(None);
        assert_eq!(first, [(1_002, "t3".to_owned()), (1_001, "t2".to_owned())]);
        assert_eq!(page(first.last().cloned()), [(1_000, "t1".to_owned())]);
    }
}
