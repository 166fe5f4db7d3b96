//! The service's routes: the router that joins every door (the direct
//! call route, chats, `/mcp`, uploads, the console, audit, health and
//! metrics), and the small handlers that need no module of their own.

use crate::Service;
use crate::auth::{Caller, Operator};
use crate::response::error;
use crate::{Connection, LimitedListener, MAX_ARGUMENTS_BYTES};
use crate::{chat, console, direct, door, mcp, upload};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, get, post};
use axum::{Json, Router};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Service {
    /// `listener` bounded by the config's connection limits
    /// (`max_connections`, `max_connections_per_ip`, `idle_connection_secs`,
    /// `first_byte_secs`, `request_head_secs`, `authenticated_connections_percent`):
    /// serve the [`Service::app`] on it with `axum::serve`.
    pub fn listener(&self, listener: tokio::net::TcpListener) -> LimitedListener {
        LimitedListener::new(listener, self.inner.limits.connections, self.inner.metrics.clone())
    }

    /// The routes, to serve on a [`Service::listener`]: each request carries
    /// its [`Connection`], so that a connection which presented a valid key
    /// may use the places kept for authenticated traffic.
    pub fn app(&self) -> axum::extract::connect_info::IntoMakeServiceWithConnectInfo<Router, Connection> {
        self.router().into_make_service_with_connect_info::<Connection>()
    }

    /// The routes (without [`Service::app`]'s connection: every connection
    /// then counts as unauthenticated).
    pub fn router(&self) -> Router {
        // Each group of `/api` routes has its own door, with its body limit:
        // the key is checked and the body read (into a reservation) there,
        // before any handler or body extractor runs.
        let door = |limit: usize, upload: bool| {
            axum::middleware::from_fn_with_state(door::Door { service: self.clone(), limit, upload }, door::admit)
        };
        let api = Router::new()
            .route("/api/tools", get(list_tools))
            .route("/api/tools/{name}/call", post(direct::call_tool))
            .route("/api/tools/calls/{id}", delete(direct::cancel_call))
            .route("/api/tools/detailed", get(console::tools))
            .route("/api/chat", post(chat::chat).get(console::sessions))
            .route("/api/approvals", get(console::approvals))
            .route("/api/metrics", get(console::metrics))
            .route("/api/status", get(status))
            .route("/api/audit", get(tenant_audit))
            .route("/api/chat/approve", post(chat::approve))
            .route("/api/chat/answer", post(chat::answer))
            .route("/api/questions", get(console::questions))
            .route("/api/chat/cancel", post(chat::cancel))
            .route("/api/chat/{session_id}", get(chat::transcript))
            .route("/mcp", any(mcp::serve))
            .route_layer(door(MAX_ARGUMENTS_BYTES, false));
        let uploads = Router::new()
            .route(
                "/api/plugins",
                post(upload::upload)
                    .layer(axum::extract::DefaultBodyLimit::max(self.inner.limits.max_plugin_bytes.saturating_add(1))),
            )
            .route_layer(door(self.inner.limits.max_plugin_bytes, true));
        Router::new()
            .route("/healthz", get(|| async { "ok\n" }))
            .route("/readyz", get(readyz))
            .route("/metrics", get(metrics_text))
            .route("/audit", get(operator_audit))
            .route("/console", get(console::index))
            .route("/console/", get(console::index))
            .route("/console/app.js", get(console::app_js))
            .route("/console/dom.js", get(console::dom_js))
            .route("/console/parts.js", get(console::parts_js))
            .route("/console/schema-form.js", get(console::schema_form_js))
            .route("/console/console.css", get(console::console_css))
            .route("/console/icon.svg", get(console::icon))
            .merge(api)
            .merge(uploads)
            .fallback(|| async { error(StatusCode::NOT_FOUND, "no such route") })
            .layer(axum::extract::DefaultBodyLimit::max(MAX_ARGUMENTS_BYTES))
            .with_state(self.clone())
    }
}

