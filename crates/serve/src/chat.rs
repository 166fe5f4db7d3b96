//! `/api/chat`: runs of the tenant's agent streamed as SSE, their approvals
//! and cancellation, and their transcripts. A run belongs to one (tenant,
//! session); its events go to every connected reader; it survives readers
//! leaving, and is persisted so that it survives the process too.

mod agent;
mod outcomes;
mod refusal;
mod run_task;

use super::auth::Caller;
use super::lease::Taken;
use super::question::Questions;
use super::remote::{Order, Posted};
use super::sse::{READER_QUEUE, Reader, frame};
use crate::Service;
use crate::Tenant;
use crate::response::error;
use agent::ChatAgent;
use axum::Json;
use axum::extract::Path as UrlPath;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use lovia_host::BoxFuture;
use lovia_host::CallContext;
use lovia_host::approval::{ApprovalChannel, ApprovalDecision, ApprovalHandler, ApprovalRequest, HandlerAnswer};
use lovia_host::exec::{CancelToken, RunState};
use lovia_runner::{Runner, new_id};
pub(crate) use refusal::RunRefusal;
use run_task::RunTask;
use serde::Deserialize;
use serde_json::json;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::mpsc;

/// Events of one run kept for readers that attach while it runs
/// (docs/operators.md, "Routes"): at most this many, the oldest dropped first.
/// Half a reader's queue ([`READER_QUEUE`]), so a replay always fits in it.
pub(crate) const RUN_REPLAY_EVENTS: usize = READER_QUEUE / 2;
/// Bytes of event data one run keeps for replay: 1 MiB, the oldest dropped first.
pub(crate) const RUN_REPLAY_BYTES: usize = 1 << 20;
/// Bytes of event data all of a tenant's runs keep for replay together:
/// 8 MiB. A run that would pass it drops its own oldest events instead.
pub(crate) const TENANT_REPLAY_BYTES: usize = 8 << 20;

/// One tenant's runs in this process.
pub(crate) struct TenantRuns {
    /// A place for each run in progress here.
    pub(crate) slots: Arc<tokio::sync::Semaphore>,
    /// `max_concurrent_runs`: with a shared store, across replicas (`lease`).
    pub(crate) max: u32,
    /// How the runs this process ended ended, for `GET /api/chat`.
    pub(crate) outcomes: outcomes::Outcomes,
    /// Bytes of its runs' events kept for replay ([`TENANT_REPLAY_BYTES`]).
    pub(crate) replay_bytes: Arc<AtomicUsize>,
}

impl TenantRuns {
    /// Room for `max_concurrent_runs` runs.
    pub(crate) fn new(max_concurrent_runs: u32) -> Self {
        Self {
            slots: Arc::new(tokio::sync::Semaphore::new(max_concurrent_runs as usize)),
            max: max_concurrent_runs,
            outcomes: outcomes::Outcomes::default(),
            replay_bytes: Arc::default(),
        }
    }
}

/// How long a run's end waits for its events to reach the table before
/// it lets the lease go: 5 s.
const RELAY_FLUSH: Duration = Duration::from_secs(5);

/// One kept event.
struct Kept {
    id: u64,
    bytes: usize,
    /// The call whose approval it asks for, for an `approval_required`.
    approval_of: Option<String>,
    event: Event,
}

/// A run's event ids, its kept events and its readers, under one lock: an
/// event is numbered, kept and sent to the readers in one step, and a new
/// reader gets the kept events and joins the readers in one step, so it
/// sees every event after its cursor exactly once, in order.
#[derive(Default)]
struct Feed {
    next_id: u64,
    kept: VecDeque<Kept>,
    kept_bytes: usize,
    /// The newest id dropped from `kept`, if any was.
    lost_through: Option<u64>,
    /// One bounded queue per reader; a full one is dropped (see `sse`).
    readers: Vec<mpsc::Sender<Event>>,
}

/// A run in progress and its readers.
pub(crate) struct LiveRun {
    pub(crate) approvals: ApprovalChannel,
    cancel: CancelToken,
    feed: Mutex<Feed>,
    /// The tenant's bytes of kept events, across its runs ([`TENANT_REPLAY_BYTES`]).
    tenant_replay: Arc<AtomicUsize>,
    /// When each pending approval was asked for (the console shows how long
    /// it has waited and when it will be denied); removed when decided.
    asked: Mutex<HashMap<String, SystemTime>>,
    started: SystemTime,
    /// Woken when this replica has lost the run's lease (another replica
    /// may run it now): the run stops where it is (`takeover`).
    pub(crate) lease_lost: tokio::sync::Notify,
    /// With a shared store, the run's fence: it ends a margin before the
    /// lease could, and each renewal moves it (docs/replicas.md, "Fencing").
    /// Past it the run has no effect outside this process and is stopped.
    pub(crate) fence: Option<lovia_host::Fence>,
    /// With a shared store, where its events go for readers on other
    /// replicas (`relay`); taken away when the run ends or is handed over.
    relay: Mutex<Option<mpsc::Sender<super::relay::Relayed>>>,
    /// The run's open `ask_human` question, when the agent has the tool.
    pub(crate) questions: Option<Arc<Questions>>,
}

