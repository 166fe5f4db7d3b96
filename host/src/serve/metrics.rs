//! Prometheus metrics: calls, errors, latency, in-flight calls, refusals.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the latency histogram, in seconds.
const BUCKETS: [f64; 10] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.1, 1.0, 10.0];

#[derive(Default)]
struct Series {
    calls: u64,
    errors: u64,
    seconds_sum: f64,
    buckets: [u64; BUCKETS.len()],
}

/// Counters by (tenant, tool), and refusals by (tenant, reason).
#[derive(Default)]
pub(crate) struct Metrics {
    calls: Mutex<BTreeMap<(String, String), Series>>,
    refused: Mutex<BTreeMap<(String, &'static str), u64>>,
}

impl Metrics {
    pub(crate) fn record(&self, tenant: &str, tool: &str, elapsed: Duration, is_error: bool) {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let series = calls.entry((tenant.to_owned(), tool.to_owned())).or_default();
        series.calls += 1;
        series.errors += u64::from(is_error);
        let secs = elapsed.as_secs_f64();
        series.seconds_sum += secs;
        for (i, bound) in BUCKETS.iter().enumerate() {
            if secs <= *bound {
                series.buckets[i] += 1;
            }
        }
    }

    pub(crate) fn refuse(&self, tenant: &str, reason: &'static str) {
        *self.refused.lock().unwrap_or_else(|e| e.into_inner()).entry((tenant.to_owned(), reason)).or_default() += 1;
    }

    /// The text exposition format.
    pub(crate) fn render(&self, in_flight: &[(String, usize)]) -> String {
        let mut out = String::new();
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        out += "# HELP lovia_calls_total Tool calls answered.\n# TYPE lovia_calls_total counter\n";
        for ((tenant, tool), s) in calls.iter() {
            let _ = writeln!(out, "lovia_calls_total{{tenant=\"{tenant}\",tool=\"{tool}\"}} {}", s.calls);
        }
        out += "# HELP lovia_call_errors_total Tool calls answered with an error result.\n# TYPE lovia_call_errors_total counter\n";
        for ((tenant, tool), s) in calls.iter() {
            let _ = writeln!(out, "lovia_call_errors_total{{tenant=\"{tenant}\",tool=\"{tool}\"}} {}", s.errors);
        }
        out +=
            "# HELP lovia_call_duration_seconds Time to answer a call.\n# TYPE lovia_call_duration_seconds histogram\n";
        for ((tenant, tool), s) in calls.iter() {
            for (bound, count) in BUCKETS.iter().zip(s.buckets) {
                let _ = writeln!(
                    out,
                    "lovia_call_duration_seconds_bucket{{tenant=\"{tenant}\",tool=\"{tool}\",le=\"{bound}\"}} {count}"
                );
            }
            let _ = writeln!(
                out,
                "lovia_call_duration_seconds_bucket{{tenant=\"{tenant}\",tool=\"{tool}\",le=\"+Inf\"}} {}",
                s.calls
            );
            let _ = writeln!(
                out,
                "lovia_call_duration_seconds_sum{{tenant=\"{tenant}\",tool=\"{tool}\"}} {}",
                s.seconds_sum
            );
            let _ =
                writeln!(out, "lovia_call_duration_seconds_count{{tenant=\"{tenant}\",tool=\"{tool}\"}} {}", s.calls);
        }
        out += "# HELP lovia_calls_in_flight Calls running now.\n# TYPE lovia_calls_in_flight gauge\n";
        for (tenant, n) in in_flight {
            let _ = writeln!(out, "lovia_calls_in_flight{{tenant=\"{tenant}\"}} {n}");
        }
        out += "# HELP lovia_refused_total Requests refused by a quota.\n# TYPE lovia_refused_total counter\n";
        for ((tenant, reason), n) in self.refused.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = writeln!(out, "lovia_refused_total{{tenant=\"{tenant}\",reason=\"{reason}\"}} {n}");
        }
        out
    }
}
