//! Arguments: parse, coerce and validate the model's argument text against a
//! tool's schema (docs/semantics.md §3 with docs/semantics.md D1–D4). A validator is compiled once per
//! tool, at load time.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{Draft, Validator};
use serde_json::{Map, Value};

/// Why the model's arguments were rejected. `Display` is the exact text the
/// model reads (without the `Tool error: ` prefix for [`ArgumentError::Invalid`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentError {
    /// The text is not JSON.
    #[error("Invalid JSON in tool arguments: {message}")]
    InvalidJson {
        /// The decoder's message.
        message: String,
    },
    /// The JSON is not an object.
    #[error("Invalid tool arguments: expected a JSON object, got {got}.")]
    NotObject {
        /// The JSON type found (`array`, `string`, `integer`, `number`, `boolean`, `null`).
        got: &'static str,
    },
    /// The object does not match the schema.
    #[error("Invalid arguments for tool '{tool}': {}", problems.iter().map(|(p, m)| format!("{p}: {m}")).collect::<Vec<_>>().join("; "))]
    Invalid {
        /// The tool's name.
        tool: String,
        /// `(path, message)` pairs in declaration order; the path is dotted
        /// (`p.x`, `xs.1`) and `arguments` when empty.
        problems: Vec<(String, String)>,
    },
}

/// A tool's compiled argument checker.
#[derive(Debug, Clone)]
pub struct ArgumentValidator {
    tool: String,
    schema: Value,
    validator: Validator,
    strict: bool,
    /// Top-level property names in declaration order, to order the messages.
    order: Vec<String>,
}

/// Why a tool's parameters schema was refused.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The schema does not describe an object.
    #[error("the parameters schema must have \"type\": \"object\"")]
    NotAnObject,
    /// The schema is not valid JSON Schema (2020-12).
    #[error("invalid parameters schema: {message}")]
    Invalid {
        /// The schema compiler's message.
        message: String,
    },
}

/// Nesting past this depth is not coerced (the validator still checks it).
const MAX_DEPTH: usize = 64;

