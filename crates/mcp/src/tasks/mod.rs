//! Tasks served (MCP 2025-11-25, "Tasks"): a client that asks for a task
//! when it calls a tool that offers one (`execution.taskSupport:
//! "optional"`: the tools that may run long or wait for a person, see
//! `catalog::runs_as_task`) gets the task at once, and then polls it
//! (`tasks/get`), reads its result (`tasks/result`, which waits for its
//! end), lists its scope's tasks (`tasks/list`) and cancels it
//! (`tasks/cancel`). The call runs as any other call does (the same
//! executor, hook, approval and cancellation), detached from the request
//! that made it; while it waits for the client's answer to an approval or
//! a question its status is `input_required`.
//!
//! A server's tasks are one scope (with `lovia serve`, its tenant): every
//! client of the server sees them, as every client of a tenant calls its
//! tools. They are kept where [`TaskOptions::store`] says, at most
//! [`TaskOptions::max_kept`] at once.

mod store;
pub(crate) mod wire;

pub use store::{
    Created, InMemoryTasks, KEPT_AFTER_END_MS, MAX_TASKS_IN_MEMORY, TaskRow, TaskStatus, TaskStore, TaskStoreError,
};
pub use wire::TaskWire;

use lovia_host::call::text;
use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams, ErrorCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The default of [`TaskOptions::max_kept`]: 100 tasks.
pub const DEFAULT_MAX_TASKS: usize = 100;

/// The longest a task is kept from its creation (`ttl`), whatever the
/// client asks: one hour, also the `ttl` of a client that names none.
pub const MAX_TASK_TTL: Duration = Duration::from_secs(3600);

/// The shortest `ttl` a task gets: a minute, so that a client that asks
/// for less still finds its result once the call ends.
pub const MIN_TASK_TTL: Duration = Duration::from_secs(60);

/// How often a client should poll a task (`pollInterval`): 500 ms.
pub const TASK_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// How many tasks one `tasks/list` page holds.
pub const TASKS_PAGE: usize = 100;

/// How often a running task tells its store that it still runs, and looks
/// whether it was cancelled elsewhere (another replica's `tasks/cancel`).
const RENEW_EVERY: Duration = Duration::from_secs(1);

/// The reason a cancelled task's call records, and its status message.
pub(crate) const CANCELLED_BY_CLIENT: &str = "cancelled by the client (tasks/cancel)";

/// Options of a server's tasks ([`McpOptions::tasks`](crate::McpOptions::tasks)).
#[derive(Clone)]
#[non_exhaustive]
pub struct TaskOptions {
    /// The most tasks the server keeps at once, running or ended (an ended
    /// one is kept until its `ttl` passes, and the oldest ended one makes
    /// room for a new task). 0 turns tasks off: no `tasks` capability, no
    /// `execution` on any tool. Default: [`DEFAULT_MAX_TASKS`].
    pub max_kept: usize,
    /// Where the tasks are kept, shared by the replicas of one service so
    /// any of them answers for a task. Default: this process's memory
    /// ([`InMemoryTasks`]).
    pub store: Option<Arc<dyn TaskStore>>,
}

impl Default for TaskOptions {
    fn default() -> Self {
        Self { max_kept: DEFAULT_MAX_TASKS, store: None }
    }
}

impl std::fmt::Debug for TaskOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskOptions").field("max_kept", &self.max_kept).field("store", &self.store.is_some()).finish()
    }
}

/// A server's tasks: its store, and the calls of them running here.
pub(crate) struct Tasks {
    store: Arc<dyn TaskStore>,
    /// The tenant, or "" for a server of none.
    scope: String,
    max: usize,
    /// The tasks running in this process, by id.
    running: Mutex<HashMap<String, CancellationToken>>,
    /// Woken when a task running here ends.
    ended: tokio::sync::Notify,
}

impl Tasks {
    pub(crate) fn new(options: &TaskOptions, tenant: Option<&str>) -> Self {
        Self {
            store: options.store.clone().unwrap_or_else(|| Arc::new(InMemoryTasks::default())),
            scope: tenant.unwrap_or_default().to_owned(),
            max: options.max_kept,
            running: Mutex::default(),
            ended: tokio::sync::Notify::new(),
        }
    }

    /// Whether the server offers tasks.
    pub(crate) fn on(&self) -> bool {
        self.max > 0
    }

