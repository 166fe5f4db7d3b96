//! A run's events as JSON, in one vocabulary: `lovia serve`'s chat stream
//! (SSE) and `lovia run`'s output name and shape them here, so a client of
//! one reads the other. Each surface chooses which events it carries (the
//! chat stream adds its own, such as `replay_truncated` and `question`;
//! `lovia run` adds `turn_started`, `tool_messages` and `turn_ended`), never
//! a second name or shape for one of these.
//!
//! ```
//! use lovia_runner::{RunEvent, wire};
//!
//! let event = RunEvent::RunCompleted { output: "done".into() };
//! let wire = wire::run_event(&event, Some("s1"), false).expect("carried");
//! assert_eq!(wire.name, "run_completed");
//! assert_eq!(wire.data, serde_json::json!({"output": "done", "session_id": "s1"}));
//! ```

use super::RunEvent;
use lovia_host::exec::ToolEvent;
use lovia_host::{ContentPart, ErrorKind};
use serde_json::{Value, json};

/// Every name [`run_event`] and [`tool_event`] give, in the order of
/// [`RunEvent`]'s and [`ToolEvent`]'s variants. A change here changes a
/// public wire format: `tests/golden/events.txt` holds the same list.
pub const EVENT_NAMES: [&str; 12] = [
    "run_started",
    "text_delta",
    "approval_required",
    "approval_auto",
    "tool_call",
    "error",
    "tool_result",
    "tool_progress",
    "tool_attempt_failed",
    "handoff",
    "context_compacted",
    "run_completed",
];

/// One event on the wire: its name (one of [`EVENT_NAMES`]) and its data,
/// a JSON object.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WireEvent {
    /// The event's name.
    pub name: &'static str,
    /// Its data.
    pub data: Value,
}

impl WireEvent {
    fn new(name: &'static str, data: Value) -> WireEvent {
        WireEvent { name, data }
    }
}

/// The wire form of a run event of session `session` (`null` on the wire
/// without one; `resumed` when the run resumes one the store held
/// unfinished); `None` for the events no
/// surface carries as such (turn boundaries, whole messages, tool log lines,
/// and any event a newer runner adds).
pub fn run_event(event: &RunEvent, session: Option<&str>, resumed: bool) -> Option<WireEvent> {
    Some(match event {
        RunEvent::RunStarted { agent, run_id } => WireEvent::new(
            "run_started",
            json!({"run_id": run_id, "session_id": session, "agent": agent, "resumed": resumed}),
        ),
        RunEvent::TextDelta { text } => WireEvent::new("text_delta", json!({"text": text})),
        RunEvent::Tool(event) => return tool_event(event),
        RunEvent::HandoffOccurred { from_agent, to_agent } => {
            WireEvent::new("handoff", json!({"from_agent": from_agent, "to_agent": to_agent}))
        }
        RunEvent::ContextCompacted { reason, tokens_before, tokens_after } => WireEvent::new(
            "context_compacted",
            json!({"reason": reason, "tokens_before": tokens_before, "tokens_after": tokens_after}),
        ),
        RunEvent::RunCompleted { output } => {
            WireEvent::new("run_completed", json!({"output": output, "session_id": session}))
        }
        RunEvent::RunFailed { error } => {
            WireEvent::new("error", json!({"type": error.kind(), "message": error.to_string(), "fatal": true}))
        }
        _ => return None,
    })
}

/// The wire form of a tool event. A call a running tool made (code mode's
/// program, [`ToolEvent::Nested`]) has the same name and data plus `parent`,
/// the making call's id. `None` for a log line.
pub fn tool_event(event: &ToolEvent) -> Option<WireEvent> {
    let call = event.call();
    let (id, name) = (&call.id, &call.name);
    Some(match event {
        ToolEvent::ApprovalRequired { .. } => {
            WireEvent::new("approval_required", json!({"id": id, "name": name, "arguments": call.arguments}))
        }
        ToolEvent::AutoApproved { .. } => {
            WireEvent::new("approval_auto", json!({"id": id, "name": name, "reason": "allowed for this chat"}))
        }
        ToolEvent::ToolCallStarted { .. } => {
            WireEvent::new("tool_call", json!({"id": id, "name": name, "arguments": call.arguments}))
        }
        ToolEvent::ToolCallFailed { error, .. } => {
            WireEvent::new("error", json!({"type": "ToolCallFailed", "message": error, "call_id": id}))
        }
        ToolEvent::ToolCallCompleted { output, is_error, error_kind, parts, tool_error_kind, .. } => {
            let mut data = json!({"id": id, "name": name, "result": output, "is_error": is_error});
            attach_outcome(&mut data, *error_kind, tool_error_kind.as_deref(), parts.as_deref());
            WireEvent::new("tool_result", data)
        }
        ToolEvent::ToolProgress { message, .. } => {
            WireEvent::new("tool_progress", json!({"id": id, "name": name, "message": message}))
        }
        ToolEvent::AttemptFailed { attempt, error, retry_in, .. } => WireEvent::new(
            "tool_attempt_failed",
            json!({"id": id, "name": name, "attempt": attempt, "error": error,
                   "retry_in_ms": u64::try_from(retry_in.as_millis()).unwrap_or(u64::MAX)}),
        ),
        ToolEvent::Nested { parent, event } => {
            let mut nested = tool_event(event)?;
            nested.data["parent"] = json!(parent);
            nested
        }
        _ => return None,
    })
}

