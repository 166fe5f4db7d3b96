//! The web console at `/console` (docs/console.md): static assets embedded
//! in the binary, and the tenant-scoped JSON routes it reads beside the
//! chat routes — pending approvals, the tenant's sessions, its tools in
//! detail and its own metrics.
//!
//! The console runs in the browser of a person holding a tenant's key, and
//! it shows what tools and models produced: the page is served with a
//! Content-Security-Policy that allows only its own script and style (no
//! inline script, no `eval`, no other origin, no framing), and the script
//! renders every value as text.

use super::{Service, Tenant, unauthorized};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Sessions of a tenant that `GET /api/chat` lists: the ones this process
/// started or resumed, newest first; older finished ones are forgotten
/// (their transcripts stay in the store). Default and bound: 100.
pub(crate) const RECENT_SESSIONS: usize = 100;

/// The policy of every console response: its own script and style only,
/// requests only to its own origin, never framed.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../assets/console/index.html");
const APP_JS: &str = include_str!("../assets/console/app.js");
const CONSOLE_CSS: &str = include_str!("../assets/console/console.css");
const ICON_SVG: &str = include_str!("../assets/console/icon.svg");

/// Milliseconds since the Unix epoch (0 before it: a clock that wrong
/// shows odd times, it does not fail a request).
pub(crate) fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    // A new binary serves new assets: never run yesterday's script against today's API.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

pub(crate) async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

pub(crate) async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

pub(crate) async fn console_css() -> Response {
    asset("text/css; charset=utf-8", CONSOLE_CSS)
}

pub(crate) async fn icon() -> Response {
    asset("image/svg+xml", ICON_SVG)
}

/// One session in `GET /api/chat`.
#[derive(Clone)]
pub(crate) struct SessionSummary {
    pub(crate) id: String,
    pub(crate) started_ms: u64,
    pub(crate) ended_ms: Option<u64>,
    /// `running`, `completed`, or the run error's kind (`cancelled`, …).
    pub(crate) status: &'static str,
    /// The start of the input that started it (none for a resumed run).
    pub(crate) input: Option<String>,
}

/// The first characters of a run's input that the session list shows.
const INPUT_PREVIEW_CHARS: usize = 200;

/// The tenant's recent sessions, newest first, at most [`RECENT_SESSIONS`].
#[derive(Default)]
pub(crate) struct Sessions(Mutex<VecDeque<SessionSummary>>);

impl Sessions {
    pub(crate) fn started(&self, id: &str, input: Option<&str>) {
        let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|s| s.id != id);
        list.push_front(SessionSummary {
            id: id.to_owned(),
            started_ms: unix_ms(SystemTime::now()),
            ended_ms: None,
            status: "running",
            input: input.map(|i| i.chars().take(INPUT_PREVIEW_CHARS).collect()),
        });
        list.truncate(RECENT_SESSIONS);
    }

    pub(crate) fn ended(&self, id: &str, status: &'static str) {
        let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = list.iter_mut().find(|s| s.id == id) {
            s.status = status;
            s.ended_ms = Some(unix_ms(SystemTime::now()));
        }
    }

    fn list(&self) -> Vec<SessionSummary> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
    }
}

/// `GET /api/chat`: the tenant's recent sessions with their status.
pub(crate) async fn sessions(State(service): State<Service>, headers: HeaderMap) -> Response {
    let Some(tenant) = service.tenant(&headers) else { return unauthorized() };
    let list: Vec<Value> = tenant
        .sessions
        .list()
        .into_iter()
        .map(|s| {
            let pending = service.live(tenant, &s.id).map_or(0, |live| live.approvals.pending_ids().len());
            json!({
                "session_id": s.id,
                "status": s.status,
                "started_ms": s.started_ms,
                "ended_ms": s.ended_ms,
                "input": s.input,
                "pending_approvals": pending,
            })
        })
        .collect();
    Json(json!({"sessions": list, "now_ms": unix_ms(SystemTime::now())})).into_response()
}

