//! A tenant's `[[tenants.mcp_servers]]`: each server is started and listed
//! when the service starts, and its tools join the tenant's toolset after
//! the plugins' (where uploads check their names against them). Every door
//! gets the servers themselves as capabilities (`offer`), so that a
//! server's `notifications/tools/list_changed` changes a chat's tools
//! before its next model turn and the direct route's and `/mcp`'s before
//! their next request (docs/operators.md). A server that dies is started
//! again for the next call by its tools. A server with `defer = true` is
//! not in the toolset: every door reaches its tools through
//! `search_mcp_tools` and `call_mcp_tool`, and a chat's system message
//! names them (docs/mcp.md, "Deferred servers").
//!
//! A server that does not start is one tenant's problem: the service starts
//! without its tools, logs it, reports it in the tenant's `GET /api/status`,
//! and starts it again in the background ([`RETRY_FIRST`], doubling to
//! [`RETRY_MAX`]), adding its tools when it comes up. Otherwise one tenant's
//! broken server would keep every tenant's service (and every new replica)
//! from starting.

use crate::error::ServeError;
use lovia_host::{Capability, ToolSource, Toolset};
use lovia_mcp::source::{DeferredMcpTools, McpServerConfig, McpSource};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The first retry of a server that did not start comes this long after
/// its failure.
pub(crate) const RETRY_FIRST: Duration = Duration::from_secs(1);
/// Each retry waits twice as long as the last, up to this.
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(60);

/// A tenant's MCP servers: those started, and those still being retried.
#[derive(Debug, Default)]
pub(crate) struct TenantSources {
    state: RwLock<Sources>,
}

#[derive(Debug, Default)]
struct Sources {
    started: Vec<Arc<McpSource>>,
    /// The servers with `defer = true` that started: in no toolset.
    deferred: Vec<Arc<McpSource>>,
    /// The names their tools had when they started: those in the tenant's toolset.
    listed_at_start: HashSet<String>,
    /// The servers that did not start, by name: their config and the last failure.
    waiting: BTreeMap<String, (McpServerConfig, String)>,
}

impl TenantSources {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Sources> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Sources> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the toolset's tool `name` came from one of the servers.
    pub(crate) fn listed_at_start(&self, name: &str) -> bool {
        self.read().listed_at_start.contains(name)
    }

    /// The servers as capabilities: the listed ones, which follow their
    /// list changes, then the deferred ones behind their two tools (with
    /// their section of the system message).
    pub(crate) fn capabilities(&self) -> Vec<Arc<dyn Capability>> {
        let sources = self.read();
        let mut all: Vec<Arc<dyn Capability>> =
            sources.started.iter().map(|source| source.clone() as Arc<dyn Capability>).collect();
        if !sources.deferred.is_empty() {
            all.push(Arc::new(DeferredMcpTools::new(sources.deferred.clone())));
        }
        all
    }

    /// Whether any server is up: only then can a list change.
    pub(crate) fn any_started(&self) -> bool {
        let sources = self.read();
        !sources.started.is_empty() || !sources.deferred.is_empty()
    }

    /// Each server's name, whether it is up, and why not.
    pub(crate) fn status(&self) -> Vec<serde_json::Value> {
        let sources = self.read();
        let up = sources
            .started
            .iter()
            .chain(&sources.deferred)
            .map(|s| serde_json::json!({"name": s.server(), "ready": true}));
        let down = sources
            .waiting
            .iter()
            .map(|(name, (_, error))| serde_json::json!({"name": name, "ready": false, "error": error}));
        up.chain(down).collect()
    }

    /// The configs of the servers that did not start.
    pub(crate) fn waiting(&self) -> Vec<McpServerConfig> {
        self.read().waiting.values().map(|(config, _)| config.clone()).collect()
    }

    /// Notes another failed start of server `name`.
    pub(crate) fn failed_again(&self, name: &str, error: String) {
        if let Some(entry) = self.write().waiting.get_mut(name) {
            entry.1 = error;
        }
    }

    /// Adds `source`, which has started, to `tools` (the tenant's toolset
    /// now) and to the chats' sources; a name another source of the tenant
    /// has is an error, and the server then stays out (and waiting).
    pub(crate) fn started(&self, source: McpSource, tools: &mut Toolset) -> Result<(), String> {
        if source.deferred() {
            let mut sources = self.write();
            sources.waiting.remove(source.server());
            sources.deferred.push(Arc::new(source));
            return Ok(());
        }
        // The tools it refused are logged by `McpSource` with their reasons.
        let listed = source.tools();
        let names: Vec<String> = listed.iter().map(|t| t.name().to_owned()).collect();
        tools.add(ToolSource::Mcp(source.server().to_owned()), listed).map_err(|e| e.to_string())?;
        let mut sources = self.write();
        sources.listed_at_start.extend(names);
        sources.waiting.remove(source.server());
        sources.started.push(Arc::new(source));
        Ok(())
    }
}

/// Starts `servers` for `tenant` and adds their tools to `tools`. A tool
/// name another source of the tenant has is an error naming both (the
/// config is wrong); a server that cannot start is logged and left waiting
/// for [`crate::Service`] to retry it.
pub(crate) async fn add(
    tenant: &str,
    servers: &[McpServerConfig],
    tools: &mut Toolset,
) -> Result<TenantSources, ServeError> {
    let sources = TenantSources::default();
    for config in servers {
        match McpSource::start(config.clone()).await {
            Ok(source) => sources
                .started(source, tools)
                .map_err(|reason| ServeError::Conflict { tenant: tenant.to_owned(), reason })?,
            Err(e) => {
                tracing::warn!(
                    %tenant, server = %config.name, error = %e,
                    "MCP server did not start; the tenant is served without its tools, and it is retried in the background"
                );
                sources.write().waiting.insert(config.name.clone(), (config.clone(), e.to_string()));
            }
        }
    }
    Ok(sources)
}
