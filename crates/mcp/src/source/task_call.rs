//! A call of a tool that runs only as a task (the 2025-11-25 revision's
//! `execution.taskSupport: "required"`): `tools/call` with a `task`
//! parameter answers with a task, which lovia polls with `tasks/get` until
//! it ends and then reads with `tasks/result`. A call lovia gives up (its
//! timeout, a cancel) cancels the task (`tasks/cancel`), or the request
//! still in flight (`notifications/cancelled`), through [`Abandon`].
//!
//! Why by hand: rmcp 3.11 types the tasks of a later proposal (SEP-2663:
//! `ttlMs`, an inline result, no `tasks/result`), not this revision's, so
//! the requests go as rmcp's custom requests and their answers are read as
//! JSON. A server that ignores `task` and answers the call at once is
//! answered as a plain call.

use super::progress::ProgressRoutes;
use lovia_host::ProgressSink;
use rmcp::RoleClient;
use rmcp::model::{
    CallToolResult, CancelledNotification, CancelledNotificationParam, ClientNotification, ClientRequest,
    CustomRequest, JsonObject, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// How long the server is asked to keep the task and its result: 1 hour
/// (the spec's `ttl`, from its creation). lovia's own bound on the call is
/// the server's `timeout_ms`, which ends the polling and cancels the task.
pub(crate) const TASK_TTL: Duration = Duration::from_secs(3600);
/// The wait between two polls when the server names none: 1 s (what the
/// TypeScript SDK's client waits).
const POLL_DEFAULT: Duration = Duration::from_secs(1);
/// The bounds put on the server's `pollInterval`: at least 50 ms, so a
/// server cannot make lovia poll it in a loop, and at most 5 s, so a call
/// does not outwait its end by much.
const POLL_MIN: Duration = Duration::from_millis(50);
const POLL_MAX: Duration = Duration::from_secs(5);
/// Longest task id lovia sends back: 256 bytes (the id is the server's).
const MAX_TASK_ID: usize = 256;
/// How long the cancel of an abandoned task may take: 5 s.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// Tells the server what lovia gave up on. Dropped before
/// [`Abandon::disarm`] (the call's future was dropped: it timed out or
/// was cancelled), it sends `tasks/cancel` for the task, or
/// `notifications/cancelled` for the request still in flight, on a task
/// of its own.
pub(super) struct Abandon {
    peer: Peer<RoleClient>,
    pending: Option<Pending>,
}

enum Pending {
    Request(RequestId),
    Task(String),
}

impl Abandon {
    /// For the request `id`, answered or not.
    pub(super) fn request(peer: Peer<RoleClient>, id: RequestId) -> Self {
        Self { peer, pending: Some(Pending::Request(id)) }
    }

    /// The request was answered with the task `id`: that is what to cancel now.
    fn task(&mut self, id: String) {
        self.pending = Some(Pending::Task(id));
    }

    /// Nothing is left to cancel.
    pub(super) fn disarm(&mut self) {
        self.pending = None;
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        let Some(pending) = self.pending.take() else { return };
        // Without a runtime (the process is ending) the server goes with it.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            match pending {
                Pending::Request(id) => {
                    let reason = Some("lovia's call ended (a timeout or a cancel)".to_owned());
                    let cancelled = CancelledNotification::new(CancelledNotificationParam::new(Some(id), reason));
                    let _ = peer.send_notification(ClientNotification::CancelledNotification(cancelled)).await;
                }
                Pending::Task(id) => {
                    let cancel = custom("tasks/cancel", json!({"taskId": id}));
                    if tokio::time::timeout(CANCEL_WAIT, peer.send_request(cancel)).await.is_err() {
                        tracing::debug!(task = %id, "the server did not answer tasks/cancel in time");
                    }
                }
            }
        });
    }
}

fn custom(method: &str, params: Value) -> ClientRequest {
    ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)))
}

/// A result as JSON, whichever type rmcp gave it.
fn raw(result: ServerResult) -> Value {
    match result {
        ServerResult::CustomResult(custom) => custom.0,
        other => serde_json::to_value(other).unwrap_or_default(),
    }
}

/// Why a task call failed: its session's request failed (the caller sorts
/// a broken session from a server's error), or the server's answers were
/// not what a task's are.
pub(super) enum TaskFailed {
    Request(ServiceError),
    Answered(String),
}

impl From<ServiceError> for TaskFailed {
    fn from(e: ServiceError) -> Self {
        Self::Request(e)
    }
}

