//! `POST /api/plugins`: a tenant adds a component. It is validated,
//! compiled and cached like any plugin, granted nothing, and its tools join
//! the tenant's (a name clash is a 409 and changes nothing). Each tenant's
//! uploads are bounded in number and in bytes (`max_plugins`,
//! `max_uploaded_bytes`), checked before the compile, so that one tenant
//! cannot fill the service's memory with compiled code.

use super::{Service, error, unauthorized};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use lovia_host::Tool;
use lovia_host::exec::Executor;
use lovia_host::{ToolSource, Toolset};
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
    // Checked and charged under the tenant's upload slot, so two uploads of
    // one tenant cannot both pass the check.
    let (count, bytes) = *tenant.uploaded.lock().unwrap_or_else(|e| e.into_inner());
    if count >= tenant.max_plugins {
        service.inner.metrics.refuse(&tenant.name, "max_plugins");
        return error(
            StatusCode::FORBIDDEN,
            &format!("this tenant has uploaded {count} plugins; the limit is {} (max_plugins)", tenant.max_plugins),
        );
    }
    let after = bytes.saturating_add(body.len() as u64);
    if after > tenant.max_uploaded_bytes {
        service.inner.metrics.refuse(&tenant.name, "max_uploaded_bytes");
        return error(
            StatusCode::FORBIDDEN,
            &format!(
                "this tenant's uploads would reach {after} bytes; the limit is {} bytes (max_uploaded_bytes)",
                tenant.max_uploaded_bytes
            ),
        );
    }
    let size = body.len() as u64;
    let origin = format!("upload by {}", tenant.name);
    let host = service.inner.host.clone();
    let (compiled, _compiling) =
        compile_on_the_blocking_pool(host, &service.inner.compile_slots, compiling, body, origin).await;
    let plugin = match compiled {
        Ok(p) => p,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let tools = Tool::from_plugin(&plugin);
    let names: Vec<String> = tools.iter().map(|t| t.name().to_owned()).collect();
    let mut current = tenant.executor.write().unwrap_or_else(|e| e.into_inner());
    let mut set: Toolset = current.tools().clone();
    if let Err(e) = set.add(ToolSource::Plugin, tools) {
        return error(StatusCode::CONFLICT, &e.to_string());
    }
    *current = Executor::new(set, current.settings().clone());
    drop(current);
    {
        let mut uploaded = tenant.uploaded.lock().unwrap_or_else(|e| e.into_inner());
        uploaded.0 += 1;
        uploaded.1 = uploaded.1.saturating_add(size);
    }
    tracing::info!(tenant = %tenant.name, plugin = ?plugin.info().name, digest = %plugin.digest(), "plugin uploaded");
    (StatusCode::CREATED, Json(json!({"plugin": plugin.info().name, "digest": plugin.digest(), "tools": names})))
        .into_response()
}

/// Compiling a component takes from milliseconds to seconds of CPU. It runs
/// on tokio's blocking pool, never on a service worker, and at most
/// [`COMPILE_SLOTS`](super::COMPILE_SLOTS) compile at once across tenants
/// (later ones wait their turn), so uploads cannot take every core.
///
/// Both permits (the shared slot and the tenant's `compiling` one) move into
/// the blocking task: it runs to its end even when the client hangs up and
/// this future is dropped, and until then it still counts. The tenant's
/// permit comes back with the result, so that the caller charges the upload
/// before another one of the tenant's can pass the quota check.
async fn compile_on_the_blocking_pool(
    host: lovia_host::Host,
    slots: &Arc<Semaphore>,
    compiling: OwnedSemaphorePermit,
    bytes: Bytes,
    origin: String,
) -> (Result<lovia_host::Plugin, String>, Option<OwnedSemaphorePermit>) {
    let Ok(slot) = slots.clone().acquire_owned().await else {
        return (Err("the service is shutting down".to_owned()), Some(compiling));
    };
    let runtime = tokio::runtime::Handle::current();
    let task = tokio::task::spawn_blocking(move || {
        let result = runtime.block_on(host.load_bytes(&bytes, &origin)).map_err(|e| e.to_string());
        drop(slot);
        (result, compiling)
    });
    match task.await {
        Ok((result, compiling)) => (result, Some(compiling)),
        Err(e) => (Err(format!("the compile task failed: {e}")), None),
    }
}
