//! The agent of one chat: the tenant's agent settings with its tools, each
//! under the tenant's call quotas, its MCP servers as sources, the
//! session's workspace, code mode's `run_code` and `ask_human`.

use super::{ApiError, AwaitDecision};
use crate::question::Questions;
use crate::quota::{QuotaPolicy, fuel_cap_of};
use crate::workspace::{OpenWorkspace, WorkspaceError};
use crate::{Service, Tenant};
use axum::http::StatusCode;
use lovia_host::policy::Policy;
use lovia_runner::Agent;
use std::sync::Arc;

/// What a chat's run is made of besides its model.
pub(crate) struct ChatAgent {
    pub(crate) agent: Agent,
    /// The session's workspace, open until the run's task ends.
    pub(crate) workspace: Option<OpenWorkspace>,
    /// Where `ask_human` puts its questions, once the run exists.
    pub(crate) questions: Option<Arc<Questions>>,
}

impl Service {
    /// The agent of `tenant`'s chat in `session`. Fails only when the
    /// session's workspace cannot be opened (429 when the tenant's
    /// workspaces are full, else 503).
    pub(crate) fn chat_agent(&self, tenant: &Tenant, session: &str) -> Result<ChatAgent, ApiError> {
        let config = &tenant.agent;
        let mut agent = Agent::new(config.name.clone());
        agent.instructions = config.instructions.clone();
        agent.max_turns = config.max_turns;
        agent.context_policy = config.context_window_tokens.map(lovia_runner::ContextPolicy::for_window);
        agent.budget = config.budget;
        agent.settings.parallel_tool_calls = config.parallel_tool_calls;
        // The tenant's call quotas hold inside chats too: a refused call is an error result.
        // Each tool's attempts pass the tenant's quota with its own fuel cap.
        let quota_for = |t: &lovia_host::Tool| -> Arc<dyn Policy> {
            Arc::new(QuotaPolicy(tenant.quota.clone(), fuel_cap_of(Some(t))))
        };
        // The tenant's MCP servers come as sources, which follow their list
        // changes; they run no wasm, so they hold no fuel.
        agent.plugin_tools = tenant
            .executor()
            .tools()
            .iter()
            .filter(|t| !tenant.mcp_servers.listed_at_start(t.name()))
            .map(|t| t.clone().with_policy(quota_for(t)))
            .collect();
        let unfuelled: Arc<dyn Policy> = Arc::new(QuotaPolicy(tenant.quota.clone(), fuel_cap_of(None)));
        let (sources, deferred) = tenant.mcp_servers.for_chat(&unfuelled);
        agent.tool_sources = sources;
        if let Some(section) = deferred {
            agent.context.push(Arc::new(section));
        }
        // The tenant's web tools, under its call quotas like any other.
        agent.tools.extend(tenant.web_tools.iter().map(|t| t.clone().with_policy(unfuelled.clone())));
        // The session's workspace; its tools count against the tenant's
        // call quotas like any other.
        let workspace = match &tenant.workspaces {
            Some(workspaces) => {
                let open = workspaces.open(session).map_err(|e| workspace_refusal(tenant, session, e))?;
                agent = agent.with_workspace(&open.workspace);
                agent.workspace_tools = std::mem::take(&mut agent.workspace_tools)
                    .into_iter()
                    .map(|t| t.with_policy(unfuelled.clone()))
                    .collect();
                Some(open)
            }
            None => None,
        };
        // ask_human: its question goes to the run's stream once the run
        // exists. Before code mode, so that a program can ask too.
        let questions = config.ask_human.then(|| Arc::new(Questions::new(self.inner.limits.question_timeout)));
        if let Some(questions) = &questions {
            agent.tools.push(lovia_runner::ask_human(questions.clone()));
        }
        // Code mode: run_code over the chat's tools as they are now (an MCP
        // server's later changes are not declared to the program).
        if let Some(engine) = &self.inner.code_engine
            && config.code_mode
        {
            let mut listed: Vec<lovia_host::Tool> =
                agent.plugin_tools.iter().chain(&agent.tools).chain(&agent.workspace_tools).cloned().collect();
            listed.extend(agent.tool_sources.iter().flat_map(|s| s.tools()));
            match lovia_code::run_code(engine.clone(), &listed, lovia_code::CodeLimits::default()) {
                Ok(tool) => agent.tools.push(tool.with_policy(unfuelled.clone())),
                Err(e) => {
                    tracing::warn!(tenant = %tenant.name, error = %e, "code mode is off for this chat");
                }
            }
        }
        agent.tool_settings.approval_handler = Some(Arc::new(AwaitDecision(self.inner.limits.approval_timeout)));
        Ok(ChatAgent { agent, workspace, questions })
    }
}

/// The answer when the session's workspace cannot be opened.
fn workspace_refusal(tenant: &Tenant, session: &str, e: WorkspaceError) -> ApiError {
    match e {
        e @ WorkspaceError::Full { .. } => ApiError(
            StatusCode::TOO_MANY_REQUESTS,
            format!("{e}; delete files in existing sessions' workspaces or wait for idle ones to be removed"),
        ),
        e => {
            tracing::warn!(tenant = %tenant.name, %session, error = %e, "cannot open the session's workspace");
            ApiError(StatusCode::SERVICE_UNAVAILABLE, "the session's workspace cannot be opened; retry later".into())
        }
    }
}
