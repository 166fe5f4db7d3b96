//! What each door of a tenant offers, composed one way
//! (docs/architecture.md): the capabilities every door shares (its
//! plugins as they are now, its MCP servers, its web tools) make the direct
//! route's table with code mode over them, which `/mcp` serves with its
//! workspace and `ask_human` beside it (code mode then over those too); a
//! chat adds its session's workspace, `ask_human` and code mode to the same
//! capabilities (`chat::agent`).

use crate::Tenant;
use crate::mcp_sources::TenantSources;
use crate::quota::{NestedQuotaPolicy, Quota, fuel_cap_of};
use lovia_host::capability::ToolList;
use lovia_host::{Composition, Executor, Tool};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// The capabilities every door of a tenant offers: its plugins in
/// `plugins` (its executor, which also holds its MCP servers' tools as
/// listed at start, left out here), its MCP servers as they list their
/// tools now, then its web tools.
pub(crate) fn shared_capabilities(plugins: &Executor, sources: &TenantSources, web: &[Tool]) -> Composition {
    let mut shared = Composition::new();
    let tools = plugins.tools().iter().filter(|t| !sources.listed_at_start(t.name())).cloned().collect();
    shared.push(Arc::new(ToolList::plugins("the tenant's plugins", tools)));
    for source in sources.capabilities() {
        shared.push(source);
    }
    if !web.is_empty() {
        shared.push(Arc::new(lovia_web::capability(web.to_vec())));
    }
    shared
}

/// Code mode at a door that admits each call at the door (the direct
/// route, `/mcp`): the engine, and the tenant's quota, which each nested
/// call of a program passes as a chat's calls do (the door admits
/// `run_code` itself, not what it calls).
#[derive(Clone)]
pub(crate) struct AdmittedCodeMode {
    pub(crate) engine: Arc<lovia_code::CodeEngine>,
    pub(crate) quota: Arc<Quota>,
}

impl AdmittedCodeMode {
    /// `door` with `run_code` over its tools, and every tool under the
    /// tenant's quota when a program calls it (a program's nested calls run
    /// through the door's table by name). A program that cannot be declared
    /// (the tools' declarations too long) leaves `door` without it, and is
    /// logged.
    pub(crate) fn add_to(&self, tenant: &str, door: &Composition) -> Composition {
        let mut with_code = match lovia_code::code_mode(self.engine.clone(), door, lovia_code::CodeLimits::default()) {
            Ok(code_mode) => door.clone().with(Arc::new(code_mode)),
            Err(e) => {
                tracing::warn!(%tenant, error = %e, "code mode is off at the tenant's direct route and /mcp");
                return door.clone();
            }
        };
        let quota = self.quota.clone();
        with_code.set_adjust(Arc::new(move |tool: Tool| {
            let fuel = fuel_cap_of(Some(&tool));
            tool.with_policy(Arc::new(NestedQuotaPolicy(quota.clone(), fuel)))
        }));
        with_code
    }
}

/// The direct route's table: `shared`'s, with the settings of `plugins`. A
/// name that clashes (an MCP server's new tool named as a plugin's) keeps
/// the plugins' tools alone, and is logged.
pub(crate) fn direct_tools(tenant: &str, shared: &Composition, plugins: &Executor) -> Executor {
    match shared.toolset() {
        Ok(tools) => Executor::new(tools, plugins.settings().clone()),
        Err(e) => {
            tracing::warn!(%tenant, error = %e, "the tenant's tools are served without the clashing one");
            plugins.clone()
        }
    }
}

impl Tenant {
    /// [`shared_capabilities`] of this tenant.
    pub(crate) fn shared_capabilities(&self, plugins: &Executor) -> Composition {
        shared_capabilities(plugins, &self.mcp_servers, &self.web_tools)
    }

    /// The direct route's capabilities: the shared ones, and code mode over
    /// them when the tenant's agent has it.
    pub(crate) fn direct_capabilities(&self, shared: &Composition) -> Composition {
        match &self.code_mode {
            Some(code_mode) => code_mode.add_to(&self.name, shared),
            None => shared.clone(),
        }
    }

    /// Brings the direct route's table and `/mcp` up to date with the MCP
    /// servers' lists (a server's `notifications/tools/list_changed`, or
    /// its restart), as a chat does between turns. Called before a direct
    /// call or a listing; without a server it does nothing.
    pub(crate) async fn follow_sources(&self) {
        if !self.mcp_servers.any_started() {
            return;
        }
        let sources = self.mcp_servers.capabilities();
        for source in &sources {
            source.refresh().await;
        }
        // A chat may have taken the change first: the generation says
        // whether the table here was built from the lists as they are.
        let now = sources.iter().fold(0u64, |sum, s| sum.wrapping_add(s.generation()));
        if now != self.direct_generation.load(Ordering::SeqCst) {
            let current = self.executor.write().unwrap_or_else(|e| e.into_inner());
            self.rebuild_direct(&current);
        }
    }

    /// Makes the direct tools and `/mcp` those over `plugins` (the
    /// tenant's executor, locked by the caller, so that two changes reach
    /// them in the order they were made).
    pub(crate) fn rebuild_direct(&self, plugins: &Executor) {
        let shared = self.shared_capabilities(plugins);
        self.direct_generation.store(shared.generation(), Ordering::SeqCst);
        let direct = direct_tools(&self.name, &self.direct_capabilities(&shared), plugins);
        *self.direct.write().unwrap_or_else(|e| e.into_inner()) = direct.clone();
        self.mcp.replace(&self.name, &shared, &direct);
    }
}
