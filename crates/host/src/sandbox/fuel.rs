//! Fuel: a deterministic CPU budget per call, and a budget per tenant —
//! either one total for the host's lifetime (`HostConfig::tenant_fuel`) or
//! an amount per period for one tenant (`lovia serve`'s `fuel_per_minute`).
//!
//! A call's fuel is taken out of its tenant's budget before the call starts
//! ([`FuelLedger::reserve`]) and what it did not burn is given back when it
//! ends, however it ends. Charging afterwards let parallel calls each see the
//! whole budget and together burn a multiple of it (issue 12, item 6).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A tenant's own budget: `amount` per `period`, refilled whole when a
/// period has passed since the window started.
#[derive(Debug)]
struct Periodic {
    amount: u64,
    period: Duration,
    window: Instant,
    left: u64,
    /// Counts refills, so that a refund from an earlier window is not added
    /// to a fresh one (which would let a tenant exceed `amount`).
    generation: u64,
}

impl Periodic {
    fn refill_if_due(&mut self) {
        if self.window.elapsed() >= self.period {
            self.window = Instant::now();
            self.left = self.amount;
            self.generation = self.generation.wrapping_add(1);
        }
    }
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

/// Where a reservation's fuel came from, so the unused part goes back there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Nothing was held: no tenant, or a tenant without a budget.
    None,
    /// The host's lifetime total for the tenant.
    Total,
    /// The tenant's periodic budget, in the window of this generation.
    Periodic(u64),
}

/// The tenant is out of fuel: the call must not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the tenant's fuel budget is spent")]
pub(crate) struct OutOfFuel;

/// Fuel held for one call. [`Reservation::finish`] records what the call
/// burned and refunds the rest; dropped unfinished (the call never got a
/// store), it refunds everything.
#[derive(Debug)]
pub(crate) struct Reservation {
    ledger: Arc<FuelLedger>,
    tenant: Option<String>,
    /// The fuel the call's store gets (`None`: as much as possible).
    pub(crate) fuel: Option<u64>,
    held: u64,
    source: Source,
    done: bool,
}

impl FuelLedger {
    pub(crate) fn new(per_tenant: Option<u64>) -> Self {
        Self { per_tenant, left: Mutex::default(), periodic: Mutex::default(), used: Mutex::default() }
    }

    /// Gives `tenant` `amount` fuel per `period`, over the host's total.
    pub fn limit_per_period(&self, tenant: &str, amount: u64, period: Duration) {
        let budget = Periodic { amount, period, window: Instant::now(), left: amount, generation: 0 };
        self.periodic.lock().unwrap_or_else(|p| p.into_inner()).insert(tenant.to_owned(), budget);
    }

    /// The fuel `tenant` may still burn (`None`: unlimited). Fuel held by
    /// calls still running is not included.
    pub fn remaining(&self, tenant: Option<&str>) -> Option<u64> {
        let tenant = tenant?;
        if let Some(b) = self.periodic.lock().unwrap_or_else(|p| p.into_inner()).get_mut(tenant) {
            b.refill_if_due();
            return Some(b.left);
        }
        let total = self.per_tenant?;
        Some(*self.left.lock().unwrap_or_else(|p| p.into_inner()).get(tenant).unwrap_or(&total))
    }

    /// The fuel `tenant` burned since the host started.
    pub fn used(&self, tenant: &str) -> u64 {
        self.used.lock().unwrap_or_else(|p| p.into_inner()).get(tenant).copied().unwrap_or(0)
    }

    /// Takes the fuel of one call out of `tenant`'s budget: `min(call_cap,
    /// what is left)`, or all that is left when the call has no cap. A
    /// tenant without a budget holds nothing and the call gets `call_cap`.
    /// `metered` is false on an engine that counts no fuel: the budget is
    /// still checked, but nothing is held, as nothing could be refunded.
    pub(crate) fn reserve(
        self: &Arc<Self>,
        tenant: Option<&str>,
        call_cap: Option<u64>,
        metered: bool,
    ) -> Result<Reservation, OutOfFuel> {
        let unheld = |fuel| Reservation {
            ledger: self.clone(),
            tenant: tenant.map(str::to_owned),
            fuel,
            held: 0,
            source: Source::None,
            done: false,
        };
        let Some(name) = tenant else { return Ok(unheld(call_cap)) };
        let take = |left: &mut u64| -> Result<u64, OutOfFuel> {
            if *left == 0 {
                return Err(OutOfFuel);
            }
            let amount = call_cap.map_or(*left, |cap| cap.min(*left));
            if metered {
                *left -= amount;
            }
            Ok(amount)
        };
        let (amount, source) = {
            let mut periodic = self.periodic.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(b) = periodic.get_mut(name) {
                b.refill_if_due();
                (take(&mut b.left)?, Source::Periodic(b.generation))
            } else if let Some(total) = self.per_tenant {
                drop(periodic);
                let mut left = self.left.lock().unwrap_or_else(|p| p.into_inner());
                (take(left.entry(name.to_owned()).or_insert(total))?, Source::Total)
            } else {
                return Ok(unheld(call_cap));
            }
        };
        if !metered {
            return Ok(unheld(Some(amount)));
        }
        Ok(Reservation {
            ledger: self.clone(),
            tenant: Some(name.to_owned()),
            fuel: Some(amount),
            held: amount,
            source,
            done: false,
        })
    }

