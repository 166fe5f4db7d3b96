//! The agent of one chat: the tenant's agent settings with its tools, each
//! under the tenant's call quotas, its MCP servers as sources, the
//! session's workspace, code mode's `run_code` and `ask_human`.

use super::{AwaitDecision, RunRefusal};
use crate::Service;
use crate::Tenant;
use crate::question::Questions;
use crate::quota::{QuotaPolicy, fuel_cap_of};
use crate::workspace::{OpenWorkspace, WorkspaceError};
use lovia_host::Composition;
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
    pub(crate) fn chat_agent(&self, tenant: &Tenant, session: &str) -> Result<ChatAgent, RunRefusal> {
        let config = &tenant.agent;
        let mut agent = Agent::new(config.name.clone());
        agent.instructions = config.instructions.clone();
        agent.max_turns = config.max_turns;
        agent.context_policy = config.context_window_tokens.map(lovia_runner::ContextPolicy::for_window);
        agent.budget = config.budget;
        agent.settings.parallel_tool_calls = config.parallel_tool_calls;
        // The tenant's call quotas hold inside chats too: each tool's
        // attempts pass them with its own fuel cap (a tool that runs no
        // wasm holds none), and a refused attempt is an error result.
        let quota = tenant.quota.clone();
        let mut capabilities = Composition::new();
        capabilities.set_adjust(Arc::new(move |tool: lovia_host::Tool| {
            let fuel = fuel_cap_of(Some(&tool));
            tool.with_policy(Arc::new(QuotaPolicy(quota.clone(), fuel)))
        }));
        // The session's workspace first: its section leads the system message.
        let workspace = match &tenant.workspaces {
            Some(workspaces) => {
                let open = workspaces.open(session).map_err(|e| workspace_refusal(tenant, session, e))?;
                capabilities.push(Arc::new(open.workspace.clone()));
                Some(open)
            }
            None => None,
        };
        // What every door of the tenant offers: its plugins, its MCP servers
        // (which follow their list changes between turns), its web tools.
        for shared in tenant.shared_capabilities(&tenant.executor()).capabilities() {
            capabilities.push(shared.clone());
        }
        // ask_human: its question goes to the run's stream once the run
        // exists. Before code mode, so that a program can ask too.
        let questions = config.ask_human.then(|| Arc::new(Questions::new(self.inner.limits.question_timeout)));
        if let Some(questions) = &questions {
            capabilities
                .push(Arc::new(lovia_host::human::ask_human_capability(lovia_runner::ask_human(questions.clone()))));
        }
        // Code mode: run_code over the chat's tools as they are now.
        if let Some(engine) = &self.inner.code_engine
            && config.code_mode
        {
            match lovia_code::code_mode(engine.clone(), &capabilities, lovia_code::CodeLimits::default()) {
                Ok(code_mode) => {
                    capabilities.push(Arc::new(code_mode));
                }
                Err(e) => {
                    tracing::warn!(tenant = %tenant.name, error = %e, "code mode is off for this chat");
                }
            }
        }
        agent.capabilities = capabilities;
        agent.tool_settings.approval_handler = Some(Arc::new(AwaitDecision(self.inner.limits.approval_timeout)));
        agent.tool_settings.telemetry = tenant.telemetry.clone();
        Ok(ChatAgent { agent, workspace, questions })
    }
}

/// The answer when the session's workspace cannot be opened.
fn workspace_refusal(tenant: &Tenant, session: &str, e: WorkspaceError) -> RunRefusal {
    match e {
        e @ WorkspaceError::Full { .. } => RunRefusal::WorkspaceFull(e),
        e => {
            tracing::warn!(tenant = %tenant.name, %session, error = %e, "cannot open the session's workspace");
            RunRefusal::WorkspaceUnavailable
        }
    }
}