impl ArgumentValidator {
    /// Compiles `schema`. Fails with a readable reason when it is not a valid
    /// JSON Schema (2020-12) for an object.
    pub fn new(tool: &str, schema: &Value, strict: bool) -> Result<Self, SchemaError> {
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(SchemaError::NotAnObject);
        }
        // Strict only changes the schema the model sees: an omitted argument
        // that has a default still gets it (docs/semantics.md §2 rule 9).
        let mut checked = schema.clone();
        let defaulted: Vec<String> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.iter().filter(|(_, s)| s.get("default").is_some()).map(|(k, _)| k.clone()).collect())
            .unwrap_or_default();
        if let Some(Value::Array(required)) = checked.get_mut("required") {
            required.retain(|r| r.as_str().is_none_or(|r| !defaulted.iter().any(|d| d == r)));
        }
        let validator = jsonschema::options()
            .with_draft(Draft::Draft202012)
            .build(&checked)
            .map_err(|e| SchemaError::Invalid { message: e.to_string() })?;
        let order = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        Ok(Self { tool: tool.into(), schema: schema.clone(), validator, strict, order })
    }

    /// Parses `raw` (empty text counts as `{}`), coerces it (docs/semantics.md D3),
    /// drops unknown keys unless the tool is strict (D2), and validates it.
    /// Returns the object the tool receives.
    pub fn prepare(&self, raw: &str) -> Result<Value, ArgumentError> {
        self.prepare_value(parse_object(raw)?)
    }

    /// [`ArgumentValidator::prepare`] for arguments already parsed, so that a
    /// call's text is parsed once: `value` must be an object.
    pub fn prepare_value(&self, mut value: Value) -> Result<Value, ArgumentError> {
        if !value.is_object() {
            return Err(ArgumentError::NotObject { got: json_type(&value) });
        }
        coerce(&mut value, &self.schema, &self.schema, !self.strict, 0);
        let mut problems: Vec<(String, String)> = Vec::new();
        for error in self.validator.iter_errors(&value) {
            let path = pointer_to_path(error.instance_path().as_str());
            self.describe(&error, path, &mut problems);
        }
        if problems.is_empty() {
            self.apply_defaults(&mut value);
            return Ok(value);
        }
        let rank = |path: &str| {
            let first = path.split('.').next().unwrap_or("");
            self.order.iter().position(|k| k == first).unwrap_or(usize::MAX)
        };
        problems.sort_by_key(|(p, _)| rank(p));
        problems.dedup();
        Err(ArgumentError::Invalid { tool: self.tool.clone(), problems })
    }

    /// Omitted arguments receive their declared default (docs/semantics.md §3B).
    fn apply_defaults(&self, value: &mut Value) {
        let (Some(props), Some(obj)) =
            (self.schema.get("properties").and_then(Value::as_object), value.as_object_mut())
        else {
            return;
        };
        for (name, schema) in props {
            if let Some(default) = schema.get("default")
                && !obj.contains_key(name)
            {
                obj.insert(name.clone(), default.clone());
            }
        }
    }

    fn describe(&self, error: &jsonschema::ValidationError<'_>, path: Vec<String>, out: &mut Vec<(String, String)>) {
        let join = |mut p: Vec<String>, extra: Option<&str>| {
            if let Some(e) = extra {
                p.push(e.to_owned());
            }
            if p.is_empty() { "arguments".to_owned() } else { p.join(".") }
        };
        let instance = error.instance();
        let message = match error.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default().to_owned();
                out.push((join(path, Some(&name)), "Field required".into()));
                return;
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                for key in unexpected {
                    out.push((join(path.clone(), Some(key)), "Extra inputs are not permitted".into()));
                }
                return;
            }
            ValidationErrorKind::AnyOf { .. } | ValidationErrorKind::OneOfNotValid { .. } => {
                // `Option<T>` is `anyOf [T, null]`: report why the value is not a T.
                if let Some(branch) = self.single_non_null_branch(error.schema_path().as_str())
                    && let Ok(sub) = jsonschema::options().with_draft(Draft::Draft202012).build(&branch)
                {
                    let before = out.len();
                    for e in sub.iter_errors(instance) {
                        let mut p = path.clone();
                        p.extend(pointer_to_path(e.instance_path().as_str()));
                        self.describe(&e, p, out);
                    }
                    if out.len() > before {
                        return;
                    }
                }
                "Input does not match any allowed shape".to_owned()
            }
            ValidationErrorKind::Type { kind } => type_message(kind, instance),
            ValidationErrorKind::Enum { options } => match options.as_array() {
                Some(values) => format!("Input should be {}", or_list(values)),
                None => "Input should be one of the allowed values".into(),
            },
            ValidationErrorKind::Constant { expected_value } => format!("Input should be {}", literal(expected_value)),
            ValidationErrorKind::Minimum { limit } => format!("Input should be greater than or equal to {limit}"),
            ValidationErrorKind::Maximum { limit } => format!("Input should be less than or equal to {limit}"),
            ValidationErrorKind::ExclusiveMinimum { limit } => format!("Input should be greater than {limit}"),
            ValidationErrorKind::ExclusiveMaximum { limit } => format!("Input should be less than {limit}"),
            ValidationErrorKind::MinLength { limit } => {
                format!("String should have at least {limit} {}", plural(*limit, "character"))
            }
            ValidationErrorKind::MaxLength { limit } => {
                format!("String should have at most {limit} {}", plural(*limit, "character"))
            }
            ValidationErrorKind::MinItems { limit } => {
                format!("Array should have at least {limit} {}", plural(*limit, "item"))
            }
            ValidationErrorKind::MaxItems { limit } => {
                format!("Array should have at most {limit} {}", plural(*limit, "item"))
            }
            ValidationErrorKind::Pattern { pattern } => format!("String should match pattern '{pattern}'"),
            ValidationErrorKind::UniqueItems => "Array items should be unique".into(),
            ValidationErrorKind::MultipleOf { .. } => "Input should be a multiple of the allowed step".into(),
            _ => error.to_string(),
        };
        out.push((join(path, None), message));
    }

    /// For an `anyOf`/`oneOf` at `schema_path` with one non-null branch: that
    /// branch as a standalone schema (with the root's `$defs` for references).
    fn single_non_null_branch(&self, schema_path: &str) -> Option<Value> {
        let node = self.schema.pointer(schema_path)?;
        let branches: Vec<&Value> =
            node.as_array()?.iter().filter(|b| b.get("type") != Some(&Value::from("null"))).collect();
        let [branch] = branches.as_slice() else { return None };
        let mut standalone = (*branch).clone();
        if let (Some(obj), Some(defs)) = (standalone.as_object_mut(), self.schema.get("$defs")) {
            obj.insert("$defs".into(), defs.clone());
        }
        Some(standalone)
    }
}

/// Parses the argument text (docs/semantics.md §3A).
pub(crate) fn parse_object(raw: &str) -> Result<Value, ArgumentError> {
    let text = if raw.is_empty() { "{}" } else { raw };
    let value: Value = serde_json::from_str(text).map_err(|e| ArgumentError::InvalidJson { message: e.to_string() })?;
    if !value.is_object() {
        return Err(ArgumentError::NotObject { got: json_type(&value) });
    }
    Ok(value)
}

