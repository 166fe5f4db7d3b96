//! Session mode: one warm instance per (tenant, session) of a plugin, for
//! tools that keep state in memory between calls. Fresh instances per call
//! stay the default; see [`InstanceMode`].

use crate::sandbox::GuestInstance;
use crate::sandbox::{SandboxState, SlotPermit};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// [`WARM_INSTANCES`] are kept per plugin (least recently used go first);
    /// one unused for [`crate::HostConfig::warm_idle_timeout`] is dropped,
    /// and a tenant at its instance limit
    /// ([`crate::HostConfig::tenant_instances`]) gives up its least recently
    /// used idle one to a new session.
    Session,
}

/// Warm instances kept per plugin in session mode.
pub const WARM_INSTANCES: usize = 64;

/// An instance and its store, between calls.
pub(crate) struct Warm {
    pub(crate) store: wasmtime::Store<SandboxState>,
    pub(crate) instance: GuestInstance,
    /// The instance slot it holds until it is dropped.
    pub(crate) permit: SlotPermit,
}

/// A session's slot: empty until its first call, and emptied while a call
/// runs, so that a call abandoned half-way never hands its instance on.
pub(crate) type Slot = Arc<tokio::sync::Mutex<Option<Warm>>>;

/// (tenant, session).
type SessionKey = (Option<String>, String);

/// The warm instances of one plugin, by (tenant, session), with when each was last used.
#[derive(Default)]
pub(crate) struct WarmInstances {
    slots: Mutex<HashMap<SessionKey, (Slot, Instant)>>,
}

impl WarmInstances {
    /// The slot of a session, made on first use.
    pub(crate) fn slot(&self, tenant: Option<&str>, session: &str) -> Slot {
        let now = Instant::now();
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let key = (tenant.map(str::to_owned), session.to_owned());
        if let Some((slot, used)) = slots.get_mut(&key) {
            *used = now;
            return slot.clone();
        }
        // Only an idle session gives way: evicting a busy one would let its
        // next call start beside the one still running. With every session
        // busy the map grows past the cap, bounded by the calls in flight.
        if slots.len() >= WARM_INSTANCES
            && let Some(oldest) = slots
                .iter()
                .filter(|(_, (slot, _))| slot.try_lock().is_ok())
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
        {
            slots.remove(&oldest);
        }
        let slot = Slot::default();
        slots.insert(key, (slot.clone(), now));
        slot
    }

    /// Marks a session used now: its call just ended, so its idle time
    /// starts here, not when the call began.
    pub(crate) fn touch(&self, tenant: Option<&str>, session: &str) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, used)) = slots.get_mut(&(tenant.map(str::to_owned), session.to_owned())) {
            *used = Instant::now();
        }
    }

    /// Drops a session's instance; true if there was one.
    pub(crate) fn end(&self, tenant: Option<&str>, session: &str) -> bool {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.remove(&(tenant.map(str::to_owned), session.to_owned())).is_some()
    }

    /// How many sessions hold a warm instance now (busy ones count).
    pub(crate) fn len(&self) -> usize {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.values().filter(|(slot, _)| slot.try_lock().map_or(true, |warm| warm.is_some())).count()
    }

    /// Drops every instance unused for `idle` or longer. A slot in use (its
    /// lock held by a call) is not idle.
    pub(crate) fn sweep(&self, idle: Duration) -> usize {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let before = slots.len();
        slots.retain(|_, (slot, used)| used.elapsed() < idle || slot.try_lock().is_err());
        before - slots.len()
    }
}

impl crate::sandbox::IdleInstances for WarmInstances {
    /// Drops the least recently used idle instance of `tenant` other than
    /// `keep`'s, to give its slot to a new session; true if one was dropped.
    fn evict_idle(&self, tenant: Option<&str>, keep: &str) -> bool {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let victim = slots
            .iter()
            .filter(|((t, s), (slot, _))| {
                t.as_deref() == tenant && s != keep && slot.try_lock().is_ok_and(|warm| warm.is_some())
            })
            .min_by_key(|(_, (_, used))| *used)
            .map(|(k, _)| k.clone());
        victim.is_some_and(|k| slots.remove(&k).is_some())
    }
}
