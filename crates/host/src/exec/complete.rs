//! The end of a call: render (docs/semantics.md §11), truncate (§12), record the one
//! result and emit `ToolCallCompleted`.

use super::tool::Tool;
use super::{EventSink, ExecSettings, ToolCall, ToolEvent, ToolResultEntry};
use crate::call::CallContext;
use crate::call::ToolOutput;
use crate::call::{ErrorKind, Failure, is_valid_error_kind, text};
use crate::call::{Rendered, render_default, render_json};
use crate::call::{render_parts, truncate};
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// Past this many characters the raw value is not retained (docs/semantics.md §12).
const RAW_RETENTION_CHARS: usize = 16_000;

pub(super) type Results = Arc<Mutex<Vec<ToolResultEntry>>>;

pub(super) async fn record(
    results: &Results,
    events: &EventSink,
    call: &ToolCall,
    entry: ToolResultEntry,
    result: Value,
) {
    let (is_error, error_kind, output, parts, tool_error_kind) =
        (entry.is_error, entry.error_kind, entry.output.clone(), entry.parts.clone(), entry.tool_error_kind.clone());
    results.lock().unwrap_or_else(|p| p.into_inner()).push(entry);
    events
        .emit_kept(ToolEvent::ToolCallCompleted {
            call: call.clone(),
            result,
            is_error,
            error_kind,
            output,
            parts,
            tool_error_kind,
        })
        .await;
}

/// A preflight rejection: final text, never rendered or truncated.
pub(super) async fn reject(results: &Results, events: &EventSink, call: &ToolCall, kind: ErrorKind, text: String) {
    let entry = ToolResultEntry {
        call_id: call.id.clone(),
        output: text.clone(),
        raw: None,
        parts: None,
        tool_error_kind: None,
        is_error: true,
        error_kind: Some(kind),
    };
    record(results, events, call, entry, Value::String(text)).await;
}

/// An execution error outside the attempt loop (a panicking native body).
pub(super) async fn record_error(results: &Results, events: &EventSink, call: &ToolCall, failure: &Failure) {
    let text = text::tool_error(failure);
    let entry = ToolResultEntry {
        call_id: call.id.clone(),
        output: text.clone(),
        raw: Some(Value::String(text.clone())),
        parts: None,
        tool_error_kind: None,
        is_error: true,
        error_kind: Some(failure.kind()),
    };
    record(results, events, call, entry, Value::String(text)).await;
}

/// The end of an executed call.
pub(super) async fn finish(
    results: &Results,
    events: &EventSink,
    settings: &ExecSettings,
    tool: &Tool,
    call: &ToolCall,
    ctx: &CallContext,
    outcome: Result<ToolOutput, Failure>,
) {
    let limit = tool.spec.max_output_chars.or(settings.max_output_chars);
    // Checked here too: a native tool or a policy may build the failure, and
    // the kind reaches metrics labels.
    let tool_error_kind = match &outcome {
        Err(Failure::Tool { kind: Some(kind), .. }) if is_valid_error_kind(kind) => Some(kind.clone()),
        _ => None,
    };
    let (text, raw, error_kind, parts) = match outcome {
        // Parts are their own rendering: renderers are bypassed and the
        // model reads the projection (docs/semantics.md §11).
        Ok(ToolOutput::Parts(parts)) => {
            let raw = serde_json::to_value(&parts).unwrap_or(Value::Null);
            (render_parts(&parts), raw, None, Some(parts))
        }
        Ok(output) => {
            let raw = match &output {
                ToolOutput::Text(t) => Value::String(t.clone()),
                ToolOutput::Json(v) => v.clone(),
                ToolOutput::Parts(_) => Value::Null,
            };
            match render(tool, settings, &output, ctx) {
                Ok(text) => (text, raw, None, None),
                Err(message) => {
                    events.emit(ToolEvent::ToolCallFailed { call: call.clone(), error: message.clone() });
                    // No class-name fallback here: an empty message stays empty (docs/semantics.md §5).
                    let text = text::rendering_failed(&message);
                    (text.clone(), Value::String(text), Some(ErrorKind::ToolError), None)
                }
            }
        }
        Err(failure) => {
            events.emit(ToolEvent::ToolCallFailed { call: call.clone(), error: failure.to_string() });
            let text = text::tool_error(&failure);
            (text.clone(), Value::String(text), Some(failure.kind()), None)
        }
    };
    let truncated = limit.and_then(|l| truncate(&text, l));
    if truncated.is_some() {
        // Said on the call's span, which is current here.
        settings.telemetry.annotate_current(|| lovia_telemetry::KeyValue::new(lovia_telemetry::attr::TRUNCATED, true));
    }
    // Parts keep no raw value; a truncated result drops its parts and
    // degrades to the truncated text (docs/semantics.md §12).
    // A tool that declares an output schema keeps its value up to its output
    // cap: an MCP client must get structured content for it (docs/mcp.md).
    let schema_bound = tool.spec.output_schema.is_some() && error_kind.is_none();
    let keep_raw =
        truncated.is_none() && parts.is_none() && (schema_bound || text.chars().count() <= RAW_RETENTION_CHARS);
    let parts = if truncated.is_some() { None } else { parts };
    let output = truncated.unwrap_or(text);
    let entry = ToolResultEntry {
        call_id: call.id.clone(),
        output,
        raw: keep_raw.then(|| raw.clone()),
        parts,
        tool_error_kind,
        is_error: error_kind.is_some(),
        error_kind,
    };
    record(results, events, call, entry, raw).await;
}

/// Tool renderer, else agent renderer, else the default (docs/semantics.md §11).
fn render(tool: &Tool, settings: &ExecSettings, output: &ToolOutput, ctx: &CallContext) -> Result<String, String> {
    match tool.renderer.as_ref().or(settings.renderer.as_ref()) {
        None => Ok(render_default(output)),
        Some(renderer) => Ok(match renderer(output, ctx)? {
            Rendered::Text(t) => t,
            Rendered::Value(Value::String(s)) => s,
            Rendered::Value(v) => render_json(&v),
        }),
    }
}