/// `GET /api/approvals`: every approval of the tenant's runs waiting for a
/// decision, with what an approver needs to decide it.
pub(crate) async fn approvals(State(service): State<Service>, headers: HeaderMap) -> Response {
    let Some(tenant) = service.tenant(&headers) else { return unauthorized() };
    let executor = tenant.executor();
    let timeout = service.inner.approval_timeout;
    let runs: Vec<(String, std::sync::Arc<super::chat::LiveRun>)> = {
        let live = service.inner.live.lock().unwrap_or_else(|p| p.into_inner());
        // Only this tenant's runs: the key's first half is the tenant index.
        live.iter().filter(|((i, _), _)| *i == tenant.index).map(|((_, s), r)| (s.clone(), r.clone())).collect()
    };
    let mut list = Vec::new();
    for (session, run) in runs {
        for request in run.approvals.pending() {
            let asked = run.asked_at(&request.call_id);
            let tool = executor.tools().get(&request.tool);
            let plugin = tool.and_then(|t| t.plugin());
            list.push(json!({
                "session_id": session,
                "call_id": request.call_id,
                "tool": request.tool,
                "description": tool.map(|t| t.spec().description.clone()),
                "arguments": request.arguments,
                "plugin": plugin.map(|p| p.info().name.clone()),
                "plugin_version": plugin.map(|p| p.info().version.clone()),
                "plugin_digest": request.plugin_digest,
                "asked_ms": unix_ms(asked),
                "deny_at_ms": unix_ms(asked + timeout),
            }));
        }
    }
    list.sort_by_key(|a| a["asked_ms"].as_u64());
    Json(json!({"approvals": list, "now_ms": unix_ms(SystemTime::now())})).into_response()
}

/// `GET /api/tools/detailed`: each tool with its schema, hints, limits,
/// grants and plugin.
pub(crate) async fn tools(State(service): State<Service>, headers: HeaderMap) -> Response {
    let Some(tenant) = service.tenant(&headers) else { return unauthorized() };
    let executor = tenant.executor();
    let list: Vec<Value> = executor
        .tools()
        .iter()
        .map(|t| {
            let spec = t.spec();
            let plugin = t.plugin().map(|p| {
                let limits = p.limits();
                json!({
                    "name": p.info().name,
                    "version": p.info().version,
                    "digest": p.digest(),
                    "grants": p.config().grants,
                    "instance": p.config().instance,
                    "limits": {
                        "memory_bytes": limits.memory_bytes,
                        "max_wall_clock_ms": millis(limits.max_wall_clock),
                        "result_bytes": limits.result_bytes,
                        "fuel": limits.fuel,
                    },
                })
            });
            json!({
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
                "output_schema": spec.output_schema,
                "strict": spec.strict,
                "parallel": spec.parallel,
                "retries": spec.retries,
                "timeout_ms": spec.timeout_ms,
                "max_output_chars": spec.max_output_chars,
                "approval": spec.approval,
                "hints": spec.hints,
                "plugin": plugin,
            })
        })
        .collect();
    Json(list).into_response()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `GET /api/metrics`: the tenant's own figures from the service metrics.
pub(crate) async fn metrics(State(service): State<Service>, headers: HeaderMap) -> Response {
    let Some(tenant) = service.tenant(&headers) else { return unauthorized() };
    let pending = pending_of(&service, tenant);
    let mut body = service.inner.metrics.tenant_json(&tenant.name);
    body["tenant"] = json!(tenant.name);
    body["in_flight"] = json!(tenant.quota.in_flight());
    body["pending_approvals"] = json!(pending);
    body["now_ms"] = json!(unix_ms(SystemTime::now()));
    Json(body).into_response()
}

fn pending_of(service: &Service, tenant: &Tenant) -> usize {
    let live = service.inner.live.lock().unwrap_or_else(|p| p.into_inner());
    live.iter().filter(|((i, _), _)| *i == tenant.index).map(|(_, r)| r.approvals.pending_ids().len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_list_is_bounded_newest_first_and_records_the_end() {
        let sessions = Sessions::default();
        for i in 0..RECENT_SESSIONS + 5 {
            sessions.started(&format!("s{i}"), Some(&"x".repeat(INPUT_PREVIEW_CHARS * 2)));
        }
        let list = sessions.list();
        assert_eq!(list.len(), RECENT_SESSIONS);
        assert_eq!(list[0].id, format!("s{}", RECENT_SESSIONS + 4));
        assert_eq!(list[RECENT_SESSIONS - 1].id, "s5", "the oldest were forgotten");
        assert_eq!(list[0].input.as_deref().map(str::len), Some(INPUT_PREVIEW_CHARS));

        // A session that runs again moves to the top, once.
        sessions.started("s50", None);
        sessions.ended("s50", "cancelled");
        let list = sessions.list();
        assert_eq!((list[0].id.as_str(), list[0].status), ("s50", "cancelled"));
        assert!(list[0].ended_ms.is_some());
        assert_eq!(list.iter().filter(|s| s.id == "s50").count(), 1);
        assert_eq!(list[1].status, "running");
    }
}
