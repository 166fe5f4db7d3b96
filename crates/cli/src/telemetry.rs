//! Traces for `lovia run`, `lovia call` and `lovia mcp` (docs/telemetry.md):
//! on when an `OTEL_EXPORTER_OTLP_*ENDPOINT` variable names a collector,
//! off otherwise. `lovia serve` starts its own from its `[telemetry]` table
//! (crates/serve). The handle is this binary's; the library crates are
//! handed it and install nothing globally.

use crate::CliError;
use lovia_telemetry::Telemetry;
use lovia_telemetry::export::{Export, TelemetrySection};
use std::sync::OnceLock;

static HANDLE: OnceLock<Telemetry> = OnceLock::new();

/// Starts the export the environment asks for (`section` adds a config
/// file's table), and keeps its handle for [`handle`]. Shut the returned
/// export down before the process exits: spans still queued go then.
pub(crate) fn start(section: &TelemetrySection) -> Result<Option<Export>, CliError> {
    let export = export(section)?;
    if let Some(export) = &export {
        let _ = HANDLE.set(export.telemetry());
    }
    Ok(export)
}

/// An export as `section` and the environment say, without keeping its
/// handle (`lovia bench` measures several side by side).
pub(crate) fn export(section: &TelemetrySection) -> Result<Option<Export>, CliError> {
    let tls = lovia_host::sandbox::tls_client_config()
        .map_err(|e| CliError::new(format!("telemetry: cannot set up TLS for the collector: {e}")))?;
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured((*tls).clone())
        .build()
        .map_err(|e| CliError::new(format!("telemetry: cannot build the collector's HTTP client: {e}")))?;
    Export::start(section, client).map_err(|e| {
        CliError::new(e.to_string()).hint("see docs/telemetry.md for the [telemetry] table and the OTEL_* variables")
    })
}

/// The handle of this process: off unless [`start`] found a collector.
pub(crate) fn handle() -> Telemetry {
    HANDLE.get().cloned().unwrap_or_default()
}
