//! A tenant's `[[tenants.mcp_servers]]`: each server is started and listed
//! when the service starts, and its tools join the tenant's toolset after
//! the plugins' (so `/api/tools` and `/api/tools/{name}/call` see them).
//! A chat gets the servers themselves as tool sources instead, under the
//! tenant's quotas, so that a server's `notifications/tools/list_changed`
//! changes the chat's tools before its next model turn; the toolset of
//! the direct routes keeps the list taken at start (docs/operators.md). A
//! server that dies is started again for the next call by its tools.

use crate::ServeError;
use lovia_host::policy::Policy;
use lovia_host::{BoxFuture, DynamicTools, Tool, ToolSource, Toolset};
use lovia_mcp::source::{McpServerConfig, McpSource};
use std::collections::HashSet;
use std::sync::Arc;

/// A tenant's started MCP servers.
#[derive(Debug, Default)]
pub(crate) struct TenantSources {
    sources: Vec<Arc<McpSource>>,
    /// The names their tools had at start: those in the tenant's toolset.
    listed_at_start: HashSet<String>,
}

impl TenantSources {
    /// Whether the toolset's tool `name` came from one of the servers.
    pub(crate) fn listed_at_start(&self, name: &str) -> bool {
        self.listed_at_start.contains(name)
    }

    /// The servers as a chat's tool sources, each call under `quota`.
    pub(crate) fn for_chat(&self, quota: &Arc<dyn Policy>) -> Vec<Arc<dyn DynamicTools>> {
        self.sources
            .iter()
            .map(|source| {
                Arc::new(UnderQuota { source: source.clone(), quota: quota.clone() }) as Arc<dyn DynamicTools>
            })
            .collect()
    }
}

/// Starts `servers` for `tenant` and adds their tools to `tools`; a server
/// that cannot start, or a tool name another source of the tenant has, is
/// an error naming both.
pub(crate) async fn add(
    tenant: &str,
    servers: &[McpServerConfig],
    tools: &mut Toolset,
) -> Result<TenantSources, ServeError> {
    let mut started = TenantSources::default();
    for config in servers {
        let source = McpSource::start(config.clone())
            .await
            .map_err(|source| ServeError::McpServer { tenant: tenant.to_owned(), source })?;
        // The tools it refused are logged by `McpSource` with their reasons.
        let listed = source.tools();
        started.listed_at_start.extend(listed.iter().map(|t| t.name().to_owned()));
        tools
            .add(ToolSource::Mcp(source.server().to_owned()), listed)
            .map_err(|e| ServeError::Conflict { tenant: tenant.to_owned(), reason: e.to_string() })?;
        started.sources.push(Arc::new(source));
    }
    Ok(started)
}

/// A server's tools with the tenant's quota policy on each, as a chat's
/// plugin tools have it.
struct UnderQuota {
    source: Arc<McpSource>,
    quota: Arc<dyn Policy>,
}

impl std::fmt::Debug for UnderQuota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnderQuota").field("source", &self.source).finish_non_exhaustive()
    }
}

impl DynamicTools for UnderQuota {
    fn source(&self) -> ToolSource {
        DynamicTools::source(&*self.source)
    }

    fn tools(&self) -> Vec<Tool> {
        self.source.tools().into_iter().map(|t| t.with_policy(self.quota.clone())).collect()
    }

    fn refresh(&self) -> BoxFuture<'_, bool> {
        DynamicTools::refresh(&*self.source)
    }
}
