//! Prometheus metrics: calls, errors by kind, traps, latency, in-flight
//! calls, refusals, runs and pending approvals; and each tenant's calls per
//! minute for its console.

use super::call_rate::CallRate;
use lovia_host::ErrorKind;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Upper bounds of the latency histogram, in seconds.
const BUCKETS: [f64; 10] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.1, 1.0, 10.0];

#[derive(Default)]
struct Series {
    calls: u64,
    errors: u64,
    seconds_sum: f64,
    buckets: [u64; BUCKETS.len()],
}

/// Counters by (tenant, tool), errors by (tenant, kind), refusals by
/// (tenant, reason), finished runs by (tenant, outcome).
#[derive(Default)]
pub(crate) struct Metrics {
    calls: Mutex<BTreeMap<(String, String), Series>>,
    errors: Mutex<BTreeMap<(String, &'static str), u64>>,
    refused: Mutex<BTreeMap<(String, &'static str), u64>>,
    runs: Mutex<BTreeMap<(String, &'static str), u64>>,
    /// Tool errors by the tool's own name for them (contract 0.2), by (tenant, tool, kind).
    tool_kinds: Mutex<BTreeMap<(String, String, String), u64>>,
    /// Calls per second of each tenant, for its calls per minute.
    rate: CallRate,
    /// The span export whose counts `/metrics` shows, when traces are on.
    pub(crate) spans: std::sync::OnceLock<lovia_telemetry::export::Export>,
}

/// Whole seconds since the Unix epoch (0 for a clock before it).
fn unix_secs(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Most (tool, kind) series one tenant's plugins can create; later kinds
/// are counted under [`OTHER_KIND`]. A plugin names its kinds, so without a
/// bound it could grow the exposition without end. Fixed: 64.
const MAX_KIND_SERIES_PER_TENANT: usize = 64;
const OTHER_KIND: &str = "(other)";

/// A label value in the Prometheus text format: backslash, double quote and
/// newline escaped, so a name cannot close its label and forge a series.
fn label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The tool label of a call: a name the toolset does not have is whatever
/// the model made up, so it is counted under one label instead of growing
/// a series per invented name.
const UNKNOWN_TOOL: &str = "(unknown)";

impl Metrics {
    /// One answered call; `error` is the kind of its error result, as the
    /// executor decided it (never read back from the text the model saw).
    pub(crate) fn record(&self, tenant: &str, tool: &str, elapsed: Duration, error: Option<ErrorKind>) {
        let is_error = error.is_some();
        self.rate.record(&label(tenant), unix_secs(SystemTime::now()), is_error);
        if let Some(kind) = error {
            *self
                .errors
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry((label(tenant), kind.as_str()))
                .or_default() += 1;
        }
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let tool = if error == Some(ErrorKind::UnknownTool) { UNKNOWN_TOOL } else { tool };
        let series = calls.entry((label(tenant), label(tool))).or_default();
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

    /// One answered call and, for a tool error that names its kind, that
    /// kind: what every route that runs calls records (`/api/tools/{name}/call`,
    /// chats, `/mcp`).
    pub(crate) fn record_call(
        &self,
        tenant: &str,
        tool: &str,
        elapsed: Duration,
        error: Option<ErrorKind>,
        tool_error_kind: Option<&str>,
    ) {
        self.record(tenant, tool, elapsed, error);
        if let Some(kind) = tool_error_kind {
            self.record_tool_kind(tenant, tool, kind);
        }
    }

    /// One tool error the tool named `kind` (already checked against the
    /// kind grammar, so it is a safe label value).
    pub(crate) fn record_tool_kind(&self, tenant: &str, tool: &str, kind: &str) {
        let mut kinds = self.tool_kinds.lock().unwrap_or_else(|e| e.into_inner());
        let (tenant, tool) = (label(tenant), label(tool));
        let key = (tenant.clone(), tool.clone(), kind.to_owned());
        let key = if kinds.contains_key(&key)
            || kinds.keys().filter(|(t, _, k)| *t == tenant && k != OTHER_KIND).count() < MAX_KIND_SERIES_PER_TENANT
        {
            key
        } else {
            (tenant, tool, OTHER_KIND.to_owned())
        };
        *kinds.entry(key).or_default() += 1;
    }

    pub(crate) fn refuse(&self, tenant: &str, reason: &'static str) {
        *self.refused.lock().unwrap_or_else(|e| e.into_inner()).entry((label(tenant), reason)).or_default() += 1;
    }

    /// A chat run ended with `outcome` (`completed` or a run error kind).
    pub(crate) fn run_ended(&self, tenant: &str, outcome: &'static str) {
        *self.runs.lock().unwrap_or_else(|e| e.into_inner()).entry((label(tenant), outcome)).or_default() += 1;
    }

    /// One tenant's figures as JSON at `now`, for its console (`GET
    /// /api/metrics`): calls, errors and the latency histogram by tool,
    /// errors by kind, runs by outcome, refusals by reason and calls per
    /// minute ([`CallRate::tenant_json`]). Nothing of another tenant.
    pub(crate) fn tenant_json(&self, tenant: &str, now: SystemTime) -> serde_json::Value {
        use serde_json::{Map, Value, json};
        let tenant = label(tenant);
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let tools: Vec<Value> = calls
            .iter()
            .filter(|((t, _), _)| *t == tenant)
            .map(|((_, tool), s)| {
                json!({
                    "tool": tool,
                    "calls": s.calls,
                    "errors": s.errors,
                    "seconds_sum": s.seconds_sum,
                    "buckets": BUCKETS.iter().zip(s.buckets).map(|(le, n)| json!({"le": le, "count": n})).collect::<Vec<_>>(),
                })
            })
            .collect();
        drop(calls);
        let by = |map: &Mutex<BTreeMap<(String, &'static str), u64>>| {
            let map = map.lock().unwrap_or_else(|e| e.into_inner());
            let out: Map<String, Value> =
                map.iter().filter(|((t, _), _)| *t == tenant).map(|((_, k), n)| ((*k).to_owned(), json!(n))).collect();
            Value::Object(out)
        };
        let tool_error_kinds: Vec<Value> = self
            .tool_kinds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|((t, _, _), _)| *t == tenant)
            .map(|((_, tool, kind), n)| json!({"tool": tool, "kind": kind, "count": n}))
            .collect();
        json!({
            "tools": tools,
            "errors_by_kind": by(&self.errors),
            "tool_error_kinds": tool_error_kinds,
            "runs": by(&self.runs),
            "refused": by(&self.refused),
            "calls_per_minute": self.rate.tenant_json(&tenant, unix_secs(now)),
        })
    }

    /// The text exposition format.
    pub(crate) fn render(
        &self,
        in_flight: &[(String, usize)],
        pending: &[(String, usize)],
        fuel: &[(String, u64)],
    ) -> String {
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
            let tenant = label(tenant);
            let _ = writeln!(out, "lovia_calls_in_flight{{tenant=\"{tenant}\"}} {n}");
        }
        let errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        out += "# HELP lovia_tool_errors_total Error results by kind.\n# TYPE lovia_tool_errors_total counter\n";
        for ((tenant, kind), n) in errors.iter() {
            let _ = writeln!(out, "lovia_tool_errors_total{{tenant=\"{tenant}\",kind=\"{kind}\"}} {n}");
        }
        out += "# HELP lovia_tool_error_kinds_total Tool errors by the kind the tool named (tool-error.kind).\n# TYPE lovia_tool_error_kinds_total counter\n";
        for ((tenant, tool, kind), n) in self.tool_kinds.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = writeln!(
                out,
                "lovia_tool_error_kinds_total{{tenant=\"{tenant}\",tool=\"{tool}\",kind=\"{kind}\"}} {n}"
            );
        }
        out += "# HELP lovia_traps_total Calls that trapped (memory, stack, CPU budget, panic, wasm trap).\n# TYPE lovia_traps_total counter\n";
        for ((tenant, _), n) in errors.iter().filter(|((_, k), _)| *k == "trap") {
            let _ = writeln!(out, "lovia_traps_total{{tenant=\"{tenant}\"}} {n}");
        }
        out += "# HELP lovia_runs_total Chat runs ended, by outcome.\n# TYPE lovia_runs_total counter\n";
        for ((tenant, outcome), n) in self.runs.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = writeln!(out, "lovia_runs_total{{tenant=\"{tenant}\",outcome=\"{outcome}\"}} {n}");
        }
        out +=
            "# HELP lovia_approvals_pending Approvals waiting for a decision.\n# TYPE lovia_approvals_pending gauge\n";
        for (tenant, n) in pending {
            let tenant = label(tenant);
            let _ = writeln!(out, "lovia_approvals_pending{{tenant=\"{tenant}\"}} {n}");
        }
        out += "# HELP lovia_fuel_used_total Fuel burned by the tenant's calls (0 without fuel metering).\n# TYPE lovia_fuel_used_total counter\n";
        for (tenant, n) in fuel {
            let tenant = label(tenant);
            let _ = writeln!(out, "lovia_fuel_used_total{{tenant=\"{tenant}\"}} {n}");
        }
        out += "# HELP lovia_refused_total Requests refused by a quota.\n# TYPE lovia_refused_total counter\n";
        for ((tenant, reason), n) in self.refused.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = writeln!(out, "lovia_refused_total{{tenant=\"{tenant}\",reason=\"{reason}\"}} {n}");
        }
        if let Some(export) = self.spans.get() {
            out += "# HELP lovia_telemetry_spans_exported_total Spans the collector accepted.\n# TYPE lovia_telemetry_spans_exported_total counter\n";
            let _ = writeln!(out, "lovia_telemetry_spans_exported_total {}", export.exported());
            out += "# HELP lovia_telemetry_spans_dropped_total Spans dropped: the export queue was full, or the collector refused or did not answer.\n# TYPE lovia_telemetry_spans_dropped_total counter\n";
            let _ = writeln!(out, "lovia_telemetry_spans_dropped_total {}", export.dropped());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_cannot_forge_a_series() {
        let metrics = Metrics::default();
        let forged = "x\"} 1\nlovia_calls_total{tenant=\"victim\",tool=\"y";
        metrics.record("acme", forged, Duration::from_millis(1), None);
        let text = metrics.render(&[], &[], &[]);
        assert!(!text.lines().any(|l| l.starts_with("lovia_calls_total{tenant=\"victim\"")), "{text}");
        assert!(
            text.contains(
                r#"lovia_calls_total{tenant="acme",tool="x\"} 1\nlovia_calls_total{tenant=\"victim\",tool=\"y"} 1"#
            ),
            "{text}"
        );
    }

    #[test]
    fn a_plugin_cannot_grow_the_kind_series_without_end() {
        let metrics = Metrics::default();
        for i in 0..200 {
            metrics.record_tool_kind("acme", "t", &format!("Kind{i}"));
        }
        metrics.record_tool_kind("acme", "t", "Kind3");
        metrics.record_tool_kind("other", "t", "Kind199");
        let text = metrics.render(&[], &[], &[]);
        let series = text.lines().filter(|l| l.starts_with("lovia_tool_error_kinds_total{tenant=\"acme\"")).count();
        assert_eq!(series, MAX_KIND_SERIES_PER_TENANT + 1, "{text}");
        assert!(text.contains(r#"lovia_tool_error_kinds_total{tenant="acme",tool="t",kind="Kind3"} 2"#), "{text}");
        assert!(text.contains(r#"lovia_tool_error_kinds_total{tenant="acme",tool="t",kind="(other)"} 136"#), "{text}");
        assert!(text.contains(r#"lovia_tool_error_kinds_total{tenant="other",tool="t",kind="Kind199"} 1"#), "{text}");
    }

    #[test]
    fn tools_the_model_made_up_share_one_series() {
        let metrics = Metrics::default();
        for name in ["nope_1", "nope_2", "nope_3"] {
            metrics.record("acme", name, Duration::from_millis(1), Some(ErrorKind::UnknownTool));
        }
        let text = metrics.render(&[], &[], &[]);
        assert!(text.lines().any(|l| l == r#"lovia_calls_total{tenant="acme",tool="(unknown)"} 3"#), "{text}");
        assert!(!text.contains("nope_"), "{text}");
    }
}
