//! The executor's spans (docs/telemetry.md): `execute_tool` per call, from
//! its checks to its one result; an `approval` span around a wait for a
//! decision; a `lovia.attempt` span per attempt of a call that may retry.
//! Nothing here runs when telemetry is off but a check of the handle.

use super::complete::Results;
use super::tool::{Body, Tool};
use super::{Executor, RunState, ToolCall, ToolSource};
use crate::call::Failure;
use lovia_telemetry::{KeyValue, Scope, SpanKind, Telemetry, attr};

/// The span of one call, a child of the context current when the turn began.
pub(super) fn tool_span(exec: &Executor, run: &RunState, call: &ToolCall, parent: &lovia_telemetry::Context) -> Scope {
    let telemetry = &exec.settings.telemetry;
    if !telemetry.is_on() {
        return Scope::none();
    }
    let tool_type = match exec.tools.source_of(&call.name) {
        Some(ToolSource::Mcp(_)) => "extension",
        _ => "function",
    };
    let span = telemetry.start(format!("execute_tool {}", call.name), SpanKind::Internal, parent, || {
        let mut attributes = vec![
            KeyValue::new(attr::GEN_AI_OPERATION, "execute_tool"),
            KeyValue::new(attr::GEN_AI_TOOL_NAME, call.name.clone()),
            KeyValue::new(attr::GEN_AI_TOOL_CALL_ID, call.id.clone()),
            KeyValue::new(attr::GEN_AI_TOOL_TYPE, tool_type),
            KeyValue::new(attr::GEN_AI_AGENT_NAME, exec.settings.agent.clone()),
            KeyValue::new(attr::TURN, i64::from(run.turn)),
        ];
        if !run.run_id.is_empty() {
            attributes.push(KeyValue::new(attr::RUN_ID, run.run_id.clone()));
        }
        if let Some(tenant) = &run.tenant {
            attributes.push(KeyValue::new(attr::TENANT, tenant.clone()));
        }
        if let Some(session) = &run.session_id {
            attributes.push(KeyValue::new(attr::GEN_AI_CONVERSATION, session.clone()));
        }
        attributes
    });
    span.set_content(|| vec![KeyValue::new(attr::GEN_AI_TOOL_ARGUMENTS, call.arguments.clone())]);
    span
}

/// The plugin behind a call, on its span.
pub(super) fn plugin(span: &Scope, tool: &Tool) {
    if let Body::Component { plugin, .. } = &tool.body {
        span.set_with(|| {
            let mode = match plugin.config().instance {
                crate::InstanceMode::Fresh => "fresh",
                crate::InstanceMode::Session => "session",
            };
            vec![
                KeyValue::new(attr::PLUGIN_NAME, plugin.info().name.clone()),
                KeyValue::new(attr::PLUGIN_VERSION, plugin.info().version.clone()),
                KeyValue::new(attr::PLUGIN_DIGEST, plugin.digest().to_owned()),
                KeyValue::new(attr::INSTANCE_MODE, mode),
            ]
        });
    }
}

/// The call's one result, on its span: its error kind and (with content
/// captured) the text the model reads. (Whether it was cut is said where
/// it is cut, in `complete`.)
pub(super) fn finish(span: &Scope, results: &Results, call_id: &str) {
    if !span.is_recording() {
        return;
    }
    let results = results.lock().unwrap_or_else(|p| p.into_inner());
    let Some(entry) = results.iter().rev().find(|r| r.call_id == call_id) else {
        // No result: the run was cancelled under it.
        span.fail("cancelled", "the run was cancelled");
        return;
    };
    if let Some(kind) = entry.error_kind {
        span.fail(kind.as_str(), entry.output.chars().take(200).collect::<String>());
        if let Some(kind) = &entry.tool_error_kind {
            span.set(KeyValue::new("lovia.tool.error_kind", kind.clone()));
        }
    }
    span.set_content(|| vec![KeyValue::new(attr::GEN_AI_TOOL_RESULT, entry.output.clone())]);
}

/// The span of one attempt of a call that may be retried.
pub(super) fn attempt(telemetry: &Telemetry, attempt: u32) -> Scope {
    telemetry.start("lovia.attempt", SpanKind::Internal, &telemetry.current(), || {
        vec![KeyValue::new(attr::ATTEMPT, i64::from(attempt))]
    })
}

/// A failed attempt, on its span: its kind and the limit that ended it.
pub(super) fn failed(span: &Scope, failure: &Failure) {
    if !span.is_recording() {
        return;
    }
    span.fail(failure.kind().as_str(), failure.to_string());
    limit(span, failure);
}

/// The limit that ended a call or attempt, on its span (its error comes
/// from the result [`finish`] reads).
pub(super) fn limit(span: &Scope, failure: &Failure) {
    if let Some(limit) = failure.limit() {
        span.set(KeyValue::new(attr::LIMIT, limit));
    }
}

/// The span of a wait for an approval decision.
pub(super) fn approval(telemetry: &Telemetry, call: &ToolCall) -> Scope {
    telemetry.start("lovia.approval", SpanKind::Internal, &telemetry.current(), || {
        vec![KeyValue::new(attr::GEN_AI_TOOL_NAME, call.name.clone())]
    })
}

/// How an approval ended, on its span: the decision, how, and who.
pub(super) fn decided(span: &Scope, decision: &'static str, via: &'static str, by: Option<&'static str>) {
    span.set_with(|| {
        let mut attributes =
            vec![KeyValue::new(attr::APPROVAL_DECISION, decision), KeyValue::new(attr::APPROVAL_VIA, via)];
        if let Some(by) = by {
            attributes.push(KeyValue::new(attr::APPROVAL_BY, by));
        }
        attributes
    });
}
