//! OTLP export for the binaries: a `[telemetry]` table and the standard
//! `OTEL_*` variables become a tracer provider, whose spans leave through a
//! bounded queue on a thread of their own.
//!
//! The queue is lovia's, not the SDK's `BatchSpanProcessor`: that one drops
//! spans when full but does not say how many, and lovia counts each dropped
//! span (`lovia_telemetry_spans_dropped_total`). A span is handed over with
//! one `try_send`, so a collector that is slow, stopped or unreachable never
//! slows a call: its spans wait in the queue, then are dropped and counted.

use crate::{Telemetry, TelemetryError};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{
    ParentBasedSampler, Sampler, SdkTracerProvider, Span, SpanData, SpanExporter, SpanProcessor,
};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most spans `queue` may hold.
pub const MAX_QUEUE: usize = 65_536;
/// Spans sent in one export request at most.
const BATCH: usize = 512;
/// How long a span waits for its batch to fill before it is sent.
const DELAY: Duration = Duration::from_secs(1);
/// How long one export request may take before its spans count as dropped.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The `[telemetry]` table (and its flags). Every field says its default;
/// with no endpoint here or in the environment, nothing is exported.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TelemetrySection {
    /// The OTLP endpoint, such as `http://127.0.0.1:4318` (HTTP) or
    /// `http://127.0.0.1:4317` (gRPC). Default: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
    /// then `OTEL_EXPORTER_OTLP_ENDPOINT`; with neither, telemetry is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// `http/protobuf` or `grpc`. Default: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`,
    /// then `OTEL_EXPORTER_OTLP_PROTOCOL`, then `http/protobuf`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The share of traces kept, 0–1. A trace a caller did not sample is
    /// not kept; one it sampled is kept at this same share (a caller cannot
    /// raise it). Default: 1 (every trace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<f64>,
    /// Spans waiting for export beyond the batch being sent (at most 512);
    /// past it spans are dropped and counted. Default: 2048; at most 65,536.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<usize>,
    /// `service.name`. Default: `OTEL_SERVICE_NAME`, then `lovia`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// Record arguments, results, prompts and command lines in spans.
    /// Default: false, unless `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`
    /// is `true`. `lovia serve` also takes it per tenant.
    #[serde(default)]
    pub capture_content: bool,
    /// A trace UI's address for one trace, with `{trace_id}` in it; the
    /// console links a run to it. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_url: Option<String>,
}

/// Where a setting came from, for errors and for `--help`.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl TelemetrySection {
    /// The endpoint this table and the environment name; `None`: off.
    /// `OTEL_SDK_DISABLED=true` turns it off whatever else is set.
    pub fn endpoint(&self) -> Option<String> {
        if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return None;
        }
        self.endpoint
            .clone()
            .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
            .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
    }

    /// Checks every value; the errors name the setting and what is allowed.
    pub fn check(&self) -> Result<(), TelemetryError> {
        self.protocol()?;
        if let Some(value) = self.sampling
            && !(0.0..=1.0).contains(&value)
        {
            return Err(TelemetryError::Sampling { value });
        }
        if let Some(value) = self.queue
            && !(1..=MAX_QUEUE).contains(&value)
        {
            return Err(TelemetryError::Queue { value, max: MAX_QUEUE });
        }
        if let Some(template) = &self.trace_url
            && !template.contains("{trace_id}")
        {
            return Err(TelemetryError::TraceUrl { template: template.clone() });
        }
        Ok(())
    }

    fn protocol(&self) -> Result<Protocol, TelemetryError> {
        let (value, from) =
            match (&self.protocol, env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), env("OTEL_EXPORTER_OTLP_PROTOCOL")) {
                (Some(p), _, _) => (p.clone(), "[telemetry] protocol"),
                (None, Some(p), _) => (p, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
                (None, None, Some(p)) => (p, "OTEL_EXPORTER_OTLP_PROTOCOL"),
                (None, None, None) => return Ok(Protocol::HttpBinary),
            };
        match value.trim() {
            "http/protobuf" => Ok(Protocol::HttpBinary),
            "grpc" => Ok(Protocol::Grpc),
            other => Err(TelemetryError::Protocol { protocol: other.to_owned(), from: from.to_owned() }),
        }
    }

    /// Whether content goes into spans: `capture_content`, or the GenAI
    /// conventions' `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
    pub fn captures_content(&self) -> bool {
        self.capture_content
            || env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT").is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// The trace UI's address for `trace_id`, when a template is set.
    pub fn trace_link(&self, trace_id: &str) -> Option<String> {
        self.trace_url.as_ref().map(|t| t.replace("{trace_id}", trace_id))
    }
}

