//! The checks of a schema at load time: its `$ref`s resolve, its fan-out
//! is bounded, and each pattern compiles to an automaton under the limit.

use super::walk::{admits, array_children, in_place, object_children, ref_target};
use super::{MAX_ARGUMENT_DEPTH, MAX_PATTERN_STATES, MAX_SCHEMA_FAN, PATTERN_SIZE_LIMIT, SchemaError};
use serde_json::Value;
use std::collections::HashMap;

/// The weight of every pattern of the schema (`pattern` values and
/// `patternProperties` keys, in every subschema the validator compiles):
/// the states of the automaton it compiles to. Refuses a pattern over
/// [`MAX_PATTERN_STATES`]. Runs after [`check_references`], so every
/// `$ref` it follows resolves.
pub(super) fn pattern_weights(root: &Value) -> Result<HashMap<String, u64>, SchemaError> {
    let mut weights: HashMap<String, u64> = HashMap::new();
    let mut seen: std::collections::HashSet<*const Value> = std::collections::HashSet::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if !seen.insert(node as *const Value) {
            continue;
        }
        let Some(obj) = node.as_object() else { continue };
        let patterns = obj.get("pattern").and_then(Value::as_str).into_iter();
        let keys = obj.get("patternProperties").and_then(Value::as_object).into_iter().flat_map(|m| m.keys());
        for pattern in patterns.chain(keys.map(String::as_str)) {
            if !weights.contains_key(pattern) {
                weights.insert(pattern.to_owned(), pattern_states(pattern)?);
            }
        }
        if let Some((_, Some(target))) = ref_target(node, root) {
            stack.push(target);
        }
        stack.extend(in_place(node));
        stack.extend(object_children(node).map(|(_, s)| s));
        stack.extend(array_children(node).map(|(_, s)| s));
        for defs in ["$defs", "definitions"] {
            stack.extend(obj.get(defs).and_then(Value::as_object).into_iter().flat_map(|m| m.values()));
        }
    }
    Ok(weights)
}

/// The states of the automaton `pattern` compiles to: its Thompson NFA
/// after the ECMA-to-Rust translation the validator applies, as the
/// `regex` engine builds it. Over [`MAX_PATTERN_STATES`] it is refused.
pub(super) fn pattern_states(pattern: &str) -> Result<u64, SchemaError> {
    use regex_automata::nfa::thompson;
    let invalid = |why: String| SchemaError::Invalid { message: format!("the pattern \"{}\" {why}", cut(pattern)) };
    let translated =
        jsonschema_regex::to_rust_regex(pattern).map_err(|()| invalid("is not a regular expression".into()))?;
    let nfa = thompson::Compiler::new()
        .configure(thompson::Config::new().nfa_size_limit(Some(PATTERN_SIZE_LIMIT)))
        .build(&translated)
        .map_err(|e| invalid(format!("does not compile within {PATTERN_SIZE_LIMIT} bytes: {e}")))?;
    let states = u64::try_from(nfa.states().len()).unwrap_or(u64::MAX);
    if states > MAX_PATTERN_STATES {
        return Err(SchemaError::PatternTooComplex { pattern: cut(pattern), states, limit: MAX_PATTERN_STATES });
    }
    Ok(states.max(1))
}

/// `s` cut to 200 characters, for error messages about hostile schemas.
pub(super) fn cut(s: &str) -> String {
    s.chars().take(200).collect()
}

/// Refuses what the load-time figure could not follow: a `$ref` that is not
/// a JSON pointer resolving inside the schema (`#/...`), `$id` below the root
/// (it rebases the references under it), `$dynamicRef` and `$recursiveRef`
/// (resolved at run time), and `contentSchema` (it validates a document
/// decoded from a string, outside the depth limit). Visits every subschema
/// the validator compiles: the applicators, the definitions, and whatever a
/// `$ref` points at; values such as `default` or `enum` are not schemas.
pub(super) fn check_references(root: &Value) -> Result<(), SchemaError> {
    let unsupported = |keyword: &'static str, value: &Value| SchemaError::UnsupportedReference {
        keyword,
        value: cut(&value.to_string()),
    };
    let mut seen: std::collections::HashSet<*const Value> = std::collections::HashSet::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if !seen.insert(node as *const Value) {
            continue;
        }
        let Some(obj) = node.as_object() else { continue };
        if let Some(id) = obj.get("$id").filter(|_| !std::ptr::eq(node, root)) {
            return Err(unsupported("$id", id));
        }
        for keyword in ["$dynamicRef", "$recursiveRef", "contentSchema"] {
            if let Some(value) = obj.get(keyword) {
                return Err(unsupported(keyword, value));
            }
        }
        if let Some(reference) = obj.get("$ref") {
            match ref_target(node, root) {
                Some((_, Some(target))) => stack.push(target),
                _ => return Err(unsupported("$ref", reference)),
            }
        }
        stack.extend(in_place(node));
        stack.extend(object_children(node).map(|(_, s)| s));
        stack.extend(array_children(node).map(|(_, s)| s));
        for defs in ["$defs", "definitions"] {
            stack.extend(obj.get(defs).and_then(Value::as_object).into_iter().flat_map(|m| m.values()));
        }
    }
    Ok(())
}

