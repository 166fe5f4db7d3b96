//! `--only telemetry`: the lone call and `lovia serve`'s throughput with
//! traces off, on with sampling 0, and on with sampling 1, beside each
//! other in one run (docs/telemetry.md, "What it costs").
//!
//! The spans go to `--otlp-endpoint`, or by default to a receiver in this
//! process that accepts every OTLP/HTTP request and keeps nothing: what is
//! measured is lovia's own cost per call (making and queueing spans, the
//! export thread's encoding and sending), not a collector's, which on 2
//! cores would take its CPU from the service measured.

use super::{Latency, latency, serve};
use crate::CliError;
use lovia_host::{ExecSettings, Executor, Host, Plugin, Tool, ToolSource, Toolset};
use lovia_telemetry::export::{Export, TelemetrySection};
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// One setting's figures.
#[derive(Serialize)]
pub(super) struct TelemetryRow {
    pub setting: &'static str,
    pub lone_call: Latency,
    pub serve: serve::ServeFigure,
    /// Spans the collector accepted, and spans dropped, during this setting.
    pub spans_exported: u64,
    pub spans_dropped: u64,
}

#[derive(Serialize)]
pub(super) struct TelemetryFigure {
    pub collector: String,
    pub rows: Vec<TelemetryRow>,
}

/// Measures each setting in turn.
pub(super) async fn telemetry(
    host: &Host,
    plugin: &Plugin,
    path: &Path,
    connections: u32,
    window: Duration,
    endpoint: Option<String>,
) -> Result<TelemetryFigure, CliError> {
    let (endpoint, collector, _receiver) = match endpoint {
        Some(url) => (url.clone(), url, None),
        None => {
            let (addr, task) = discard_receiver().await?;
            (format!("http://{addr}"), "a receiver in this process that keeps nothing".to_owned(), Some(task))
        }
    };
    let mut rows = Vec::new();
    for (setting, sampling) in [("off", None), ("on, sampling 0", Some(0.0)), ("on, sampling 1", Some(1.0))] {
        let export = match sampling {
            None => None,
            Some(ratio) => {
                let mut section = TelemetrySection::default();
                section.endpoint = Some(endpoint.clone());
                section.sampling = Some(ratio);
                crate::telemetry::export(&section)?
            }
        };
        let handle = export.as_ref().map(Export::telemetry).unwrap_or_default();
        let tools = Toolset::new().with(ToolSource::Plugin, Tool::from_plugin(plugin)).unwrap_or_default();
        let exec = Executor::new(tools, ExecSettings::default().with_telemetry(handle.clone()));
        let lone_call = latency(&exec).await;
        let serve = serve::serve_traced(host, path, connections, window, handle).await?;
        let (spans_exported, spans_dropped) = match export {
            Some(export) => {
                let _ = tokio::task::spawn_blocking({
                    let export = export.clone();
                    move || export.shutdown()
                })
                .await;
                (export.exported(), export.dropped())
            }
            None => (0, 0),
        };
        rows.push(TelemetryRow { setting, lone_call, serve, spans_exported, spans_dropped });
    }
    Ok(TelemetryFigure { collector, rows })
}

/// An OTLP/HTTP receiver on loopback that answers every request with an
/// empty `ExportTraceServiceResponse` (zero bytes of protobuf) and keeps
/// nothing.
async fn discard_receiver() -> Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>), CliError> {
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(|_body: axum::body::Bytes| async {
            ([(axum::http::header::CONTENT_TYPE, "application/x-protobuf")], Vec::<u8>::new())
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| CliError::new(format!("cannot listen on loopback: {e}")))?;
    let addr = listener.local_addr().map_err(|e| CliError::new(e.to_string()))?;
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((addr, task))
}

/// The table's lines: each setting beside the first ("off"), its floor.
pub(super) fn rows(figure: &TelemetryFigure) -> String {
    let mut out = format!("telemetry   spans to {}\n", figure.collector);
    let Some(off) = figure.rows.first() else { return out };
    for row in &figure.rows {
        out += &format!(
            "telemetry   {:<15} lone call p50 {:>6.1} µs (off {:>6.1} = {:.2}×), p99 {:>6.1} µs; serve {:>8.0} calls/s (off {:>8.0} = {:.2}×), p99 {:.2} ms; spans exported {}, dropped {}\n",
            row.setting,
            row.lone_call.p50_us,
            off.lone_call.p50_us,
            row.lone_call.p50_us / off.lone_call.p50_us,
            row.lone_call.p99_us,
            row.serve.calls_per_second,
            off.serve.calls_per_second,
            row.serve.calls_per_second / off.serve.calls_per_second,
            row.serve.p99_ms,
            row.spans_exported,
            row.spans_dropped,
        );
    }
    out
}
