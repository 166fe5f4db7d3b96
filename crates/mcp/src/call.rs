//! `tools/call`: one MCP request is one [`ToolCall`] through the executor,
//! so validation, timeouts, retries, policies, truncation and rendering are
//! lovia's, and the client reads the exact string any model would.

use crate::approve::{self, Approval, StateRefused};
use crate::catalog::WRAPPED_RESULT_KEY;
use crate::hook::{CallOutcome, CallPermit};
use crate::logging;
use crate::progress::{Step, Throttle};
use crate::question::{QuestionCall, RoundOutcome};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use lovia_host::approval::ApprovalChannel;
use lovia_host::call::text;
use lovia_host::{ContentPart, EventSink, Executor, RunState, ToolCall, ToolEvent, ToolResultEntry, TurnError};
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock, ElicitationCapability, ErrorData,
    FormElicitationCapability, ProgressNotificationParam, ProgressToken, Resource,
};
use rmcp::service::Peer;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The reason the run of a call cancelled by its client records.
pub(crate) const CANCELLED_BY_CLIENT: &str = "cancelled by the MCP client";

/// How often a call waiting for its client's approval looks whether the
/// host decided it meanwhile (`lovia serve`'s approve route): the channel
/// has no wake-up, and 50 ms is nothing beside a person's answer.
const DECIDED_ELSEWHERE_POLL: Duration = Duration::from_millis(50);

/// What the request brought besides the call itself.
pub(crate) struct Request {
    /// The call, with the argument text as the client sent it.
    pub(crate) call: ToolCall,
    /// Its own run (a fresh one per request: a call's cancellation or
    /// budget never reaches another client's call).
    pub(crate) state: RunState,
    /// The host's permit, told how the call ended.
    pub(crate) permit: Box<dyn CallPermit>,
    /// Cancelled when the client sends `notifications/cancelled` (or, over
    /// HTTP, drops the request).
    pub(crate) cancelled: CancellationToken,
    /// Where progress goes, when the request carried a progress token, and
    /// the least time between two notifications.
    pub(crate) progress: Option<(Peer<RoleServer>, ProgressToken, Duration)>,
    /// How a call that needs approval is asked about (shared with the
    /// question of an `ask_human` call, which asks the same client).
    pub(crate) approval: Arc<Approval>,
    /// Set for a call of `ask_human` served over this server's questions:
    /// what its round answers instead of a result.
    pub(crate) question: Option<Arc<QuestionCall>>,
    /// The plugin names the prompt shows, by digest.
    pub(crate) plugin_names: Arc<HashMap<String, String>>,
    /// Where the tool's log lines go, and the least level the client wants.
    pub(crate) log: Option<(Peer<RoleServer>, logging::Threshold)>,
}

/// Why a 2026-07-28 call is answered with a JSON-RPC error rather than a
/// result: the client can act on these (declare elicitation, or start the
/// call again), where "not approved" means a person said no.
enum Refusal {
    /// The call needs approval and the client declared no form elicitation:
    /// `-32021` with the capability it lacks (HTTP 400).
    NoElicitation,
    /// The request state it brought back does not open (tampered, forged,
    /// expired, replayed, for another call or tenant): `-32602`.
    State(StateRefused),
}

impl Refusal {
    fn into_error(self) -> ErrorData {
        match self {
            Refusal::NoElicitation => {
                let mut required = ClientCapabilities::default();
                required.elicitation = Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
                ErrorData::missing_required_client_capability(required)
            }
            Refusal::State(e) => ErrorData::invalid_params(e.to_string(), None),
        }
    }
}

