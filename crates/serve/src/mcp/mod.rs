//! `/mcp`: each tenant's tools over MCP streamable HTTP, behind the same
//! door as `/api` (the Bearer key is checked before a byte of the body is
//! read, and the body is bounded). The key picks the tenant, and the tenant
//! has its own [`McpServer`] and session manager: its `tools/list` holds
//! only its tools, another tenant's tool is an unknown tool, and a session
//! id of one tenant is unknown to another (docs/mcp.md, "`/mcp` in
//! `lovia serve`").
//!
//! The `Host` header is not checked: the allowlist of `lovia mcp --http`
//! stops a web page from reaching a keyless local server through DNS
//! rebinding, and here every request needs a tenant's key, which such a
//! page does not have.

mod hook;
pub(crate) mod states;
mod tasks;

pub(crate) use hook::Pending;

use super::auth::Caller;
use crate::response::error;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use lovia_host::approval::ApprovalDecision;
use lovia_host::{Capability, Composition, Executor};
use lovia_mcp::{
    BoundedSessions, HttpOptions, McpHttpService, McpOptions, McpServer, NewServerError, SessionLimitReached,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

/// What one tenant's `/mcp` is made of.
pub(crate) struct TenantMcp {
    server: McpServer,
    http: McpHttpService,
    sessions: Arc<BoundedSessions>,
    waiting: Arc<hook::Waiting>,
    /// What `/mcp` offers beside the tenant's shared capabilities: its
    /// workspace (one root for the tenant's MCP clients) and `ask_human`
    /// over elicitation, as the tenant has them.
    own: Vec<Arc<dyn Capability>>,
    /// Code mode over the rest, when the tenant's agent has it.
    code_mode: Option<crate::offer::AdmittedCodeMode>,
    /// Keeps `/mcp`'s root open (and out of the retention sweep) while the
    /// service lives.
    _workspace: Option<crate::workspace::OpenWorkspace>,
}

/// What [`TenantMcp::new`] needs besides the executor.
pub(crate) struct Setup<'a> {
    pub(crate) tenant: &'a str,
    pub(crate) quota: Arc<super::quota::Quota>,
    pub(crate) metrics: Arc<super::metrics::Metrics>,
    pub(crate) approval_timeout: Duration,
    pub(crate) max_sessions: usize,
    /// `max_mcp_tasks`: the most tasks kept for the tenant (0: none).
    pub(crate) max_tasks: usize,
    /// `sse_keep_alive_secs`: its streams must outlive `idle_connection_secs`
    /// exactly as the chats' do.
    pub(crate) sse_keep_alive: Duration,
    pub(crate) shared: Option<&'a states::SharedStates>,
    /// With `ask_human`: how long a question waits for the client's answer.
    pub(crate) questions: Option<Duration>,
    /// With a `[tenants.workspace]` table: `/mcp`'s root.
    pub(crate) workspace: Option<crate::workspace::OpenWorkspace>,
    /// With `agent.code_mode`: `run_code` over everything `/mcp` offers.
    pub(crate) code_mode: Option<crate::offer::AdmittedCodeMode>,
}

/// `/mcp`'s tools: the tenant's shared capabilities with its own (`own`)
/// among them, and code mode over all of them, in the one table order. A
/// name that clashes (the start and the uploads refuse such names) keeps
/// `direct`, the direct route's table.
fn served_tools(
    tenant: &str,
    shared: &Composition,
    own: &[Arc<dyn Capability>],
    code_mode: Option<&crate::offer::AdmittedCodeMode>,
    direct: &Executor,
) -> Executor {
    if own.is_empty() {
        return direct.clone();
    }
    let mut all = shared.clone();
    for capability in own {
        all.push(capability.clone());
    }
    if let Some(code_mode) = code_mode {
        all = code_mode.add_to(tenant, &all);
    }
    match all.toolset() {
        Ok(tools) => Executor::new(tools, direct.settings().clone()),
        Err(e) => {
            tracing::warn!(%tenant, error = %e, "a host tool's name is taken; the tenant's tools are served without it");
            direct.clone()
        }
    }
}

/// Plugin names by digest, for the approval prompt.
fn plugin_names(exec: &Executor) -> HashMap<String, String> {
    exec.tools().iter().filter_map(|t| t.plugin()).map(|p| (p.digest().to_owned(), p.info().name.clone())).collect()
}

