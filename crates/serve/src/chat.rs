//! `/api/chat`: runs of the tenant's agent streamed as SSE, their approvals
//! and cancellation, and their transcripts. A run belongs to one (tenant,
//! session); its events go to every connected reader; it survives readers
//! leaving, and is persisted so that it survives the process too.

use super::sse::{Reader, frame};
use super::{Service, Tenant, error, unauthorized};
use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use lovia_host::BoxFuture;
use lovia_host::CallContext;
use lovia_host::approval::{ApprovalChannel, ApprovalDecision, ApprovalHandler, ApprovalRequest, HandlerAnswer};
use lovia_host::exec::{CancelToken, RunState, ToolEvent};
use lovia_runner::{Agent, RunEvent, Runner, new_id, without_stalling};
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::mpsc;

/// A run in progress and its readers.
pub(crate) struct LiveRun {
    pub(crate) approvals: ApprovalChannel,
    cancel: CancelToken,
    /// One bounded queue per reader; a full one is dropped (see `sse`).
    readers: Mutex<Vec<mpsc::Sender<Event>>>,
    /// When each pending approval was asked for (the console shows how long
    /// it has waited and when it will be denied); removed when decided.
    asked: Mutex<HashMap<String, SystemTime>>,
    started: SystemTime,
}

impl LiveRun {
    /// When the approval of `call_id` was asked for; the run's start for
    /// one asked before this process (a resumed run re-asks it at once).
    pub(crate) fn asked_at(&self, call_id: &str) -> SystemTime {
        self.asked.lock().unwrap_or_else(|p| p.into_inner()).get(call_id).copied().unwrap_or(self.started)
    }

    /// Queues `event` for every reader; a reader whose queue is full or
    /// closed is dropped, which ends its stream (docs/operators.md, "Routes").
    fn send(&self, event: Event) {
        self.readers.lock().unwrap_or_else(|p| p.into_inner()).retain(|r| r.try_send(event.clone()).is_ok());
    }

    /// A new reader's stream; `replay` frames go first.
    fn subscribe(self: &Arc<Self>, replay: Vec<Event>) -> Reader {
        let live = Arc::downgrade(self);
        // A reader leaving decides nothing: its run's approvals stay pending
        // until decided, cancelled or timed out (docs/semantics.md D12).
        let (tx, reader) = Reader::new(move || {
            if let Some(live) = live.upgrade() {
                live.readers.lock().unwrap_or_else(|p| p.into_inner()).retain(|r| !r.is_closed());
            }
        });
        for f in replay {
            let _ = tx.try_send(f);
        }
        self.readers.lock().unwrap_or_else(|p| p.into_inner()).push(tx);
        reader
    }

    fn pending_frames(&self) -> Vec<Event> {
        self.approvals
            .pending()
            .iter()
            .map(|r| frame("approval_required", &json!({"id": r.call_id, "name": r.tool, "arguments": r.arguments})))
            .collect()
    }
}

/// Waits for an out-of-band decision (`/api/chat/approve`) up to the
/// configured timeout, then denies: runs never hang on an approval.
struct AwaitDecision(Duration);

