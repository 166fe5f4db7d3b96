//! The `store` interface: session-scoped key-value storage.

use super::SandboxState;
use crate::bindings::v0_2::lovia::tools::store::Host;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Where a plugin's session data lives. Keys are namespaced by the host:
/// a plugin sees only the keys of its own namespace,
/// `tenant/store-namespace/session`.
pub trait SessionStore: Send + Sync {
    /// The value under `key`.
    fn get(&self, namespace: &str, key: &str) -> Option<Vec<u8>>;
    /// Stores `value`; an error message is shown to the tool.
    fn set(&self, namespace: &str, key: &str, value: &[u8]) -> Result<(), String>;
    /// Removes `key`.
    fn delete(&self, namespace: &str, key: &str);
    /// Keys with `prefix`, sorted, at most [`StoreQuota::list_keys`] of them
    /// and [`StoreQuota::list_bytes`] bytes in all (the first ones in order).
    fn keys(&self, namespace: &str, prefix: &str) -> Vec<String>;
}

/// Quotas of one namespace (one plugin's data in one session of one tenant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreQuota {
    /// Bytes of one value. Default: 1 MiB.
    pub value_bytes: usize,
    /// Bytes of one key. Default: 1 KiB. A key is data the guest makes the
    /// host keep and send back from `keys()`, so it is bounded like a value.
    pub key_bytes: usize,
    /// Keys per namespace. Default: 1,000.
    pub keys: usize,
    /// Bytes of all keys and values of a namespace. Default: 16 MiB.
    pub total_bytes: usize,
    /// Keys one `keys()` returns at most: the first ones in sorted order.
    /// Default: 1,000.
    pub list_keys: usize,
    /// Bytes of key text one `keys()` returns at most (the first keys in
    /// sorted order that fit). Default: 1 MiB. With the default key size and
    /// key count a whole namespace always fits; the bound is for stores an
    /// operator gave larger quotas, or written before keys were bounded.
    pub list_bytes: usize,
}

impl Default for StoreQuota {
    fn default() -> Self {
        Self {
            value_bytes: 1 << 20,
            key_bytes: 1 << 10,
            keys: 1_000,
            total_bytes: 16 << 20,
            list_keys: 1_000,
            list_bytes: 1 << 20,
        }
    }
}

impl StoreQuota {
    /// Checks a write of `new_len` value bytes under `key`, which holds
    /// `old_len` bytes (`None`: a new key), given the namespace's current
    /// totals (`total`: key and value bytes).
    pub(crate) fn check(
        &self,
        key: &str,
        keys: usize,
        total: usize,
        old_len: Option<usize>,
        new_len: usize,
    ) -> Result<(), String> {
        if key.len() > self.key_bytes {
            return Err(format!(
                "key of {} bytes exceeds the store's limit of {} bytes per key",
                key.len(),
                self.key_bytes
            ));
        }
        if new_len > self.value_bytes {
            return Err(format!(
                "value of {new_len} bytes exceeds the store's limit of {} bytes per value",
                self.value_bytes
            ));
        }
        if old_len.is_none() && keys >= self.keys {
            return Err(format!("the store holds {keys} keys for this session; the limit is {}", self.keys));
        }
        // An overwrite keeps its key: only the value's bytes change.
        let before = match old_len {
            Some(old) => total.saturating_sub(old),
            None => total.saturating_add(key.len()),
        };
        let after = before.saturating_add(new_len);
        if after > self.total_bytes {
            return Err(format!(
                "the session's data would reach {after} bytes; the limit is {} bytes",
                self.total_bytes
            ));
        }
        Ok(())
    }

    /// The first of `keys` (sorted) that a listing may return: at most
    /// `list_keys` of them and `list_bytes` bytes. A key longer than the whole
    /// budget could never be listed; it is skipped rather than allowed to
    /// hide every key after it.
    pub(crate) fn bound_listing(&self, keys: impl Iterator<Item = String>) -> Vec<String> {
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for key in keys.filter(|k| k.len() <= self.list_bytes).take(self.list_keys) {
            bytes = bytes.saturating_add(key.len());
            if bytes > self.list_bytes {
                break;
            }
            out.push(key);
        }
        out
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
        let (keys, total) = data
            .iter()
            .filter(|((ns, _), _)| ns == namespace)
            .fold((0, 0), |(n, t), ((_, k), v)| (n + 1, t + k.len() + v.len()));
        let old = data.get(&(namespace.to_owned(), key.to_owned())).map(Vec::len);
        self.quota.check(key, keys, total, old, value.len())?;
        data.insert((namespace.to_owned(), key.to_owned()), value.to_vec());
        Ok(())
    }
    fn delete(&self, namespace: &str, key: &str) {
        let mut data = self.data.lock().unwrap_or_else(|p| p.into_inner());
        data.remove(&(namespace.to_owned(), key.to_owned()));
    }
    fn keys(&self, namespace: &str, prefix: &str) -> Vec<String> {
        let data = self.data.lock().unwrap_or_else(|p| p.into_inner());
        if prefix.len() > self.quota.key_bytes {
            return Vec::new();
        }
        let matching = data.keys().filter(|(ns, k)| ns == namespace && k.starts_with(prefix)).map(|(_, k)| k.clone());
        self.quota.bound_listing(matching)
    }
}

