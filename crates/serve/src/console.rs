//! The web console at `/console` (docs/console.md): static assets embedded
//! in the binary, and the tenant-scoped JSON routes it reads beside the
//! chat routes — pending approvals, the tenant's sessions, its tools in
//! detail and its own metrics.
//!
//! The console runs in the browser of a person holding a tenant's key, and
//! it shows what tools and models produced: the page is served with a
//! Content-Security-Policy that allows only its own script and style (no
//! inline script, no `eval`, no other origin, no framing) and images only
//! from itself and the `blob:` URLs its script makes from checked image
//! bytes, and the script renders every value as text.

use super::auth::Caller;
use crate::Service;
use crate::Tenant;
use crate::response::error;
use axum::Json;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use lovia_runner::{RunStatus, SESSION_PAGE_DEFAULT, SESSION_PAGE_MAX, SessionCursor, SessionPage};
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::{Duration, SystemTime};

/// The policy of every console response: its own script and style only,
/// requests only to its own origin, never framed. `blob:` images are the
/// PNG, JPEG, GIF and WebP parts of tool results, drawn from the bytes the
/// script decoded and checked (assets/console/parts.js); no other source
/// of anything is allowed.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../assets/console/index.html");
const APP_JS: &str = include_str!("../assets/console/app.js");
const DOM_JS: &str = include_str!("../assets/console/dom.js");
const PARTS_JS: &str = include_str!("../assets/console/parts.js");
const SCHEMA_FORM_JS: &str = include_str!("../assets/console/schema-form.js");
const CONSOLE_CSS: &str = include_str!("../assets/console/console.css");
const ICON_SVG: &str = include_str!("../assets/console/icon.svg");

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

pub(crate) async fn dom_js() -> Response {
    asset("text/javascript; charset=utf-8", DOM_JS)
}

pub(crate) async fn parts_js() -> Response {
    asset("text/javascript; charset=utf-8", PARTS_JS)
}

pub(crate) async fn schema_form_js() -> Response {
    asset("text/javascript; charset=utf-8", SCHEMA_FORM_JS)
}

pub(crate) async fn console_css() -> Response {
    asset("text/css; charset=utf-8", CONSOLE_CSS)
}

pub(crate) async fn icon() -> Response {
    asset("image/svg+xml", ICON_SVG)
}

/// The query of `GET /api/chat`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionsQuery {
    /// Sessions on the page: 1 to [`SESSION_PAGE_MAX`], [`SESSION_PAGE_DEFAULT`] when absent.
    limit: Option<usize>,
    /// The `next` of the previous page.
    before: Option<String>,
}

/// `GET /api/chat?limit=&before=`: a page of the tenant's sessions from the
/// run store, newest first, with their status; they outlive the process.
pub(crate) async fn sessions(caller: Caller, query: Result<Query<SessionsQuery>, QueryRejection>) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
    let query = match query {
        Ok(Query(q)) => q,
        Err(rejection) => return error(StatusCode::BAD_REQUEST, &rejection.body_text()),
    };
    let limit = query.limit.unwrap_or(SESSION_PAGE_DEFAULT);
    if !(1..=SESSION_PAGE_MAX).contains(&limit) {
        return error(StatusCode::BAD_REQUEST, &format!("limit must be 1 to {SESSION_PAGE_MAX}, not {limit}"));
    }
    let page = match query.before.as_deref().map(str::parse::<SessionCursor>) {
        None => SessionPage::first(limit),
        Some(Ok(cursor)) => SessionPage::after(limit, cursor),
        Some(Err(e)) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let found = match service.inner.stores.runs.list(&tenant.name, &page).await {
        Ok(found) => found,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let next = (found.len() == limit).then(|| found.last().map(|s| s.cursor().to_string())).flatten();
    let list: Vec<Value> = found
        .into_iter()
        .map(|s| {
            let live = service.live(tenant, &s.session);
            let status = match (&live, s.status) {
                (Some(_), _) => "running",
                (None, RunStatus::Running) => "running",
                (None, stored) => tenant.runs.outcomes.of(&s.session).unwrap_or(match stored {
                    RunStatus::Completed => "completed",
                    RunStatus::Failed => "failed",
                    _ => "interrupted",
                }),
            };
            let ended = (status != "running").then_some(s.updated_ms);
            json!({
                "session_id": s.session,
                "status": status,
                "started_ms": s.created_ms,
                "updated_ms": s.updated_ms,
                "ended_ms": ended,
                "input": s.input,
                "pending_approvals": live.map_or(0, |l| l.approvals.pending_ids().len()),
            })
        })
        .collect();
    Json(json!({"sessions": list, "next": next, "now_ms": super::sse::unix_ms(SystemTime::now())})).into_response()
}

/// `GET /api/approvals`: every approval of the tenant's runs waiting for a
/// decision, with what an approver needs to decide it.
pub(crate) async fn approvals(caller: Caller) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
    let executor = tenant.direct_executor();
    let timeout = service.inner.limits.approval_timeout;
    let runs: Vec<(String, std::sync::Arc<super::chat::LiveRun>)> = {
        let live = service.inner.live.lock().unwrap_or_else(|p| p.into_inner());
        // Only this tenant's runs: the key's first half is the tenant index.
        live.iter().filter(|((i, _), _)| *i == tenant.index).map(|((_, s), r)| (s.clone(), r.clone())).collect()
    };
    // The chats' approvals, then those of `/mcp` calls (their run id is the session).
    let chats = runs.iter().flat_map(|(session, run)| {
        run.approvals.pending().into_iter().map(move |r| (session.clone(), run.asked_at(&r.call_id), r))
    });
    let mcp = tenant.mcp.pending().into_iter().map(|p| (p.session, p.asked, p.request));
    let mut list = Vec::new();
    for (session, asked, request) in chats.chain(mcp) {
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
            "asked_ms": super::sse::unix_ms(asked),
            "deny_at_ms": super::sse::unix_ms(asked + timeout),
        }));
    }
    list.sort_by_key(|a| a["asked_ms"].as_u64());
    Json(json!({"approvals": list, "now_ms": super::sse::unix_ms(SystemTime::now())})).into_response()
}