/// Runs the call ([`Executor::call`]) and maps lovia's result onto MCP's; on
/// 2026-07-28, a call that needs approval first answers `input_required`,
/// and one that cannot be asked is a JSON-RPC error (see [`Refusal`]). In
/// every case a call that needs approval and was not approved never runs.
pub(crate) async fn run(exec: &Executor, request: Request) -> Result<CallToolResponse, ErrorData> {
    let Request { call, state, permit, cancelled, progress, approval, question, plugin_names, log } = request;
    let started = Instant::now();
    let client_gone = cancelled.clone();
    // Set when this round asks the client instead of deciding.
    let mut asked = None;
    // Set when this round answers with a JSON-RPC error.
    let mut refusal = None;
    let (sink, mut events) = EventSink::channel();
    let turn = async {
        let result = exec.call(&call, &state, &sink).await;
        // Closing the sink ends the forwarding loop once it has drained.
        drop(sink);
        result
    };
    let forward = async {
        let mut throttle = progress.as_ref().map(|(_, _, interval)| Throttle::new(*interval));
        loop {
            let due = throttle.as_ref().and_then(Throttle::due);
            let event = tokio::select! {
                event = events.recv() => event,
                () = sleep_until(due) => {
                    if let Some(step) = throttle.as_mut().and_then(|t| t.flush(tokio::time::Instant::now())) {
                        notify(progress.as_ref(), step).await;
                    }
                    continue;
                }
            };
            let Some(event) = event else { break };
            // A call made by a program (code mode's run_code) is asked about
            // and reported like the client's own call.
            let (event, nested) = match event {
                ToolEvent::Nested { event, .. } => (*event, true),
                event => (event, false),
            };
            match event {
                // The executor holds the call until the ticket is decided.
                // Only an explicit accept approves; every other path rejects
                // here, whatever handler the executor has: never run unasked.
                ToolEvent::ApprovalRequired { ticket, .. } => {
                    let request = ticket.request();
                    let name = request.plugin_digest.as_ref().and_then(|d| plugin_names.get(d));
                    let message = approve::prompt(request, name.map(String::as_str));
                    let mut by = "mcp_unavailable";
                    let approved = match approval.as_ref() {
                        // A 2026-07-28 round trip answers input_required and
                        // the client retries the whole call: a program would
                        // run again from its start, repeating the calls before
                        // this one. Its gated calls are denied instead.
                        Approval::RoundTrip { .. } if nested => {
                            tracing::warn!(tool = %request.tool, "a program's gated call needs elicitation (a 2025-11-25 session); not approved");
                            false
                        }
                        Approval::Elicit { able: false, .. } => false,
                        Approval::RoundTrip { able: false, retry: None, .. } => {
                            refusal = Some(Refusal::NoElicitation);
                            false
                        }
                        Approval::Elicit { allowed, .. } if allowed.allows(request) => {
                            tracing::info!(tool = %request.tool, "auto-approved (allowed for this MCP session)");
                            by = "mcp_session_allowance";
                            true
                        }
                        Approval::Elicit { peer, timeout, allowed, task, .. } => {
                            // The call now waits for a person: the host may list it.
                            permit.approval_asked();
                            let mut form = approve::elicitation(message, Some(&request.tool));
                            if let Some(task) = task {
                                task.relate(&mut form);
                                task.input_required(&format!("waiting for approval to run {}", request.tool)).await;
                            }
                            // Withdrawn if the select below stops waiting for it.
                            let ask = crate::elicit::elicit(peer, form, *timeout);
                            let approved = tokio::select! {
                                answer = ask => match answer {
                                    Ok(result) => {
                                        by = "mcp_elicitation";
                                        if approve::always(&result) {
                                            allowed.allow(request);
                                        }
                                        approve::accepted(&result)
                                    }
                                    Err(e) => {
                                        tracing::warn!(tool = %request.tool, error = %e, "approval not answered; not approved");
                                        false
                                    }
                                },
                                // A client that gave up on the call approves nothing.
                                () = client_gone.cancelled() => false,
                                // The host decided it (whoever answers first wins):
                                // the ticket's decision no longer counts.
                                () = decided_elsewhere(&state.approvals, &request.call_id) => false,
                            };
                            if let Some(task) = task {
                                task.working().await;
                            }
                            approved
                        }
                        Approval::RoundTrip { states, retry: Some((state, responses)), .. } => {
                            by = "mcp_input_required";
                            match states.redeem(state, responses.as_ref(), request).await {
                                Ok(approved) => approved,
                                Err(e) => {
                                    tracing::warn!(tool = %request.tool, "{e}; not approved");
                                    refusal = Some(Refusal::State(e));
                                    false
                                }
                            }
                        }
                        Approval::RoundTrip { states, retry: None, .. } => {
                            match states.ask(request, message) {
                                Ok(result) => asked = Some(result),
                                Err(e) => tracing::warn!(tool = %request.tool, error = %e, "cannot seal an approval"),
                            }
                            // This round does not run the call: it answers input_required.
                            false
                        }
                    };
                    state.approvals.note_decider(&request.call_id, by);
                    if approved {
                        ticket.approve();
                    } else {
                        ticket.reject();
                    }
                }
                ToolEvent::ToolLog { call, level, message } => {
                    if let Some((peer, threshold)) = &log {
                        logging::send(peer, *threshold, level, &call.name, &message).await;
                    }
                }
                ToolEvent::ToolProgress { message, .. } => {
                    if let Some(step) = throttle.as_mut().and_then(|t| t.offer(message, tokio::time::Instant::now())) {
                        notify(progress.as_ref(), step).await;
                    }
                }
                _ => {}
            }
        }
        // The turn is over: the latest message goes before the result.
        if let Some(step) = throttle.as_mut().and_then(|t| t.flush(tokio::time::Instant::now())) {
            notify(progress.as_ref(), step).await;
        }
    };
    let cancel = state.cancel.clone();
    let watch = async move {
        cancelled.cancelled().await;
        // Cancelling the run interrupts the instance at its next epoch tick.
        cancel.cancel(Some(CANCELLED_BY_CLIENT));
        std::future::pending::<()>().await;
    };
    let outcome = tokio::select! {
        (outcome, ()) = async { tokio::join!(turn, forward) } => outcome,
        () = watch => unreachable_pending(),
    };
    let entry = match outcome {
        Ok(entry) => Some(entry),
        Err(TurnError::Cancelled { results, .. } | TurnError::BudgetExceeded { results, .. }) => {
            results.into_iter().find(|r| r.call_id == call.id)
        }
        Err(_) => None,
    };
    // A question's round may answer instead of the tool (2026-07-28).
    match question.as_ref().and_then(|q| q.take()) {
        Some(RoundOutcome::Asked(input_required)) => asked = Some(input_required),
        Some(RoundOutcome::NoElicitation) => refusal = Some(Refusal::NoElicitation),
        Some(RoundOutcome::State(e)) => refusal = Some(Refusal::State(e)),
        None => {}
    }
    permit.finished(&CallOutcome {
        tool: &call.name,
        elapsed: started.elapsed(),
        result: entry.as_ref(),
        input_required: asked.is_some(),
    });
    if let Some(refusal) = refusal {
        return Err(refusal.into_error());
    }
    if let Some(input_required) = asked {
        return Ok(CallToolResponse::InputRequired(input_required));
    }
    Ok(match entry {
        Some(entry) => to_mcp(entry).into(),
        // The call was cancelled before it recorded a result: a runner would
        // answer it with the cancellation filler (docs/semantics.md D8).
        None => CallToolResult::error(vec![ContentBlock::text(text::RUN_CANCELLED)]).into(),
    })
}