/// The message a tool gets when it uses the store without a grant.
pub(crate) const NOT_GRANTED: &str =
    "the store is not granted to this plugin (grant a session store to the plugin in the host)";

impl SandboxState {
    /// `tenant/store-namespace/session` (the tenant is empty outside a
    /// multi-tenant host): a plugin never sees another plugin's, session's or
    /// tenant's keys. The middle part is the identity the host gave the
    /// plugin ([`PluginConfig::store_namespace`](crate::plugin::config::PluginConfig::store_namespace),
    /// by default its content digest), never the name the plugin declares
    /// itself: any component may call itself `notes`. A session-less call has
    /// no store.
    ///
    /// The middle part cannot hold `/` or `%`; the tenant and the session
    /// have theirs escaped, so that no two (tenant, session) pairs make one
    /// namespace (tenant `a/x`, session `s` against tenant `a`, session
    /// `x/s`). Values without them, the usual case, read as before.
    pub(crate) fn namespace(&self) -> Option<String> {
        let session = self.call.session_id.as_deref()?;
        let tenant = self.call.tenant.as_deref().unwrap_or("");
        Some(format!("{}/{}/{}", escape_part(tenant), self.store_namespace, escape_part(session)))
    }
}

/// `%` and `/` as `%25` and `%2F`; anything else unchanged.
fn escape_part(part: &str) -> std::borrow::Cow<'_, str> {
    if part.contains(['%', '/']) { part.replace('%', "%25").replace('/', "%2F").into() } else { part.into() }
}

impl Host for SandboxState {
    fn get(&mut self, key: String) -> Option<Vec<u8>> {
        let ns = self.namespace()?;
        self.session_store.as_ref()?.get(&ns, &key)
    }
    fn set(&mut self, key: String, value: Vec<u8>) -> Result<(), String> {
        let Some(store) = &self.session_store else { return Err(NOT_GRANTED.into()) };
        // A run past its fence writes nothing: its lease may be another
        // replica's, which may be writing the same session's notes.
        if self.call.cancel.fence_ended() {
            return Err(crate::call::FENCE_ENDED.into());
        }
        let Some(ns) = self.namespace() else {
            return Err("the store needs a session: this call has no session id".into());
        };
        store.set(&ns, &key, &value)
    }
    fn delete(&mut self, key: String) {
        if self.call.cancel.fence_ended() {
            return;
        }
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

/// 0.1.0's `store` is 0.2.0's: each call goes to the implementation above.
impl crate::bindings::v0_1::lovia::tools::store::Host for SandboxState {
    fn get(&mut self, key: String) -> Option<Vec<u8>> {
        Host::get(self, key)
    }
    fn set(&mut self, key: String, value: Vec<u8>) -> Result<(), String> {
        Host::set(self, key, value)
    }
    fn delete(&mut self, key: String) {
        Host::delete(self, key);
    }
    fn keys(&mut self, prefix: String) -> Vec<String> {
        Host::keys(self, prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_parts_keep_tenants_and_sessions_apart() {
        // Tenant `a/x` with session `s` against tenant `a` with session `x/s`.
        let ns = |tenant: &str, session: &str| format!("{}/digest/{}", escape_part(tenant), escape_part(session));
        assert_ne!(ns("a/x", "s"), ns("a", "x/s"));
        assert_ne!(ns("a%2Fx", "s"), ns("a/x", "s"));
        assert_eq!(ns("acme", "s1"), "acme/digest/s1", "ordinary ids read as before");
    }

    #[test]
    fn listings_stop_at_their_count_and_bytes() {
        let quota = StoreQuota { list_keys: 3, list_bytes: 10, ..StoreQuota::default() };
        let keys = |list: &[&str]| quota.bound_listing(list.iter().map(|k| k.to_string()));
        assert_eq!(keys(&["a", "b", "c", "d"]), ["a", "b", "c"]);
        assert_eq!(keys(&["aaaa", "bbbb", "cccc"]), ["aaaa", "bbbb"]);
        assert_eq!(keys(&["a", "much-too-long-key", "b"]), ["a", "b"], "a key over the whole budget is skipped");
    }
}
