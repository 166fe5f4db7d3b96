//! `tools/list`: each lovia tool as an MCP `Tool`, in the toolset's order.

use lovia_host::{Executor, ToolSpec, Toolset};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// A tool that cannot be described to an MCP client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// MCP requires `inputSchema` to be a JSON object; lovia's loader
    /// already insists on an object schema, so this only catches a host
    /// tool built by hand with something else.
    #[error("tool '{tool}' cannot be served over MCP: its parameter schema is not a JSON object")]
    SchemaNotAnObject {
        /// The tool.
        tool: String,
    },
}

/// The key a non-object JSON result is wrapped under in `structuredContent`
/// (MCP requires an object there and an `outputSchema` of type object).
pub(crate) const WRAPPED_RESULT_KEY: &str = "result";

/// The MCP descriptions of every tool, in the toolset's insertion order, so
/// that two listings of the same plugins are byte-identical.
/// The first line of the server's `instructions`.
const INTRODUCTION: &str = "Tools running as sandboxed WebAssembly components under lovia.";

/// The server's `instructions`, where MCP puts text for the model: the
/// introduction, then `context` (a workspace's section), then the
/// instructions of each plugin with a tool here, once per plugin in tool
/// order; joined by a blank line, as the runner joins its system message.
pub(crate) fn instructions(tools: &Toolset, context: Option<&str>) -> String {
    let mut parts: Vec<&str> = vec![INTRODUCTION];
    parts.extend(context);
    let mut seen: Vec<&str> = Vec::new();
    for plugin in tools.iter().filter_map(lovia_host::Tool::plugin) {
        if seen.contains(&plugin.digest()) {
            continue;
        }
        seen.push(plugin.digest());
        parts.extend(plugin.info().instructions.as_deref());
    }
    parts.retain(|p| !p.trim().is_empty());
    parts.join("\n\n")
}

/// The least per-attempt timeout that makes a tool's calls long enough to
/// offer as tasks: 10 s.
pub(crate) const TASK_WORTHY_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a tool offers to run as a task (`execution.taskSupport:
/// "optional"`): one whose call may wait for a person (it may need
/// approval, or it is `ask_human`), that runs a program (code mode's
/// `run_code`), or whose timeout is none or at least
/// [`TASK_WORTHY_TIMEOUT`] (the shell, a plugin or a source tool that may
/// run long). The others answer fast enough for a plain call.
pub(crate) fn runs_as_task(tool: &lovia_host::Tool, default_timeout: Option<Duration>) -> bool {
    let timeout = tool.spec().timeout_ms.map(Duration::from_millis).or(default_timeout);
    tool.may_need_approval()
        || tool.calls_tools()
        || tool.spec().name == lovia_host::human::ASK_HUMAN
        || timeout.is_none_or(|t| t >= TASK_WORTHY_TIMEOUT)
}

/// The names of `exec`'s tools that offer to run as tasks.
pub(crate) fn task_tools(exec: &Executor) -> HashSet<String> {
    let default_timeout = exec.settings().default_timeout;
    exec.tools().iter().filter(|t| runs_as_task(t, default_timeout)).map(|t| t.spec().name.clone()).collect()
}

pub(crate) fn describe(tools: &Toolset) -> Result<Vec<Tool>, CatalogError> {
    tools.iter().map(|t| describe_one(t.spec())).collect()
}

fn describe_one(spec: &ToolSpec) -> Result<Tool, CatalogError> {
    // The schema the model sees: the same value lovia gives every provider.
    let Value::Object(input) = &spec.parameters else {
        return Err(CatalogError::SchemaNotAnObject { tool: spec.name.clone() });
    };
    let mut tool = Tool::new_with_raw(spec.name.clone(), Some(spec.description.clone().into()), input.clone())
        .with_title(display_title(spec))
        .with_annotations(annotations(spec));
    if let Some(schema) = &spec.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(output_schema(schema)));
    }
    Ok(tool)
}

/// MCP's `outputSchema` must describe an object; a tool returning an array
/// or a scalar gets its schema wrapped the same way its result is
/// (see [`WRAPPED_RESULT_KEY`]).
fn output_schema(schema: &Value) -> JsonObject {
    match schema {
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("object") => o.clone(),
        other => {
            let wrapped = json!({
                "type": "object",
                "properties": { WRAPPED_RESULT_KEY: other },
                "required": [WRAPPED_RESULT_KEY],
            });
            match wrapped {
                Value::Object(o) => o,
                _ => JsonObject::new(),
            }
        }
    }
}

/// The hints the tool's author stated, and only those: an absent hint means
/// something else in MCP (`destructiveHint` defaults to true there), so a
/// hint lovia was not told is never sent as `false`. A component states all
/// four; a tool from an MCP server states what its server sent.
fn annotations(spec: &ToolSpec) -> ToolAnnotations {
    let mut a = ToolAnnotations::with_title(display_title(spec));
    a.read_only_hint = spec.hints.read_only;
    a.destructive_hint = spec.hints.destructive;
    a.idempotent_hint = spec.hints.idempotent;
    a.open_world_hint = spec.hints.open_world;
    a
}

/// The tool's own title (contract 0.2), else one made from its name.
fn display_title(spec: &ToolSpec) -> String {
    spec.title.clone().unwrap_or_else(|| title(&spec.name))
}

/// A display title from the tool's name: `lookup_order` → `Lookup order`,
/// for tools that declare none (every 0.1.0 tool); names are `[a-zA-Z0-9_-]`.
pub(crate) fn title(name: &str) -> String {
    let spaced: String = name.chars().map(|c| if c == '_' || c == '-' { ' ' } else { c }).collect();
    let mut chars = spaced.trim().chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_read_like_words() {
        assert_eq!(title("lookup_order"), "Lookup order");
        assert_eq!(title("spin-ms"), "Spin ms");
        assert_eq!(title("x"), "X");
        assert_eq!(title("_"), "_");
    }

    #[test]
    fn non_object_output_schemas_are_wrapped() {
        let s = output_schema(&json!({"type": "array", "items": {"type": "string"}}));
        assert_eq!(
            Value::Object(s),
            json!({"type": "object", "properties": {"result": {"type": "array", "items": {"type": "string"}}}, "required": ["result"]})
        );
        let o = json!({"type": "object", "properties": {}});
        assert_eq!(Value::Object(output_schema(&o)), o);
    }
}

/// The prefix of lovia's `tools/list` cursors: a client treats them as
/// opaque, and anything else is refused.
const CURSOR_PREFIX: &str = "lovia-tools-";

/// The cursor of the page starting at tool `start`.
pub(crate) fn cursor_at(start: usize) -> String {
    format!("{CURSOR_PREFIX}{start}")
}

/// Where the page of `cursor` starts; `None` for a cursor lovia did not
/// give, or one past the end of a catalog of `len` tools.
pub(crate) fn page_start(cursor: &str, len: usize) -> Option<usize> {
    let digits = cursor.strip_prefix(CURSOR_PREFIX)?;
    // Digits only: no sign, no spaces, nothing `parse` would also accept.
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<usize>().ok().filter(|&start| start > 0 && start < len)
}

#[cfg(test)]
mod cursor_tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_strangers_are_refused() {
        assert_eq!(page_start(&cursor_at(100), 120), Some(100));
        for bad in [
            "",
            "100",
            "lovia-tools-",
            "lovia-tools-+5",
            "lovia-tools-120",
            "lovia-tools-0",
            "lovia-tools-99999999999999999999999",
        ] {
            assert_eq!(page_start(bad, 120), None, "{bad:?}");
        }
    }
}
