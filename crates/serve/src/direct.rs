//! The direct call route, `POST /api/tools/{name}/call`: one call of a
//! tenant's tool as a model's call would run (the executor's checks,
//! timeout, rendering and truncation), admitted by the tenant's quotas, over
//! the tools every door of the tenant shares (`offer`). Optional headers:
//!
//! - `x-lovia-session: <id>`: the session its instance and store belong to;
//! - `x-lovia-approval: wait`: a call that needs approval waits for a
//!   person (listed by `GET /api/approvals`, decided by
//!   `POST /api/chat/approve`, at most `approval_timeout_secs`); without it
//!   nobody is asked and such a call is denied;
//! - `x-lovia-call-id: <id>`: the id `DELETE /api/tools/calls/{id}` cancels
//!   the call by while it runs (otherwise `http_<n>`, which a streamed answer
//!   says first);
//! - `Accept: text/event-stream`: the answer streams: `call_started`
//!   (`call_id`), each `tool_progress` (`message`, at most one per
//!   [`PROGRESS_EVERY`]), then `tool_result` with the fields of the JSON
//!   answer, or `error` (`status`, `error`) when the quota or a running
//!   call of the same id refuses it.

use crate::Tenant;
use crate::auth::Caller;
use crate::response::error;
use crate::sse::{Reader, frame};
use crate::{chat, quota};
use axum::extract::Path as UrlPath;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use lovia_host::Executor;
use lovia_host::call::ErrorKind;
use lovia_host::call::text;
use lovia_host::exec::{CancelToken, EventSink, RunState, ToolCall, ToolEvent};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Progress messages reach a streamed answer at most this often; the
/// latest is kept (as over MCP).
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// The direct calls of a tenant in flight, by id, for their cancellation.
/// Bounded by the tenant's `max_concurrent_calls`: a call is listed only
/// once its quota admitted it.
#[derive(Debug, Default)]
pub(crate) struct DirectCalls {
    running: Mutex<HashMap<String, CancelToken>>,
}

/// A listed call; unlisted when dropped.
struct Listed<'a> {
    calls: &'a DirectCalls,
    id: String,
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        self.calls.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}

impl DirectCalls {
    /// Lists call `id` with `cancel`; `None` when a call of that id runs.
    fn list(&self, id: &str, cancel: &CancelToken) -> Option<Listed<'_>> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.contains_key(id) {
            return None;
        }
        running.insert(id.to_owned(), cancel.clone());
        Some(Listed { calls: self, id: id.to_owned() })
    }

    /// Cancels call `id`; false when none of that id runs.
    fn cancel(&self, id: &str) -> bool {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        match running.get(id) {
            Some(cancel) => {
                cancel.cancel(Some("cancelled through DELETE /api/tools/calls"));
                true
            }
            None => false,
        }
    }
}

/// Why a direct call is refused before it runs, or cannot be cancelled.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DirectError {
    /// An id header is not an id.
    #[error("{header} must be 1-128 letters, digits, _ . or -")]
    BadId { header: &'static str },
    /// `x-lovia-approval` is not `wait`.
    #[error("x-lovia-approval is {value}; the one value is \"wait\" (wait for a decision through /api/approvals)")]
    BadApproval { value: String },
    /// The tenant has no such tool.
    #[error("no tool named {name}")]
    NoTool { name: String },
    /// `ask_human`, which asks the person in a chat.
    #[error(
        "ask_human has no direct call: it asks the person in a chat (POST /api/chat), who answers with POST /api/chat/answer"
    )]
    AskHuman,
    /// A call of the same `x-lovia-call-id` runs.
    #[error("a call with x-lovia-call-id {id} is running; name this one differently")]
    IdInUse { id: String },
    /// The tenant's quota refused it.
    #[error("{0}")]
    Quota(String),
    /// No call of the tenant has the id to cancel.
    #[error("no direct call {id} is running")]
    NotRunning { id: String },
}

impl DirectError {
    fn status(&self) -> StatusCode {
        match self {
            Self::BadId { .. } | Self::BadApproval { .. } => StatusCode::BAD_REQUEST,
            Self::NoTool { .. } | Self::AskHuman | Self::NotRunning { .. } => StatusCode::NOT_FOUND,
            Self::IdInUse { .. } => StatusCode::CONFLICT,
            Self::Quota(_) => StatusCode::TOO_MANY_REQUESTS,
        }
    }
}