    /// Keeps a new running task of `tool`, kept for `ttl_ms` (clamped to
    /// [`MIN_TASK_TTL`]..[`MAX_TASK_TTL`]; none asked: the most).
    pub(crate) async fn create(&self, tool: &str, ttl_ms: Option<u64>) -> Result<TaskRow, ErrorData> {
        let ttl = ttl_ms.map_or(MAX_TASK_TTL, Duration::from_millis).clamp(MIN_TASK_TTL, MAX_TASK_TTL);
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)
            .map_err(|e| ErrorData::internal_error(format!("no randomness for a task id: {e}"), None))?;
        let row = TaskRow::new(
            format!("task-{}", hex::encode(bytes)),
            tool.to_owned(),
            store::now_ms(),
            millis(ttl),
            millis(TASK_POLL_INTERVAL),
        );
        match self.store.create(&self.scope, &row, self.max).await {
            Ok(Created::Yes) => Ok(row),
            Ok(_) => Err(ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                format!(
                    "{} tasks are kept already and none of them has ended; wait for one to end, or cancel one",
                    self.max
                ),
                None,
            )),
            Err(e) => Err(store_failed(&e)),
        }
    }

    /// Runs `call` as task `row`, detached: `cancel` is the call's own
    /// token, cancelled by `tasks/cancel` here or (seen at the next
    /// renewal) on another replica.
    pub(crate) fn spawn(
        self: &Arc<Self>,
        row: &TaskRow,
        cancel: CancellationToken,
        call: impl Future<Output = Result<CallToolResponse, ErrorData>> + Send + 'static,
    ) {
        let id = row.id.clone();
        self.running.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), cancel.clone());
        let tasks = self.clone();
        tokio::spawn(async move {
            // The call on a task of its own: one that panics ends its task
            // as failed instead of leaving it `working` for ever.
            let call = tokio::spawn(call);
            let answer = tokio::select! {
                joined = call => joined.unwrap_or_else(|e| {
                    tracing::warn!(task = %id, error = %e, "a task's call stopped abnormally");
                    Err(ErrorData::internal_error("the call stopped abnormally", None))
                }),
                () = tasks.renew(&id, &cancel) => unreachable_renewal(),
            };
            tasks.finish(&id, answer).await;
            tasks.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            tasks.ended.notify_waiters();
        });
    }

    /// Tells the store every [`RENEW_EVERY`] that the task still runs
    /// here, and cancels its call once the store says it ended (a cancel
    /// elsewhere) or forgot it. Never returns.
    async fn renew(&self, id: &str, cancel: &CancellationToken) {
        loop {
            tokio::time::sleep(RENEW_EVERY).await;
            match self.store.renew(&self.scope, id).await {
                Ok(Some(status)) if !status.is_terminal() => {}
                Ok(_) => cancel.cancel(),
                Err(e) => tracing::warn!(task = %id, error = %e, "cannot renew a task; retrying"),
            }
        }
    }

    /// Records how the call ended; a task cancelled meanwhile keeps its
    /// cancel (the first end wins). A store that fails is asked again
    /// three times (after 100, 400 and 1,600 ms), as a run's end is.
    async fn finish(&self, id: &str, answer: Result<CallToolResponse, ErrorData>) {
        let (status, message, result) = match answer {
            Ok(CallToolResponse::Complete(mut result)) => {
                result.result_type = None;
                (TaskStatus::Completed, None, serde_json::to_value(result).unwrap_or(Value::Null))
            }
            Ok(_) => (
                TaskStatus::Failed,
                Some("the call answered with something other than a result".to_owned()),
                json!({"code": ErrorCode::INTERNAL_ERROR.0, "message": "the call answered with something other than a result"}),
            ),
            Err(e) => (
                TaskStatus::Failed,
                Some(e.message.to_string()),
                json!({"code": e.code.0, "message": e.message, "data": e.data}),
            ),
        };
        let result = result.to_string();
        for pause in [0, 100, 400, 1_600] {
            tokio::time::sleep(Duration::from_millis(pause)).await;
            match self.store.finish(&self.scope, id, status, message.as_deref(), &result).await {
                Ok(_) => return,
                Err(e) => tracing::warn!(task = %id, error = %e, "cannot record a task's end"),
            }
        }
    }

    /// Marks a running task as waiting for its client, or working again.
    pub(crate) async fn set_status(&self, id: &str, status: TaskStatus, message: Option<&str>) {
        if let Err(e) = self.store.set_status(&self.scope, id, status, message).await {
            tracing::warn!(task = %id, error = %e, "cannot record a task's status");
        }
    }

    async fn row(&self, id: &str) -> Result<TaskRow, ErrorData> {
        known(id, self.store.get(&self.scope, id).await)
    }

    /// The task with its result (an ended one's, read once).
    async fn row_with_result(&self, id: &str) -> Result<TaskRow, ErrorData> {
        known(id, self.store.get_with_result(&self.scope, id).await)
    }
}