/// Adds what a result says besides its text, each only when there is one:
/// `error_kind` on an error result, `tool_error_kind` when the tool named its
/// failure, `parts` for a rich result. The `tool_result` event and the
/// single-call route (`POST /api/tools/{name}/call`) carry these the same way.
pub fn attach_outcome(
    data: &mut Value,
    error_kind: Option<ErrorKind>,
    tool_error_kind: Option<&str>,
    parts: Option<&[ContentPart]>,
) {
    if let Some(kind) = error_kind {
        data["error_kind"] = json!(kind.as_str());
    }
    if let Some(kind) = tool_error_kind {
        data["tool_error_kind"] = json!(kind);
    }
    if let Some(parts) = parts {
        data["parts"] = json!(parts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunError;
    use lovia_host::ToolCall;
    use std::time::Duration;

    /// One event of each kind the wire carries, in [`EVENT_NAMES`]' order,
    /// but for `approval_required`, whose ticket only an executor makes (the
    /// CLI and chat tests see it).
    fn one_of_each() -> Vec<RunEvent> {
        let call = || ToolCall::new("c1", "lookup", r#"{"id": 1}"#);
        let tool = |event: ToolEvent| RunEvent::Tool(event);
        vec![
            RunEvent::RunStarted { agent: "a".into(), run_id: "r".into() },
            RunEvent::TextDelta { text: "t".into() },
            tool(ToolEvent::AutoApproved { call: call() }),
            tool(ToolEvent::ToolCallStarted { call: call() }),
            tool(ToolEvent::ToolCallFailed { call: call(), error: "e".into() }),
            tool(ToolEvent::ToolCallCompleted {
                call: call(),
                result: json!("ok"),
                is_error: false,
                error_kind: None,
                output: "ok".into(),
                parts: None,
                tool_error_kind: None,
            }),
            tool(ToolEvent::ToolProgress { call: call(), message: "m".into() }),
            tool(ToolEvent::AttemptFailed {
                call: call(),
                attempt: 1,
                error: "e".into(),
                retry_in: Duration::from_millis(100),
            }),
            RunEvent::HandoffOccurred { from_agent: "a".into(), to_agent: "b".into() },
            RunEvent::ContextCompacted { reason: "clear".into(), tokens_before: 9, tokens_after: 3 },
            RunEvent::RunCompleted { output: "done".into() },
        ]
    }

    #[test]
    fn each_name_comes_from_one_event_in_order_and_matches_the_golden_list() {
        let names: Vec<&str> =
            one_of_each().iter().map(|e| run_event(e, Some("s"), false).map_or("(none)", |w| w.name)).collect();
        let expected: Vec<&str> = EVENT_NAMES.into_iter().filter(|n| *n != "approval_required").collect();
        assert_eq!(names, expected);
        let golden: Vec<&str> = include_str!("../../../tests/golden/events.txt").lines().collect();
        assert_eq!(golden, EVENT_NAMES, "tests/golden/events.txt is the published list");
    }

    #[test]
    fn a_run_failure_is_an_error_event_with_its_kind() {
        let event = RunEvent::RunFailed { error: RunError::Aborted { message: "stop".into() } };
        let wire = run_event(&event, None, false).expect("carried");
        assert_eq!(wire.name, "error");
        assert_eq!(wire.data["type"], "aborted");
        assert_eq!(wire.data["fatal"], true);
    }

    #[test]
    fn a_nested_call_has_its_parent_and_a_log_line_is_not_carried() {
        let inner = ToolEvent::ToolCallStarted { call: ToolCall::new("n1", "lookup", "{}") };
        let nested = ToolEvent::Nested { parent: "p1".into(), event: Box::new(inner) };
        let wire = tool_event(&nested).expect("carried");
        assert_eq!(wire.name, "tool_call");
        assert_eq!(wire.data["parent"], "p1");
        assert_eq!(wire.data["id"], "n1");
        let log = ToolEvent::ToolLog {
            call: ToolCall::new("c", "t", "{}"),
            level: lovia_host::LogLevel::Info,
            message: "line".into(),
        };
        assert_eq!(tool_event(&log), None);
    }

    #[test]
    fn an_error_result_carries_its_kinds() {
        let event = ToolEvent::ToolCallCompleted {
            call: ToolCall::new("c1", "t", "{}"),
            result: json!("no"),
            is_error: true,
            error_kind: Some(ErrorKind::Timeout),
            output: "Tool error: timed out".into(),
            parts: None,
            tool_error_kind: Some("not_found".into()),
        };
        let wire = tool_event(&event).expect("carried");
        assert_eq!(wire.data["error_kind"], ErrorKind::Timeout.as_str());
        assert_eq!(wire.data["tool_error_kind"], "not_found");
        assert!(wire.data.get("parts").is_none());
    }
}
