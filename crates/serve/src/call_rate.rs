//! Calls per minute, counted by the service per tenant: a rolling window
//! over per-second counts, so the console draws the service's own figures
//! rather than differences of its samples (which a slow or hidden tab
//! would get wrong).

use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// The window one figure counts: the 60 seconds up to its point.
pub(crate) const WINDOW_SECS: u64 = 60;
/// Seconds between two points of the series: 10.
pub(crate) const STEP_SECS: u64 = 10;
/// Points of the series: 60, the last ten minutes.
pub(crate) const POINTS: u64 = 60;
/// Seconds of counts kept per tenant: what the oldest point's window
/// reaches back to. With one entry per second that had a call, a tenant
/// holds at most this many entries (650), however many calls it makes.
const HISTORY_SECS: u64 = (POINTS - 1) * STEP_SECS + WINDOW_SECS;

/// (second since the Unix epoch, calls, error results) of one second.
#[derive(Clone, Copy)]
struct Second {
    at: u64,
    calls: u64,
    errors: u64,
}

/// Per-second call counts by tenant, the last [`HISTORY_SECS`] of each.
/// The tenants are the configured ones, so the map is as bounded as the
/// config.
#[derive(Default)]
pub(crate) struct CallRate(Mutex<BTreeMap<String, VecDeque<Second>>>);

impl CallRate {
    /// One answered call of `tenant` at `at` (seconds since the Unix epoch).
    /// A clock that steps back counts the call in the latest second kept,
    /// so the seconds stay in order.
    pub(crate) fn record(&self, tenant: &str, at: u64, error: bool) {
        let mut tenants = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let seconds = tenants.entry(tenant.to_owned()).or_default();
        match seconds.back_mut() {
            Some(last) if last.at >= at => {
                last.calls += 1;
                last.errors += u64::from(error);
            }
            _ => seconds.push_back(Second { at, calls: 1, errors: u64::from(error) }),
        }
        let newest = seconds.back().map_or(at, |s| s.at);
        while seconds.front().is_some_and(|s| s.at + HISTORY_SECS <= newest) {
            seconds.pop_front();
        }
    }

    /// `tenant`'s calls per minute at `now` (seconds since the Unix epoch):
    /// `last_minute`, the calls of the 60 s up to now, and `points`, oldest
    /// first, one every [`STEP_SECS`] over the last ten minutes, each the
    /// calls and errors of the [`WINDOW_SECS`] up to its `at_ms`.
    pub(crate) fn tenant_json(&self, tenant: &str, now: u64) -> Value {
        let tenants = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let seconds = tenants.get(tenant);
        let window = |end: u64| {
            let start = end.saturating_sub(WINDOW_SECS);
            seconds
                .into_iter()
                .flatten()
                .filter(|s| s.at > start && s.at <= end)
                .fold((0, 0), |(c, e), s| (c + s.calls, e + s.errors))
        };
        let points: Vec<Value> = (0..POINTS)
            .rev()
            .map(|k| {
                let end = now.saturating_sub(k * STEP_SECS);
                let (calls, errors) = window(end);
                json!({"at_ms": end.saturating_mul(1000), "calls": calls, "errors": errors})
            })
            .collect();
        json!({
            "window_secs": WINDOW_SECS,
            "step_secs": STEP_SECS,
            "last_minute": window(now).0,
            "points": points,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_point_counts_the_minute_up_to_it() {
        let rate = CallRate::default();
        let t0 = 1_000_000;
        for at in [t0, t0, t0 + 5, t0 + 30] {
            rate.record("acme", at, false);
        }
        rate.record("acme", t0 + 70, true);
        rate.record("globex", t0 + 70, false);
        let now = t0 + 75;
        let figures = rate.tenant_json("acme", now);
        // The minute up to now holds the call at +30 and the error at +70.
        assert_eq!(figures["last_minute"], 2, "{figures}");
        let points = figures["points"].as_array().expect("points");
        assert_eq!(points.len(), POINTS as usize);
        let last = &points[points.len() - 1];
        assert_eq!((last["at_ms"].as_u64(), &last["calls"], &last["errors"]), (Some(now * 1000), &json!(2), &json!(1)));
        // 10 s earlier (+65): +30 only; 50 s earlier (+25): +0, +0, +5; 80 s earlier: nothing.
        let calls = |k: usize| points[points.len() - 1 - k]["calls"].as_u64();
        assert_eq!((calls(1), calls(5), calls(8)), (Some(1), Some(3), Some(0)));
        assert_eq!(rate.tenant_json("globex", now)["last_minute"], 1);
        assert_eq!(rate.tenant_json("nobody", now)["last_minute"], 0);
    }

    #[test]
    fn a_tenant_keeps_at_most_its_history_however_many_calls() {
        let rate = CallRate::default();
        for at in 0..10_000 {
            for _ in 0..3 {
                rate.record("acme", at, false);
            }
        }
        let kept = rate.0.lock().expect("lock")["acme"].len();
        assert_eq!(kept as u64, HISTORY_SECS);
        assert_eq!(rate.tenant_json("acme", 9_999)["last_minute"], 3 * WINDOW_SECS);
        // A clock that steps back adds to the latest second instead of growing the list.
        rate.record("acme", 5, false);
        assert_eq!(rate.0.lock().expect("lock")["acme"].len() as u64, HISTORY_SECS);
        assert_eq!(rate.tenant_json("acme", 9_999)["last_minute"], 3 * WINDOW_SECS + 1);
    }
}