/// Computes, for each nesting depth of the arguments up to
/// [`MAX_ARGUMENT_DEPTH`], how many schema nodes can apply there (with
/// repetition, over every key at that depth) and refuses the schema when a
/// depth exceeds [`MAX_SCHEMA_FAN`]. A node's multiplicity is summed over
/// the in-place graph (`$ref`, combinators) in topological order, so shared
/// references cost one visit per node and depth however often they repeat:
/// the check is linear in the schema's size times the depth limit. Children
/// are only counted where the node's `type` admits objects or arrays, as
/// `is_valid` checks `type` first (the per-call estimate covers the rest).
pub(super) fn check_fan(root: &Value) -> Result<(), SchemaError> {
    type Key = *const Value;
    let mut frontier: HashMap<Key, (&Value, u64)> = HashMap::from([(root as Key, (root, 1))]);
    for depth in 0..=MAX_ARGUMENT_DEPTH {
        if frontier.is_empty() {
            break;
        }
        // Discover the in-place graph below the frontier, in post-order,
        // refusing a cycle (a node reached again while it is being explored).
        let mut state: HashMap<Key, bool> = HashMap::new(); // false: open, true: done
        let mut order: Vec<&Value> = Vec::new();
        let mut edges: HashMap<Key, Vec<&Value>> = HashMap::new();
        for &(start, _) in frontier.values() {
            if state.contains_key(&(start as Key)) {
                continue;
            }
            let mut stack: Vec<(&Value, bool)> = vec![(start, false)];
            while let Some((node, expanded)) = stack.pop() {
                let key = node as Key;
                if expanded {
                    state.insert(key, true);
                    order.push(node);
                    continue;
                }
                if state.contains_key(&key) {
                    continue;
                }
                state.insert(key, false);
                stack.push((node, true));
                let mut next: Vec<&Value> = in_place(node).collect();
                if let Some((reference, target)) = ref_target(node, root) {
                    match target {
                        Some(t) if state.get(&(t as Key)) == Some(&false) => {
                            return Err(SchemaError::RefCycle { reference: cut(reference) });
                        }
                        Some(t) => next.push(t),
                        None => {}
                    }
                }
                for &n in &next {
                    match state.get(&(n as Key)) {
                        Some(false) => {
                            let reference = n.get("$ref").and_then(Value::as_str).unwrap_or("#");
                            return Err(SchemaError::RefCycle { reference: cut(reference) });
                        }
                        Some(true) => {}
                        None => stack.push((n, false)),
                    }
                }
                edges.insert(key, next);
            }
        }
        // Multiplicities in topological order (reverse post-order).
        let mut count: HashMap<Key, u64> = frontier.iter().map(|(k, (_, m))| (*k, *m)).collect();
        let mut figure: u64 = 0;
        for node in order.iter().rev() {
            let m = count.get(&(*node as Key)).copied().unwrap_or(0);
            figure = figure.saturating_add(m);
            for &n in edges.get(&(*node as Key)).into_iter().flatten() {
                let c = count.entry(n as Key).or_insert(0);
                *c = c.saturating_add(m);
            }
        }
        if figure > MAX_SCHEMA_FAN {
            return Err(SchemaError::TooComplex { figure, depth, limit: MAX_SCHEMA_FAN });
        }
        let mut next: HashMap<Key, (&Value, u64)> = HashMap::new();
        for node in &order {
            let m = count.get(&(*node as Key)).copied().unwrap_or(0);
            let objects = admits(node, "object").then(|| object_children(node).map(|(_, s)| s));
            let arrays = admits(node, "array").then(|| array_children(node).map(|(_, s)| s));
            for child in objects.into_iter().flatten().chain(arrays.into_iter().flatten()) {
                let entry = next.entry(child as Key).or_insert((child, 0));
                entry.1 = entry.1.saturating_add(m);
            }
        }
        frontier = next;
    }
    Ok(())
}