impl IntoResponse for DirectError {
    fn into_response(self) -> Response {
        error(self.status(), &self.to_string())
    }
}

/// A request header's value, checked as a session id is: `None` without it.
fn id_header(headers: &HeaderMap, header: &'static str) -> Result<Option<String>, DirectError> {
    match headers.get(header) {
        None => Ok(None),
        Some(value) => match value.to_str().ok().filter(|id| chat::valid_session_id(id)) {
            Some(id) => Ok(Some(id.to_owned())),
            None => Err(DirectError::BadId { header }),
        },
    }
}

/// `x-lovia-approval`: whether the call waits for a person's decision.
fn waits(headers: &HeaderMap) -> Result<bool, DirectError> {
    match headers.get("x-lovia-approval").map(|v| v.to_str()) {
        None => Ok(false),
        Some(Ok("wait")) => Ok(true),
        Some(Ok(other)) => Err(DirectError::BadApproval { value: format!("{other:?}") }),
        Some(Err(_)) => Err(DirectError::BadApproval { value: "not visible ASCII".into() }),
    }
}

/// `POST /api/tools/{name}/call` (the module's comment says what it takes).
pub(crate) async fn call_tool(
    caller: Caller,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let direct = match prepare(&caller, name, &headers, body).await {
        Ok(direct) => direct,
        Err(refused) => return refused.into_response(),
    };
    let streamed = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"));
    if streamed {
        return stream(caller, direct);
    }
    match direct.run(caller.tenant(), caller.service(), &EventSink::none()).await {
        Ok(body) => Json(body).into_response(),
        Err(refused) => refused.into_response(),
    }
}

/// The call a request asks for, checked, over the tenant's tools now.
async fn prepare(caller: &Caller, name: String, headers: &HeaderMap, body: String) -> Result<Direct, DirectError> {
    // The session id keys warm instances and the session store: only the
    // ids a chat may have, never arbitrary bytes of any length.
    let session_id = id_header(headers, "x-lovia-session")?;
    let named = id_header(headers, "x-lovia-call-id")?;
    let wait = waits(headers)?;
    let (service, tenant) = (caller.service(), caller.tenant());
    tenant.follow_sources().await;
    let executor = tenant.direct_executor();
    if executor.tools().get(&name).is_none() {
        if name == lovia_host::human::ASK_HUMAN && tenant.agent.ask_human {
            return Err(DirectError::AskHuman);
        }
        return Err(DirectError::NoTool { name });
    }
    let n = service.inner.calls.fetch_add(1, Ordering::Relaxed);
    let id = named.unwrap_or_else(|| format!("http_{n}"));
    let call = ToolCall::new(id, name, if body.trim().is_empty() { "{}".into() } else { body });
    let run =
        RunState { run_id: format!("serve_{n}"), session_id, tenant: Some(tenant.name.clone()), ..RunState::default() };
    // A `traceparent` makes the call's span part of the client's trace.
    let trace = tenant.telemetry.is_on().then(|| lovia_telemetry::propagate::from_headers(headers));
    Ok(Direct { executor, call, run, wait, n, trace })
}

/// Runs `direct` on a task of its own, which the reader's disconnect
/// cancels, and streams its events as they come.
fn stream(caller: Caller, direct: Direct) -> Response {
    let cancel = direct.run.cancel.clone();
    let (tx, reader) = Reader::new(move || cancel.cancel(Some("the client disconnected")));
    let _ = tx.try_send(frame("call_started", &json!({ "call_id": direct.call.id })));
    let keep_alive = caller.service().inner.limits.sse_keep_alive;
    tokio::spawn(async move {
        let progress = Progress::new(tx.clone());
        let sink = {
            let progress = progress.clone();
            EventSink::from_fn(move |event| {
                if let ToolEvent::ToolProgress { message, .. } = event {
                    progress.offer(message);
                }
            })
        };
        let answer = direct.run(caller.tenant(), caller.service(), &sink).await;
        progress.flush();
        let (event, data) = match answer {
            Ok(body) => ("tool_result", body),
            Err(refused) => ("error", json!({ "status": refused.status().as_u16(), "error": refused.to_string() })),
        };
        let _ = tx.send(frame(event, &data)).await;
    });
    reader.into_response(keep_alive)
}

