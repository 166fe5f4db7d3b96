//! A run's spans (docs/telemetry.md): `invoke_agent` for the run, `chat` for
//! each model request. The executor makes the tool calls' spans under them.

use crate::checkpoint::Checkpoint;
use crate::provider::{ModelProvider, ModelReply, ModelRequest, ProviderError};
use crate::{Agent, RunError};
use lovia_host::{RunState, Usage};
use lovia_telemetry::{KeyValue, Scope, SpanKind, attr, propagate};
use std::sync::Mutex;

/// The run's span. A run resumed from a checkpoint that kept its trace
/// continues that trace: its span is a child of the span the checkpoint
/// names (the interrupted run's), marked `lovia.run.resumed`. The
/// checkpoint then keeps this span's context, for a later takeover.
pub(crate) fn run_span(
    agent: &Agent,
    provider: &dyn ModelProvider,
    state: &RunState,
    checkpoint: &Mutex<Checkpoint>,
    resuming: bool,
) -> Scope {
    let telemetry = &agent.tool_settings.telemetry;
    if !telemetry.is_on() {
        return Scope::none();
    }
    let mut cp = checkpoint.lock().unwrap_or_else(|p| p.into_inner());
    let kept = cp.trace.as_deref().filter(|_| resuming).map(propagate::from_traceparent);
    let parent = kept.clone().unwrap_or_else(|| telemetry.current());
    let span = telemetry.start(format!("invoke_agent {}", agent.name), SpanKind::Internal, &parent, || {
        let mut attributes = vec![
            KeyValue::new(attr::GEN_AI_OPERATION, "invoke_agent"),
            KeyValue::new(attr::GEN_AI_AGENT_NAME, agent.name.clone()),
            KeyValue::new(attr::GEN_AI_PROVIDER, provider.name().to_owned()),
            KeyValue::new(attr::RUN_ID, state.run_id.clone()),
        ];
        if let Some(model) = &agent.model {
            attributes.push(KeyValue::new(attr::GEN_AI_REQUEST_MODEL, model.clone()));
        }
        if let Some(tenant) = &state.tenant {
            attributes.push(KeyValue::new(attr::TENANT, tenant.clone()));
        }
        if let Some(session) = &state.session_id {
            attributes.push(KeyValue::new(attr::GEN_AI_CONVERSATION, session.clone()));
        }
        if kept.is_some() {
            attributes.push(KeyValue::new(attr::RUN_RESUMED, true));
        }
        attributes
    });
    if let Some(cx) = span.context() {
        cp.trace = propagate::traceparent(cx);
    }
    span
}

/// How the run ended, on its span.
pub(crate) fn run_end<T>(span: &Scope, outcome: &Result<T, RunError>, usage: &Usage) {
    span.set_with(|| {
        vec![
            KeyValue::new(attr::GEN_AI_INPUT_TOKENS, usage.input_tokens as i64),
            KeyValue::new(attr::GEN_AI_OUTPUT_TOKENS, usage.output_tokens as i64),
        ]
    });
    if let Err(error) = outcome {
        span.fail(error.kind(), error.to_string());
    }
}

/// One model request's span.
pub(crate) fn chat_span(agent: &Agent, provider: &dyn ModelProvider, request: &ModelRequest, turn: u32) -> Scope {
    let telemetry = &agent.tool_settings.telemetry;
    if !telemetry.is_on() {
        return Scope::none();
    }
    let model = request.model.clone().unwrap_or_default();
    let span =
        telemetry.start(format!("chat {model}").trim_end().to_owned(), SpanKind::Client, &telemetry.current(), || {
            vec![
                KeyValue::new(attr::GEN_AI_OPERATION, "chat"),
                KeyValue::new(attr::GEN_AI_PROVIDER, provider.name().to_owned()),
                KeyValue::new(attr::GEN_AI_REQUEST_MODEL, model.clone()),
                KeyValue::new(attr::TURN, i64::from(turn)),
            ]
        });
    span.set_content(|| {
        vec![KeyValue::new(attr::GEN_AI_INPUT_MESSAGES, serde_json::to_string(&request.messages).unwrap_or_default())]
    });
    span
}

/// The model's reply, on its request's span.
pub(crate) fn chat_end(span: &Scope, reply: &Result<ModelReply, ProviderError>) {
    match reply {
        Ok(reply) => {
            span.set_with(|| {
                let mut attributes = Vec::with_capacity(3);
                if let Some(reason) = &reply.finish_reason {
                    let reason: String = reason.clone().into();
                    attributes.push(KeyValue::new(
                        attr::GEN_AI_FINISH_REASONS,
                        opentelemetry::Value::Array(vec![opentelemetry::StringValue::from(reason)].into()),
                    ));
                }
                if let Some(usage) = &reply.usage {
                    attributes.push(KeyValue::new(attr::GEN_AI_INPUT_TOKENS, usage.input_tokens as i64));
                    attributes.push(KeyValue::new(attr::GEN_AI_OUTPUT_TOKENS, usage.output_tokens as i64));
                }
                attributes
            });
            span.set_content(|| {
                let message = serde_json::json!({"content": reply.content, "tool_calls": reply.tool_calls});
                vec![KeyValue::new(attr::GEN_AI_OUTPUT_MESSAGES, message.to_string())]
            });
        }
        Err(error) => span.fail("provider", error.to_string()),
    }
}
