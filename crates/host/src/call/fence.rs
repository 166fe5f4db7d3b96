//! A run's fence: the moment, on this process's monotonic clock, after
//! which the run may no longer have an effect outside the process
//! (docs/replicas.md, "Fencing"). A replica that holds a run by a lease
//! gives the run a fence at the lease's end (minus a margin) and moves it
//! forward at each renewal. Whatever stalls the process (a pause, SIGSTOP,
//! an overloaded machine), the fence is read from the clock at the moment
//! of the effect, so a run whose lease may be another replica's by now
//! stops before its next call, outbound request, store write or checkpoint,
//! without waiting for any task to notice.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The origin of the fence clock: the first use in this process.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Nanoseconds from the origin to `at` (0 before it).
fn nanos(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(origin()).as_nanos()).unwrap_or(u64::MAX)
}

/// The end of a run's right to act. Cheap to clone: clones share the
/// deadline.
///
/// ```
/// use std::time::{Duration, Instant};
/// let fence = lovia_host::Fence::until(Instant::now() + Duration::from_secs(2));
/// assert!(fence.holds());
/// fence.revoke();
/// assert!(!fence.holds());
/// ```
#[derive(Debug, Clone)]
pub struct Fence {
    inner: Arc<Deadline>,
    /// The lease the fence stands for, when a shared store holds it.
    lease: Option<Arc<LeaseToken>>,
}

/// Which lease a run holds: the replica that took it and the epoch of that
/// taking (a number that grows with every taking of any run's lease). A
/// store shared between replicas writes the run's checkpoint only while its
/// lease row still names both, in the same transaction, so a write of a
/// replica that stalled past the check of the fence's clock is refused by
/// the database.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseToken {
    /// The replica's id.
    pub owner: String,
    /// The epoch of its taking.
    pub epoch: i64,
}

impl LeaseToken {
    /// The token of `owner`'s taking at `epoch`.
    pub fn new(owner: impl Into<String>, epoch: i64) -> Self {
        Self { owner: owner.into(), epoch }
    }
}

#[derive(Debug)]
struct Deadline {
    /// Nanoseconds from the origin.
    until: AtomicU64,
    /// Set by `revoke`: no later renewal opens the fence again.
    revoked: AtomicBool,
}

impl Fence {
    /// A fence that holds until `deadline`.
    pub fn until(deadline: Instant) -> Self {
        let _ = origin();
        Self {
            inner: Arc::new(Deadline { until: AtomicU64::new(nanos(deadline)), revoked: AtomicBool::new(false) }),
            lease: None,
        }
    }

    /// The fence of the lease `token` names (see [`LeaseToken`]).
    #[must_use]
    pub fn for_lease(mut self, token: LeaseToken) -> Self {
        self.lease = Some(Arc::new(token));
        self
    }

    /// The lease the fence stands for, if one was given.
    pub fn lease(&self) -> Option<&LeaseToken> {
        self.lease.as_deref()
    }

    /// Moves the deadline to `deadline` if that is later: a renewal that
    /// was answered late never shortens a later one's.
    pub fn extend_to(&self, deadline: Instant) {
        self.inner.until.fetch_max(nanos(deadline), Ordering::AcqRel);
    }

    /// Ends the fence now, for good.
    pub fn revoke(&self) {
        self.inner.revoked.store(true, Ordering::Release);
    }

    /// Whether the run may still act: the deadline is in the future.
    pub fn holds(&self) -> bool {
        !self.remaining().is_zero()
    }

    /// How long the fence holds from now (zero once it does not).
    pub fn remaining(&self) -> Duration {
        if self.inner.revoked.load(Ordering::Acquire) {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.inner.until.load(Ordering::Acquire).saturating_sub(nanos(Instant::now())))
    }

    /// Resolves once the fence no longer holds.
    pub async fn ended(&self) {
        loop {
            let left = self.remaining();
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_ends_at_its_deadline_moves_only_forward_and_stays_revoked() {
        let fence = Fence::until(Instant::now() + Duration::from_millis(30));
        assert!(fence.holds());
        fence.extend_to(Instant::now());
        assert!(fence.holds(), "an earlier deadline does not shorten it");
        std::thread::sleep(Duration::from_millis(40));
        assert!(!fence.holds(), "past its deadline");
        fence.extend_to(Instant::now() + Duration::from_secs(5));
        assert!(fence.holds(), "a renewal opens it again");
        fence.revoke();
        fence.extend_to(Instant::now() + Duration::from_secs(5));
        assert!(!fence.holds(), "revoked for good");
        assert_eq!(fence.remaining(), Duration::ZERO);
    }
}