impl TenantMcp {
    /// `/mcp` over the tenant's shared capabilities (`direct`: their table,
    /// [`crate::Tenant::direct_executor`]) and `ask_human`.
    pub(crate) fn new(shared: &Composition, direct: &Executor, setup: Setup<'_>) -> Result<TenantMcp, NewServerError> {
        let waiting = Arc::new(hook::Waiting::default());
        let mut options = McpOptions::default();
        let mut own: Vec<Arc<dyn Capability>> = Vec::new();
        // The workspace first: its section leads the server's instructions.
        if let Some(open) = &setup.workspace {
            own.push(Arc::new(open.workspace.clone()));
        }
        // ask_human asks the client itself (elicitation; input_required on 2026-07-28).
        if let Some(timeout) = setup.questions {
            let questions = lovia_mcp::McpQuestions::with_timeout(timeout);
            own.push(Arc::new(lovia_host::human::ask_human_capability(questions.tool())));
            options.questions = Some(questions);
        }
        // The sections a model would read in its system message go where MCP
        // puts text for the model; the server adds each plugin's itself.
        let sections: Vec<String> = own
            .iter()
            .chain(shared.capabilities())
            .filter(|c| c.source() != lovia_host::ToolSource::Plugin)
            .filter_map(|c| c.instructions())
            .collect();
        options.instructions = (!sections.is_empty()).then(|| sections.join("\n\n"));
        let exec = served_tools(setup.tenant, shared, &own, setup.code_mode.as_ref(), direct);
        options.approval_timeout = setup.approval_timeout;
        options.plugin_names = plugin_names(&exec);
        // Uploads change the list while clients are connected.
        options.list_changed = true;
        options.tenant = Some(setup.tenant.to_owned());
        options.hook = Some(Arc::new(hook::TenantHook {
            tenant: setup.tenant.to_owned(),
            quota: setup.quota,
            metrics: setup.metrics,
            waiting: waiting.clone(),
        }));
        options.tasks.max_kept = setup.max_tasks;
        if let Some(shared) = setup.shared {
            options.state_key = Some(shared.key.clone());
            options.redeemed = Some(shared.redeemed.clone());
            options.tasks.store = Some(shared.tasks.clone());
        }
        let server = McpServer::with_options(exec, options)?;
        let sessions = Arc::new(BoundedSessions::new(setup.max_sessions));
        let mut http = HttpOptions::default();
        // The key stops DNS rebinding here (see the module's comment).
        http.allowed_hosts = Vec::new();
        http.sessions = Some(sessions.clone());
        http.sse_keep_alive = setup.sse_keep_alive;
        let http = server.clone().http_service(http);
        Ok(TenantMcp { server, http, sessions, waiting, own, code_mode: setup.code_mode, _workspace: setup.workspace })
    }

    /// Serves the tools of `shared` (whose table is `direct`) and
    /// `ask_human` from now on, and tells the connected clients.
    pub(crate) fn replace(&self, tenant: &str, shared: &Composition, direct: &Executor) {
        let exec = served_tools(tenant, shared, &self.own, self.code_mode.as_ref(), direct);
        let names = plugin_names(&exec);
        if let Err(e) = self.server.replace(exec, names) {
            tracing::error!(%tenant, error = %e, "/mcp keeps the tools it had");
        }
    }

    /// See [`hook::Waiting::decide`].
    pub(crate) fn decide(&self, session: &str, call_id: &str, decision: ApprovalDecision) -> Option<bool> {
        self.waiting.decide(session, call_id, decision)
    }

    /// The approvals its calls wait for (direct calls that wait included).
    pub(crate) fn pending(&self) -> Vec<Pending> {
        self.waiting.pending()
    }

    /// See [`hook::Waiting::register_direct`]: the direct calls' approvals
    /// are listed and decided with the `/mcp` calls'.
    pub(crate) fn register_direct(
        &self,
        session: String,
        approvals: lovia_host::approval::ApprovalChannel,
    ) -> hook::Registered {
        self.waiting.register_direct(session, approvals)
    }
}

/// `/mcp` (POST, GET, DELETE): the request goes to its tenant's MCP service.
pub(crate) async fn serve(caller: Caller, request: Request) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
    // The MCP servers' list changes reach a listing or a call here, as a chat's next turn.
    tenant.follow_sources().await;
    let mcp = &tenant.mcp;
    // An `initialize` past the bound gets a 429 that says why; the session
    // manager refuses it anyway should two pass this check at once.
    let request = if request.method() == Method::POST
        && !request.headers().contains_key("mcp-session-id")
        && mcp.sessions.open().await >= mcp.sessions.max()
    {
        let (parts, body) = request.into_parts();
        // The door has read the body already: this only takes it back.
        let Ok(bytes) = body.collect().await.map(|b| b.to_bytes()) else {
            return error(StatusCode::BAD_REQUEST, "the request body could not be read");
        };
        if is_initialize(&bytes) {
            service.inner.metrics.refuse(&tenant.name, "max_mcp_sessions");
            return error(StatusCode::TOO_MANY_REQUESTS, &SessionLimitReached::new(mcp.sessions.max()).to_string());
        }
        Request::from_parts(parts, Body::from(bytes))
    } else {
        request
    };
    match mcp.http.clone().oneshot(request).await {
        Ok(response) => response.map(Body::new),
        Err(never) => match never {},
    }
    .into_response()
}

/// Whether a JSON-RPC body is an `initialize` request (the one that opens a session).
fn is_initialize(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Method<'_>>(body).is_ok_and(|m| m.method.as_deref() == Some("initialize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_initialize_opens_a_session() {
        assert!(is_initialize(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#));
        assert!(!is_initialize(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#));
        assert!(!is_initialize(br#"[{"method":"initialize"}]"#));
        assert!(!is_initialize(b"not json"));
    }
}