/// A task's status and wait, read from a `tasks/get` answer (the task's
/// fields) or a `tools/call` one (`{"task": {...}}`).
struct Seen {
    status: String,
    poll: Option<Duration>,
    message: Option<String>,
}

fn seen(task: &Value) -> Result<Seen, TaskFailed> {
    let status = task
        .get("status")
        .and_then(Value::as_str)
        .ok_or_else(|| TaskFailed::Answered("the server's task has no status".into()))?
        .to_owned();
    // `pollIntervalMs`: how rmcp writes back a `tasks/get` answer it typed
    // as the later proposal's.
    let poll = ["pollInterval", "pollIntervalMs"]
        .iter()
        .find_map(|key| task.get(*key).and_then(Value::as_u64))
        .map(Duration::from_millis);
    let message = task.get("statusMessage").and_then(Value::as_str).map(|m| m.chars().take(300).collect());
    Ok(Seen { status, poll, message })
}

/// Sends `request` and waits for its answer; dropped meanwhile (the call
/// was given up), it tells the server with `notifications/cancelled`, which
/// also frees rmcp's record of the request.
async fn ask(peer: &Peer<RoleClient>, request: ClientRequest) -> Result<ServerResult, ServiceError> {
    let handle = peer.send_request_with_option(request, PeerRequestOptions::no_options()).await?;
    let mut abandon = Abandon::request(peer.clone(), handle.id.clone());
    let answer = handle.await_response().await;
    abandon.disarm();
    answer
}

/// Calls `raw_name` as a task and waits for its result (module doc); the
/// server's progress for it goes to `progress` while the task lasts.
pub(super) async fn call_as_task(
    peer: &Peer<RoleClient>,
    raw_name: &str,
    arguments: JsonObject,
    meta: Option<JsonObject>,
    progress: Option<(&Arc<ProgressRoutes>, ProgressSink)>,
) -> Result<CallToolResult, TaskFailed> {
    let ttl = u64::try_from(TASK_TTL.as_millis()).unwrap_or(u64::MAX);
    let mut params = json!({"name": raw_name, "arguments": arguments, "task": {"ttl": ttl}});
    if let Some(meta) = meta {
        params["_meta"] = Value::Object(meta);
    }
    let handle = peer.send_request_with_option(custom("tools/call", params), PeerRequestOptions::no_options()).await?;
    let _route = progress.map(|(routes, sink)| routes.route(handle.progress_token.clone(), sink));
    let mut abandon = Abandon::request(peer.clone(), handle.id.clone());
    let answer = handle.await_response().await;
    abandon.disarm();
    let created = match answer? {
        // A server that runs the tool at once (it ignored `task`).
        ServerResult::CallToolResult(result) => return Ok(result),
        other => raw(other),
    };
    let Some(task) = created.get("task") else {
        return Err(TaskFailed::Answered("the server's answer is neither a tool result nor a task".into()));
    };
    let id = match task.get("taskId").and_then(Value::as_str) {
        Some(id) if !id.is_empty() && id.len() <= MAX_TASK_ID => id.to_owned(),
        _ => return Err(TaskFailed::Answered(format!("the server's task has no id of 1 to {MAX_TASK_ID} bytes"))),
    };
    // From here a call given up cancels the task.
    abandon.task(id.clone());
    let mut now = seen(task)?;
    let mut poll = POLL_DEFAULT;
    loop {
        poll = now.poll.unwrap_or(poll).clamp(POLL_MIN, POLL_MAX);
        match now.status.as_str() {
            // `input_required`: the result request is where the server asks.
            "completed" | "failed" | "input_required" => break,
            "working" => {}
            "cancelled" => {
                abandon.disarm();
                let why = now.message.map(|m| format!(": {m}")).unwrap_or_default();
                return Err(TaskFailed::Answered(format!("the server cancelled the task{why}")));
            }
            other => {
                return Err(TaskFailed::Answered(format!(
                    "the server's task has the status {:?}; the statuses are working, input_required, completed, failed and cancelled",
                    other.chars().take(40).collect::<String>()
                )));
            }
        }
        tokio::time::sleep(poll).await;
        now = seen(&raw(ask(peer, custom("tasks/get", json!({"taskId": id}))).await?))?;
    }
    let answer = ask(peer, custom("tasks/result", json!({"taskId": id}))).await;
    abandon.disarm();
    match answer? {
        ServerResult::CallToolResult(result) => Ok(result),
        other => serde_json::from_value(raw(other))
            .map_err(|_| TaskFailed::Answered("the server's task result is not a tool result".into())),
    }
}
