//! The `store` interface: session-scoped key-value storage.

use super::SandboxState;
use crate::bindings::lovia::tools::store::Host;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Where a plugin's session data lives. Keys are namespaced by the host:
/// a plugin sees only `(plugin, session)`'s keys.
pub trait SessionStore: Send + Sync {
    /// The value under `key`.
    fn get(&self, namespace: &str, key: &str) -> Option<Vec<u8>>;
    /// Stores `value`; an error message is shown to the tool.
    fn set(&self, namespace: &str, key: &str, value: &[u8]) -> Result<(), String>;
    /// Removes `key`.
    fn delete(&self, namespace: &str, key: &str);
    /// Keys with `prefix`, sorted.
    fn keys(&self, namespace: &str, prefix: &str) -> Vec<String>;
}

/// An in-process store, lost when the process exits. Values are capped at
/// `max_value_bytes` (default 1 MiB).
#[derive(Debug)]
pub struct MemoryStore {
    data: Mutex<BTreeMap<(String, String), Vec<u8>>>,
    max_value_bytes: usize,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self { data: Mutex::default(), max_value_bytes: 1 << 20 }
    }
}

impl SessionStore for MemoryStore {
    fn get(&self, namespace: &str, key: &str) -> Option<Vec<u8>> {
        let data = self.data.lock().unwrap_or_else(|p| p.into_inner());
        data.get(&(namespace.to_owned(), key.to_owned())).cloned()
    }
    fn set(&self, namespace: &str, key: &str, value: &[u8]) -> Result<(), String> {
        if value.len() > self.max_value_bytes {
            return Err(format!(
                "value of {} bytes exceeds the store's limit of {} bytes",
                value.len(),
                self.max_value_bytes
            ));
        }
        let mut data = self.data.lock().unwrap_or_else(|p| p.into_inner());
        data.insert((namespace.to_owned(), key.to_owned()), value.to_vec());
        Ok(())
    }
    fn delete(&self, namespace: &str, key: &str) {
        let mut data = self.data.lock().unwrap_or_else(|p| p.into_inner());
        data.remove(&(namespace.to_owned(), key.to_owned()));
    }
    fn keys(&self, namespace: &str, prefix: &str) -> Vec<String> {
        let data = self.data.lock().unwrap_or_else(|p| p.into_inner());
        data.keys().filter(|(ns, k)| ns == namespace && k.starts_with(prefix)).map(|(_, k)| k.clone()).collect()
    }
}

/// The message a tool gets when it uses the store without a grant.
pub(crate) const NOT_GRANTED: &str =
    "the store is not granted to this plugin (grant a session store to the plugin in the host)";

impl SandboxState {
    /// `plugin/session`: a session-less call has no store.
    fn namespace(&self) -> Option<String> {
        let session = self.call.session_id.as_deref()?;
        Some(format!("{}/{}", self.plugin, session))
    }
}

impl Host for SandboxState {
    fn get(&mut self, key: String) -> Option<Vec<u8>> {
        let ns = self.namespace()?;
        self.session_store.as_ref()?.get(&ns, &key)
    }
    fn set(&mut self, key: String, value: Vec<u8>) -> Result<(), String> {
        let Some(store) = &self.session_store else { return Err(NOT_GRANTED.into()) };
        let Some(ns) = self.namespace() else {
            return Err("the store needs a session: this call has no session id".into());
        };
        store.set(&ns, &key, &value)
    }
    fn delete(&mut self, key: String) {
        if let (Some(store), Some(ns)) = (&self.session_store, self.namespace()) {
            store.delete(&ns, &key);
        }
    }
    fn keys(&mut self, prefix: String) -> Vec<String> {
        match (&self.session_store, self.namespace()) {
            (Some(store), Some(ns)) => store.keys(&ns, &prefix),
            _ => Vec::new(),
        }
    }
}