/// Takes `n` bytes of `budget` if they fit under `limit`.
fn charge(budget: &AtomicUsize, n: usize, limit: usize) -> bool {
    budget.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| used.checked_add(n).filter(|&u| u <= limit)).is_ok()
}

impl LiveRun {
    /// When the approval of `call_id` was asked for; the run's start for
    /// one asked before this process (a resumed run re-asks it at once).
    pub(crate) fn asked_at(&self, call_id: &str) -> SystemTime {
        self.asked.lock().unwrap_or_else(|p| p.into_inner()).get(call_id).copied().unwrap_or(self.started)
    }

    /// Numbers `data` as the run's next event, keeps it for later readers
    /// within the bounds, and queues it for every reader; a reader whose
    /// queue is full or closed is dropped, which ends its stream
    /// (docs/operators.md, "Routes").
    fn publish(&self, name: &str, mut data: serde_json::Value) {
        // When it happened, so that a reader attaching later still draws
        // the run's calls on their real time axis.
        data["at_ms"] = json!(super::sse::unix_ms(SystemTime::now()));
        let text = data.to_string();
        let bytes = name.len() + text.len();
        let approval_of = (name == "approval_required").then(|| data["id"].as_str().map(str::to_owned)).flatten();
        let mut feed = self.feed.lock().unwrap_or_else(|p| p.into_inner());
        let id = feed.next_id;
        feed.next_id += 1;
        let event = Event::default().event(name).id(id.to_string()).data(text.clone());
        // Room for it: the oldest kept events go first, until it fits the
        // run's bounds and the tenant's budget; one that never fits is not kept.
        let mut keep = true;
        loop {
            let fits_run = feed.kept.len() < RUN_REPLAY_EVENTS && feed.kept_bytes + bytes <= RUN_REPLAY_BYTES;
            if fits_run && charge(&self.tenant_replay, bytes, TENANT_REPLAY_BYTES) {
                break;
            }
            match feed.kept.pop_front() {
                Some(old) => {
                    feed.kept_bytes -= old.bytes;
                    self.tenant_replay.fetch_sub(old.bytes, Ordering::AcqRel);
                    feed.lost_through = Some(old.id);
                }
                None => {
                    keep = false;
                    feed.lost_through = Some(id);
                    break;
                }
            }
        }
        if keep {
            feed.kept_bytes += bytes;
            feed.kept.push_back(Kept { id, bytes, approval_of, event: event.clone() });
        }
        // Under the feed's lock, so the table gets the events in id order.
        // A full queue (the store is slow) loses the event for remote
        // readers only; they see the gap as `replay_truncated`.
        if let Some(relay) = self.relay.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
            && relay.try_send((id, name.to_owned(), text)).is_err()
        {
            tracing::warn!(event = id, "a run event could not be queued for the other replicas");
        }
        feed.readers.retain(|r| r.try_send(event.clone()).is_ok());
    }

    /// A new reader's stream: the kept events after `after` (all of them
    /// without it), then the live ones. When some it needs were dropped, it
    /// first gets `replay_truncated` and the pending approvals whose events
    /// are gone.
    fn subscribe(self: &Arc<Self>, after: Option<u64>) -> Reader {
        let live = Arc::downgrade(self);
        // A reader leaving decides nothing: its run's approvals stay pending
        // until decided, cancelled or timed out (docs/semantics.md D12).
        let (tx, reader) = Reader::new(move || {
            if let Some(live) = live.upgrade() {
                live.feed.lock().unwrap_or_else(|p| p.into_inner()).readers.retain(|r| !r.is_closed());
            }
        });
        let from = after.map_or(0, |a| a.saturating_add(1));
        let mut feed = self.feed.lock().unwrap_or_else(|p| p.into_inner());
        let mut replay = Vec::new();
        if let Some(lost) = feed.lost_through.filter(|&lost| from <= lost) {
            replay.push(frame("replay_truncated", &json!({"missing_through": lost})));
            let shown: Vec<&str> = feed.kept.iter().filter_map(|k| k.approval_of.as_deref()).collect();
            for r in self.approvals.pending().iter().filter(|r| !shown.contains(&r.call_id.as_str())) {
                replay.push(frame(
                    "approval_required",
                    &json!({"id": r.call_id, "name": r.tool, "arguments": r.arguments}),
                ));
            }
            // The open question, whose event may be gone too.
            if let Some(questions) = &self.questions
                && let Some((question, asked)) = questions.open()
            {
                replay.push(frame("question", &questions.event(&question, asked)));
            }
        }
        replay.extend(feed.kept.iter().filter(|k| k.id >= from).map(|k| k.event.clone()));
        // The queue holds a whole replay (RUN_REPLAY_EVENTS is half of it);
        // should it not, the stream ends rather than skip an event.
        if replay.into_iter().all(|e| tx.try_send(e).is_ok()) {
            feed.readers.push(tx);
        }
        reader
    }

