//! Each tenant's share of the cores for its guest code
//! ([`HostConfig::tenant_cpu_cores`](crate::HostConfig::tenant_cpu_cores)).
//!
//! Every running call yields at each epoch tick (1 ms), and each tick it
//! sees is a millisecond of its tenant's CPU. A tenant's ticks are drawn
//! from a token bucket that fills at `cores` tokens a millisecond and holds
//! at most [`BURST_MS`] milliseconds' worth: a call that finds it empty
//! pauses before it runs again until a token is there. So a tenant running
//! many spinning calls at once runs on at most its cores, with no burst
//! when they wake (a woken call runs only once it has its token), and the
//! cores left over serve everyone else. A tenant whose calls mostly wait (a
//! sleep, an HTTP request) ticks only while it computes, and is not held
//! back for waiting. The host's own work for a tenant (a costly argument
//! check) is charged to the same bucket after it ran, which may leave it in
//! debt: the tenant's next ticks wait until it is paid.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most CPU a tenant can use at once beyond its rate: 2 ms per core.
pub const BURST_MS: f64 = 2.0;

/// The tenants' CPU shares of one host.
#[derive(Debug)]
pub struct CpuShares {
    /// The share of a tenant without one of its own (`None`: unlimited).
    default_cores: Option<f64>,
    tenants: Mutex<HashMap<String, Arc<TenantCpu>>>,
}

/// One tenant's bucket: tokens are milliseconds of one core.
#[derive(Debug)]
pub struct TenantCpu {
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Tokens added per millisecond: the tenant's cores.
    rate: f64,
    /// The most tokens held.
    capacity: f64,
    /// Tokens now; below zero after a charge (a debt).
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
    /// The tenant's costly argument checks running now: each uses a core
    /// while it runs, so the bucket fills that much slower (and drains when
    /// they take more than the share), and the tenant's guests wait at once
    /// instead of after the check.
    checks: u32,
}

impl Bucket {
    fn new(cores: f64) -> Self {
        let rate = cores.max(0.01);
        let capacity = (BURST_MS * rate).max(1.0);
        Self { rate, capacity, tokens: capacity, at: Instant::now(), checks: 0 }
    }

    fn refill(&mut self, now: Instant) {
        let ms = now.duration_since(self.at).as_secs_f64() * 1e3;
        self.tokens = (self.tokens + ms * (self.rate - f64::from(self.checks))).min(self.capacity);
        self.at = now;
    }

    /// When the bucket will hold `tokens`.
    fn when(&self, tokens: f64, now: Instant) -> Instant {
        let missing = (tokens - self.tokens).max(0.0);
        now + Duration::from_secs_f64(missing / self.rate / 1e3)
    }
}

impl TenantCpu {
    fn new(cores: f64) -> Self {
        Self { bucket: Mutex::new(Bucket::new(cores)) }
    }

    fn bucket(&self) -> std::sync::MutexGuard<'_, Bucket> {
        self.bucket.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the token of one tick; `Some` of when the next token will be
    /// there when there is none now (nothing was taken).
    pub fn tick(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut bucket = self.bucket();
        bucket.refill(now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            None
        } else {
            Some(bucket.when(1.0, now))
        }
    }

    /// A costly check of the tenant's starts: until [`TenantCpu::check_ended`],
    /// its core is taken from the tenant's rate (the bucket may go into debt).
    pub(crate) fn check_started(&self) {
        let mut bucket = self.bucket();
        bucket.refill(Instant::now());
        bucket.checks += 1;
    }

    /// The check [`TenantCpu::check_started`] counted has ended.
    pub(crate) fn check_ended(&self) {
        let mut bucket = self.bucket();
        bucket.refill(Instant::now());
        bucket.checks = bucket.checks.saturating_sub(1);
    }

    /// `Some` of when the tenant has a token again, when it has none now;
    /// nothing is taken.
    pub(crate) fn over(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut bucket = self.bucket();
        bucket.refill(now);
        (bucket.tokens < 1.0).then(|| bucket.when(1.0, now))
    }

    /// Waits until a tick's token is taken, or until `deadline`.
    pub async fn take(self: Arc<Self>, first: Instant, deadline: Instant) {
        let mut until = first;
        loop {
            tokio::time::sleep_until(until.min(deadline).into()).await;
            if Instant::now() >= deadline {
                return;
            }
            match self.tick() {
                None => return,
                Some(next) => until = next,
            }
        }
    }
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
            Some(cpu) => *cpu.bucket() = Bucket::new(cores),
            None => {
                tenants.insert(tenant.to_owned(), Arc::new(TenantCpu::new(cores)));
            }
        }
    }

    /// The window of `tenant`'s calls; `None` for calls without a tenant,
    /// and for a tenant without a share when the host sets none.
    pub fn of(&self, tenant: Option<&str>) -> Option<Arc<TenantCpu>> {
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
    fn a_tenant_draws_its_ticks_from_a_bucket_of_its_cores() {
        let shares = CpuShares::new(None);
        assert!(shares.of(Some("a")).is_none(), "no share, no accounting");
        assert!(shares.of(None).is_none());
        shares.limit("a", 0.5);
        let a = shares.of(Some("a")).unwrap_or_else(|| panic!("a share"));
        // 0.5 core: a burst of 1 tick, then one tick every 2 ms.
        assert!(a.tick().is_none());
        let next = a.tick().unwrap_or_else(|| panic!("the bucket is empty"));
        let wait = next.saturating_duration_since(Instant::now());
        assert!(wait <= Duration::from_millis(2), "{wait:?}");
        // A check in flight takes its core from the rate: at half a core the
        // bucket drains half a token a millisecond until it ends.
        let b = CpuShares::new(Some(0.5));
        let b = b.of(Some("b")).unwrap_or_else(|| panic!("b share"));
        b.check_started();
        std::thread::sleep(Duration::from_millis(20));
        b.check_ended();
        // 20 ms of a check at half a core drained about 10 tokens: paid back
        // at half a token a millisecond, about 20 ms.
        let paid = b.over().unwrap_or_else(|| panic!("in debt after the check"));
        assert!(paid.saturating_duration_since(Instant::now()) > Duration::from_millis(15), "{paid:?}");
        let defaulted = CpuShares::new(Some(1.0));
        assert!(defaulted.of(Some("b")).is_some());
    }
}
