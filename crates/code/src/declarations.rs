//! The tools as the model sees them in code mode: TypeScript declarations
//! of a global `tools` object, made from each tool's JSON Schemas. What
//! TypeScript cannot say from a schema (a `$ref`, `not`, a pattern) becomes
//! `unknown` or is left to the tool's own check.

use lovia_host::ToolSpec;
use serde_json::Value;
use std::collections::HashSet;
use std::fmt::Write;

/// The deepest schema nesting rendered; deeper is `unknown`.
const MAX_DEPTH: usize = 6;

/// The most schema nodes rendered per tool (references are followed, so a
/// schema could otherwise expand without bound); past it, `unknown`.
const MAX_NODES: usize = 2_000;

/// One tool's rendering: its schema's root (for references) and the nodes left.
struct Cx<'a> {
    root: &'a Value,
    left: std::cell::Cell<usize>,
}

impl<'a> Cx<'a> {
    fn new(root: &'a Value) -> Self {
        Cx { root, left: std::cell::Cell::new(MAX_NODES) }
    }
}

/// A valid JavaScript identifier for tool `name` (`[A-Za-z0-9_-]`): `-`
/// becomes `_`, and a leading digit gets a `_` in front.
pub fn identifier(name: &str) -> String {
    let mut ident: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '$' { c } else { '_' }).collect();
    if ident.is_empty() || ident.starts_with(|c: char| c.is_ascii_digit()) {
        ident.insert(0, '_');
    }
    ident
}

/// Each tool's identifier, made unique in order (`a-b` and `a_b` become
/// `a_b` and `a_b_2`), with its tool's name.
pub(crate) fn identifiers<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<(String, String)> {
    let mut taken = HashSet::new();
    let mut out = Vec::new();
    for name in names {
        let base = identifier(name);
        let mut ident = base.clone();
        let mut n = 1;
        while !taken.insert(ident.clone()) {
            n += 1;
            ident = format!("{base}_{n}");
        }
        out.push((ident, name.to_owned()));
    }
    out
}

/// The TypeScript declaration of `tools`: one async function per tool,
/// with its description as a doc comment.
///
/// ```
/// let tool = lovia_host::Tool::builder("lookup-order")
///     .description("Look up an order.")
///     .parameters(serde_json::json!({
///         "type": "object",
///         "properties": {"order_id": {"type": "string", "description": "Like A-1001"}},
///         "required": ["order_id"]
///     }))
///     .invoke(|_, _| async { Ok(lovia_host::ToolOutput::Text(String::new())) })
///     .expect("a valid tool");
/// let ts = lovia_code::declarations([tool.spec()]);
/// assert!(ts.contains("lookup_order(args: {\n    /** Like A-1001 */\n    order_id: string;\n  }): Promise<unknown>;"));
/// ```
pub fn declarations<'a>(specs: impl IntoIterator<Item = &'a ToolSpec>) -> String {
    let specs: Vec<&ToolSpec> = specs.into_iter().collect();
    let names = identifiers(specs.iter().map(|s| s.name.as_str()));
    let mut out = String::from("declare const tools: {\n");
    for (spec, (ident, _)) in specs.iter().zip(&names) {
        let description = spec.description.trim();
        if !description.is_empty() {
            out.push_str("  /**\n");
            for line in description.lines() {
                let _ = writeln!(out, "   * {}", comment(line).trim_end());
            }
            out.push_str("   */\n");
        }
        let args = ts_type(&spec.parameters, &Cx::new(&spec.parameters), 1);
        let result = spec.output_schema.as_ref().map_or_else(|| "unknown".to_owned(), |s| ts_type(s, &Cx::new(s), 1));
        let _ = writeln!(out, "  {ident}(args: {args}): Promise<{result}>;");
    }
    out.push_str("};");
    out
}

/// A schema's TypeScript type, at `depth` (for indentation and the cap).
fn ts_type(schema: &Value, cx: &Cx<'_>, depth: usize) -> String {
    let Some(object) = schema.as_object() else {
        return "unknown".into();
    };
    if depth > MAX_DEPTH || cx.left.get() == 0 {
        return "unknown".into();
    }
    cx.left.set(cx.left.get() - 1);
    // A reference inside the same schema (`#/$defs/Rank`) is followed, as
    // deep as any other nesting; any other is `unknown`.
    if let Some(reference) = object.get("$ref") {
        return match reference.as_str().and_then(|r| r.strip_prefix('#')).and_then(|p| cx.root.pointer(p)) {
            Some(target) => ts_type(target, cx, depth + 1),
            None => "unknown".into(),
        };
    }
    if let Some(value) = object.get("const") {
        return literal(value);
    }
    if let Some(Value::Array(values)) = object.get("enum") {
        return union(values.iter().map(literal));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = object.get(key) {
            return union(options.iter().map(|s| ts_type(s, cx, depth)));
        }
    }
    match object.get("type") {
        Some(Value::String(kind)) => of_type(kind, object, cx, depth),
        Some(Value::Array(kinds)) => {
            union(kinds.iter().filter_map(Value::as_str).map(|k| of_type(k, object, cx, depth)))
        }
        _ if object.contains_key("properties") => of_type("object", object, cx, depth),
        _ => "unknown".into(),
    }
}