/// Returns once `call_id` no longer waits on `approvals`.
async fn decided_elsewhere(approvals: &ApprovalChannel, call_id: &str) {
    while approvals.is_pending(call_id) {
        tokio::time::sleep(DECIDED_ELSEWHERE_POLL).await;
    }
}

/// Sleeps until `due`, or forever when nothing waits.
async fn sleep_until(due: Option<tokio::time::Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// Sends one progress notification; a client gone away only loses its
/// progress, and the call's result still counts.
async fn notify(progress: Option<&(Peer<RoleServer>, ProgressToken, Duration)>, step: Step) {
    let Some((peer, token, _)) = progress else { return };
    let note = ProgressNotificationParam::new(token.clone(), f64::from(step.progress)).with_message(step.message);
    if let Err(e) = peer.notify_progress(note).await {
        tracing::debug!(error = %e, "progress notification not delivered");
    }
}

fn content_block(part: ContentPart) -> ContentBlock {
    match part {
        ContentPart::Image { mime_type, data } => ContentBlock::image(BASE64.encode(data), mime_type),
        ContentPart::ResourceLink { uri, name, mime_type } => {
            let link = Resource::new(uri, name);
            ContentBlock::resource_link(match mime_type {
                Some(m) => link.with_mime_type(m),
                None => link,
            })
        }
        // Text, and any part a later contract adds, as the model reads it.
        other => ContentBlock::text(other.model_text()),
    }
}

/// `watch` never completes; this keeps the select total without a panic.
fn unreachable_pending() -> Result<ToolResultEntry, TurnError> {
    Err(TurnError::Cancelled { reason: text::RUN_CANCELLED.to_owned(), results: Vec::new() })
}

/// A text result is one text block; a JSON result is `structuredContent`
/// plus lovia's rendering of it as text; content parts are text, image and
/// resource-link blocks in order (their text parts under the output cap); an
/// error is `isError` with the model-facing string.
pub(crate) fn to_mcp(entry: ToolResultEntry) -> CallToolResult {
    if entry.is_error {
        return CallToolResult::error(vec![ContentBlock::text(entry.output)]);
    }
    if let Some(parts) = entry.parts {
        return CallToolResult::success(parts.into_iter().map(content_block).collect());
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(entry.output)]);
    // `raw` is kept only when the output was not truncated and is at most
    // 16,000 characters (docs/semantics.md §12): a larger value reaches the
    // client as lovia's capped text only, never past the tool's cap.
    result.structured_content = match entry.raw {
        None | Some(Value::String(_)) => None,
        Some(Value::Object(o)) => Some(Value::Object(o)),
        Some(other) => {
            let mut wrapped = Map::new();
            wrapped.insert(WRAPPED_RESULT_KEY.to_owned(), other);
            Some(Value::Object(wrapped))
        }
    };
    result
}