    /// Applies a client's order (from this replica's route or, through the
    /// store, another's); whether it matched.
    pub(crate) fn apply(&self, order: &Order) -> bool {
        if let Order::Decide { call_id, .. } = order {
            // `POST /api/chat/approve`, from the console or an API client (traced as `lovia.approval.by`).
            self.approvals.note_decider(call_id, "http_api");
        }
        match order {
            Order::Decide { call_id, decision: ApprovalDecision::Approve, always: true } => {
                self.approvals.approve_always(call_id).is_some()
            }
            Order::Decide { call_id, decision, .. } => self.approvals.resolve(call_id, *decision),
            Order::Answer { answer } => self.questions.as_ref().is_some_and(|q| q.answer(answer.clone())),
            Order::Cancel => {
                self.cancel.cancel(Some("cancelled by the client"));
                self.approvals.release(ApprovalDecision::Deny);
                true
            }
        }
    }

    /// Ends every reader's stream and gives the kept bytes back to the tenant.
    fn close(&self) {
        let mut feed = self.feed.lock().unwrap_or_else(|p| p.into_inner());
        // Dropping the senders ends every reader's stream.
        feed.readers.clear();
        feed.kept.clear();
        self.tenant_replay.fetch_sub(std::mem::take(&mut feed.kept_bytes), Ordering::AcqRel);
    }
}

impl Drop for LiveRun {
    fn drop(&mut self) {
        self.close();
    }
}

/// Waits for an out-of-band decision (`/api/chat/approve`) up to the
/// configured timeout, then denies: runs never hang on an approval.
/// The approval handler of a call a person decides: it waits `.0` for the
/// decision (which resolves the call's channel first), then denies.
pub(crate) struct AwaitDecision(pub(crate) Duration);