    /// Gives `amount` back to where `source` took it from.
    fn refund(&self, tenant: &str, source: Source, amount: u64) {
        match source {
            Source::None => {}
            Source::Total => {
                if let Some(left) = self.left.lock().unwrap_or_else(|p| p.into_inner()).get_mut(tenant) {
                    *left = left.saturating_add(amount);
                }
            }
            Source::Periodic(generation) => {
                if let Some(b) = self.periodic.lock().unwrap_or_else(|p| p.into_inner()).get_mut(tenant)
                    && b.generation == generation
                {
                    b.left = b.left.saturating_add(amount).min(b.amount);
                }
            }
        }
    }

    fn record_used(&self, tenant: &str, used: u64) {
        let mut map = self.used.lock().unwrap_or_else(|p| p.into_inner());
        let entry = map.entry(tenant.to_owned()).or_default();
        *entry = entry.saturating_add(used);
    }
}

impl Reservation {
    /// Records what the call burned, from the fuel its store has `left`
    /// (`None`: unknown, on an engine without fuel metering, where nothing
    /// was held), and refunds the rest. Idempotent.
    pub(crate) fn finish(&mut self, left: Option<u64>) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let Some(tenant) = self.tenant.as_deref() else { return };
        let Some(left) = left else {
            self.ledger.refund(tenant, self.source, self.held);
            return;
        };
        let used = self.fuel.unwrap_or(u64::MAX).saturating_sub(left);
        self.ledger.record_used(tenant, used);
        self.ledger.refund(tenant, self.source, self.held.saturating_sub(used));
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // Unfinished: no store ever ran with this fuel (the call was dropped
        // before it started), so all of it goes back.
        self.finish(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_periodic_budget_refills_after_its_period() {
        let ledger = Arc::new(FuelLedger::new(None));
        assert_eq!(ledger.remaining(Some("a")), None);
        ledger.limit_per_period("a", 100, Duration::from_millis(50));
        let mut first = ledger.reserve(Some("a"), Some(70), true).expect("fuel");
        assert_eq!((first.fuel, ledger.remaining(Some("a"))), (Some(70), Some(30)), "held up front");
        let mut second = ledger.reserve(Some("a"), Some(70), true).expect("fuel");
        assert_eq!(second.fuel, Some(30), "only what is left");
        assert_eq!(ledger.reserve(Some("a"), Some(70), true).err(), Some(OutOfFuel));
        first.finish(Some(0));
        second.finish(Some(0));
        assert_eq!((ledger.remaining(Some("a")), ledger.used("a")), (Some(0), 100));
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(ledger.remaining(Some("a")), Some(100));
        assert_eq!(ledger.remaining(Some("b")), None);
    }

    #[test]
    fn unused_fuel_is_refunded_and_a_dropped_reservation_gives_all_back() {
        let ledger = Arc::new(FuelLedger::new(Some(1_000)));
        let mut call = ledger.reserve(Some("t"), Some(400), true).expect("fuel");
        assert_eq!(ledger.remaining(Some("t")), Some(600));
        call.finish(Some(350));
        assert_eq!((ledger.remaining(Some("t")), ledger.used("t")), (Some(950), 50));
        drop(ledger.reserve(Some("t"), None, true).expect("fuel"));
        assert_eq!((ledger.remaining(Some("t")), ledger.used("t")), (Some(950), 50));
        // Without a cap a call holds all that is left, so a parallel one gets none.
        let _all = ledger.reserve(Some("t"), None, true).expect("fuel");
        assert_eq!(ledger.reserve(Some("t"), None, true).err(), Some(OutOfFuel));
    }

    #[test]
    fn a_refund_from_an_earlier_window_does_not_overfill_a_fresh_one() {
        let ledger = Arc::new(FuelLedger::new(None));
        ledger.limit_per_period("a", 100, Duration::from_millis(30));
        let mut call = ledger.reserve(Some("a"), None, true).expect("fuel");
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(ledger.remaining(Some("a")), Some(100), "refilled");
        call.finish(Some(90));
        assert_eq!((ledger.remaining(Some("a")), ledger.used("a")), (Some(100), 10));
    }
}
