//! Walking a schema and a value together: the children each keyword
//! applies to a value, local `$ref`s, and the pattern cost of a walk.

use super::budget::{Budget, Stop};
use super::coerce::type_is;
use super::{MAX_PATTERN_STATES, MAX_PATTERN_SUBJECT_BYTES, json_type};
use serde_json::Value;
use std::collections::HashMap;

/// The target of a local `$ref` (`#` or `#/pointer`), if it resolves.
pub(super) fn ref_target<'a>(schema: &'a Value, root: &'a Value) -> Option<(&'a str, Option<&'a Value>)> {
    let reference = schema.get("$ref")?.as_str()?;
    // The validator percent-decodes a pointer and serde_json's `pointer` does
    // not: `#/$defs/a%62` would be checked here as the key `a%62` and run
    // there as `ab`. A reference with `%` has no target here, so it is refused.
    if reference.contains('%') {
        return Some((reference, None));
    }
    Some((reference, reference.strip_prefix('#').and_then(|p| root.pointer(p))))
}

/// Whether a schema node's `type` admits instances of JSON type `name`
/// (`integer` is also a `number`); a node without `type` admits anything.
pub(super) fn admits(schema: &Value, name: &str) -> bool {
    match schema.get("type") {
        None => true,
        Some(_) => type_is(schema, name) || (name == "integer" && type_is(schema, "number")),
    }
}

/// The subschemas that apply to the same instance as `schema` (in place).
pub(super) fn in_place(schema: &Value) -> impl Iterator<Item = &Value> {
    let lists =
        ["allOf", "anyOf", "oneOf"].into_iter().filter_map(move |k| schema.get(k).and_then(Value::as_array)).flatten();
    let single = ["not", "if", "then", "else"].into_iter().filter_map(move |k| schema.get(k));
    // `dependencies` is the older spelling; its array values are not schemas.
    let dependent = ["dependentSchemas", "dependencies"]
        .into_iter()
        .filter_map(move |k| schema.get(k).and_then(Value::as_object))
        .flat_map(|m| m.values())
        .filter(|s| !s.is_array());
    lists.chain(single).chain(dependent)
}

/// The subschemas of `schema` that apply to the children of an object
/// instance (`properties`, `patternProperties`, `additionalProperties`,
/// `propertyNames`, `unevaluatedProperties`), each with the key it is for
/// (`None`: possibly any key).
pub(super) fn object_children(schema: &Value) -> impl Iterator<Item = (Option<&str>, &Value)> {
    let named =
        schema.get("properties").and_then(Value::as_object).into_iter().flatten().map(|(k, s)| (Some(k.as_str()), s));
    let patterns = schema.get("patternProperties").and_then(Value::as_object).into_iter().flat_map(|m| m.values());
    let rest = ["additionalProperties", "propertyNames", "unevaluatedProperties"]
        .into_iter()
        .filter_map(move |k| schema.get(k));
    named.chain(patterns.chain(rest).map(|s| (None, s)))
}

/// The subschemas of `schema` that apply to the items of an array instance
/// (`prefixItems`, `items`, `contains`, `unevaluatedItems`, and the older
/// tuple form `items: [...]` with `additionalItems`), with the index each is
/// for (`None`: possibly any index).
pub(super) fn array_children(schema: &Value) -> impl Iterator<Item = (Option<usize>, &Value)> {
    let tuples = ["prefixItems", "items"]
        .into_iter()
        .filter_map(move |k| schema.get(k).and_then(Value::as_array))
        .flat_map(|t| t.iter().enumerate().map(|(i, s)| (Some(i), s)));
    let rest = ["items", "contains", "unevaluatedItems", "additionalItems"]
        .into_iter()
        .filter_map(move |k| schema.get(k))
        .filter(|s| !s.is_array())
        .map(|s| (None, s));
    tuples.chain(rest)
}

/// One pass over a schema node's entries: what applies in place (pushed on
/// `stack`), and what applies to the children of an object or array value
/// (into `children`, with the key or index each is for). Equivalent to
/// [`in_place`] with [`ref_target`], [`object_children`] and
/// [`array_children`], without a map lookup per keyword: this is the hot
/// loop of the per-call estimate.
pub(super) fn expand<'s>(
    schema: &'s Value,
    root: &'s Value,
    kind: &str,
    stack: &mut Vec<&'s Value>,
    children: &mut Vec<(Child<'s>, &'s Value)>,
) {
    let Some(obj) = schema.as_object() else { return };
    for (key, value) in obj {
        match key.as_str() {
            "$ref" => {
                if let Some(target) = value.as_str().and_then(|r| r.strip_prefix('#')).and_then(|p| root.pointer(p)) {
                    stack.push(target);
                }
            }
            "allOf" | "anyOf" | "oneOf" => stack.extend(value.as_array().into_iter().flatten()),
            "not" | "if" | "then" | "else" => stack.push(value),
            "dependentSchemas" | "dependencies" => {
                stack.extend(value.as_object().into_iter().flat_map(|m| m.values()).filter(|s| !s.is_array()));
            }
            "properties" if kind == "object" => {
                children.extend(value.as_object().into_iter().flatten().map(|(k, s)| (Child::Key(k.as_str()), s)));
            }
            "patternProperties" if kind == "object" => {
                children.extend(value.as_object().into_iter().flat_map(|m| m.values()).map(|s| (Child::Any, s)));
            }
            "additionalProperties" | "propertyNames" | "unevaluatedProperties" if kind == "object" => {
                children.push((Child::Any, value));
            }
            "prefixItems" | "items" if kind == "array" && value.is_array() => {
                children.extend(value.as_array().into_iter().flatten().enumerate().map(|(i, s)| (Child::Index(i), s)));
            }
            "items" | "contains" | "unevaluatedItems" | "additionalItems" if kind == "array" => {
                children.push((Child::Any, value));
            }
            _ => {}
        }
    }
}

