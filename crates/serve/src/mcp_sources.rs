//! A tenant's `[[tenants.mcp_servers]]`: each server is started and listed
//! when the service starts, and its tools join the tenant's toolset after
//! the plugins' (so `/api/tools`, `/api/tools/{name}/call` and the chats
//! see them), each under the tenant's quotas as a plugin's tool is.
//!
//! The list is taken once: a server's `notifications/tools/list_changed`
//! does not change the tenant's tools until the service restarts
//! (docs/mcp.md, "Not done yet"). A server that dies is still started
//! again for the next call, by its tools themselves.

use crate::ServeError;
use lovia_host::{ToolSource, Toolset};
use lovia_mcp::source::{McpServerConfig, McpSource};

/// Starts `servers` for `tenant` and adds their tools to `tools`; a server
/// that cannot start, or a tool name another source of the tenant has, is
/// an error naming both.
pub(crate) async fn add(tenant: &str, servers: &[McpServerConfig], tools: &mut Toolset) -> Result<(), ServeError> {
    for config in servers {
        let source = McpSource::start(config.clone())
            .await
            .map_err(|source| ServeError::McpServer { tenant: tenant.to_owned(), source })?;
        // The tools it refused are logged by `McpSource` with their reasons.
        tools
            .add(ToolSource::Mcp(source.server().to_owned()), source.tools())
            .map_err(|e| ServeError::Conflict { tenant: tenant.to_owned(), reason: e.to_string() })?;
    }
    Ok(())
}