impl ApprovalHandler for AwaitDecision {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        _ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<HandlerAnswer, String>> {
        Box::pin(async move {
            tokio::time::sleep(self.0).await;
            tracing::info!(call = %request.call_id, tool = %request.tool, "approval timed out: denied");
            Ok(HandlerAnswer::Deny)
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChatRequest {
    session_id: Option<String>,
    input: Option<String>,
    agent: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApproveRequest {
    session_id: String,
    call_id: String,
    decision: Decision,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Decision {
    Approve,
    Deny,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CancelRequest {
    session_id: String,
}

/// A refusal: its status and the message of its `{"error": …}` body.
pub(crate) struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        error(self.0, &self.1)
    }
}

/// The JSON body, or a 400 that says what is wrong with it.
fn parse<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, ApiError> {
    serde_json::from_str(body).map_err(|e| ApiError(StatusCode::BAD_REQUEST, format!("invalid request body: {e}")))
}

/// The ids a session may have (`session_id` of a chat, `x-lovia-session` of a call).
pub(crate) fn valid_session_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

pub(crate) async fn chat(State(service): State<Service>, headers: HeaderMap, body: String) -> Response {
    let Some(tenant) = service.tenant(&headers) else { return unauthorized() };
    let request: ChatRequest = match parse(&body) {
        Ok(r) => r,
        Err(refusal) => return refusal.into_response(),
    };
    if let Some(agent) = &request.agent
        && *agent != tenant.agent.name
    {
        return error(StatusCode::NOT_FOUND, &format!("no agent named {agent}"));
    }
    let session = request.session_id.unwrap_or_else(|| new_id("session"));
    if !valid_session_id(&session) {
        return error(StatusCode::BAD_REQUEST, "session_id must be 1-128 letters, digits, _ . or -");
    }
    let input = request.input.filter(|i| !i.trim().is_empty());
    if let Some(live) = service.live(tenant, &session) {
        if input.is_some() {
            return error(StatusCode::CONFLICT, "a run is in progress for this session; send no input to attach to it");
        }
        // Reconnect: the pending approvals again, then the live events.
        let body = live.subscribe(live.pending_frames());
        return service.sse_response(body);
    }
    if input.is_none() {
        let unfinished = without_stalling(|| service.inner.store.load(&tenant.name, &session))
            .ok()
            .flatten()
            .is_some_and(|cp| cp.is_unfinished());
        if !unfinished {
            return error(StatusCode::BAD_REQUEST, "input is required (there is no run to resume in this session)");
        }
    }
    match service.start_run(tenant, &session, input, true) {
        Ok(Some(live)) => service.sse_response(live),
        Ok(None) => error(StatusCode::INTERNAL_SERVER_ERROR, "the run started without a reader"),
        Err(refusal) => refusal.into_response(),
    }
}

impl Service {
    fn sse_response(&self, reader: Reader) -> Response {
        let mut response = reader.into_response(self.inner.sse_keep_alive);
        response.headers_mut().insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-cache"));
        response
    }
}

pub(crate) async fn approve(State(service): State<Service>, headers: HeaderMap, body: String) -> Response {
    let Some(tenant) = service.tenant(&headers) else { return unauthorized() };
    let request: ApproveRequest = match parse(&body) {
        Ok(r) => r,
        Err(refusal) => return refusal.into_response(),
    };
    let decision = match request.decision {
        Decision::Approve => ApprovalDecision::Approve,
        Decision::Deny => ApprovalDecision::Deny,
    };
    let decided = service
        .live(tenant, &request.session_id)
        .is_some_and(|live| live.approvals.resolve(&request.call_id, decision));
    if decided {
        Json(json!({"ok": true})).into_response()
    } else {
        let message = "no pending approval matches";
        (StatusCode::NOT_FOUND, Json(json!({"error": message, "detail": message}))).into_response()
    }
}

pub(crate) async fn cancel(State(service): State<Service>, headers: HeaderMap, body: String) -> Response {
    let Some(tenant) = service.tenant(&headers) else { return unauthorized() };
    let request: CancelRequest = match parse(&body) {
        Ok(r) => r,
        Err(refusal) => return refusal.into_response(),
    };
    match service.live(tenant, &request.session_id) {
        Some(live) => {
            live.cancel.cancel(Some("cancelled by the client"));
            live.approvals.release(ApprovalDecision::Deny);
            Json(json!({"ok": true})).into_response()
        }
        None => error(StatusCode::NOT_FOUND, "no run in progress for this session"),
    }
}

pub(crate) async fn transcript(
    State(service): State<Service>,
    UrlPath(session): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    let Some(tenant) = service.tenant(&headers) else { return unauthorized() };
    match without_stalling(|| service.inner.store.load(&tenant.name, &session)) {
        Ok(Some(cp)) => Json(json!({
            "session_id": session,
            "run_id": cp.run_id,
            "status": cp.status,
            "agent": cp.agent,
            "messages": cp.messages,
            "pending_approvals": cp.pending_approvals,
            "error": cp.error,
        }))
        .into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, "no such session"),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

impl Service {
    pub(crate) fn live(&self, tenant: &Tenant, session: &str) -> Option<Arc<LiveRun>> {
        self.inner.live.lock().unwrap_or_else(|p| p.into_inner()).get(&(tenant.index, session.to_owned())).cloned()
    }

    /// The tenants whose chats have no model, with the reason.
    pub fn unconfigured_models(&self) -> Vec<(String, String)> {
        self.inner
            .tenants
            .iter()
            .filter_map(|t| match &t.model {
                super::model::TenantModel::Missing(reason) => Some((t.name.clone(), reason.clone())),
                _ => None,
            })
            .collect()
    }

    /// Approvals waiting, by tenant name.
    pub(crate) fn pending_approvals(&self) -> Vec<(String, usize)> {
        let live = self.inner.live.lock().unwrap_or_else(|p| p.into_inner());
        self.inner
            .tenants
            .iter()
            .map(|t| {
                let n =
                    live.iter().filter(|((i, _), _)| *i == t.index).map(|(_, r)| r.approvals.pending_ids().len()).sum();
                (t.name.clone(), n)
            })
            .collect()
    }

    /// Resumes, in the background, every run the store says is unfinished
    /// (the process that ran it died or was stopped).
    pub fn resume_unfinished(&self) {
        let unfinished = match without_stalling(|| self.inner.store.unfinished()) {
            Ok(u) => u,
            Err(e) => {
                tracing::error!("cannot list unfinished runs: {e}");
                return;
            }
        };
        for (tenant_name, session) in unfinished {
            let Some(tenant) = self.inner.tenants.iter().find(|t| t.name == tenant_name) else { continue };
            match self.start_run(tenant, &session, None, false) {
                Ok(_) => tracing::info!(tenant = %tenant.name, %session, "resumed an unfinished run"),
                Err(_) => tracing::warn!(tenant = %tenant.name, %session, "cannot resume the run now"),
            }
        }
    }

    /// Starts (or resumes) the session's run; with `read`, returns a
    /// reader's stream attached before the first event.
    fn start_run(
        &self,
        tenant: &Tenant,
        session: &str,
        input: Option<String>,
        read: bool,
    ) -> Result<Option<Reader>, ApiError> {
        let provider = tenant.model.provider().map_err(|reason| ApiError(StatusCode::SERVICE_UNAVAILABLE, reason))?;
        let Ok(permit) = tenant.runs.clone().try_acquire_owned() else {
            self.inner.metrics.refuse(&tenant.name, "max_concurrent_runs");
            return Err(ApiError(StatusCode::TOO_MANY_REQUESTS, "too many runs in progress for this tenant".into()));
        };
        let executor = tenant.executor();
        let config = &tenant.agent;
        let mut agent = Agent::new(config.name.clone());
        agent.instructions = config.instructions.clone();
        agent.max_turns = config.max_turns;
        agent.budget = config.budget;
        agent.settings.parallel_tool_calls = config.parallel_tool_calls;
        // The tenant's call quotas hold inside chats too: a refused call is an error result.
        let quota: Arc<dyn lovia_host::policy::Policy> = Arc::new(super::quota::QuotaPolicy(tenant.quota.clone()));
        agent.plugin_tools = executor.tools().iter().map(|t| t.clone().with_policy(quota.clone())).collect();
        agent.tool_settings.approval_handler = Some(Arc::new(AwaitDecision(self.inner.approval_timeout)));
        let runner = Runner::new(agent, provider).with_store(self.inner.store.clone());
        let state =
            RunState { session_id: Some(session.to_owned()), tenant: Some(tenant.name.clone()), ..RunState::default() };
        let live = Arc::new(LiveRun {
            approvals: state.approvals.clone(),
            cancel: state.cancel.clone(),
            readers: Mutex::default(),
            asked: Mutex::default(),
            started: SystemTime::now(),
        });
        let key = (tenant.index, session.to_owned());
        {
            let mut map = self.inner.live.lock().unwrap_or_else(|p| p.into_inner());
            if map.contains_key(&key) {
                return Err(ApiError(StatusCode::CONFLICT, "a run is in progress for this session".into()));
            }
            map.insert(key.clone(), live.clone());
        }
        tenant.outcomes.started(session);
        let reader = read.then(|| live.subscribe(Vec::new()));
        let mut handle = runner.stream_with(input, state);
        let service = self.clone();
        let (tenant_name, tenant_index, session) = (tenant.name.clone(), tenant.index, session.to_owned());
        tokio::spawn(async move {
            let _permit = permit;
            let mut started: HashMap<String, Instant> = HashMap::new();
            // What the session list says once the run is over; a run whose
            // stream ends without a final event counts as failed.
            let mut outcome: &'static str = "failed";
            while let Some(event) = handle.next_event().await {
                let metrics = &service.inner.metrics;
                let out = match event {
                    RunEvent::RunStarted { agent, run_id } => {
                        Some(frame("run_started", &json!({"run_id": run_id, "session_id": session, "agent": agent})))
                    }
                    RunEvent::TextDelta { text } => Some(frame("text_delta", &json!({"text": text}))),
                    RunEvent::Tool(ToolEvent::ToolCallStarted { call }) => {
                        started.insert(call.id.clone(), Instant::now());
                        Some(frame(
                            "tool_call",
                            &json!({"id": call.id, "name": call.name, "arguments": call.arguments}),
                        ))
                    }
                    RunEvent::Tool(ToolEvent::ToolCallCompleted {
                        call,
                        output,
                        is_error,
                        error_kind,
                        parts,
                        tool_error_kind,
                        ..
                    }) => {
                        live.asked.lock().unwrap_or_else(|p| p.into_inner()).remove(&call.id);
                        let elapsed = started.remove(&call.id).map_or(Duration::ZERO, |t| t.elapsed());
                        metrics.record(&tenant_name, &call.name, elapsed, error_kind);
                        if let Some(kind) = &tool_error_kind {
                            metrics.record_tool_kind(&tenant_name, &call.name, kind);
                        }
                        let mut data =
                            json!({"id": call.id, "name": call.name, "result": output, "is_error": is_error});
                        if let Some(kind) = error_kind {
                            data["error_kind"] = json!(kind.as_str());
                        }
                        if let Some(kind) = tool_error_kind {
                            data["tool_error_kind"] = json!(kind);
                        }
                        if let Some(parts) = parts {
                            data["parts"] = json!(parts);
                        }
                        Some(frame("tool_result", &data))
                    }
                    RunEvent::Tool(ToolEvent::ToolProgress { call, message }) => {
                        Some(frame("tool_progress", &json!({"id": call.id, "name": call.name, "message": message})))
                    }
                    // The ticket is dropped here: the decision comes out of band, through
                    // /api/chat/approve, while the handler waits.
                    RunEvent::Tool(ToolEvent::ApprovalRequired { call, ticket: _ }) => {
                        live.asked.lock().unwrap_or_else(|p| p.into_inner()).insert(call.id.clone(), SystemTime::now());
                        Some(frame(
                            "approval_required",
                            &json!({"id": call.id, "name": call.name, "arguments": call.arguments}),
                        ))
                    }
                    RunEvent::Tool(ToolEvent::ToolCallFailed { call, error }) => {
                        Some(frame("error", &json!({"type": "ToolCallFailed", "message": error, "call_id": call.id})))
                    }
                    RunEvent::HandoffOccurred { from_agent, to_agent } => {
                        Some(frame("handoff", &json!({"from_agent": from_agent, "to_agent": to_agent})))
                    }
                    RunEvent::RunCompleted { output } => {
                        metrics.run_ended(&tenant_name, "completed");
                        outcome = "completed";
                        Some(frame("run_completed", &json!({"output": output, "session_id": session})))
                    }
                    RunEvent::RunFailed { error } => {
                        metrics.run_ended(&tenant_name, error.kind());
                        outcome = error.kind();
                        Some(frame(
                            "error",
                            &json!({"type": error.kind(), "message": error.to_string(), "fatal": true}),
                        ))
                    }
                    // Turn boundaries, whole messages, and any event a newer
                    // runner adds are not part of the SSE stream.
                    _ => None,
                };
                if let Some(bytes) = out {
                    live.send(bytes);
                }
            }
            let _ = handle.result().await;
            if let Some(tenant) = service.inner.tenants.get(tenant_index) {
                tenant.outcomes.ended(&session, outcome);
            }
            let mut map = service.inner.live.lock().unwrap_or_else(|p| p.into_inner());
            if map.get(&key).is_some_and(|l| Arc::ptr_eq(l, &live)) {
                map.remove(&key);
            }
            // Dropping the senders ends every reader's stream.
            live.readers.lock().unwrap_or_else(|p| p.into_inner()).clear();
        });
        Ok(reader)
    }
}
