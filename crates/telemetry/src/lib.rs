//! Traces of lovia's runs, model requests and tool calls.
//!
//! lovia writes its spans with the OpenTelemetry API in the GenAI and MCP
//! semantic conventions (`invoke_agent`, `chat`, `execute_tool`, MCP client
//! and server spans), with lovia's own attributes under `lovia.`
//! ([`attr`]). docs/telemetry.md lists every span and attribute.
//!
//! The library crates take a [`Telemetry`] handle made from a tracer provider
//! the embedder owns; none of them installs a global provider. Without one
//! ([`Telemetry::off`], the default) no span is made and a call pays one
//! branch. The binaries build their provider with [`export`], from a
//! `[telemetry]` table and the standard `OTEL_*` variables.
//!
//! ```
//! use lovia_telemetry::{Telemetry, Context};
//! use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
//!
//! let spans = InMemorySpanExporter::default();
//! let provider = SdkTracerProvider::builder().with_simple_exporter(spans.clone()).build();
//! let telemetry = Telemetry::new(&provider);
//! let span = telemetry.start("execute_tool search_docs", lovia_telemetry::SpanKind::Internal, &Context::new(), Vec::new);
//! span.end();
//! assert_eq!(spans.get_finished_spans().unwrap()[0].name, "execute_tool search_docs");
//! ```

pub mod attr;
mod error;
pub mod export;
mod handle;
pub mod propagate;
mod scope;

pub use error::TelemetryError;
pub use handle::Telemetry;
pub use opentelemetry::trace::SpanKind;
pub use opentelemetry::{Context, KeyValue, Value};
/// The SDK an embedder builds its tracer provider with, at the version
/// lovia's handle takes.
pub use opentelemetry_sdk;
pub use scope::{MAX_CONTENT_BYTES, Scope};

/// Runs `future` with `cx` as its current context (spans made inside are
/// its children); without one, as it is.
pub async fn within<F: Future>(cx: Option<&Context>, future: F) -> F::Output {
    match cx {
        Some(cx) => opentelemetry::context::FutureExt::with_context(future, cx.clone()).await,
        None => future.await,
    }
}
