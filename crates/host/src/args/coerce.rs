//! Coercion of the model's values toward the schema before validation
//! (docs/semantics.md §3B, D1–D3): numbers and booleans from strings, and
//! the branch of a union a value fits.

use super::budget::{Budget, Stop};
use super::{MAX_DEPTH, json_type};
use serde_json::Map;
use serde_json::Value;

pub(super) fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
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

pub(super) fn type_is(schema: &Value, name: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == name,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == name),
        _ => false,
    }
}

/// The first `anyOf`/`oneOf` list of `schema`, as coercion reads it.
pub(super) fn union_of(schema: &Value) -> Option<&[Value]> {
    ["anyOf", "oneOf"].into_iter().find_map(|key| match schema.get(key) {
        Some(Value::Array(branches)) => Some(branches.as_slice()),
        _ => None,
    })
}

/// The scalar coercions of D3 for one node under a schema that is not a union.
pub(super) fn scalar(value: &Value, schema: &Value) -> Option<Value> {
    if type_is(schema, "integer") {
        match value {
            Value::String(s) => s.parse::<i64>().map(Value::from).or_else(|_| s.parse::<u64>().map(Value::from)).ok(),
            Value::Number(n) if !(n.is_i64() || n.is_u64()) => n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15)
                .map(|f| Value::from(f as i64)),
            _ => None,
        }
    } else if type_is(schema, "number") {
        let Value::String(s) = value else { return None };
        match s.parse::<i64>() {
            Ok(i) => Some(Value::from(i)),
            Err(_) => s
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number),
        }
    } else if type_is(schema, "boolean") {
        match value.as_str() {
            Some("true") => Some(Value::Bool(true)),
            Some("false") => Some(Value::Bool(false)),
            _ => None,
        }
    } else {
        None
    }
}

/// What coercion under `schema` makes of this node itself, children aside:
/// `Some` replacement scalar, or `None` when it stays as it is. Only
/// scalars change, so this never looks below the node.
pub(super) fn coerce_node(
    value: &Value,
    schema: &Value,
    root: &Value,
    depth: usize,
    budget: &mut Budget,
) -> Result<Option<Value>, Stop> {
    if depth > MAX_DEPTH {
        return Ok(None);
    }
    budget.spend(1)?;
    let schema = resolve(schema, root);
    match union_of(schema) {
        Some(_) if value.is_null() => Ok(None),
        Some(branches) => Ok(pick(value, branches, root, depth, budget)?.and_then(|(_, replaced)| replaced)),
        None => Ok(scalar(value, schema)),
    }
}

/// The branch of a union that coercion follows: the first non-null one whose
/// type matches the node once the node itself is coerced by it. Only the
/// node is examined (nested unions the same shallow way), never its
/// children: the choice costs the size of the union, not of the subtree, and
/// picks what trying each branch on a full copy did, since coercing the
/// children never changes the node's own type.
pub(super) fn pick<'s>(
    value: &Value,
    branches: &'s [Value],
    root: &Value,
    depth: usize,
    budget: &mut Budget,
) -> Result<Option<(&'s Value, Option<Value>)>, Stop> {
    for branch in branches.iter().filter(|b| !type_is(b, "null")) {
        let replaced = coerce_node(value, branch, root, depth + 1, budget)?;
        if shallow_type_matches(replaced.as_ref().unwrap_or(value), resolve(branch, root)) {
            return Ok(Some((branch, replaced)));
        }
    }
    Ok(None)
}

/// Schema-guided lax coercion (docs/semantics.md D3): strings holding an integer,
/// number or boolean where one is wanted, integral floats where an integer is
/// wanted; nothing else. Unknown keys are dropped when `drop_unknown`. Each
/// argument value is coerced under one chain of schema nodes (a union picks
/// its branch with [`pick`] first), so the work is linear in the arguments.
pub(super) fn coerce(
    value: &mut Value,
    schema: &Value,
    root: &Value,
    drop_unknown: bool,
    depth: usize,
    budget: &mut Budget,
) -> Result<(), Stop> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    budget.spend(1)?;
    let schema = resolve(schema, root);
    if let Some(branches) = union_of(schema) {
        if value.is_null() {
            return Ok(());
        }
        return match pick(value, branches, root, depth, budget)? {
            Some((branch, _)) => coerce(value, branch, root, drop_unknown, depth + 1, budget),
            None => Ok(()),
        };
    }
    if let Some(replacement) = scalar(value, schema) {
        *value = replacement;
    }
    match value {
        Value::Object(obj) => coerce_object(obj, schema, root, drop_unknown, depth, budget),
        Value::Array(items) => {
            let prefix = schema.get("prefixItems").and_then(Value::as_array);
            for (i, item) in items.iter_mut().enumerate() {
                match (prefix.and_then(|p| p.get(i)), schema.get("items")) {
                    (Some(s), _) | (None, Some(s)) => coerce(item, s, root, drop_unknown, depth + 1, budget)?,
                    (None, None) => {}
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

pub(super) fn coerce_object(
    obj: &mut Map<String, Value>,
    schema: &Value,
    root: &Value,
    drop_unknown: bool,
    depth: usize,
    budget: &mut Budget,
) -> Result<(), Stop> {
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
            (Some(s), _) | (None, Some(s)) => coerce(item, s, root, drop_unknown, depth + 1, budget)?,
            (None, None) => {}
        }
    }
    Ok(())
}

pub(super) fn shallow_type_matches(value: &Value, schema: &Value) -> bool {
    match schema.get("type") {
        None => true,
        Some(_) => {
            let t = json_type(value);
            type_is(schema, t) || (t == "integer" && type_is(schema, "number"))
        }
    }
}
