//! Preflight (docs/semantics.md §4.1 with docs/semantics.md D1): serial, in request order — cancel,
//! budget, lookup, handoff dedup, parse + coerce + validate, approval
//! predicate, approval flow. A rejection is one `ToolCallCompleted(is_error)`
//! with no `ToolCallStarted`.

use super::complete::{Results, reject};
use super::tool::{Body, Tool};
use super::{BudgetExceeded, EventSink, Executor, RunState, ToolCall, ToolEvent};
use crate::approval::{ApprovalDecision, ApprovalRequest, ApprovalTicket, HandlerAnswer, NeedsApproval};
use crate::args::{ArgumentError, parse_object};
use crate::call::{CallContext, ErrorKind, Failure, text};
use crate::plugin::ApprovalCheckError;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

pub(super) enum Preflight {
    /// The call may run; `tool` is shared with the toolset, never copied per call.
    /// `raw_args`, the model's arguments before coercion, is kept only for a
    /// tool with policies (they see them, and each attempt checks them
    /// again); the hot path moves the parsed value through the checks
    /// without a copy. `checking` is what parsing and checking the arguments
    /// took: the first attempt's timeout is shortened by it.
    Ready { tool: Arc<Tool>, raw_args: Option<Value>, prepared: Value, checking: Duration },
    /// Rejected; its result is recorded.
    Rejected,
    /// The run's budget tripped: `tool call count N exceeds budget M`.
    Budget(String),
    /// The run was cancelled.
    Cancelled,
}

pub(super) async fn preflight(
    exec: &Executor,
    call: &ToolCall,
    ctx: &CallContext,
    run: &RunState,
    events: &EventSink,
    results: &Results,
    handoff: &mut Option<String>,
) -> Preflight {
    if run.cancel.is_cancelled() {
        return Preflight::Cancelled;
    }
    // Every requested call counts, including ones rejected below; strictly greater trips (docs/semantics.md §7).
    let count = run.tool_calls.fetch_add(1, Ordering::SeqCst) + 1;
    if let Some(max) = exec.settings.max_tool_calls
        && count > max
    {
        return Preflight::Budget(BudgetExceeded::ToolCalls { used: count, max }.to_string());
    }
    if let Err(exceeded) = run.meter.check(count) {
        return Preflight::Budget(exceeded.to_string());
    }
    let Some(shared) = exec.tools.get_shared(&call.name) else {
        reject(results, events, call, ErrorKind::UnknownTool, text::unknown_tool(&call.name)).await;
        return Preflight::Rejected;
    };
    let tool: &Tool = shared;
    if let (Some(_), Some(target)) = (&tool.handoff, handoff.as_ref()) {
        reject(results, events, call, ErrorKind::ToolError, text::handoff_not_performed(target)).await;
        return Preflight::Rejected;
    }
    // The call's timeout starts before its arguments are parsed and checked
    // (docs/semantics.md D15): a slow check is part of the call, not free.
    let started = Instant::now();
    let timeout = tool.timeout.or(exec.settings.default_timeout);
    let raw_args = match parse_object(&call.arguments) {
        Ok(v) => v,
        Err(ArgumentError::InvalidJson { .. }) if run.cut_off => {
            reject(results, events, call, ErrorKind::InvalidArguments, text::incomplete_arguments(&call.name)).await;
            return Preflight::Rejected;
        }
        Err(e) => {
            reject(results, events, call, ErrorKind::InvalidArguments, e.to_string()).await;
            return Preflight::Rejected;
        }
    };
    // The model's own arguments outlive the checks only where something
    // reads them later: policies, or an approval predicate.
    let predicate = matches!(tool.approval, NeedsApproval::Predicate(_));
    let raw_kept = (predicate || !tool.policies.is_empty()).then(|| raw_args.clone());
    let prepared = match &tool.validator {
        // The text was parsed above; the validator takes the value.
        // A costly check moves to the blocking pool (`prepare_value_async`).
        Some(v) => match v
            .prepare_value_charged(
                raw_args,
                Some(&call.arguments),
                timeout.and_then(|t| started.checked_add(t)),
                tool.plugin().and_then(|p| p.cpu_share(run.tenant.as_deref())),
            )
            .await
        {
            Ok(p) => p,
            Err(ArgumentError::DeadlinePassed) => {
                let ms = timeout.map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
                let failure = Failure::TimedOut { ms };
                reject(results, events, call, ErrorKind::Timeout, text::tool_error(&failure)).await;
                return Preflight::Rejected;
            }
            Err(e @ ArgumentError::Invalid { .. }) => {
                reject(results, events, call, ErrorKind::InvalidArguments, text::tool_error(&e)).await;
                return Preflight::Rejected;
            }
            Err(e) => {
                reject(results, events, call, ErrorKind::InvalidArguments, e.to_string()).await;
                return Preflight::Rejected;
            }
        },
        None => raw_args,
    };
    // Measured before approval: waiting for a person is not the call's time.
    let checking = started.elapsed();
    let gated = match &tool.approval {
        NeedsApproval::Never => Ok(false),
        NeedsApproval::Always => Ok(true),
        NeedsApproval::Predicate(predicate) => predicate(raw_kept.as_ref().unwrap_or(&prepared), ctx),
        NeedsApproval::Plugin => match &tool.body {
            Body::Component { plugin, .. } => {
                match plugin.needs_approval(&call.name, &prepared.to_string(), ctx).await {
                    // A cancelled run ends here, as it would while waiting for a decision.
                    Err(ApprovalCheckError::Cancelled) => return Preflight::Cancelled,
                    other => other.map_err(|e| e.to_string()),
                }
            }
            Body::Native(_) => Ok(true),
        },
    };
    match gated {
        Ok(false) => {}
        Ok(true) => match decide(exec, tool, call, ctx, run, events).await {
            Some(ApprovalDecision::Approve) => {}
            Some(ApprovalDecision::Deny) => {
                reject(results, events, call, ErrorKind::Denied, text::not_approved(&call.name)).await;
                return Preflight::Rejected;
            }
            None => return Preflight::Cancelled,
        },
        Err(error) => {
            events.emit(ToolEvent::ToolCallFailed { call: call.clone(), error });
            reject(results, events, call, ErrorKind::Denied, text::approval_check_failed(&call.name)).await;
            return Preflight::Rejected;
        }
    }
    if let Some(target) = &tool.handoff {
        *handoff = Some(target.clone());
    }
    let raw_args = raw_kept.filter(|_| !tool.policies.is_empty());
    Preflight::Ready { tool: shared.clone(), raw_args, prepared, checking }
}

