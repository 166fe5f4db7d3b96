//! A server's listed tool as a host-native [`Tool`]: named `<prefix><raw>`,
//! its input schema normalised and compiled for validation, the server's
//! settings (timeout, retries, approval, output cap) on it, and a body that
//! calls the server (docs/semantics.md §20).

use super::approval::ApprovalNeed;
use super::config::{MAX_SCHEMA_BYTES, McpServerConfig};
use super::content::result_output;
use super::supervisor::Supervisor;
use lovia_host::{Failure, NeedsApproval, Tool, ToolHints};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// The hint under a transport failure, after which the session is restarted.
const FAILURE_HINT: &str = "The MCP server did not answer this call; it is restarted for the next one. Retry the call, or continue without this tool.";

/// The hint under an answer that is not a result (a JSON-RPC error): the
/// server is up and keeps its session, so a retry of the same call is
/// likely to get the same answer.
const REFUSED_HINT: &str = "The MCP server answered this call with an error instead of a result; it keeps running. Check the arguments against the tool's description, or continue without this tool.";

/// The text of a failed call: `MCP tool '<tool>' failed: <reason>` with the
/// hint that says whether the server is restarted; the executor puts
/// `Tool error: ` before it.
pub(crate) fn call_failed(tool: &str, reason: &str, restarted: bool) -> Failure {
    Failure::Tool {
        message: format!("MCP tool '{tool}' failed: {reason}"),
        hint: Some(if restarted { FAILURE_HINT } else { REFUSED_HINT }.into()),
        kind: None,
    }
}

/// The reference's normalisation: a missing or empty schema takes no
/// arguments, a missing `type` is `object`, missing or non-object
/// `properties` are `{}` (OpenAI's strict tool format requires the key).
pub(crate) fn normalise_schema(schema: Option<&Value>) -> Result<Value, String> {
    let mut schema = match schema {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(other) => return Err(format!("the input schema is {}, not an object", kind(other))),
    };
    if schema.is_empty() {
        return Ok(json!({"type": "object", "properties": {}}));
    }
    match schema.get("type") {
        None => {
            schema.insert("type".into(), json!("object"));
        }
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => return Err(format!("the input schema's type is {other}, not \"object\"")),
    }
    if !schema.get("properties").is_some_and(Value::is_object) {
        schema.insert("properties".into(), json!({}));
    }
    Ok(Value::Object(schema))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `raw` (one entry of `tools/list`) as a lovia tool, or why it is refused.
pub(crate) fn adapt(server: &Arc<Supervisor>, raw: &Value) -> Result<Tool, Refused> {
    let config: &McpServerConfig = &server.config;
    let raw_name = raw.get("name").and_then(Value::as_str).unwrap_or_default();
    let refuse = |reason: String| Refused { tool: shown(raw_name), reason };
    if raw_name.is_empty() {
        return Err(refuse("the tool has no name".into()));
    }
    let name = format!("{}{raw_name}", config.prefix());
    if !lovia_host::call::is_valid_name(&name) {
        return Err(refuse(format!(
            "the name {:?} does not match ^[a-zA-Z0-9_-]{{1,64}}$ (set a shorter `prefix`, or `exclude` the tool)",
            shown(&name)
        )));
    }
    let schema_bytes = raw.get("inputSchema").map_or(0, |s| s.to_string().len());
    if schema_bytes > MAX_SCHEMA_BYTES {
        return Err(refuse(format!("the input schema is {schema_bytes} bytes; the limit is {MAX_SCHEMA_BYTES}")));
    }
    let schema = normalise_schema(raw.get("inputSchema")).map_err(refuse)?;
    let description = raw.get("description").and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut builder =
        Tool::builder(name.clone()).description(description).parameters(schema).hints(hints(raw.get("annotations")));
    if let Some(title) =
        raw.get("title").and_then(Value::as_str).filter(|t| t.len() <= lovia_host::call::MAX_TITLE_BYTES)
    {
        builder = builder.title(title);
    }
    let (server, tool_name) = (server.clone(), raw_name.to_owned());
    let tool = builder
        .invoke(move |args, ctx| {
            let (server, tool_name) = (server.clone(), tool_name.clone());
            async move {
                let Value::Object(arguments) = args else {
                    // The validator only passes objects.
                    return Err(call_failed(&tool_name, "the arguments are not an object", false));
                };
                match server.call(&tool_name, arguments, ctx.progress.clone()).await {
                    Ok(result) => Ok(result_output(&result)),
                    Err(e) => Err(call_failed(&tool_name, &e.reason, e.restarted)),
                }
            }
        })
        .map_err(|e| refuse(e.to_string()))?;
    let mut tool = tool.with_timeout(config.timeout()).with_retries(config.retries);
    match &config.needs_approval {
        ApprovalNeed::Never => {}
        ApprovalNeed::Always => tool = tool.with_approval(NeedsApproval::Always),
        need => {
            // Judged on the arguments as the model sent them, by the raw name.
            let (need, raw) = (need.clone(), raw_name.to_owned());
            tool = tool.with_approval(NeedsApproval::Predicate(Arc::new(
                move |args: &Value, _ctx: &lovia_host::CallContext| Ok(need.asks(&raw, args)),
            )));
        }
    }
    if let Some(chars) = config.max_output_chars {
        tool = tool.with_max_output_chars(chars);
    }
    Ok(tool)
}

/// The hints the server stated in the tool's `annotations`, and only those:
/// a hint it left out stays unstated, so an MCP client reads it by the
/// protocol's default (`destructiveHint` is true there), never as `false`.
fn hints(annotations: Option<&Value>) -> ToolHints {
    let stated = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_bool);
    let mut hints = ToolHints::default();
    hints.read_only = stated("readOnlyHint");
    hints.destructive = stated("destructiveHint");
    hints.idempotent = stated("idempotentHint");
    hints.open_world = stated("openWorldHint");
    hints
}