/// How long `/readyz` waits for the store before it calls it unreachable.
const READY_STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /readyz`: 200 `ready` when this replica should get requests: the
/// store answers, the stored uploads are loaded (they are before the
/// service listens; this says whether the last read of new ones failed) and
/// it is not draining. Else 503 with the reason, for a load balancer's log.
async fn readyz(State(service): State<Service>) -> Response {
    let unready = |reason: String| (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {reason}\n")).into_response();
    if service.inner.draining.load(Ordering::Acquire) {
        return unready("draining (the process is stopping)".into());
    }
    match tokio::time::timeout(READY_STORE_TIMEOUT, service.inner.stores.plugins.ping()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return unready(format!("the store is unreachable: {e}")),
        Err(_) => return unready(format!("the store did not answer within {} s", READY_STORE_TIMEOUT.as_secs())),
    }
    let failed = service.inner.uploads.failed.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(e) = failed {
        return unready(format!("the stored uploads could not be read: {e}"));
    }
    "ready\n".into_response()
}

/// `?limit=N` of the audit routes: at most [`audit::MAX_READ`], default 100.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    #[serde(default = "default_audit_limit")]
    limit: usize,
}

fn default_audit_limit() -> usize {
    100
}

/// `GET /api/audit`: the tenant's own audit trail, newest first.
async fn tenant_audit(
    caller: Caller,
    query: Result<axum::extract::Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
    let Ok(axum::extract::Query(query)) = query else {
        return error(StatusCode::BAD_REQUEST, "the only query parameter is limit, a number");
    };
    match service.inner.stores.plugins.trail(Some(&tenant.name), query.limit).await {
        Ok(entries) => Json(json!({ "entries": entries })).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "the audit trail could not be read");
            error(StatusCode::SERVICE_UNAVAILABLE, "the store is unreachable; retry later")
        }
    }
}

/// `GET /audit`: every tenant's audit trail, for the operator (the metrics
/// token, as `/metrics`).
async fn operator_audit(
    _: Operator,
    State(service): State<Service>,
    query: Result<axum::extract::Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(axum::extract::Query(query)) = query else {
        return error(StatusCode::BAD_REQUEST, "the only query parameter is limit, a number");
    };
    match service.inner.stores.plugins.trail(None, query.limit).await {
        Ok(entries) => Json(json!({ "entries": entries })).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "the audit trail could not be read");
            error(StatusCode::SERVICE_UNAVAILABLE, "the store is unreachable; retry later")
        }
    }
}

/// `GET /api/status`: whether the tenant has all it was configured with:
/// `{"ready": bool, "mcp_servers": [{"name", "ready", "error"?}]}`. An MCP
/// server that did not start is not ready (with its last error) while the
/// service retries it; the rest of the tenant is served meanwhile.
async fn status(caller: Caller) -> Response {
    let tenant = caller.tenant();
    let servers = tenant.mcp_servers.status();
    let ready = servers.iter().all(|s| s["ready"] == true);
    Json(json!({ "tenant": tenant.name, "ready": ready, "mcp_servers": servers })).into_response()
}

/// `GET /metrics`: the metrics name every tenant and its tools, so only
/// the [`Operator`] reads them (never anyone by default).
async fn metrics_text(_: Operator, State(service): State<Service>) -> Response {
    let in_flight: Vec<(String, usize)> =
        service.inner.tenants.iter().map(|t| (t.name.clone(), t.quota.in_flight())).collect();
    let pending = service.pending_approvals();
    let fuel: Vec<(String, u64)> = service
        .inner
        .tenants
        .iter()
        .map(|t| (t.name.clone(), service.inner.host.tenant_fuel().used(&t.name)))
        .collect();
    let body = service.inner.metrics.render(&in_flight, &pending, &fuel);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

async fn list_tools(caller: Caller) -> Response {
    let tenant = caller.tenant();
    tenant.follow_sources().await;
    // What the tenant's chats offer beside its plugins and MCP servers: the
    // web tools, and `ask_human` (listed; it has no direct call).
    let mut tools: Vec<serde_json::Value> =
        tenant.direct_executor().tools().iter().map(|t| t.spec().openai_function()).collect();
    if tenant.agent.ask_human {
        tools.push(lovia_host::human::ask_human_spec().openai_function());
    }
    Json(tools).into_response()
}
