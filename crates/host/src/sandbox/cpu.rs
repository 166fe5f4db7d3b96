//! Each tenant's share of the cores for its guest code
//! ([`HostConfig::tenant_cpu_cores`](crate::HostConfig::tenant_cpu_cores)).
//!
//! Every running call yields at each epoch tick (1 ms). Each tick a call of
//! a tenant sees is counted as a millisecond of that tenant's CPU, in
//! windows of [`WINDOW`]; a tenant past `cores` × the window in one window
//! has its calls pause at their next tick until the window ends, like a
//! cgroup's CPU quota. So a tenant running many spinning calls at once
//! takes at most its share of the machine, and the cores left over serve
//! everyone else at once; a tenant whose calls mostly wait (a sleep, an HTTP
//! request) ticks only while it computes, and is not held back for waiting.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The accounting window.
pub const WINDOW: Duration = Duration::from_millis(20);

/// The tenants' CPU shares of one host.
#[derive(Debug)]
pub struct CpuShares {
    /// The share of a tenant without one of its own (`None`: unlimited).
    default_cores: Option<f64>,
    tenants: Mutex<HashMap<String, Arc<TenantCpu>>>,
}

/// One tenant's window.
#[derive(Debug)]
pub(crate) struct TenantCpu {
    /// Ticks the tenant may use per window (`cores` × window in ms).
    budget: Mutex<u64>,
    window: Mutex<(Instant, u64)>,
}

impl TenantCpu {
    fn new(cores: f64) -> Self {
        Self { budget: Mutex::new(ticks_of(cores)), window: Mutex::new((Instant::now(), 0)) }
    }

    /// Counts one tick of the tenant's guest code; `Some` of when its
    /// window ends when the tenant has used its share of this one.
    pub(crate) fn tick(&self) -> Option<Instant> {
        self.charge(1)
    }

    /// Counts `ticks` milliseconds of the tenant's CPU spent on the host's
    /// side for it (an argument check); as [`TenantCpu::tick`].
    pub(crate) fn charge(&self, ticks: u64) -> Option<Instant> {
        let budget = *self.budget.lock().unwrap_or_else(|p| p.into_inner());
        let mut window = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if now.duration_since(window.0) >= WINDOW {
            *window = (now, 0);
        }
        window.1 = window.1.saturating_add(ticks);
        (window.1 > budget).then(|| window.0 + WINDOW)
    }

    /// `Some` of when the window ends when the tenant has already used its
    /// share of it; nothing is counted.
    pub(crate) fn over(&self) -> Option<Instant> {
        self.charge(0)
    }
}

/// Ticks of `cores` in one window (at least one).
fn ticks_of(cores: f64) -> u64 {
    let ms = WINDOW.as_millis() as f64;
    (cores.max(0.0) * ms).round().max(1.0) as u64
}

impl CpuShares {
    pub(crate) fn new(default_cores: Option<f64>) -> Self {
        Self { default_cores, tenants: Mutex::new(HashMap::new()) }
    }

    /// Sets `tenant`'s share: the cores its guest code may use at once,
    /// measured over each window (0.5 is half a core).
    pub fn limit(&self, tenant: &str, cores: f64) {
        let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        match tenants.get(tenant) {
            Some(cpu) => *cpu.budget.lock().unwrap_or_else(|p| p.into_inner()) = ticks_of(cores),
            None => {
                tenants.insert(tenant.to_owned(), Arc::new(TenantCpu::new(cores)));
            }
        }
    }

    /// The window of `tenant`'s calls; `None` for calls without a tenant,
    /// and for a tenant without a share when the host sets none.
    pub(crate) fn of(&self, tenant: Option<&str>) -> Option<Arc<TenantCpu>> {
        let tenant = tenant?;
        let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cpu) = tenants.get(tenant) {
            return Some(cpu.clone());
        }
        let cores = self.default_cores?;
        Some(tenants.entry(tenant.to_owned()).or_insert_with(|| Arc::new(TenantCpu::new(cores))).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_past_its_share_of_a_window_waits_for_the_next() {
        let shares = CpuShares::new(None);
        assert!(shares.of(Some("a")).is_none(), "no share, no accounting");
        assert!(shares.of(None).is_none());
        shares.limit("a", 0.5);
        let a = shares.of(Some("a")).unwrap_or_else(|| panic!("a share"));
        let over: Vec<bool> = (0..12).map(|_| a.tick().is_some()).collect();
        assert!(over[..10].iter().all(|o| !o) && over[10..].iter().all(|o| *o), "10 ticks of 20 ms, then wait");
        let defaulted = CpuShares::new(Some(1.0));
        assert!(defaulted.of(Some("b")).is_some());
    }
}
