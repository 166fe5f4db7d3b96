//! `lovia run --mcp-servers FILE.toml`: the `[[mcp_servers]]` tables of
//! the file, each server started and listed before the run starts.

use crate::CliError;
use lovia_mcp::source::{McpServerConfig, McpSource, check_all};
use serde::Deserialize;
use std::path::Path;
use std::sync::Arc;

/// The file: `[[mcp_servers]]` tables and nothing else.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServersFile {
    #[serde(default)]
    mcp_servers: Vec<McpServerConfig>,
}

/// Starts every server `path` configures, in the file's order.
pub(crate) async fn start(path: &Path) -> Result<Vec<Arc<McpSource>>, CliError> {
    let hint = "see docs/mcp.md, section \"MCP servers as tool sources\", for the keys";
    let text =
        std::fs::read_to_string(path).map_err(|e| CliError::new(format!("cannot read {}: {e}", path.display())))?;
    let file: ServersFile = toml::from_str(&text)
        .map_err(|e| CliError::new(format!("{} is not a valid MCP server list: {e}", path.display())).hint(hint))?;
    check_all(&file.mcp_servers).map_err(|e| CliError::new(e.to_string()).hint(hint))?;
    let mut sources = Vec::with_capacity(file.mcp_servers.len());
    for config in file.mcp_servers {
        let hint = if config.url.is_some() {
            "check that the server is up at its `url` and that its headers are right"
        } else {
            "an MCP server is a program lovia starts; run its command by hand to see why it fails"
        };
        let source = McpSource::start(config).await.map_err(|e| CliError::new(e.to_string()).hint(hint))?;
        for refused in source.refused() {
            eprintln!("lovia: mcp server '{}': tool {:?} refused: {}", source.server(), refused.tool, refused.reason);
        }
        sources.push(Arc::new(source));
    }
    Ok(sources)
}