fn of_type(kind: &str, object: &serde_json::Map<String, Value>, cx: &Cx<'_>, depth: usize) -> String {
    match kind {
        "string" => "string".into(),
        "number" | "integer" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => match object.get("items") {
            Some(items) => format!("Array<{}>", ts_type(items, cx, depth + 1)),
            None => "unknown[]".into(),
        },
        "object" => object_type(object, cx, depth),
        _ => "unknown".into(),
    }
}

fn object_type(object: &serde_json::Map<String, Value>, cx: &Cx<'_>, depth: usize) -> String {
    let required: HashSet<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = object.get("properties").and_then(Value::as_object);
    let extra = match object.get("additionalProperties") {
        Some(Value::Bool(false)) => None,
        Some(schema @ Value::Object(_)) => Some(ts_type(schema, cx, depth + 1)),
        _ => Some("unknown".to_owned()),
    };
    let Some(properties) = properties.filter(|p| !p.is_empty()) else {
        return match extra {
            Some(value) => format!("Record<string, {value}>"),
            None => "{}".into(),
        };
    };
    let pad = "  ".repeat(depth + 1);
    let mut out = String::from("{\n");
    for (key, schema) in properties {
        if let Some(description) = schema.get("description").and_then(Value::as_str) {
            let line = description.lines().next().unwrap_or_default();
            let _ = writeln!(out, "{pad}/** {} */", comment(line).trim());
        }
        let optional = if required.contains(key.as_str()) { "" } else { "?" };
        let _ = writeln!(out, "{pad}{}{optional}: {};", property(key), ts_type(schema, cx, depth + 1));
    }
    out.push_str(&"  ".repeat(depth));
    out.push('}');
    out
}

fn union(types: impl Iterator<Item = String>) -> String {
    let mut seen = Vec::new();
    for t in types {
        if !seen.contains(&t) {
            seen.push(t);
        }
    }
    if seen.is_empty() { "never".into() } else { seen.join(" | ") }
}

/// A JSON value as a TypeScript literal type (objects and arrays: `unknown`).
fn literal(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => value.to_string(),
        _ => "unknown".into(),
    }
}

/// A property key: bare when it is an identifier, else quoted.
fn property(key: &str) -> String {
    let bare = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if bare { key.to_owned() } else { Value::String(key.to_owned()).to_string() }
}

/// Text made safe inside a `/** */` comment.
fn comment(text: &str) -> String {
    text.replace("*/", "* /")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_become_typescript_and_what_it_cannot_say_is_unknown() {
        let schema = json!({
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "n": {"type": ["integer", "null"]},
                "kind": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "ref": {"$ref": "#/$defs/x"},
                "rank": {"$ref": "#/$defs/Rank"},
                "odd key": {"type": "boolean"},
                "meta": {"type": "object", "additionalProperties": {"type": "number"}}
            },
            "required": ["id"],
            "additionalProperties": false,
            "$defs": {"Rank": {"enum": ["spend", "orders"]}}
        });
        assert_eq!(
            ts_type(&schema, &Cx::new(&schema), 1),
            "{\n    id: string;\n    n?: number | null;\n    kind?: \"a\" | \"b\";\n    tags?: Array<string>;\n    ref?: unknown;\n    rank?: \"spend\" | \"orders\";\n    \"odd key\"?: boolean;\n    meta?: Record<string, number>;\n  }"
        );
    }

    #[test]
    fn a_schema_that_expands_through_references_is_cut_short() {
        let wide: Vec<Value> = (0..50).map(|_| json!({"$ref": "#/$defs/a"})).collect();
        let schema = json!({"$defs": {"a": {"anyOf": wide}}, "anyOf": wide});
        let cx = Cx::new(&schema);
        let text = ts_type(&schema, &cx, 1);
        assert_eq!(cx.left.get(), 0);
        assert!(text.len() < 100_000, "{} characters", text.len());
    }

    #[test]
    fn names_become_unique_identifiers() {
        assert_eq!(identifier("lookup-order"), "lookup_order");
        assert_eq!(identifier("7up"), "_7up");
    }
}