/// `GET /api/questions`: the open `ask_human` questions of the tenant's
/// runs on this replica, oldest first.
pub(crate) async fn questions(caller: Caller) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
    let runs: Vec<(String, std::sync::Arc<super::chat::LiveRun>)> = {
        let live = service.inner.live.lock().unwrap_or_else(|p| p.into_inner());
        live.iter().filter(|((i, _), _)| *i == tenant.index).map(|((_, s), r)| (s.clone(), r.clone())).collect()
    };
    let mut list: Vec<Value> = runs
        .iter()
        .filter_map(|(session, run)| {
            let questions = run.questions.as_ref()?;
            let (question, asked) = questions.open()?;
            let mut entry = questions.event(&question, asked);
            entry["session_id"] = json!(session);
            Some(entry)
        })
        .collect();
    list.sort_by_key(|q| q["asked_ms"].as_u64());
    Json(json!({"questions": list, "now_ms": super::sse::unix_ms(SystemTime::now())})).into_response()
}

/// `GET /api/tools/detailed`: each tool with its schema, hints, limits,
/// grants and plugin.
pub(crate) async fn tools(caller: Caller) -> Response {
    let tenant = caller.tenant();
    tenant.follow_sources().await;
    let executor = tenant.direct_executor();
    let ask_human = tenant.agent.ask_human.then(lovia_host::human::ask_human_spec);
    let listed = executor.tools().iter().map(|t| (t.spec().clone(), t.plugin().cloned(), true));
    // `ask_human` is the chats' own: listed, with no direct call.
    let list: Vec<Value> = listed
        .chain(ask_human.map(|spec| (spec, None, false)))
        .map(|(spec, plugin, direct)| {
            let spec = &spec;
            let plugin = plugin.as_ref().map(|p| {
                let limits = p.limits();
                json!({
                    "name": p.info().name,
                    "version": p.info().version,
                    "digest": p.digest(),
                    "grants": p.config().grants,
                    // What `lovia inspect` says: "nothing" is an empty list.
                    "granted": p.config().grants.describe(),
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
                "direct": direct,
            })
        })
        .collect();
    Json(list).into_response()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `GET /api/metrics`: the tenant's own figures from the service metrics,
/// with its calls per minute as the service counted them.
pub(crate) async fn metrics(caller: Caller) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
    let pending = pending_of(service, tenant);
    let now = SystemTime::now();
    let mut body = service.inner.metrics.tenant_json(&tenant.name, now);
    body["tenant"] = json!(tenant.name);
    body["in_flight"] = json!(tenant.quota.in_flight());
    body["pending_approvals"] = json!(pending);
    body["now_ms"] = json!(super::sse::unix_ms(now));
    Json(body).into_response()
}

fn pending_of(service: &Service, tenant: &Tenant) -> usize {
    let live = service.inner.live.lock().unwrap_or_else(|p| p.into_inner());
    let chats: usize =
        live.iter().filter(|((i, _), _)| *i == tenant.index).map(|(_, r)| r.approvals.pending_ids().len()).sum();
    chats + tenant.mcp.pending().len()
}
