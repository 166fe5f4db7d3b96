//! What each door of a tenant offers, composed one way
//! (docs/architecture.md): the capabilities every door shares (its
//! plugins as they are now, its MCP servers, its web tools) make the direct
//! route's table, which `/mcp` serves with `ask_human` beside it; a chat
//! adds its session's workspace, `ask_human` and code mode to the same
//! capabilities (`chat::agent`).

use crate::Tenant;
use crate::mcp_sources::TenantSources;
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
        let direct = direct_tools(&self.name, &shared, plugins);
        *self.direct.write().unwrap_or_else(|e| e.into_inner()) = direct.clone();
        self.mcp.replace(&self.name, &shared, &direct);
    }
}
