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

/// Quotas of one namespace (one plugin's data in one session of one tenant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreQuota {
    /// Bytes of one value. Default: 1 MiB.
    pub value_bytes: usize,
    /// Keys per namespace. Default: 1,000.
    pub keys: usize,
    /// Bytes of all values of a namespace. Default: 16 MiB.
    pub total_bytes: usize,
}

impl Default for StoreQuota {
    fn default() -> Self {
        Self { value_bytes: 1 << 20, keys: 1_000, total_bytes: 16 << 20 }
    }
}

impl StoreQuota {
    /// Checks a write of `new_len` bytes under a key that holds `old_len`
    /// bytes (`None`: a new key), given the namespace's current totals.
    pub(crate) fn check(
        &self,
        keys: usize,
        total: usize,
        old_len: Option<usize>,
        new_len: usize,
    ) -> Result<(), String> {
        if new_len > self.value_bytes {
            return Err(format!(
                "value of {new_len} bytes exceeds the store's limit of {} bytes per value",
                self.value_bytes
            ));
        }
        if old_len.is_none() && keys >= self.keys {
            return Err(format!("the store holds {keys} keys for this session; the limit is {}", self.keys));
        }
        let after = total - old_len.unwrap_or(0) + new_len;
        if after > self.total_bytes {
            return Err(format!(
                "the session's data would reach {after} bytes; the limit is {} bytes",
                self.total_bytes
            ));
        }
        Ok(())
    }
}

/// An in-process store, lost when the process exits.
#[derive(Debug, Default)]
pub struct MemoryStore {
    data: Mutex<BTreeMap<(String, String), Vec<u8>>>,
    quota: StoreQuota,
}

impl MemoryStore {
    /// An empty store with `quota`.
    pub fn with_quota(quota: StoreQuota) -> Self {
        Self { data: Mutex::default(), quota }
    }
}

impl SessionStore for MemoryStore {
    fn get(&self, namespace: &str, key: &str) -> Option<Vec<u8>> {
        let data = self.data.lock().unwrap_or_else(|p| p.into_inner());
        data.get(&(namespace.to_owned(), key.to_owned())).cloned()
    }
    fn set(&self, namespace: &str, key: &str, value: &[u8]) -> Result<(), String> {
        let mut data = self.data.lock().unwrap_or_else(|p| p.into_inner());
        let (keys, total) =
            data.iter().filter(|((ns, _), _)| ns == namespace).fold((0, 0), |(k, t), (_, v)| (k + 1, t + v.len()));
        let old = data.get(&(namespace.to_owned(), key.to_owned())).map(Vec::len);
        self.quota.check(keys, total, old, value.len())?;
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
    /// `tenant/plugin/session` (the tenant is empty outside a multi-tenant
    /// host): a plugin never sees another plugin's, session's or tenant's
    /// keys. A session-less call has no store.
    fn namespace(&self) -> Option<String> {
        let session = self.call.session_id.as_deref()?;
        Some(format!("{}/{}/{}", self.call.tenant.as_deref().unwrap_or(""), self.plugin, session))
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
