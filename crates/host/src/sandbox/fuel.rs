//! Fuel: a deterministic CPU budget per call, and a budget per tenant —
//! either one total for the host's lifetime (`HostConfig::tenant_fuel`) or
//! an amount per period for one tenant (`lovia serve`'s `fuel_per_minute`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A tenant's own budget: `amount` per `period`, refilled whole when a
/// period has passed since the window started.
#[derive(Debug)]
struct Periodic {
    amount: u64,
    period: Duration,
    window: Instant,
    left: u64,
}

/// What each tenant has left of its fuel, and what each has burned. Tenants
/// without an entry start at the host's `tenant_fuel`; calls without a
/// tenant are not counted.
#[derive(Debug)]
pub struct FuelLedger {
    per_tenant: Option<u64>,
    left: Mutex<HashMap<String, u64>>,
    periodic: Mutex<HashMap<String, Periodic>>,
    used: Mutex<HashMap<String, u64>>,
}

impl FuelLedger {
    pub(crate) fn new(per_tenant: Option<u64>) -> Self {
        Self { per_tenant, left: Mutex::default(), periodic: Mutex::default(), used: Mutex::default() }
    }

    /// Gives `tenant` `amount` fuel per `period`, over the host's total.
    pub fn limit_per_period(&self, tenant: &str, amount: u64, period: Duration) {
        let budget = Periodic { amount, period, window: Instant::now(), left: amount };
        self.periodic.lock().unwrap_or_else(|p| p.into_inner()).insert(tenant.to_owned(), budget);
    }

    /// The fuel `tenant` may still burn (`None`: unlimited).
    pub fn remaining(&self, tenant: Option<&str>) -> Option<u64> {
        let tenant = tenant?;
        if let Some(b) = self.periodic.lock().unwrap_or_else(|p| p.into_inner()).get_mut(tenant) {
            if b.window.elapsed() >= b.period {
                b.window = Instant::now();
                b.left = b.amount;
            }
            return Some(b.left);
        }
        let total = self.per_tenant?;
        Some(*self.left.lock().unwrap_or_else(|p| p.into_inner()).get(tenant).unwrap_or(&total))
    }

    /// The fuel `tenant` burned since the host started.
    pub fn used(&self, tenant: &str) -> u64 {
        self.used.lock().unwrap_or_else(|p| p.into_inner()).get(tenant).copied().unwrap_or(0)
    }

    /// Records that `tenant` burned `used`.
    pub(crate) fn charge(&self, tenant: Option<&str>, used: u64) {
        let Some(tenant) = tenant else { return };
        *self.used.lock().unwrap_or_else(|p| p.into_inner()).entry(tenant.to_owned()).or_default() += used;
        if let Some(b) = self.periodic.lock().unwrap_or_else(|p| p.into_inner()).get_mut(tenant) {
            b.left = b.left.saturating_sub(used);
            return;
        }
        let Some(total) = self.per_tenant else { return };
        let mut left = self.left.lock().unwrap_or_else(|p| p.into_inner());
        let entry = left.entry(tenant.to_owned()).or_insert(total);
        *entry = entry.saturating_sub(used);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_periodic_budget_refills_after_its_period() {
        let ledger = FuelLedger::new(None);
        assert_eq!(ledger.remaining(Some("a")), None);
        ledger.limit_per_period("a", 100, Duration::from_millis(50));
        ledger.charge(Some("a"), 70);
        ledger.charge(Some("a"), 70);
        assert_eq!((ledger.remaining(Some("a")), ledger.used("a")), (Some(0), 140));
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(ledger.remaining(Some("a")), Some(100));
        assert_eq!(ledger.remaining(Some("b")), None);
    }
}