/// The JSON type name used in messages (docs/semantics.md D4: JSON names, not Python's).
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_message(kind: &TypeKind, instance: &Value) -> String {
    let wanted = match kind {
        TypeKind::Single(t) => t.to_string(),
        TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" or "),
    };
    match (wanted.as_str(), instance) {
        ("integer", Value::String(_)) => "Input should be a valid integer, unable to parse string as an integer".into(),
        ("integer", Value::Number(_)) => "Input should be a valid integer, got a number with a fractional part".into(),
        ("number", Value::String(_)) => "Input should be a valid number, unable to parse string as a number".into(),
        ("boolean", Value::String(_)) => "Input should be a valid boolean, unable to interpret input".into(),
        (w, _) => format!("Input should be a valid {w}, got {}", json_type(instance)),
    }
}

fn literal(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    }
}

/// `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'` (the reference's wording).
fn or_list(values: &[Value]) -> String {
    let items: Vec<String> = values.iter().map(literal).collect();
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 { word.to_owned() } else { format!("{word}s") }
}

/// `/p/x` → `["p", "x"]`, unescaping `~1` and `~0`.
fn pointer_to_path(pointer: &str) -> Vec<String> {
    pointer.split('/').skip(1).map(|s| s.replace("~1", "/").replace("~0", "~")).collect()
}

fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    let mut current = schema;
    // A bounded number of hops: a reference cycle is the validator's problem, not ours.
    for _ in 0..8 {
        match current.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
            Some(pointer) => match root.pointer(pointer) {
                Some(target) => current = target,
                None => break,
            },
            None => break,
        }
    }
    current
}

fn type_is(schema: &Value, name: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == name,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == name),
        _ => false,
    }
}

/// Schema-guided lax coercion (docs/semantics.md D3): strings holding an integer,
/// number or boolean where one is wanted, integral floats where an integer is
/// wanted; nothing else. Unknown keys are dropped when `drop_unknown`.
fn coerce(value: &mut Value, schema: &Value, root: &Value, drop_unknown: bool, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let schema = resolve(schema, root);
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            if value.is_null() {
                return;
            }
            for branch in branches.iter().filter(|b| !type_is(b, "null")) {
                let mut candidate = value.clone();
                coerce(&mut candidate, branch, root, drop_unknown, depth + 1);
                if shallow_type_matches(&candidate, resolve(branch, root)) {
                    *value = candidate;
                    return;
                }
            }
            return;
        }
    }
    if type_is(schema, "integer") {
        let replacement = match &*value {
            Value::String(s) => s.parse::<i64>().map(Value::from).or_else(|_| s.parse::<u64>().map(Value::from)).ok(),
            Value::Number(n) if !(n.is_i64() || n.is_u64()) => n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15)
                .map(|f| Value::from(f as i64)),
            _ => None,
        };
        if let Some(r) = replacement {
            *value = r;
        }
    } else if type_is(schema, "number") {
        if let Value::String(s) = &*value {
            if let Ok(i) = s.parse::<i64>() {
                *value = Value::from(i);
            } else if let Some(n) =
                s.parse::<f64>().ok().filter(|f| f.is_finite()).and_then(serde_json::Number::from_f64)
            {
                *value = Value::Number(n);
            }
        }
    } else if type_is(schema, "boolean") {
        match value.as_str() {
            Some("true") => *value = Value::Bool(true),
            Some("false") => *value = Value::Bool(false),
            _ => {}
        }
    }
    match value {
        Value::Object(obj) => coerce_object(obj, schema, root, drop_unknown, depth),
        Value::Array(items) => {
            let prefix = schema.get("prefixItems").and_then(Value::as_array);
            for (i, item) in items.iter_mut().enumerate() {
                match (prefix.and_then(|p| p.get(i)), schema.get("items")) {
                    (Some(s), _) | (None, Some(s)) => coerce(item, s, root, drop_unknown, depth + 1),
                    (None, None) => {}
                }
            }
        }
        _ => {}
    }
}

fn coerce_object(obj: &mut Map<String, Value>, schema: &Value, root: &Value, drop_unknown: bool, depth: usize) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    if drop_unknown
        && additional.is_none()
        && let Some(props) = properties
    {
        obj.retain(|k, _| props.contains_key(k));
    }
    for (key, item) in obj.iter_mut() {
        match (properties.and_then(|p| p.get(key)), additional) {
            (Some(s), _) | (None, Some(s)) => coerce(item, s, root, drop_unknown, depth + 1),
            (None, None) => {}
        }
    }
}

fn shallow_type_matches(value: &Value, schema: &Value) -> bool {
    match schema.get("type") {
        None => true,
        Some(_) => {
            let t = json_type(value);
            type_is(schema, t) || (t == "integer" && type_is(schema, "number"))
        }
    }
}
