//! The text of an argument error: the JSON type names and literals the
//! model reads (docs/semantics.md D4).

use super::json_type;
use jsonschema::error::TypeKind;
use serde_json::Value;

pub(super) fn type_message(kind: &TypeKind, instance: &Value) -> String {
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

pub(super) fn literal(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    }
}

/// `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'` (the reference's wording).
pub(super) fn or_list(values: &[Value]) -> String {
    let items: Vec<String> = values.iter().map(literal).collect();
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

pub(super) fn plural(n: u64, word: &str) -> String {
    if n == 1 { word.to_owned() } else { format!("{word}s") }
}

/// `/p/x` → `["p", "x"]`, unescaping `~1` and `~0`.
pub(super) fn pointer_to_path(pointer: &str) -> Vec<String> {
    pointer.split('/').skip(1).map(|s| s.replace("~1", "/").replace("~0", "~")).collect()
}
