//! Fuel: a deterministic CPU budget per call, and a running total per tenant.

use std::collections::HashMap;
use std::sync::Mutex;

/// What each tenant has left of its fuel. Tenants without an entry start at
/// the host's `tenant_fuel`; calls without a tenant are not counted.
#[derive(Debug)]
pub struct FuelLedger {
    per_tenant: Option<u64>,
    left: Mutex<HashMap<String, u64>>,
}

impl FuelLedger {
    pub(crate) fn new(per_tenant: Option<u64>) -> Self {
        Self { per_tenant, left: Mutex::default() }
    }

    /// The fuel `tenant` may still burn (`None`: unlimited).
    pub fn remaining(&self, tenant: Option<&str>) -> Option<u64> {
        let (total, tenant) = (self.per_tenant?, tenant?);
        Some(*self.left.lock().unwrap_or_else(|p| p.into_inner()).get(tenant).unwrap_or(&total))
    }

    /// Records that `tenant` burned `used`.
    pub(crate) fn charge(&self, tenant: Option<&str>, used: u64) {
        let (Some(total), Some(tenant)) = (self.per_tenant, tenant) else { return };
        let mut left = self.left.lock().unwrap_or_else(|p| p.into_inner());
        let entry = left.entry(tenant.to_owned()).or_insert(total);
        *entry = entry.saturating_sub(used);
    }
}