/// A listed tool lovia did not take, and why (logged at warn).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refused {
    /// The raw name (at most 80 characters, escaped).
    pub tool: String,
    /// Why.
    pub reason: String,
}

/// At most 80 characters of a server-controlled string, escaped.
fn shown(s: &str) -> String {
    s.chars().take(80).collect::<String>().escape_debug().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_normalised_as_the_reference_does() {
        let empty = json!({"type": "object", "properties": {}});
        assert_eq!(normalise_schema(None), Ok(empty.clone()));
        assert_eq!(normalise_schema(Some(&json!({}))), Ok(empty.clone()));
        assert_eq!(normalise_schema(Some(&json!({"type": "object"}))), Ok(empty));
        assert_eq!(
            normalise_schema(Some(&json!({"properties": {"a": {"type": "string"}}}))),
            Ok(json!({"properties": {"a": {"type": "string"}}, "type": "object"}))
        );
        assert_eq!(
            normalise_schema(Some(&json!({"type": "object", "properties": ["a"]}))),
            Ok(json!({"type": "object", "properties": {}}))
        );
        assert!(normalise_schema(Some(&json!({"type": "array"}))).is_err());
        assert!(normalise_schema(Some(&json!("x"))).is_err());
    }

    #[test]
    fn refusals_say_why() {
        let server = Arc::new(Supervisor::new(McpServerConfig::command("s", "/bin/true")));
        let long = "x".repeat(70);
        let refused = adapt(&server, &json!({"name": long, "inputSchema": {}})).expect_err("too long");
        assert!(refused.reason.contains("does not match"), "{refused:?}");
        let bad =
            adapt(&server, &json!({"name": "t", "inputSchema": {"type": "object", "properties": {"a": {"type": 5}}}}))
                .expect_err("does not compile");
        assert!(bad.reason.contains("tool 's__t'"), "{bad:?}");
        let ok = adapt(&server, &json!({"name": "t", "description": "d"})).expect("taken");
        assert_eq!(ok.name(), "s__t");
        assert_eq!(ok.spec().timeout_ms, Some(60_000));
        let tasks = adapt(&server, &json!({"name": "t", "execution": {"taskSupport": "required"}}));
        assert!(tasks.is_ok(), "a tool that runs only as a task is called as one (task_call.rs)");
        let optional = adapt(&server, &json!({"name": "t", "execution": {"taskSupport": "optional"}}));
        assert!(optional.is_ok(), "a tool that may run as a task also runs as a plain call");
    }

    #[test]
    fn only_the_hints_the_server_stated_are_carried() {
        let server = Arc::new(Supervisor::new(McpServerConfig::command("s", "/bin/true")));
        let raw = json!({"name": "write_file", "annotations": {"destructiveHint": true, "readOnlyHint": false}});
        let hints = adapt(&server, &raw).expect("taken").spec().hints;
        assert_eq!((hints.read_only, hints.destructive), (Some(false), Some(true)));
        assert_eq!((hints.idempotent, hints.open_world), (None, None));
        let bare = adapt(&server, &json!({"name": "t"})).expect("taken").spec().hints;
        assert_eq!(bare, ToolHints::default());
    }
}
