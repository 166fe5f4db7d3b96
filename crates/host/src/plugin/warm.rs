//! Session mode: one warm instance per (tenant, session) of a plugin, for
//! tools that keep state in memory between calls. Fresh instances per call
//! stay the default; see [`InstanceMode`].

use crate::bindings::ToolPlugin;
use crate::sandbox::SandboxState;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Where a plugin's calls get their instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum InstanceMode {
    /// A fresh instance for every call: nothing survives a call but what the
    /// session store keeps. The default.
    #[default]
    Fresh,
    /// One instance per (tenant, session), reused by that session's calls,
    /// which then run one at a time. Calls without a session id still get a
    /// fresh instance. An instance that traps, times out or is cancelled is
    /// thrown away, and the next call starts a new one. At most
    /// [`WARM_INSTANCES`] are kept per plugin (least recently used go first).
    Session,
}

/// Warm instances kept per plugin in session mode.
pub const WARM_INSTANCES: usize = 64;

/// An instance and its store, between calls.
pub(crate) struct Warm {
    pub(crate) store: wasmtime::Store<SandboxState>,
    pub(crate) instance: ToolPlugin,
}

/// A session's slot: empty until its first call, and emptied while a call
/// runs, so that a call abandoned half-way never hands its instance on.
pub(crate) type Slot = Arc<tokio::sync::Mutex<Option<Warm>>>;

/// (tenant, session).
type SessionKey = (Option<String>, String);

/// The warm instances of one plugin, by (tenant, session), with when each was last used.
#[derive(Default)]
pub(crate) struct WarmInstances {
    slots: Mutex<HashMap<SessionKey, (Slot, u64)>>,
    clock: std::sync::atomic::AtomicU64,
}

impl WarmInstances {
    /// The slot of a session, made on first use.
    pub(crate) fn slot(&self, tenant: Option<&str>, session: &str) -> Slot {
        let now = self.clock.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let key = (tenant.map(str::to_owned), session.to_owned());
        if let Some((slot, used)) = slots.get_mut(&key) {
            *used = now;
            return slot.clone();
        }
        if slots.len() >= WARM_INSTANCES
            && let Some(oldest) = slots.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone())
        {
            // A call still running on the evicted slot keeps it alive until it ends.
            slots.remove(&oldest);
        }
        let slot = Slot::default();
        slots.insert(key, (slot.clone(), now));
        slot
    }

    /// Drops a session's instance; true if there was one.
    pub(crate) fn end(&self, tenant: Option<&str>, session: &str) -> bool {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.remove(&(tenant.map(str::to_owned), session.to_owned())).is_some()
    }

    /// How many sessions hold a slot.
    pub(crate) fn len(&self) -> usize {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
