//! Instance slots: how many component instances may exist at once, in all
//! and per tenant.
//!
//! The pooling allocator has a fixed number of slots
//! ([`crate::HostConfig::pool_slots`]). Without admission in front of it, one
//! tenant holding every slot (long calls, parked warm instances, slow
//! `needs-approval` checks) makes every other tenant's instantiation fail with
//! wasmtime's "maximum concurrent limit" error. So every store that will hold
//! an instance first takes a [`SlotPermit`]: one of the host's, and, for a
//! call with a tenant, one of that tenant's
//! ([`crate::HostConfig::tenant_instances`]). A tenant at its own limit waits
//! for its own permits (inside its call's deadline); it cannot take the
//! others'. The permit lives as long as the instance does: for a warm
//! instance, until it is evicted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Parked instances that can be given up to free their slots: a
/// session-mode plugin's warm instances.
pub(crate) trait IdleInstances: Send + Sync {
    /// Drops the least recently used idle instance of `tenant` other than
    /// session `keep`'s; true if one was dropped.
    fn evict_idle(&self, tenant: Option<&str>, keep: &str) -> bool;
}

/// The host's instance permits.
pub(crate) struct InstanceSlots {
    global: Arc<Semaphore>,
    per_tenant: usize,
    /// One semaphore per tenant seen. Tenants are the operator's (API keys
    /// map to configured tenants), so this map is bounded by configuration.
    tenants: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Every session-mode plugin's warm instances, so that a tenant at its
    /// limit can give up an idle one in any plugin.
    idle: Mutex<Vec<std::sync::Weak<dyn IdleInstances>>>,
}

impl std::fmt::Debug for InstanceSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceSlots").field("per_tenant", &self.per_tenant).finish_non_exhaustive()
    }
}

/// The right to hold one instance; released when dropped.
#[derive(Debug)]
pub(crate) struct SlotPermit {
    // Field order: the tenant's permit goes back before the host's, so a
    // waiter of this tenant never sees a free host permit it cannot use.
    _tenant: Option<OwnedSemaphorePermit>,
    _global: OwnedSemaphorePermit,
}

impl InstanceSlots {
    pub(crate) fn new(total: u32, per_tenant: u32) -> Self {
        Self {
            global: Arc::new(Semaphore::new(total.max(1) as usize)),
            per_tenant: per_tenant.max(1) as usize,
            tenants: Mutex::default(),
            idle: Mutex::default(),
        }
    }

    /// Registers a plugin's warm instances; dropped plugins fall out.
    pub(crate) fn register_idle(&self, pool: std::sync::Weak<dyn IdleInstances>) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|p| p.strong_count() > 0);
        idle.push(pool);
    }

    /// Gives up one idle instance of `tenant`: `first`'s (other than
    /// session `keep`'s), else any other registered plugin's. True if one
    /// was dropped.
    pub(crate) fn evict_idle(&self, first: &dyn IdleInstances, tenant: Option<&str>, keep: &str) -> bool {
        if first.evict_idle(tenant, keep) {
            return true;
        }
        let pools: Vec<_> = {
            let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            idle.iter().filter_map(std::sync::Weak::upgrade).collect()
        };
        let first_ptr = first as *const dyn IdleInstances as *const ();
        pools.iter().filter(|p| Arc::as_ptr(p) as *const () != first_ptr).any(|p| p.evict_idle(tenant, ""))
    }

    fn tenant(&self, tenant: &str) -> Arc<Semaphore> {
        let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        // Looked up before inserting: every call passes here, and only a
        // tenant's first call needs to own its name.
        if let Some(semaphore) = tenants.get(tenant) {
            return semaphore.clone();
        }
        tenants.entry(tenant.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(self.per_tenant))).clone()
    }

    /// A permit now, if the tenant and the host both have one free.
    pub(crate) fn try_acquire(&self, tenant: Option<&str>) -> Option<SlotPermit> {
        let own = match tenant {
            Some(t) => Some(self.tenant(t).try_acquire_owned().ok()?),
            None => None,
        };
        let global = self.global.clone().try_acquire_owned().ok()?;
        Some(SlotPermit { _tenant: own, _global: global })
    }

    /// Waits for a permit: the tenant's first (so that a tenant at its limit
    /// queues behind its own calls without holding one of the host's), then
    /// the host's. The caller bounds the wait with its deadline.
    pub(crate) async fn acquire(&self, tenant: Option<&str>) -> SlotPermit {
        let own = match tenant {
            // The semaphores are never closed, so acquiring cannot fail.
            Some(t) => self.tenant(t).acquire_owned().await.ok(),
            None => None,
        };
        let global = loop {
            if let Ok(permit) = self.global.clone().acquire_owned().await {
                break permit;
            }
        };
        SlotPermit { _tenant: own, _global: global }
    }

    /// Permits `tenant` holds now (for tests and metrics).
    pub(crate) fn in_use(&self, tenant: &str) -> usize {
        let tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        tenants.get(tenant).map_or(0, |s| self.per_tenant - s.available_permits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_tenant_at_its_limit_leaves_the_rest_to_others() {
        let slots = InstanceSlots::new(4, 2);
        let a1 = slots.try_acquire(Some("a")).expect("first");
        let _a2 = slots.try_acquire(Some("a")).expect("second");
        assert!(slots.try_acquire(Some("a")).is_none(), "a is at its limit");
        let _b = slots.try_acquire(Some("b")).expect("b still gets one");
        let _none = slots.try_acquire(None).expect("an untenanted call gets the last");
        assert!(slots.try_acquire(Some("c")).is_none(), "the host is full");
        drop(a1);
        assert_eq!(slots.in_use("a"), 1);
        assert!(slots.try_acquire(Some("c")).is_some(), "a's release frees a host slot");
    }
}
