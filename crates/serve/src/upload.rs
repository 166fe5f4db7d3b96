//! `POST /api/plugins`: a tenant adds a component. It is validated,
//! compiled and cached like any plugin, granted nothing, and its tools join
//! the tenant's (a name clash is a 409 and changes nothing).

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

pub(crate) async fn upload(State(service): State<Service>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(tenant) = service.tenant(&headers) else { return unauthorized() };
    let limit = service.inner.max_plugin_bytes;
    if body.len() > limit {
        return error(StatusCode::PAYLOAD_TOO_LARGE, &format!("a plugin may be at most {limit} bytes"));
    }
    if body.is_empty() {
        return error(StatusCode::BAD_REQUEST, "the body must be a .wasm component");
    }
    let origin = format!("upload by {}", tenant.name);
    let plugin = match load_off_the_runtime(service.inner.host.clone(), body, origin).await {
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
    tracing::info!(tenant = %tenant.name, plugin = %plugin.info().name, digest = %plugin.digest(), "plugin uploaded");
    (StatusCode::CREATED, Json(json!({"plugin": plugin.info().name, "digest": plugin.digest(), "tools": names})))
        .into_response()
}

/// Compiling a component takes from milliseconds to seconds of CPU. It runs
/// on a thread of its own, so that the service's workers keep answering.
async fn load_off_the_runtime(
    host: lovia_host::Host,
    bytes: Bytes,
    origin: String,
) -> Result<lovia_host::Plugin, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("lovia-upload".into()).spawn(move || {
        let loaded = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt.block_on(host.load_bytes(&bytes, &origin)).map_err(|e| e.to_string()),
            Err(e) => Err(format!("cannot start the compile thread's runtime: {e}")),
        };
        let _ = tx.send(loaded);
    });
    if let Err(e) = spawned {
        return Err(format!("cannot start a compile thread: {e}"));
    }
    rx.await.unwrap_or_else(|_| Err("the compile thread stopped".into()))
}
