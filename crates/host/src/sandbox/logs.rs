//! How much a tenant's guests may write to the host's log, and at what
//! level (docs/security.md, "Guest logs"). A plugin's `context.log` lines
//! land in the operator's log: without a bound, one tenant's calls could
//! write gigabytes a minute into it.

use crate::call::LogLevel;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Bytes of guest log lines one tenant may write per minute by default:
/// 1 MiB. A call may write 1,000 lines of 4 KiB (its event budget), so this
/// is about a quarter of one call's most.
pub const DEFAULT_GUEST_LOG_BYTES_PER_MINUTE: u64 = 1 << 20;

/// What each line costs beyond its message and the values of the fields the
/// host adds (tenant, digest, plugin, tool, call, each counted as long as it
/// is), in bytes: the timestamp, level, target, field names and quoting, so
/// that a flood of empty lines is bounded too. A line of lovia's own log
/// format without colours spends about 110 bytes on them. Fixed: 128.
pub const GUEST_LOG_LINE_OVERHEAD: u64 = 128;

/// One tenant's guest log limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct GuestLogLimits {
    /// Bytes (message, the host's field values, plus [`GUEST_LOG_LINE_OVERHEAD`] per line) its guests
    /// may write per minute, refilled continuously; the lines past it are
    /// dropped and counted. Default: [`DEFAULT_GUEST_LOG_BYTES_PER_MINUTE`].
    pub bytes_per_minute: u64,
    /// The least severe level written; lines below it are dropped and not
    /// counted. Default: [`LogLevel::Info`].
    pub level: LogLevel,
}

impl GuestLogLimits {
    /// Limits of `bytes_per_minute` at `level` and above.
    pub fn new(bytes_per_minute: u64, level: LogLevel) -> Self {
        Self { bytes_per_minute, level }
    }
}

impl Default for GuestLogLimits {
    fn default() -> Self {
        Self { bytes_per_minute: DEFAULT_GUEST_LOG_BYTES_PER_MINUTE, level: LogLevel::default() }
    }
}

/// What becomes of one guest line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Below the tenant's level: dropped, not counted.
    BelowLevel,
    /// Written; before it, the summary of the lines suppressed since the
    /// last one written, if any: `(lines, bytes)`.
    Write(Option<(u64, u64)>),
    /// Over the budget: dropped and counted. `first` for the first line of
    /// a run of suppressed ones, which the host announces.
    Suppressed {
        /// Whether it is the first since a line was last written.
        first: bool,
    },
}

/// The guest log budgets of every tenant (calls without a tenant share one).
#[derive(Debug, Default)]
pub struct GuestLogs {
    default: GuestLogLimits,
    limits: Mutex<HashMap<String, GuestLogLimits>>,
    buckets: Mutex<HashMap<String, Bucket>>,
}

#[derive(Debug)]
struct Bucket {
    /// Bytes that may be written now.
    left: f64,
    refilled: Instant,
    suppressed_lines: u64,
    suppressed_bytes: u64,
}

impl GuestLogs {
    /// Budgets of `default` for every tenant without its own.
    pub fn new(default: GuestLogLimits) -> Self {
        Self { default, ..Self::default() }
    }

    /// Sets `tenant`'s limits.
    pub fn limit(&self, tenant: &str, limits: GuestLogLimits) {
        self.limits.lock().unwrap_or_else(|p| p.into_inner()).insert(tenant.to_owned(), limits);
    }

    /// `tenant`'s limits.
    pub fn limits(&self, tenant: Option<&str>) -> GuestLogLimits {
        let limits = self.limits.lock().unwrap_or_else(|p| p.into_inner());
        tenant.and_then(|t| limits.get(t)).copied().unwrap_or(self.default)
    }

    /// Decides the fate of a line of `bytes` at `level` from `tenant`.
    pub(crate) fn admit(&self, tenant: Option<&str>, level: LogLevel, bytes: usize) -> Admit {
        let limits = self.limits(tenant);
        if level < limits.level {
            return Admit::BelowLevel;
        }
        let cost = u64::try_from(bytes).unwrap_or(u64::MAX).saturating_add(GUEST_LOG_LINE_OVERHEAD);
        let capacity = limits.bytes_per_minute as f64;
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let bucket = buckets.entry(tenant.unwrap_or_default().to_owned()).or_insert_with(|| Bucket {
            left: capacity,
            refilled: now,
            suppressed_lines: 0,
            suppressed_bytes: 0,
        });
        let elapsed = now.saturating_duration_since(bucket.refilled);
        bucket.left = (bucket.left + capacity * elapsed.as_secs_f64() / MINUTE.as_secs_f64()).min(capacity);
        bucket.refilled = now;
        if bucket.left >= cost as f64 {
            bucket.left -= cost as f64;
            let summary = (bucket.suppressed_lines > 0).then_some((bucket.suppressed_lines, bucket.suppressed_bytes));
            bucket.suppressed_lines = 0;
            bucket.suppressed_bytes = 0;
            return Admit::Write(summary);
        }
        bucket.suppressed_lines += 1;
        bucket.suppressed_bytes = bucket.suppressed_bytes.saturating_add(cost);
        Admit::Suppressed { first: bucket.suppressed_lines == 1 }
    }
}

const MINUTE: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_over_its_budget_is_suppressed_and_summed_up() {
        let logs = GuestLogs::new(GuestLogLimits::new(1_000, LogLevel::Info));
        logs.limit("quiet", GuestLogLimits::new(0, LogLevel::Error));
        // 872 + 128 bytes fit the minute's 1,000; the next line does not.
        assert_eq!(logs.admit(Some("acme"), LogLevel::Warn, 872), Admit::Write(None));
        assert_eq!(logs.admit(Some("acme"), LogLevel::Warn, 100), Admit::Suppressed { first: true });
        assert_eq!(logs.admit(Some("acme"), LogLevel::Error, 100), Admit::Suppressed { first: false });
        // Below the level: dropped without counting.
        assert_eq!(logs.admit(Some("acme"), LogLevel::Debug, 100), Admit::BelowLevel);
        // Another tenant has its own budget, and its own level.
        assert_eq!(logs.admit(Some("globex"), LogLevel::Info, 10), Admit::Write(None));
        assert_eq!(logs.admit(Some("quiet"), LogLevel::Warn, 10), Admit::BelowLevel);
        // 138 bytes refill in about 8.3 s; pretend they passed.
        {
            let mut buckets = logs.buckets.lock().expect("lock");
            let acme = buckets.get_mut("acme").expect("acme");
            acme.refilled -= Duration::from_secs(9);
        }
        assert_eq!(logs.admit(Some("acme"), LogLevel::Warn, 10), Admit::Write(Some((2, 456))));
    }
}