impl ApprovalHandler for AwaitDecision {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        _ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<HandlerAnswer, String>> {
        Box::pin(async move {
            tokio::time::sleep(self.0).await;
            tracing::info!(call = %request.call_id, tool = %request.tool, "approval timed out: denied");
            Ok(HandlerAnswer::TimedOut)
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChatRequest {
    session_id: Option<String>,
    input: Option<String>,
    agent: Option<String>,
    /// Without input: resume the session's run even if it was stopped (a
    /// cancel, a budget). Default false: an attach without it follows the
    /// run, and resumes only one whose replica died.
    #[serde(default)]
    resume: bool,
}

/// Who starts a run without input, and so which stopped runs it resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resumer {
    /// A takeover poll, or a start's sweep: only a run still stored
    /// `running` (its replica is gone), never one a client stopped.
    Takeover,
    /// A client attaching without input (to follow the session): a run
    /// still stored `running`, never one stopped. A plain attach used to
    /// resume a cancelled run too, so a client that reattached to follow a
    /// run it had cancelled ran it on (found by bench/fault-run).
    Attach,
    /// A client that asked to resume (`"resume": true`): a stopped run too.
    Client,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApproveRequest {
    session_id: String,
    call_id: String,
    decision: Decision,
    /// With `approve`: allow the call's tool for the rest of the session.
    #[serde(default)]
    always: bool,
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

/// The JSON body, or a 400 that says what is wrong with it.
fn parse<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, RunRefusal> {
    serde_json::from_str(body).map_err(RunRefusal::Body)
}

/// The ids a session may have (`session_id` of a chat, `x-lovia-session` of a call).
pub(crate) fn valid_session_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

pub(crate) async fn chat(caller: Caller, headers: HeaderMap, body: String) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
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
    if request.resume && input.is_some() {
        return error(StatusCode::BAD_REQUEST, "resume goes without input: a chat with input starts a new run");
    }
    // Attach: the run's events so far (or those after the client's
    // Last-Event-ID), then the live ones.
    let after = match headers.get("last-event-id").map(|v| v.to_str().ok().and_then(|v| v.trim().parse().ok())) {
        None => Ok(None),
        Some(Some(id)) => Ok(Some(id)),
        Some(None) => Err(()),
    };
    let bad_cursor = || error(StatusCode::BAD_REQUEST, "Last-Event-ID must be the id of an event of this run");
    let busy = "a run is in progress for this session; send no input to attach to it";
    if let Some(live) = service.live(tenant, &session) {
        if input.is_some() {
            return error(StatusCode::CONFLICT, busy);
        }
        let Ok(after) = after else { return bad_cursor() };
        return service.sse_response(live.subscribe(after));
    }
    // Another replica's run: its events come from the store.
    match service.held_elsewhere(&tenant.name, &session).await {
        Ok(false) => {}
        Ok(true) if input.is_some() => return error(StatusCode::CONFLICT, busy),
        Ok(true) => {
            let Ok(after) = after else { return bad_cursor() };
            return service.sse_response(service.follow_remote(tenant, &session, after));
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the run's lease");
            return error(StatusCode::SERVICE_UNAVAILABLE, "the run store is unreachable; retry later");
        }
    }
    let resumer = if request.resume { Resumer::Client } else { Resumer::Attach };
    if input.is_none() {
        match service.inner.stores.runs.load(&tenant.name, &session).await {
            Ok(Some(cp)) if cp.status == lovia_runner::RunStatus::Running => {}
            Ok(Some(cp)) if cp.is_unfinished() && resumer == Resumer::Client => {}
            Ok(Some(cp)) if cp.is_unfinished() => return RunRefusal::Stopped.into_response(),
            Ok(_) => return RunRefusal::NothingToResume.into_response(),
            Err(e) => {
                tracing::warn!(tenant = %tenant.name, %session, error = %e, "cannot read the run's checkpoint");
                return RunRefusal::StoreUnreachable.into_response();
            }
        }
    }
    // A `traceparent` makes the run's trace part of the client's.
    let trace = tenant.telemetry.is_on().then(|| lovia_telemetry::propagate::from_headers(&headers));
    match service.start_run(tenant, &session, input, true, resumer, trace).await {
        Ok(Some(live)) => service.sse_response(live),
        Ok(None) => error(StatusCode::INTERNAL_SERVER_ERROR, "the run started without a reader"),
        Err(refusal) => refusal.into_response(),
    }
}

impl Service {
    fn sse_response(&self, reader: Reader) -> Response {
        let mut response = reader.into_response(self.inner.limits.sse_keep_alive);
        response.headers_mut().insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-cache"));
        response
    }
}

pub(crate) async fn approve(caller: Caller, headers: axum::http::HeaderMap, body: String) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
    let request: ApproveRequest = match parse(&body) {
        Ok(r) => r,
        Err(refusal) => return refusal.into_response(),
    };
    let decision = match request.decision {
        Decision::Approve => ApprovalDecision::Approve,
        Decision::Deny => ApprovalDecision::Deny,
    };
    if request.always && decision != ApprovalDecision::Approve {
        return error(StatusCode::BAD_REQUEST, "always is for approve only");
    }
    // The tool and its plugin, when this replica runs the call (for the
    // record): a chat's, or an `/mcp` or direct call's.
    let mcp = tenant
        .mcp
        .pending()
        .into_iter()
        .find(|p| p.session == request.session_id && p.request.call_id == request.call_id);
    // An `/mcp` or direct call is one call: there is no rest of a chat to allow it for.
    if request.always && mcp.is_some() {
        return error(
            StatusCode::BAD_REQUEST,
            "always is for a chat's approvals; an /mcp or direct call is one call: approve it without always",
        );
    }
    let asked = mcp.map(|p| (p.request.tool, p.request.plugin_digest)).or_else(|| {
        service.live(tenant, &request.session_id).and_then(|live| {
            live.approvals
                .pending()
                .into_iter()
                .find(|r| r.call_id == request.call_id)
                .map(|r| (r.tool, r.plugin_digest))
        })
    });
    let call_id = request.call_id.clone();
    let what = match (decision, request.always) {
        (ApprovalDecision::Approve, true) => "approved, always",
        (ApprovalDecision::Approve, false) => "approved",
        _ => "denied",
    };
    let order = Order::Decide { call_id: request.call_id, decision, always: request.always };
    let decided = match deliver(service, tenant, &request.session_id, &order).await {
        Ok(decided) => decided,
        Err(answer) => {
            // Queued for the replica that runs the call (202): it lands
            // when that replica takes it, and is recorded as queued.
            if answer.status() == StatusCode::ACCEPTED {
                record_decision(
                    service,
                    tenant,
                    &headers,
                    &request.session_id,
                    &call_id,
                    asked,
                    &format!("{what} (queued)"),
                )
                .await;
            }
            return answer;
        }
    };
    if decided {
        record_decision(service, tenant, &headers, &request.session_id, &call_id, asked, what).await;
        Json(json!({"ok": true})).into_response()
    } else {
        let message = "no pending approval matches";
        (StatusCode::NOT_FOUND, Json(json!({"error": message, "detail": message}))).into_response()
    }
}

/// Writes who decided which call, and when, to the audit trail, which the
/// console's run view reads back.
async fn record_decision(
    service: &Service,
    tenant: &Tenant,
    headers: &axum::http::HeaderMap,
    session: &str,
    call_id: &str,
    asked: Option<(String, Option<String>)>,
    what: &str,
) {
    let by = super::auth::token(headers)
        .map(|key| format!(" by API key sha256:{}", &super::auth::hash_key(key)[..12]))
        .unwrap_or_default();
    let (tool, digest) = asked.map_or((None, None), |(tool, digest)| (Some(tool), digest));
    let source = match tool {
        Some(tool) => format!("session {session}, call {call_id} ({tool})"),
        None => format!("session {session}, call {call_id}"),
    };
    let entry = super::audit::AuditEntry::now(&tenant.name, super::audit::AuditAction::Decide, source)
        .digest(digest)
        .outcome(format!("{what}{by}"));
    service.audit(entry).await;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerRequest {
    session_id: String,
    answer: AnswerText,
}

/// A free answer, or the labels chosen (joined by a newline for the model).
#[derive(Deserialize)]
#[serde(untagged)]
enum AnswerText {
    Text(String),
    Labels(Vec<String>),
}

/// The longest answer accepted, in bytes: 32 KiB (the model reads at most
/// [`lovia_runner::MAX_ANSWER_CHARS`] characters of it).
const MAX_ANSWER_BYTES: usize = 32 * 1024;

pub(crate) async fn answer(caller: Caller, body: String) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
    let request: AnswerRequest = match parse(&body) {
        Ok(r) => r,
        Err(refusal) => return refusal.into_response(),
    };
    let not_found = |message: &str| (StatusCode::NOT_FOUND, Json(json!({"error": message, "detail": message})));
    if !tenant.agent.ask_human {
        return not_found("no question channel").into_response();
    }
    let answer = match request.answer {
        AnswerText::Text(text) => text,
        AnswerText::Labels(labels) => labels.join("\n"),
    };
    if answer.len() > MAX_ANSWER_BYTES {
        return error(StatusCode::BAD_REQUEST, &format!("answer is over {MAX_ANSWER_BYTES} bytes"));
    }
    match deliver(service, tenant, &request.session_id, &Order::Answer { answer }).await {
        Ok(true) => Json(json!({"ok": true})).into_response(),
        Ok(false) => not_found("no pending question matches").into_response(),
        Err(answer) => answer,
    }
}

/// Applies `order` to the session's run: here when this replica runs it,
/// else through the store to the replica that does. `Ok(false)` when nothing
/// matched; `Err` is the answer to send as it is (queued, too many, no store).
async fn deliver(service: &Service, tenant: &Tenant, session: &str, order: &Order) -> Result<bool, Response> {
    // An `/mcp` call waiting for approval (its run id is the session).
    if let Order::Decide { call_id, decision, .. } = order
        && let Some(decided) = tenant.mcp.decide(session, call_id, *decision)
    {
        return Ok(decided);
    }
    match service.live(tenant, session) {
        Some(live) => Ok(live.apply(order)),
        // Another replica's run, if one holds it: the order goes there.
        None => match service.post_order(&tenant.name, session, order).await {
            Ok(Posted::Applied) => Ok(true),
            Ok(Posted::Queued) => Err(queued()),
            Ok(Posted::TooMany) => Err(too_many_orders()),
            Ok(Posted::Unmatched | Posted::NoOwner) => Ok(false),
            Err(e) => Err(unreachable_store(&e)),
        },
    }
}

/// The owner of the run did not answer in time; the order waits for it.
fn queued() -> Response {
    (StatusCode::ACCEPTED, Json(json!({"ok": true, "queued": true}))).into_response()
}

fn too_many_orders() -> Response {
    error(StatusCode::TOO_MANY_REQUESTS, "too many decisions and cancels wait for this run's replica")
}

fn unreachable_store(e: &super::LeaseError) -> Response {
    tracing::warn!(error = %e, "cannot send an order to the run's replica");
    error(StatusCode::SERVICE_UNAVAILABLE, "the run store is unreachable; retry later")
}

pub(crate) async fn cancel(caller: Caller, body: String) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
    let request: CancelRequest = match parse(&body) {
        Ok(r) => r,
        Err(refusal) => return refusal.into_response(),
    };
    let session = &request.session_id;
    let leases = &service.inner.stores.leases;
    // A run of this replica stops at once, before anything is written.
    let here = service.live(tenant, session).map(|live| live.apply(&Order::Cancel));
    // Stored before it is answered: a run whose owner dies, or loses its
    // database, before it writes that the run ended is ended by the
    // replica that takes it next, not run on (docs/replicas.md, "Faults").
    // For a run of another replica, stored before the order is sent, so
    // that a replica starting the run reads one or gets the other.
    if let Err(e) = leases.store_cancel(&tenant.name, session).await {
        // It may not hold; the client is told so (and the run, if it is
        // this replica's, is stopped here all the same).
        return unreachable_store(&e);
    }
    let cancelled = match here {
        Some(applied) => applied,
        None => match deliver(service, tenant, session, &Order::Cancel).await {
            Ok(cancelled) => cancelled,
            Err(answer) => return answer,
        },
    };
    if cancelled {
        return Json(json!({"ok": true})).into_response();
    }
    // A run the store holds as running whose replica is gone: the replica
    // that takes it over reads the stored cancel and ends it.
    match leases.running_unowned(&tenant.name, session).await {
        Ok(true) => queued(),
        Ok(false) => {
            // Nothing to cancel: the stored cancel must not end a later run.
            if let Err(e) = leases.forget_cancel(&tenant.name, session).await {
                tracing::warn!(tenant = %tenant.name, %session, error = %e, "cannot forget a cancel that matched no run");
            }
            error(StatusCode::NOT_FOUND, "no run in progress for this session")
        }
        Err(e) => unreachable_store(&e),
    }
}

/// The trace id of a W3C `traceparent` (`00-<trace id>-<span id>-<flags>`).
fn trace_id(traceparent: Option<&str>) -> Option<String> {
    let id = traceparent?.split('-').nth(1)?;
    (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_owned())
}

pub(crate) async fn transcript(caller: Caller, UrlPath(session): UrlPath<String>) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
    match service.inner.stores.runs.load(&tenant.name, &session).await {
        Ok(Some(cp)) => Json(json!({
            "session_id": session,
            "run_id": cp.run_id,
            "status": cp.status,
            "agent": cp.agent,
            "messages": cp.messages,
            // Calls of the last assistant message with no result yet: one
            // in flight when the run stopped may have had its effect (a
            // resume runs it again, under the same call id).
            "pending_calls": cp.pending_calls,
            "pending_approvals": cp.pending_approvals,
            "allowed_tools": cp.allowed_tools,
            "error": cp.error,
            // The run's trace, when traces were on (docs/telemetry.md), and
            // its address in the operator's trace UI.
            "trace_id": trace_id(cp.trace.as_deref()),
            "trace_url": trace_id(cp.trace.as_deref()).and_then(|id| service.inner.traces.trace_link(&id)),
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
                let n: usize =
                    live.iter().filter(|((i, _), _)| *i == t.index).map(|(_, r)| r.approvals.pending_ids().len()).sum();
                (t.name.clone(), n + t.mcp.pending().len())
            })
            .collect()
    }

    /// Takes the lease of `tenant`'s run in `session` (with several
    /// replicas the run is this one's only with its lease, and the tenant's
    /// leases are its runs on every replica). A run `resuming` must still
    /// be unfinished once the lease is taken; if not, the lease goes back.
    /// Only a [`Resumer::Client`] resumes a run stored as stopped (a
    /// cancel, a budget); the others resume a run still stored `running`. Also
    /// whether a stored cancel may be the run's: a run resumed from
    /// `running` (its owner died or lost its database before it wrote that
    /// the run ended) must be ended if one is.
    async fn take_run_lease(
        &self,
        tenant: &Tenant,
        session: &str,
        resuming: bool,
        resumer: Resumer,
    ) -> Result<(Option<lovia_host::LeaseToken>, bool), RunRefusal> {
        let leases = &self.inner.stores.leases;
        let lease = match leases.take(&tenant.name, session, tenant.runs.max, !resuming).await {
            Ok(Taken::Yes(lease)) => lease,
            Ok(Taken::HeldElsewhere) => return Err(RunRefusal::HeldElsewhere),
            Ok(Taken::TooMany) => return Err(too_many_runs(self, tenant)),
            Err(e) => {
                tracing::warn!(tenant = %tenant.name, %session, error = %e, "cannot take the run's lease");
                return Err(RunRefusal::StoreUnreachable);
            }
        };
        // A resume decided on before the lease was taken (a takeover poll, an
        // attach) may find the run finished meanwhile by the replica that held
        // it, which saves the end before it lets the lease go: now that the
        // lease is this one's, the checkpoint says whether there is a run left.
        if !(resuming && leases.is_shared()) {
            return Ok((lease, false));
        }
        let refusal = match self.inner.stores.runs.load(&tenant.name, session).await {
            Ok(Some(cp)) if cp.status == lovia_runner::RunStatus::Running => return Ok((lease, true)),
            // Stopped, and stored so (a cancel, a budget): a client resumes
            // it now, and a cancel stored for it was of its stop.
            Ok(Some(cp)) if cp.is_unfinished() && resumer == Resumer::Client => {
                match leases.forget_cancel(&tenant.name, session).await {
                    Ok(()) => return Ok((lease, false)),
                    Err(e) => {
                        tracing::warn!(tenant = %tenant.name, %session, error = %e, "cannot forget the run's stored cancel");
                        RunRefusal::StoreUnreachable
                    }
                }
            }
            Ok(Some(cp)) if cp.is_unfinished() && resumer == Resumer::Attach => RunRefusal::Stopped,
            Ok(_) => RunRefusal::NothingToResume,
            Err(e) => {
                tracing::warn!(tenant = %tenant.name, %session, error = %e, "cannot read the run's checkpoint");
                RunRefusal::StoreUnreachable
            }
        };
        let _ = leases.release(&tenant.name, session).await;
        Err(refusal)
    }

    /// Starts (or resumes) the session's run; with `read`, returns a
    /// reader's stream attached before the first event. Without input, the
    /// `resumer` says which unfinished runs it resumes.
    pub(crate) async fn start_run(
        &self,
        tenant: &Tenant,
        session: &str,
        input: Option<String>,
        read: bool,
        resumer: Resumer,
        trace: Option<lovia_telemetry::Context>,
    ) -> Result<Option<Reader>, RunRefusal> {
        let provider = tenant.model.provider().map_err(RunRefusal::NoModel)?;
        let Ok(permit) = tenant.runs.slots.clone().try_acquire_owned() else { return Err(too_many_runs(self, tenant)) };
        let ChatAgent { agent, workspace, questions } = self.chat_agent(tenant, session)?;
        let runner = Runner::new(agent, provider).with_store(self.inner.stores.runs.clone());
        let mut state =
            RunState { session_id: Some(session.to_owned()), tenant: Some(tenant.name.clone()), ..RunState::default() };
        let key = (tenant.index, session.to_owned());
        if self.inner.live.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&key) {
            return Err(RunRefusal::InProgress);
        }
        let taking = Instant::now();
        let (lease, cancel_may_be_stored) = self.take_run_lease(tenant, session, input.is_none(), resumer).await?;
        // With a shared store the ids continue the session's stored events.
        let first_id = match self.first_event_id(&tenant.name, session, input.is_some()).await {
            Ok(first) => first,
            Err(e) => {
                tracing::warn!(tenant = %tenant.name, %session, error = %e, "cannot read the run's stored events");
                let _ = self.inner.stores.leases.release(&tenant.name, session).await;
                return Err(RunRefusal::StoreUnreachable);
            }
        };
        let (relay, relaying) = match first_id {
            Some(_) => {
                let (tx, task) = self.relay_events(&tenant.name, session, (RUN_REPLAY_EVENTS, RUN_REPLAY_BYTES));
                (Some(tx), Some(task))
            }
            None => (None, None),
        };
        // Every effect of the run (a call, an outbound request, a store or
        // checkpoint write) checks the fence through the run's cancel token.
        let fence = self.inner.stores.leases.is_shared().then(|| {
            let fence = lovia_host::Fence::until(super::lease::fence_end(
                taking,
                self.inner.limits.lease,
                self.inner.limits.lease_renew,
            ));
            match lease {
                Some(lease) => fence.for_lease(lease),
                None => fence,
            }
        });
        if let Some(fence) = &fence {
            state.cancel = state.cancel.clone().with_fence(fence.clone());
        }
        let live = Arc::new(LiveRun {
            approvals: state.approvals.clone(),
            cancel: state.cancel.clone(),
            feed: Mutex::default(),
            tenant_replay: tenant.runs.replay_bytes.clone(),
            asked: Mutex::default(),
            started: SystemTime::now(),
            lease_lost: tokio::sync::Notify::new(),
            fence,
            relay: Mutex::new(relay),
            questions: questions.clone(),
        });
        if let Some(questions) = &questions {
            let run = Arc::downgrade(&live);
            questions.bind(Box::new(move |name, data| {
                if let Some(run) = run.upgrade() {
                    run.publish(name, data);
                }
            }));
        }
        {
            let mut map = self.inner.live.lock().unwrap_or_else(|p| p.into_inner());
            if map.contains_key(&key) {
                // Taken by a request of this process meanwhile: the lease is
                // this replica's either way, and stays with that run.
                return Err(RunRefusal::InProgress);
            }
            map.insert(key.clone(), live.clone());
        }
        if let Some(first) = first_id {
            live.feed.lock().unwrap_or_else(|p| p.into_inner()).next_id = first;
        }
        // Read once the run is live here: a cancel stored after this read
        // is delivered to the live run (the route stores, then delivers).
        if cancel_may_be_stored {
            match self.inner.stores.leases.cancel_stored(&tenant.name, session).await {
                Ok(true) => {
                    tracing::info!(tenant = %tenant.name, %session, "the run's stored cancel ends it");
                    live.apply(&Order::Cancel);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(tenant = %tenant.name, %session, error = %e, "cannot read the run's stored cancel; not resumed");
                    {
                        let mut map = self.inner.live.lock().unwrap_or_else(|p| p.into_inner());
                        if map.get(&key).is_some_and(|l| Arc::ptr_eq(l, &live)) {
                            map.remove(&key);
                        }
                    }
                    let _ = self.inner.stores.leases.release(&tenant.name, session).await;
                    return Err(RunRefusal::StoreUnreachable);
                }
            }
        }
        tenant.runs.outcomes.started(session);
        let reader = read.then(|| live.subscribe(None));
        // A run without input resumes one the store holds unfinished.
        let resumed = input.is_none();
        let handle = match trace {
            Some(parent) => {
                let _attached = parent.attach();
                runner.stream_with(input, state)
            }
            None => runner.stream_with(input, state),
        };
        let task = RunTask {
            service: self.clone(),
            live,
            handle,
            key,
            tenant_name: tenant.name.clone(),
            session: session.to_owned(),
            resumed,
            relaying,
            permit,
            workspace,
        };
        tokio::spawn(task.drive());
        Ok(reader)
    }
}

/// The tenant's `max_concurrent_runs` is reached: on this replica, or with
/// a shared store on all of them together (its unexpired leases).
fn too_many_runs(service: &Service, tenant: &Tenant) -> RunRefusal {
    service.inner.metrics.refuse(&tenant.name, "max_concurrent_runs");
    RunRefusal::TooManyRuns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(budget: &Arc<AtomicUsize>) -> Arc<LiveRun> {
        Arc::new(LiveRun {
            approvals: ApprovalChannel::default(),
            cancel: CancelToken::default(),
            feed: Mutex::default(),
            tenant_replay: budget.clone(),
            asked: Mutex::default(),
            started: SystemTime::now(),
            lease_lost: tokio::sync::Notify::new(),
            fence: None,
            relay: Mutex::default(),
            questions: None,
        })
    }

    fn kept(live: &LiveRun) -> Vec<u64> {
        live.feed.lock().expect("feed").kept.iter().map(|k| k.id).collect()
    }

    #[test]
    fn a_runs_kept_events_are_bounded_and_charged_to_its_tenant() {
        let budget = Arc::new(AtomicUsize::new(0));
        let live = run(&budget);
        let n = RUN_REPLAY_EVENTS as u64 + 100;
        for i in 0..n {
            live.publish("tool_progress", json!({"id": "c1", "message": format!("step {i}")}));
        }
        // The newest RUN_REPLAY_EVENTS, contiguous, and what they hold is charged.
        let ids = kept(&live);
        assert_eq!(ids, (100..n).collect::<Vec<_>>());
        let held = live.feed.lock().expect("feed").kept_bytes;
        assert_eq!(budget.load(Ordering::Acquire), held);
        // A reader from the start is told that the first 100 are gone, then gets the rest.
        let mut reader = live.subscribe(None);
        assert_eq!(reader.queued(), 1 + RUN_REPLAY_EVENTS);
        // One that has seen them gets only what follows its cursor, with no notice.
        let mut reader = live.subscribe(Some(n - 3));
        assert_eq!(reader.queued(), 2);
        live.publish("text_delta", json!({"text": "live"}));
        assert_eq!(reader.queued(), 1, "the live event, once");

        // A run of a tenant whose budget is spent keeps nothing, and says so.
        let other = run(&budget);
        budget.fetch_add(TENANT_REPLAY_BYTES, Ordering::AcqRel);
        other.publish("text_delta", json!({"text": "x"}));
        assert!(kept(&other).is_empty());
        assert_eq!(other.subscribe(None).queued(), 1, "replay_truncated alone");
        budget.fetch_sub(TENANT_REPLAY_BYTES, Ordering::AcqRel);

        // A big event pushes out old ones to fit the run's byte bound.
        live.publish("tool_result", json!({"result": "x".repeat(RUN_REPLAY_BYTES - 1000)}));
        assert!(live.feed.lock().expect("feed").kept_bytes <= RUN_REPLAY_BYTES);
        assert!(kept(&live).len() < 100, "{}", kept(&live).len());

        // The end of the run gives every byte back.
        live.close();
        drop(other);
        assert_eq!(budget.load(Ordering::Acquire), 0);
    }
}