/// A store's answer for task `id`, as the client reads it.
fn known(id: &str, read: Result<Option<TaskRow>, TaskStoreError>) -> Result<TaskRow, ErrorData> {
    match read {
        Ok(Some(row)) => Ok(row),
        Ok(None) => Err(ErrorData::invalid_params(format!("unknown task {id:?} (never made here, or expired)"), None)),
        Err(e) => Err(store_failed(&e)),
    }
}

impl Tasks {
    /// `tasks/get`: the task.
    pub(crate) async fn get(&self, id: &str) -> Result<Value, ErrorData> {
        Ok(task_json(&self.row(id).await?))
    }

    /// `tasks/list`: a page of the scope's tasks, newest first, at most
    /// [`TASKS_PAGE`]; `nextCursor` names the next page.
    pub(crate) async fn list(&self, cursor: Option<&str>) -> Result<Value, ErrorData> {
        let after = match cursor {
            None => None,
            Some(c) => Some(
                parse_cursor(c)
                    .ok_or_else(|| ErrorData::invalid_params(format!("unknown tasks/list cursor {c:?}"), None))?,
            ),
        };
        let rows = self.store.list(&self.scope, after, TASKS_PAGE + 1).await.map_err(|e| store_failed(&e))?;
        let more = rows.len() > TASKS_PAGE;
        let page = &rows[..rows.len().min(TASKS_PAGE)];
        let mut answer = json!({"tasks": page.iter().map(task_json).collect::<Vec<_>>()});
        if let (true, Some(last), Some(answer)) = (more, page.last(), answer.as_object_mut()) {
            answer.insert("nextCursor".into(), json!(format!("{}:{}", last.created_ms, last.id)));
        }
        Ok(answer)
    }

    /// `tasks/cancel`: the task's status is `cancelled` before the answer,
    /// and its call stops (here at once; on another replica at its next
    /// renewal). An ended task is a `-32602`.
    pub(crate) async fn cancel(&self, id: &str) -> Result<Value, ErrorData> {
        let row = self.row(id).await?;
        if row.status.is_terminal() {
            return Err(ErrorData::invalid_params(
                format!("task {id:?} has ended already ({}); it cannot be cancelled", row.status.as_str()),
                None,
            ));
        }
        let result = CallToolResult::error(vec![ContentBlock::text(text::RUN_CANCELLED)]);
        let result = serde_json::to_value(result).unwrap_or(Value::Null).to_string();
        let ended = self
            .store
            .finish(&self.scope, id, TaskStatus::Cancelled, Some(CANCELLED_BY_CLIENT), &result)
            .await
            .map_err(|e| store_failed(&e))?;
        if let Some(cancel) = self.running.lock().unwrap_or_else(|p| p.into_inner()).get(id) {
            cancel.cancel();
        }
        let row = self.row(id).await?;
        if !ended && row.status != TaskStatus::Cancelled {
            return Err(ErrorData::invalid_params(
                format!("task {id:?} has ended already ({}); it cannot be cancelled", row.status.as_str()),
                None,
            ));
        }
        Ok(task_json(&row))
    }

    /// `tasks/result`: once the task has ended, what its call answered (a
    /// failed task's error as the error), with the task named in `_meta`.
    /// Waits for the end, as long as the client waits.
    pub(crate) async fn result(&self, id: &str, gone: &CancellationToken) -> Result<Value, ErrorData> {
        loop {
            let ended = self.ended.notified();
            let row = self.row(id).await?;
            if row.status.is_terminal() {
                // Read once, at the end: the polls above carry no result.
                let row = self.row_with_result(id).await?;
                let stored: Value =
                    row.result.as_deref().and_then(|r| serde_json::from_str(r).ok()).unwrap_or(Value::Null);
                if row.status == TaskStatus::Failed {
                    let code = stored.get("code").and_then(Value::as_i64).and_then(|c| i32::try_from(c).ok());
                    let message = stored.get("message").and_then(Value::as_str).unwrap_or("the task failed").to_owned();
                    return Err(ErrorData::new(
                        ErrorCode(code.unwrap_or(ErrorCode::INTERNAL_ERROR.0)),
                        message,
                        stored.get("data").cloned().filter(|d| !d.is_null()),
                    ));
                }
                let mut result = match stored {
                    Value::Object(o) => o,
                    _ => return Err(ErrorData::internal_error(format!("task {id:?} has no readable result"), None)),
                };
                let meta = result.entry("_meta").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert(RELATED_TASK.into(), json!({"taskId": id}));
                }
                return Ok(Value::Object(result));
            }
            // Woken at once when it ends here; polled when it runs elsewhere.
            tokio::select! {
                () = ended => {}
                () = tokio::time::sleep(TASK_POLL_INTERVAL) => {}
                () = gone.cancelled() => {
                    return Err(ErrorData::new(ErrorCode::INVALID_REQUEST, "the request was cancelled", None));
                }
            }
        }
    }
}