/// A running export: the provider spans go to, and its counts. Shut it down
/// before the process exits, or the spans still queued are lost.
#[derive(Debug, Clone)]
pub struct Export {
    provider: SdkTracerProvider,
    counts: Arc<Counts>,
    capture_content: bool,
}

/// What the export did.
#[derive(Debug, Default)]
struct Counts {
    dropped: AtomicU64,
    exported: AtomicU64,
}

impl Export {
    /// Starts exporting as `section` and the environment say; `Ok(None)`
    /// when no endpoint is named (telemetry off). `client` sends OTLP over
    /// HTTP (the caller's TLS configuration); gRPC uses its own, and must be
    /// started inside a Tokio runtime, whose workers carry its connection.
    pub fn start(section: &TelemetrySection, client: reqwest::Client) -> Result<Option<Export>, TelemetryError> {
        section.check()?;
        let Some(endpoint) = section.endpoint() else { return Ok(None) };
        let exporter = match section.protocol()? {
            // tonic spawns its channel's worker on the current runtime, and
            // panics without one: refuse instead.
            Protocol::Grpc if tokio::runtime::Handle::try_current().is_err() => return Err(TelemetryError::NoRuntime),
            Protocol::Grpc => opentelemetry_otlp::SpanExporter::builder().with_tonic().with_endpoint(endpoint).build(),
            _ => {
                // The HTTP exporter takes the endpoint as the collector's
                // root, as OTEL_EXPORTER_OTLP_ENDPOINT does, unless it
                // already names the traces path.
                let url = if endpoint.trim_end_matches('/').ends_with("/v1/traces") {
                    endpoint
                } else {
                    format!("{}/v1/traces", endpoint.trim_end_matches('/'))
                };
                opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .with_http_client(client)
                    .with_endpoint(url)
                    .build()
            }
        }
        .map_err(|source| TelemetryError::Exporter { source })?;
        let counts = Arc::new(Counts::default());
        let processor = Queue::start(exporter, section.queue.unwrap_or(2048), counts.clone())?;
        let service =
            section.service_name.clone().or_else(|| env("OTEL_SERVICE_NAME")).unwrap_or_else(|| "lovia".into());
        let mut builder = SdkTracerProvider::builder().with_span_processor(processor).with_resource(
            Resource::builder()
                .with_service_name(service)
                // Tells replicas apart: random per process, as a lease owner's id is.
                .with_attribute(opentelemetry::KeyValue::new("service.instance.id", instance_id()))
                .build(),
        );
        if let Some(ratio) = section.sampling {
            // A caller's sampled flag (a client's `traceparent`, an MCP
            // client's `_meta`) cannot raise the share: a tenant could
            // otherwise have every request traced. A remote parent that is
            // sampled is kept at the same ratio (by trace id, so the
            // decision agrees with a caller sampling at it); one that is not
            // sampled is not; a local parent's decision is followed.
            builder = builder.with_sampler(sampler(ratio));
        }
        Ok(Some(Export { provider: builder.build(), counts, capture_content: section.captures_content() }))
    }

    /// The handle for the library crates.
    pub fn telemetry(&self) -> Telemetry {
        Telemetry::new(&self.provider).with_content(self.capture_content)
    }

    /// The provider, for an embedder's own spans.
    pub fn provider(&self) -> &SdkTracerProvider {
        &self.provider
    }

