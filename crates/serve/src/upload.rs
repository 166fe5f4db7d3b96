//! `POST /api/plugins`: a tenant adds a component. It is validated,
//! compiled and cached like any plugin, granted nothing, and its tools join
//! the tenant's (a name clash is a 409 and changes nothing). It is kept in
//! the store ([`stored`](super::stored)), so it survives a restart and every
//! replica loads it. Each tenant's uploads are bounded in number and in
//! bytes (`max_plugins`, `max_uploaded_bytes`), checked before the compile
//! and again in the store's transaction, so that one tenant cannot fill the
//! store or the service's memory with compiled code.

use super::stored::{NewPlugin, PluginStoreError, UploadLimits};
use super::{Service, error, unauthorized};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use lovia_host::{Tool, ToolSource};
use serde_json::json;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub(crate) async fn upload(State(service): State<Service>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(tenant) = service.tenant(&headers) else { return unauthorized() };
    let limit = service.inner.max_plugin_bytes;
    if body.len() > limit {
        return error(StatusCode::PAYLOAD_TOO_LARGE, &format!("a plugin may be at most {limit} bytes"));
    }
    if body.is_empty() {
        return error(StatusCode::BAD_REQUEST, "the body must be a .wasm component");
    }
    // One upload compiles at a time per tenant, so a tenant cannot queue up
    // the compile slots that every tenant shares.
    let Ok(compiling) = tenant.uploads.clone().try_acquire_owned() else {
        return error(
            StatusCode::TOO_MANY_REQUESTS,
            "an upload of this tenant is already compiling; retry when it is done",
        );
    };
    let limits = UploadLimits { max_plugins: tenant.max_plugins, max_bytes: tenant.max_uploaded_bytes };
    // Checked before the compile, so that an upload over the bounds costs no
    // CPU; checked again when it is stored, where another replica's upload
    // of the same moment is seen.
    let (count, bytes) = match service.inner.plugins.usage(&tenant.name).await {
        Ok(usage) => usage,
        Err(e) => return store_failed(&e),
    };
    let refused = if count >= u64::from(limits.max_plugins) {
        Some(PluginStoreError::TooMany { count, limit: limits.max_plugins })
    } else if bytes.saturating_add(body.len() as u64) > limits.max_bytes {
        Some(PluginStoreError::TooLarge { after: bytes.saturating_add(body.len() as u64), limit: limits.max_bytes })
    } else {
        None
    };
    if let Some(refusal) = refused {
        return refuse(&service, &tenant.name, &refusal);
    }
    let origin = format!("upload by {}", tenant.name);
    let host = service.inner.host.clone();
    let (compiled, _compiling) = compile_on_the_blocking_pool(
        host,
        &service.inner.compile_slots,
        Some(compiling),
        body.clone(),
        origin,
        tenant.fuel_cap,
    )
    .await;
    // A refused upload is counted against the tenant: it cost the service
    // a compile, and it leaves nothing behind (the host keeps the compiled
    // artifact only of a component that loaded).
    let rejected = |status: StatusCode, message: &str| {
        service.inner.metrics.refuse(&tenant.name, "upload_rejected");
        tracing::info!(tenant = %tenant.name, %status, error = %message, "upload refused");
        error(status, message)
    };
    let plugin = match compiled {
        Ok(p) => p,
        Err(message) => return rejected(StatusCode::BAD_REQUEST, &message),
    };
    let names: Vec<String> = Tool::from_plugin(&plugin).iter().map(|t| t.name().to_owned()).collect();
    // A clash with the configured plugins (the same on every replica) is
    // found here; one with another upload is found by the store.
    if let Err(e) = tenant.executor().tools().clone().add(ToolSource::Plugin, Tool::from_plugin(&plugin)) {
        return rejected(StatusCode::CONFLICT, &e.to_string());
    }
    let new = NewPlugin {
        tenant: tenant.name.clone(),
        name: plugin.info().name.clone(),
        digest: plugin.digest().to_owned(),
        bytes: body,
        tools: names.clone(),
    };
    let id = match service.inner.plugins.insert(new, limits).await {
        Ok(id) => id,
        Err(e) => return refuse(&service, &tenant.name, &e),
    };
    if let Err(e) = service.install(tenant, id, &plugin) {
        return error(StatusCode::CONFLICT, &e.to_string());
    }
    tracing::info!(tenant = %tenant.name, plugin = ?plugin.info().name, digest = %plugin.digest(), id, "plugin uploaded");
    (StatusCode::CREATED, Json(json!({"plugin": plugin.info().name, "digest": plugin.digest(), "tools": names})))
        .into_response()
}

/// The answer to a refusal of the store: 403 for the tenant's bounds (and
/// the metric), 409 for a tool-name clash, 503 when the store failed.
fn refuse(service: &Service, tenant: &str, refusal: &PluginStoreError) -> Response {
    match refusal {
        PluginStoreError::TooMany { .. } => service.inner.metrics.refuse(tenant, "max_plugins"),
        PluginStoreError::TooLarge { .. } => service.inner.metrics.refuse(tenant, "max_uploaded_bytes"),
        PluginStoreError::Conflict { .. } => return error(StatusCode::CONFLICT, &refusal.to_string()),
        _ => return store_failed(refusal),
    }
    error(StatusCode::FORBIDDEN, &refusal.to_string())
}

fn store_failed(e: &PluginStoreError) -> Response {
    tracing::error!(error = %e, "the plugin store failed");
    error(StatusCode::SERVICE_UNAVAILABLE, "the plugin store is unreachable; retry later")
}

/// Compiling a component takes from milliseconds to seconds of CPU. It runs
/// on tokio's blocking pool, never on a service worker, and at most
/// [`COMPILE_SLOTS`](super::COMPILE_SLOTS) compile at once across tenants
/// (later ones wait their turn), so uploads cannot take every core.
///
/// Both permits (the shared slot and the tenant's `compiling` one) move into
/// the blocking task: it runs to its end even when the client hangs up and
/// this future is dropped, and until then it still counts. The tenant's
/// permit comes back with the result, so that the caller stores the upload
/// before another one of the tenant's can pass the quota check. Uploads of
/// other replicas, loaded from the store, come without one.
pub(crate) async fn compile_on_the_blocking_pool(
    host: lovia_host::Host,
    slots: &Arc<Semaphore>,
    compiling: Option<OwnedSemaphorePermit>,
    bytes: Bytes,
    origin: String,
    fuel_cap: Option<u64>,
) -> (Result<lovia_host::Plugin, String>, Option<OwnedSemaphorePermit>) {
    // Like a configured plugin of a tenant with `fuel_per_minute`, each call
    // gets its share of the minute's fuel, not all that is left of it.
    let mut config = lovia_host::plugin::config::PluginConfig::default();
    config.limits.fuel = fuel_cap;
    let Ok(slot) = slots.clone().acquire_owned().await else {
        return (Err("the service is shutting down".to_owned()), compiling);
    };
    let runtime = tokio::runtime::Handle::current();
    let task = tokio::task::spawn_blocking(move || {
        let result = runtime.block_on(host.load_bytes_with(&bytes, &origin, config)).map_err(|e| e.to_string());
        drop(slot);
        (result, compiling)
    });
    match task.await {
        Ok((result, compiling)) => (result, compiling),
        Err(e) => (Err(format!("the compile task failed: {e}")), None),
    }
}