/// Which children of a value a subschema applies to.
#[derive(Clone, Copy)]
pub(super) enum Child<'s> {
    /// The property of that name.
    Key(&'s str),
    /// The item at that index.
    Index(usize),
    /// Possibly any child (patterns are not matched; `additionalProperties`
    /// is counted even for declared keys): an over-estimate, never an under-one.
    Any,
}

/// Estimates, within `budget`, the validator's work on `value`: every schema
/// node that applies to every argument value, `$ref`s unfolded and every
/// combinator branch counted, with repetition. `typed` models `is_valid`,
/// which stops at a node whose `type` refuses the value; otherwise (error
/// collection) every keyword of every node applies. The recursion follows
/// the arguments, whose depth [`MAX_ARGUMENT_DEPTH`] bounds.
pub(super) fn walk<'s>(
    value: &Value,
    frontier: &[&'s Value],
    schema_of: Schema<'s>,
    typed: bool,
    budget: &mut Budget,
) -> Result<(), Stop> {
    let root = schema_of.root;
    let kind = json_type(value);
    let container = match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        _ => "",
    };
    let mut stack = frontier.to_vec();
    let mut children: Vec<(Child<'s>, &'s Value)> = Vec::new();
    while let Some(schema) = stack.pop() {
        budget.spend(1)?;
        if typed && !admits(schema, kind) {
            continue;
        }
        if !schema_of.patterns.is_empty() {
            charge_patterns(value, schema, schema_of, typed, budget)?;
        }
        expand(schema, root, container, &mut stack, &mut children);
    }
    if children.is_empty() {
        return Ok(());
    }
    // Gathering them costs a step each (a node may declare many properties);
    // then each child costs one lookup, not a scan.
    budget.spend(u64::try_from(children.len()).unwrap_or(u64::MAX))?;
    let mut any: Vec<&Value> = Vec::new();
    let mut by_key: HashMap<&str, Vec<&Value>> = HashMap::new();
    let mut by_index: HashMap<usize, Vec<&Value>> = HashMap::new();
    for (child, schema) in children {
        match child {
            Child::Key(k) => by_key.entry(k).or_default().push(schema),
            Child::Index(i) => by_index.entry(i).or_default().push(schema),
            Child::Any => any.push(schema),
        }
    }
    let visit = |child: &Value, named: Option<&Vec<&'s Value>>, budget: &mut Budget| -> Result<(), Stop> {
        match named {
            Some(named) => {
                let mut next = any.clone();
                next.extend(named);
                walk(child, &next, schema_of, typed, budget)
            }
            None if any.is_empty() => Ok(()),
            None => walk(child, &any, schema_of, typed, budget),
        }
    };
    match value {
        Value::Object(obj) => {
            for (key, child) in obj {
                visit(child, by_key.get(key.as_str()), budget)?;
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                visit(item, by_index.get(&i), budget)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// What the per-call estimate reads: the schema and its patterns' weights.
#[derive(Clone, Copy)]
pub(super) struct Schema<'s> {
    pub(super) root: &'s Value,
    pub(super) patterns: &'s HashMap<String, u64>,
}

/// Charges what the validator's regex matching under `schema` costs on
/// `value`: for each pattern that applies, the length of the string it is
/// matched against times the pattern's weight ([`pattern_weights`]). A
/// `pattern` applies to a string; `patternProperties` and `propertyNames`
/// apply to an object's keys. A string longer than
/// [`MAX_PATTERN_SUBJECT_BYTES`] is refused before any matching.
pub(super) fn charge_patterns<'s>(
    value: &Value,
    schema: &'s Value,
    schema_of: Schema<'s>,
    typed: bool,
    budget: &mut Budget,
) -> Result<(), Stop> {
    let charge = |subject: &str, pattern: &str, budget: &mut Budget| {
        if subject.len() > MAX_PATTERN_SUBJECT_BYTES {
            return Err(Stop::Subject);
        }
        // A pattern the load-time scan did not weigh (it cannot happen:
        // every subschema is scanned) costs the most a pattern may.
        let weight = schema_of.patterns.get(pattern).copied().unwrap_or(MAX_PATTERN_STATES);
        budget.spend(u64::try_from(subject.len()).unwrap_or(u64::MAX).max(1).saturating_mul(weight))
    };
    match value {
        Value::String(text) => {
            if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
                charge(text, pattern, budget)?;
            }
        }
        Value::Object(obj) => {
            if let Some(patterns) = schema.get("patternProperties").and_then(Value::as_object) {
                // `additionalProperties` and `unevaluatedProperties` beside
                // them match every key against them once more.
                let rest = ["additionalProperties", "unevaluatedProperties"];
                let times = 1 + rest.iter().filter(|k| schema.get(**k).is_some()).count();
                for key in obj.keys() {
                    for pattern in patterns.keys() {
                        for _ in 0..times {
                            charge(key, pattern, budget)?;
                        }
                    }
                }
            }
            if let Some(names) = schema.get("propertyNames") {
                for key in obj.keys() {
                    walk(&Value::String(key.clone()), &[names], schema_of, typed, budget)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}
