//! The run context the host gives every call.

use crate::bindings::lovia::tools::{context as host, store as host_store, types::LogLevel};
use serde::de::DeserializeOwned;

/// The context of the current call: ids, agent, turn, dependencies,
/// cancellation, progress, logging and the session store.
///
/// Declare a parameter of type `&lovia::Context` (any name) in a
/// `#[lovia::tool]` function to receive it; it is never part of the schema.
#[derive(Debug)]
#[non_exhaustive]
pub struct Context {}

/// Severity of a [`Context::log`] line.
pub use crate::bindings::lovia::tools::types::LogLevel as Level;

impl Context {
    #[doc(hidden)]
    pub fn __new() -> Self {
        Context {}
    }

    /// The id of the run this call belongs to.
    pub fn run_id(&self) -> String {
        host::run_id()
    }

    /// The session id, when the run belongs to a session.
    pub fn session_id(&self) -> Option<String> {
        host::session_id()
    }

    /// The id the model gave this call.
    pub fn call_id(&self) -> String {
        host::call_id()
    }

    /// The name of the agent that requested the call.
    pub fn agent(&self) -> String {
        host::agent()
    }

    /// The 1-based turn of the run; 0 outside a run.
    pub fn turn(&self) -> u32 {
        host::turn()
    }

    /// The raw JSON text the application granted to this plugin under `key`.
    pub fn dependency_json(&self, key: &str) -> Option<String> {
        host::dependency(key)
    }

    /// The dependency under `key`, deserialised; `None` when absent or of another shape.
    pub fn dependency<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        serde_json::from_str(&host::dependency(key)?).ok()
    }

    /// True once the run was cancelled or the call's deadline passed. Long
    /// loops may poll it to stop early; the host interrupts the call anyway.
    pub fn cancelled(&self) -> bool {
        host::cancelled()
    }

    /// Reports progress; the application sees a `ToolProgress` event.
    pub fn progress(&self, message: &str) {
        host::progress(message)
    }

    /// Writes a log line tagged with plugin, tool and call id.
    pub fn log(&self, level: LogLevel, message: &str) {
        host::log(level, message)
    }

    /// The session-scoped key-value store of this plugin.
    pub fn store(&self) -> Store {
        Store { _private: () }
    }
}

/// Session-scoped key-value storage. Each plugin sees only its own namespace
/// in its own session. Without a store grant, writes fail with a clear error.
#[derive(Debug)]
pub struct Store {
    _private: (),
}

impl Store {
    /// The bytes stored under `key`.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        host_store::get(key)
    }

    /// The UTF-8 text stored under `key` (`None` if absent or not UTF-8).
    pub fn get_string(&self, key: &str) -> Option<String> {
        String::from_utf8(self.get(key)?).ok()
    }

    /// Stores `value` under `key`.
    pub fn set(&self, key: &str, value: impl AsRef<[u8]>) -> Result<(), crate::ToolError> {
        host_store::set(key, value.as_ref()).map_err(crate::ToolError::new)
    }

    /// Removes `key` (a missing key is not an error).
    pub fn delete(&self, key: &str) {
        host_store::delete(key)
    }

    /// The keys that start with `prefix`, sorted.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        host_store::keys(prefix)
    }
}