/// One admitted direct call, ready to run.
struct Direct {
    executor: Executor,
    call: ToolCall,
    run: RunState,
    wait: bool,
    n: u64,
    /// The client's trace context, when telemetry is on.
    trace: Option<lovia_telemetry::Context>,
}

impl Direct {
    /// Runs it under the tenant's quota and answers with its JSON body; a
    /// refusal (the quota, a call id in use) is the response to send.
    async fn run(self, tenant: &Tenant, service: &crate::Service, events: &EventSink) -> Result<Value, DirectError> {
        let Direct { mut executor, call, run, wait, n, trace } = self;
        let fuel_cap = quota::fuel_cap_of(executor.tools().get(&call.name));
        let admitted = match tenant.quota.admit(fuel_cap).await {
            Ok(admitted) => admitted,
            Err(refusal) => return Err(DirectError::Quota(refusal.message().to_owned())),
        };
        // Listed once admitted, so that the quota bounds the list.
        let Some(_listed) = tenant.direct_calls.list(&call.id, &run.cancel) else {
            tenant.quota.end(admitted).await;
            return Err(DirectError::IdInUse { id: call.id });
        };
        // Listed as session `direct-<n>` while it waits for a decision.
        let _waiting = wait.then(|| {
            let settings = executor
                .settings()
                .clone()
                .with_approval_handler(Some(Arc::new(chat::AwaitDecision(service.inner.limits.approval_timeout))));
            executor = Executor::new(executor.tools().clone(), settings);
            tenant.mcp.register_direct(format!("direct-{n}"), run.approvals.clone())
        });
        let started = Instant::now();
        let result = lovia_telemetry::within(trace.as_ref(), executor.call(&call, &run, events)).await;
        tenant.quota.end(admitted).await;
        let (output, error_kind, parts, tool_error_kind) = match result {
            Ok(entry) => (entry.output, entry.error_kind, entry.parts, entry.tool_error_kind),
            // A tool that cancels the run leaves no result (docs/semantics.md D8 answers it so).
            Err(_) => (text::RUN_CANCELLED.to_owned(), Some(ErrorKind::Cancelled), None, None),
        };
        service.inner.metrics.record_call(
            &tenant.name,
            &call.name,
            started.elapsed(),
            error_kind,
            tool_error_kind.as_deref(),
        );
        let mut body = json!({ "output": output, "is_error": error_kind.is_some() });
        lovia_runner::wire::attach_outcome(&mut body, error_kind, tool_error_kind.as_deref(), parts.as_deref());
        Ok(body)
    }
}

/// `DELETE /api/tools/calls/{id}`: cancels the tenant's direct call `id`.
pub(crate) async fn cancel_call(caller: Caller, UrlPath(id): UrlPath<String>) -> Response {
    if caller.tenant().direct_calls.cancel(&id) {
        Json(json!({ "cancelled": id })).into_response()
    } else {
        DirectError::NotRunning { id }.into_response()
    }
}

/// A streamed call's progress: the first message at once, then at most one
/// per [`PROGRESS_EVERY`], the latest kept; what is kept goes out before
/// the result.
#[derive(Clone)]
struct Progress {
    tx: tokio::sync::mpsc::Sender<axum::response::sse::Event>,
    state: Arc<Mutex<(Option<Instant>, Option<String>)>>,
}

impl Progress {
    fn new(tx: tokio::sync::mpsc::Sender<axum::response::sse::Event>) -> Self {
        Self { tx, state: Arc::new(Mutex::new((None, None))) }
    }

    fn offer(&self, message: String) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let due = state.0.is_none_or(|sent| sent.elapsed() >= PROGRESS_EVERY);
        if due {
            state.0 = Some(Instant::now());
            state.1 = None;
            // A reader too far behind loses progress, never the result.
            let _ = self.tx.try_send(frame("tool_progress", &json!({ "message": message })));
        } else {
            state.1 = Some(message);
        }
    }

    fn flush(&self) {
        let kept = self.state.lock().unwrap_or_else(|p| p.into_inner()).1.take();
        if let Some(message) = kept {
            let _ = self.tx.try_send(frame("tool_progress", &json!({ "message": message })));
        }
    }
}
