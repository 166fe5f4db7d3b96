//! What can go wrong setting telemetry up. Nothing that goes wrong exporting
//! spans is an error of a call: such spans are dropped and counted.

/// A telemetry configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// `sampling` is outside 0–1.
    #[error("telemetry: sampling must be between 0 and 1, not {value}")]
    Sampling {
        /// The value given.
        value: f64,
    },
    /// The protocol is not one lovia exports with.
    #[error("telemetry: unknown protocol '{protocol}' (from {from}); the protocols are: http/protobuf, grpc")]
    Protocol {
        /// The value given.
        protocol: String,
        /// Where it came from: `[telemetry] protocol` or a variable's name.
        from: String,
    },
    /// `queue` is 0 or over the bound.
    #[error("telemetry: queue must be 1–{max} spans, not {value}")]
    Queue {
        /// The value given.
        value: usize,
        /// The largest allowed.
        max: usize,
    },
    /// A trace UI template without `{trace_id}`.
    #[error("telemetry: trace_url '{template}' has no {{trace_id}} to fill in")]
    TraceUrl {
        /// The template given.
        template: String,
    },
    /// The OTLP exporter refused its settings (an endpoint that is not a URL, say).
    #[error("telemetry: the OTLP exporter cannot be built: {source}")]
    Exporter {
        /// Why.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// gRPC export was asked for outside a Tokio runtime: its channel's
    /// worker runs on the runtime that builds it.
    #[error("telemetry: OTLP over gRPC is started from inside a Tokio runtime (Export::start was called outside one)")]
    NoRuntime,
    /// The export thread could not be started.
    #[error("telemetry: the export thread cannot start: {source}")]
    Thread {
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