impl Tasks {
    /// The task as 2026-07-28 (SEP-2663) spells it, with its result or
    /// error inline once it has ended (`tasks/get`).
    pub(crate) async fn detailed(&self, id: &str) -> Result<rmcp::model::DetailedTask, ErrorData> {
        use rmcp::model::TaskPayload;
        let row = self.row_with_result(id).await?;
        let stored = || match row.result.as_deref().and_then(|r| serde_json::from_str::<Value>(r).ok()) {
            Some(Value::Object(o)) => o,
            _ => serde_json::Map::new(),
        };
        let payload = match row.status {
            TaskStatus::Completed => TaskPayload::Completed { result: stored() },
            TaskStatus::Failed => TaskPayload::Failed { error: stored() },
            TaskStatus::Cancelled => TaskPayload::Cancelled,
            TaskStatus::InputRequired => TaskPayload::InputRequired { input_requests: Default::default() },
            TaskStatus::Working => TaskPayload::Working,
        };
        Ok(rmcp::model::DetailedTask::new(sep2663_task(&row), payload))
    }
}

/// A task as 2026-07-28 (SEP-2663) spells it: `ttlMs`, `pollIntervalMs`.
pub(crate) fn sep2663_task(row: &TaskRow) -> rmcp::model::Task {
    let status = match row.status {
        TaskStatus::Working => rmcp::model::TaskStatus::Working,
        TaskStatus::InputRequired => rmcp::model::TaskStatus::InputRequired,
        TaskStatus::Completed => rmcp::model::TaskStatus::Completed,
        TaskStatus::Failed => rmcp::model::TaskStatus::Failed,
        TaskStatus::Cancelled => rmcp::model::TaskStatus::Cancelled,
    };
    let task = rmcp::model::Task::new(row.id.clone(), status, rfc3339(row.created_ms), rfc3339(row.updated_ms))
        .with_ttl_ms(row.ttl_ms)
        .with_poll_interval_ms(row.poll_ms);
    match &row.message {
        Some(message) => task.with_status_message(message.clone()),
        None => task,
    }
}

/// A task's status, set from inside its call (call.rs, question.rs).
#[derive(Clone)]
pub(crate) struct TaskMark {
    pub(crate) tasks: Arc<Tasks>,
    pub(crate) id: String,
}

impl TaskMark {
    /// The call waits for its client: `input_required`, saying what for.
    pub(crate) async fn input_required(&self, message: &str) {
        self.tasks.set_status(&self.id, TaskStatus::InputRequired, Some(message)).await;
    }

    /// The client answered: `working` again.
    pub(crate) async fn working(&self) {
        self.tasks.set_status(&self.id, TaskStatus::Working, None).await;
    }

    /// Names the task in the `_meta` of a request it makes of the client,
    /// as the revision asks of every message of a task.
    pub(crate) fn relate(&self, params: &mut ElicitRequestParams) {
        if let ElicitRequestParams::FormElicitationParams { meta, .. } = params {
            meta.get_or_insert_with(Default::default).insert(RELATED_TASK.into(), json!({"taskId": self.id}));
        }
    }
}

/// The `_meta` key that names a message's task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The position a `tasks/list` cursor (`<created_ms>:<id>`) names.
fn parse_cursor(cursor: &str) -> Option<(u64, String)> {
    let (ms, id) = cursor.split_once(':')?;
    Some((ms.parse().ok()?, id.to_owned()))
}

/// A task as 2025-11-25 spells it.
fn task_json(row: &TaskRow) -> Value {
    let mut task = json!({
        "taskId": row.id,
        "status": row.status.as_str(),
        "createdAt": rfc3339(row.created_ms),
        "lastUpdatedAt": rfc3339(row.updated_ms),
        "ttl": row.ttl_ms,
        "pollInterval": row.poll_ms,
    });
    if let (Some(message), Some(task)) = (&row.message, task.as_object_mut()) {
        task.insert("statusMessage".into(), json!(message));
    }
    task
}

