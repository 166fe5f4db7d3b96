//! The journal of a program's nested calls: each call's result, kept in
//! the run's checkpoint as it completes, so that a program resumed after
//! its host died (another replica's takeover, a restart) is answered from
//! it instead of calling again. A program replays from its start; its calls
//! are numbered in the order it makes them (`<parent>/<n>`), and a call the
//! journal holds is answered only if it asks for the same tool with the
//! same argument text. Otherwise the program is stopped: acting on a
//! history that differs from the one recorded could repeat or replace an
//! effect.

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
    /// The text the program read.
    pub output: String,
    /// The structured result the program read, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Value>,
    /// Whether the call failed.
    pub is_error: bool,
}

impl JournaledCall {
    /// Whether this is one of the nested calls of the call `parent`.
    pub fn is_nested_in(&self, parent: &str) -> bool {
        self.id.strip_prefix(parent).is_some_and(|rest| rest.starts_with('/'))
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

    /// Whether it holds no call.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