/// The approval flow (docs/semantics.md §13): a decision while the consumer holds the
/// event wins, then the handler (out-of-band decisions still count while it
/// runs), then deny. `None` when the run is cancelled meanwhile.
async fn decide(
    exec: &Executor,
    tool: &Tool,
    call: &ToolCall,
    ctx: &CallContext,
    run: &RunState,
    events: &EventSink,
) -> Option<ApprovalDecision> {
    let request = ApprovalRequest {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        arguments: call.arguments.clone(),
        plugin_digest: match &tool.body {
            Body::Component { plugin, .. } => Some(plugin.digest().to_owned()),
            Body::Native(_) => None,
        },
    };
    let span = super::trace::approval(&exec.settings.telemetry, call);
    let (decision, via, by) = span.within(wait(exec, call, ctx, run, events, request)).await;
    let name = match decision {
        Some(ApprovalDecision::Approve) => "approved",
        Some(ApprovalDecision::Deny) => "denied",
        None => "cancelled",
    };
    super::trace::decided(&span, name, via, by);
    decision
}

/// How [`wait`] ended: the decision (`None`: the run was cancelled), how it
/// was reached and who made it, where the decider said.
type Waited = (Option<ApprovalDecision>, &'static str, Option<&'static str>);

/// [`decide`]'s wait, and how it ended: `always_allow`, `consumer`,
/// `handler`, `timeout` or `default_deny` (docs/telemetry.md).
async fn wait(
    exec: &Executor,
    call: &ToolCall,
    ctx: &CallContext,
    run: &RunState,
    events: &EventSink,
    request: ApprovalRequest,
) -> Waited {
    // A person allowed this tool for the session: approved without asking.
    if run.approvals.is_allowed(&call.name) {
        events.emit(ToolEvent::AutoApproved { call: call.clone() });
        return (Some(ApprovalDecision::Approve), "always_allow", None);
    }
    // A decision that lands: what it says and who said it; a dropped
    // sender (the call was discarded) denies.
    let landed = |d: Result<crate::approval::Decided, _>| -> Waited {
        match d {
            Ok(d) => (Some(d.decision), "consumer", d.by),
            Err(_) => (Some(ApprovalDecision::Deny), "consumer", None),
        }
    };
    let mut decision = run.approvals.register(request.clone());
    let (held, released) = oneshot::channel::<()>();
    let ticket = ApprovalTicket { request: request.clone(), channel: run.approvals.clone(), _held: held };
    events.emit_kept(ToolEvent::ApprovalRequired { call: call.clone(), ticket }).await;

    // (a) The consumer holds the ticket: wait for a decision, its release, or cancellation.
    tokio::select! {
        biased;
        d = &mut decision => return landed(d),
        () = run.cancel.cancelled() => { run.approvals.discard(&call.id); return (None, "consumer", None) }
        _ = released => {}
    }
    if let Ok(d) = decision.try_recv() {
        return landed(Ok(d));
    }
    // (b) The handler; an out-of-band decision landing meanwhile also counts.
    if let Some(handler) = &exec.settings.approval_handler {
        let answer = tokio::select! {
            biased;
            d = &mut decision => return landed(d),
            () = run.cancel.cancelled() => { run.approvals.discard(&call.id); return (None, "consumer", None) }
            a = handler.decide(&request, ctx) => a,
        };
        match answer {
            Ok(HandlerAnswer::Allow) => {
                run.approvals.discard(&call.id);
                return (Some(ApprovalDecision::Approve), "handler", None);
            }
            Ok(HandlerAnswer::Deny) => {
                run.approvals.discard(&call.id);
                return (Some(ApprovalDecision::Deny), "handler", None);
            }
            Ok(HandlerAnswer::TimedOut) => {
                run.approvals.discard(&call.id);
                return (Some(ApprovalDecision::Deny), "timeout", None);
            }
            Ok(HandlerAnswer::Ask) => {}
            Err(error) => events.emit(ToolEvent::ToolCallFailed { call: call.clone(), error }),
        }
    }
    // (c) Still undecided: fail closed.
    run.approvals.discard(&call.id);
    (Some(ApprovalDecision::Deny), "default_deny", None)
}