/// The `{"task": …}` a `tools/call` that asked for a task answers.
pub(crate) fn created_json(row: &TaskRow) -> Value {
    json!({"task": task_json(row)})
}

fn rfc3339(ms: u64) -> String {
    let at = i64::try_from(ms).ok().and_then(chrono::DateTime::from_timestamp_millis).unwrap_or_default();
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn store_failed(e: &TaskStoreError) -> ErrorData {
    tracing::warn!(error = %e, "the task store failed");
    ErrorData::internal_error("the task store is unreachable; retry later", None)
}

/// `renew` never returns; this keeps the select total without a panic.
fn unreachable_renewal() -> Result<CallToolResponse, ErrorData> {
    Err(ErrorData::internal_error("the task's renewal ended", None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_reads_as_2025_11_25_spells_it() {
        let mut row = TaskRow::new("task-1".into(), "sleep_ms".into(), 1_700_000_000_123, 60_000, 500);
        row.message = Some("waiting".into());
        assert_eq!(
            task_json(&row),
            json!({
                "taskId": "task-1",
                "status": "working",
                "statusMessage": "waiting",
                "createdAt": "2023-11-14T22:13:20.123Z",
                "lastUpdatedAt": "2023-11-14T22:13:20.123Z",
                "ttl": 60_000,
                "pollInterval": 500,
            })
        );
    }

    #[tokio::test]
    async fn a_cancelled_task_stays_cancelled_and_its_result_says_so() {
        let tasks = Arc::new(Tasks::new(&TaskOptions::default(), None));
        let row = tasks.create("sleep_ms", Some(1)).await.expect("created");
        assert_eq!(row.ttl_ms, millis(MIN_TASK_TTL), "a ttl below the least is raised to it");
        let cancel = CancellationToken::new();
        let stopped = cancel.clone();
        tasks.spawn(&row, cancel, async move {
            stopped.cancelled().await;
            Ok(CallToolResult::success(vec![ContentBlock::text("too late")]).into())
        });
        let cancelled = tasks.cancel(&row.id).await.expect("cancelled");
        assert_eq!(cancelled["status"], "cancelled");
        let result = tasks.result(&row.id, &CancellationToken::new()).await.expect("a result");
        assert_eq!(result["isError"], true);
        assert_eq!(result["content"][0]["text"], text::RUN_CANCELLED);
        assert_eq!(result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], row.id.as_str());
        let again = tasks.cancel(&row.id).await.expect_err("ended");
        assert_eq!(again.code, ErrorCode::INVALID_PARAMS);
        let unknown = tasks.get("task-none").await.expect_err("unknown");
        assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);
    }

    #[tokio::test]
    async fn a_failed_call_is_a_failed_task_whose_result_is_its_error() {
        let tasks = Arc::new(Tasks::new(&TaskOptions::default(), Some("acme")));
        let row = tasks.create("echo", None).await.expect("created");
        assert_eq!(row.ttl_ms, millis(MAX_TASK_TTL));
        tasks.spawn(&row, CancellationToken::new(), async { Err(ErrorData::invalid_params("bad", None)) });
        let error = tasks.result(&row.id, &CancellationToken::new()).await.expect_err("failed");
        assert_eq!((error.code, error.message.as_ref()), (ErrorCode::INVALID_PARAMS, "bad"));
        assert_eq!(tasks.get(&row.id).await.expect("kept")["status"], "failed");
        assert_eq!(tasks.list(None).await.expect("listed")["tasks"][0]["taskId"], row.id.as_str());
        assert_eq!(tasks.list(Some("x")).await.expect_err("a bad cursor").code, ErrorCode::INVALID_PARAMS);
    }

    #[tokio::test]
    async fn tasks_past_the_bound_are_refused_and_zero_turns_them_off() {
        let options = TaskOptions { max_kept: 1, store: None };
        let tasks = Tasks::new(&options, None);
        tasks.create("a", None).await.expect("first");
        let full = tasks.create("a", None).await.expect_err("second");
        assert_eq!(full.code, ErrorCode::INVALID_REQUEST);
        assert!(full.message.contains("1 tasks are kept already"), "{}", full.message);
        assert!(!Tasks::new(&TaskOptions { max_kept: 0, store: None }, None).on());
    }
}