    /// Spans dropped so far: the queue was full, or the collector refused
    /// or did not answer their request in time.
    pub fn dropped(&self) -> u64 {
        self.counts.dropped.load(Ordering::Relaxed)
    }

    /// Spans the collector accepted so far.
    pub fn exported(&self) -> u64 {
        self.counts.exported.load(Ordering::Relaxed)
    }

    /// Sends what is queued (waiting at most `EXPORT_TIMEOUT` per request) and stops.
    pub fn shutdown(&self) {
        let _ = self.provider.shutdown();
    }
}

enum Message {
    Span(Box<SpanData>),
    Resource(Resource),
    Flush(SyncSender<()>),
    /// Send what is left, shut the exporter down, say so, and end.
    Close(SyncSender<()>),
}

/// The span processor: a bounded queue to the export thread. Handing a
/// span over takes no lock: `SyncSender` is shared as it is.
#[derive(Debug)]
struct Queue {
    tx: SyncSender<Message>,
    closed: std::sync::atomic::AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    counts: Arc<Counts>,
}

impl Queue {
    fn start(
        exporter: opentelemetry_otlp::SpanExporter,
        capacity: usize,
        counts: Arc<Counts>,
    ) -> Result<Queue, TelemetryError> {
        let (tx, rx) = sync_channel(capacity);
        let thread_counts = counts.clone();
        let thread = std::thread::Builder::new()
            .name("lovia-otlp".into())
            .spawn(move || export_loop(exporter, rx, &thread_counts))
            .map_err(|source| TelemetryError::Thread { source })?;
        Ok(Queue { tx, closed: Default::default(), thread: Mutex::new(Some(thread)), counts })
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

impl SpanProcessor for Queue {
    fn on_start(&self, _span: &mut Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        let sent = !self.is_closed() && self.tx.try_send(Message::Span(Box::new(span))).is_ok();
        if !sent {
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        if self.is_closed() {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        let (done, wait) = sync_channel(1);
        self.tx.send(Message::Flush(done)).map_err(|_| OTelSdkError::AlreadyShutdown)?;
        wait.recv_timeout(EXPORT_TIMEOUT * 2).map_err(|_| OTelSdkError::Timeout(EXPORT_TIMEOUT * 2))
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        let (done, wait) = sync_channel(1);
        if self.tx.send(Message::Close(done)).is_err() {
            return Err(OTelSdkError::AlreadyShutdown);
        }
        if wait.recv_timeout(timeout).is_err() {
            return Err(OTelSdkError::Timeout(timeout));
        }
        if let Some(thread) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = thread.join();
        }
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        let _ = self.tx.send(Message::Resource(resource.clone()));
    }
}

/// The export thread: batches of up to `BATCH` spans, sent when full or
/// `DELAY` after their first span, on a runtime of its own (the gRPC and
/// HTTP clients need one; the embedder's may be busy or absent).
fn export_loop(mut exporter: opentelemetry_otlp::SpanExporter, rx: Receiver<Message>, counts: &Counts) {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("telemetry: the export runtime cannot start ({e}); spans are dropped");
            // Drain so that senders see a full queue, not a stuck one.
            for message in rx {
                if let Message::Span(_) = message {
                    counts.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            return;
        }
    };
    let mut batch: Vec<SpanData> = Vec::with_capacity(BATCH);
    let mut due: Option<Instant> = None;
    let send = |batch: &mut Vec<SpanData>, exporter: &opentelemetry_otlp::SpanExporter| {
        if batch.is_empty() {
            return;
        }
        let spans = std::mem::take(batch);
        let n = spans.len() as u64;
        let sent = runtime.block_on(async { tokio::time::timeout(EXPORT_TIMEOUT, exporter.export(spans)).await });
        match sent {
            Ok(Ok(())) => {
                counts.exported.fetch_add(n, Ordering::Relaxed);
            }
            Ok(Err(e)) => {
                counts.dropped.fetch_add(n, Ordering::Relaxed);
                tracing::warn!("telemetry: the collector refused {n} spans: {e}");
            }
            Err(_) => {
                counts.dropped.fetch_add(n, Ordering::Relaxed);
                tracing::warn!("telemetry: the collector did not answer within {EXPORT_TIMEOUT:?}; {n} spans dropped");
            }
        }
    };
    loop {
        let next = match due {
            Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(Message::Span(span)) => {
                batch.push(*span);
                due.get_or_insert_with(|| Instant::now() + DELAY);
                if batch.len() >= BATCH {
                    send(&mut batch, &exporter);
                    due = None;
                }
            }
            Ok(Message::Resource(resource)) => exporter.set_resource(&resource),
            Ok(Message::Flush(done)) => {
                send(&mut batch, &exporter);
                due = None;
                let _ = done.send(());
            }
            Err(RecvTimeoutError::Timeout) => {
                send(&mut batch, &exporter);
                due = None;
            }
            Ok(Message::Close(done)) => {
                send(&mut batch, &exporter);
                let _ = exporter.shutdown();
                let _ = done.send(());
                return;
            }
            Err(RecvTimeoutError::Disconnected) => {
                send(&mut batch, &exporter);
                let _ = exporter.shutdown();
                return;
            }
        }
    }
}

/// The sampler of `sampling = ratio` (see [`Export::start`]).
fn sampler(ratio: f64) -> ParentBasedSampler {
    ParentBasedSampler::new(Sampler::TraceIdRatioBased(ratio))
        .with_remote_parent_sampled(Sampler::TraceIdRatioBased(ratio))
}

/// A random id for this process (`service.instance.id`).
fn instance_id() -> String {
    let mut bytes = [0u8; 8];
    // Without randomness the pid still tells live processes apart.
    if getrandom::fill(&mut bytes).is_err() {
        return format!("pid-{}", std::process::id());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(section: &TelemetrySection) -> String {
        section.check().expect_err("refused").to_string()
    }

    #[test]
    fn each_value_is_checked_and_named() {
        let mut section = TelemetrySection { sampling: Some(1.5), ..TelemetrySection::default() };
        assert_eq!(refusal(&section), "telemetry: sampling must be between 0 and 1, not 1.5");
        section.sampling = None;
        section.queue = Some(0);
        assert_eq!(refusal(&section), "telemetry: queue must be 1–65536 spans, not 0");
        section.queue = None;
        section.protocol = Some("http/json".into());
        assert_eq!(
            refusal(&section),
            "telemetry: unknown protocol 'http/json' (from [telemetry] protocol); the protocols are: http/protobuf, grpc"
        );
        section.protocol = None;
        section.trace_url = Some("https://traces.example/".into());
        assert!(refusal(&section).contains("has no {trace_id}"));
    }

    #[test]
    fn a_caller_s_sampled_flag_cannot_raise_the_share() {
        use opentelemetry::trace::{SpanKind, TraceId};
        use opentelemetry_sdk::trace::{SamplingDecision, ShouldSample};
        let decide = |ratio: f64, traceparent: &str| {
            let parent = crate::propagate::from_traceparent(traceparent);
            let trace = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").expect("hex");
            sampler(ratio).should_sample(Some(&parent), trace, "run", &SpanKind::Internal, &[], &[]).decision
        };
        let sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let not_sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        assert_eq!(decide(0.0, sampled), SamplingDecision::Drop, "a client cannot force a trace");
        assert_eq!(decide(1.0, sampled), SamplingDecision::RecordAndSample);
        assert_eq!(decide(1.0, not_sampled), SamplingDecision::Drop, "nor is one it did not sample kept");
    }

    #[test]
    fn an_unknown_key_is_an_error_that_names_it() {
        let e = toml::from_str::<TelemetrySection>("endpont = \"http://x\"").expect_err("unknown key").to_string();
        assert!(e.contains("unknown field `endpont`") && e.contains("endpoint"), "{e}");
    }
}
