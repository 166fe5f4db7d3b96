//! The journal of a program's nested calls: each call's result, kept in
//! the run's checkpoint as it completes, so that a program resumed after
//! its host died (another replica's takeover, a restart) is answered from
//! it instead of calling again. A program replays from its start; its calls
//! are numbered in the order it makes them (`<parent>/<n>`), and a call the
//! journal holds is answered only if it asks for the same tool with the
//! same argument text. Otherwise the program is stopped: acting on a
//! history that differs from the one recorded could repeat or replace an
//! effect.

use super::ToolCall;
use crate::call::NestedResult;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// One nested call's result, as the run's checkpoint keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct JournaledCall {
    /// The nested call's id: `<parent call id>/<n>`, `n` counting from 1 in
    /// the order the program made its calls.
    pub id: String,
    /// The tool it called.
    pub name: String,
    /// The exact argument text.
    pub arguments: String,
    /// The text the program read, when it read text (empty when it read `raw`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
    /// The structured result the program read, when there was one: only
    /// what the program reads is kept, not both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Value>,
    /// Whether the call failed.
    pub is_error: bool,
}

impl JournaledCall {
    /// The entry of `call`'s result, keeping only what a program reads:
    /// the structured value when there is one (not a string), else the text.
    pub(crate) fn new(call: ToolCall, output: String, raw: Option<Value>, is_error: bool) -> Self {
        let (output, raw) = match raw {
            Some(value) if !value.is_string() && !is_error => (String::new(), Some(value)),
            _ => (output, None),
        };
        Self { id: call.id, name: call.name, arguments: call.arguments, output, raw, is_error }
    }

    /// The answer a program reads from it.
    pub(crate) fn into_result(self) -> NestedResult {
        NestedResult { call_id: self.id, output: self.output, raw: self.raw, is_error: self.is_error }
    }

    /// Whether this is one of the nested calls of the call `parent`: its id
    /// is `<parent>/<n>` with `n` a number, so the calls of a model's call
    /// `p/1` are not taken for `p`'s.
    pub fn is_nested_in(&self, parent: &str) -> bool {
        self.id
            .strip_prefix(parent)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }

    /// Its size as the checkpoint holds it, about.
    pub fn bytes(&self) -> usize {
        self.id.len()
            + self.name.len()
            + self.arguments.len()
            + self.output.len()
            + self.raw.as_ref().map_or(0, |v| v.to_string().len())
    }
}

/// The journaled calls a resumed run's programs made before, by call id.
/// Empty (the default) for a run that is not resumed.
#[derive(Debug, Clone, Default)]
pub struct Journal(Arc<HashMap<String, JournaledCall>>);

impl Journal {
    /// The journal of `calls`.
    pub fn new(calls: impl IntoIterator<Item = JournaledCall>) -> Self {
        Self(Arc::new(calls.into_iter().map(|c| (c.id.clone(), c)).collect()))
    }

    /// The journaled call `id`, if there is one.
    pub fn get(&self, id: &str) -> Option<&JournaledCall> {
        self.0.get(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str) -> JournaledCall {
        JournaledCall::new(ToolCall::new(id, "t", "{}"), "out".into(), None, false)
    }

    #[test]
    fn the_calls_of_p_are_p_slash_a_number_and_not_those_of_a_call_named_p_slash_1() {
        assert!(entry("p/1").is_nested_in("p"));
        assert!(entry("p/12").is_nested_in("p"));
        assert!(!entry("p/1/2").is_nested_in("p"), "a nested call of the model's call p/1");
        assert!(entry("p/1/2").is_nested_in("p/1"));
        assert!(!entry("p/").is_nested_in("p"));
        assert!(!entry("px/1").is_nested_in("p"));
        assert!(!entry("p").is_nested_in("p"));
    }

    #[test]
    fn an_entry_keeps_only_what_the_program_reads() {
        let call = || ToolCall::new("p/1", "t", "{}");
        let json = JournaledCall::new(call(), "{\"a\":1}".into(), Some(serde_json::json!({"a": 1})), false);
        assert_eq!((json.output.as_str(), json.raw.clone()), ("", Some(serde_json::json!({"a": 1}))));
        let text = JournaledCall::new(call(), "hi".into(), Some(Value::String("hi".into())), false);
        assert_eq!((text.output.as_str(), text.raw.clone()), ("hi", None));
        let failed = JournaledCall::new(call(), "Tool error: no".into(), Some(serde_json::json!({"x": 1})), true);
        assert_eq!((failed.output.as_str(), failed.raw.clone()), ("Tool error: no", None));
    }
}
