//! What a command offers, composed as `lovia serve` composes a tenant's
//! doors (docs/architecture.md): `lovia run` and `lovia mcp` add their
//! plugins, then [`add_shared`] adds the MCP servers, the web tools and the
//! workspace from the same flags, then each adds `ask_human` over its own
//! person and code mode over the rest.

use crate::CliError;
use crate::web::WebOptions;
use crate::workspace::WorkspaceOptions;
use lovia_host::Composition;
use lovia_host::capability::ComposeError;
use std::path::Path;
use std::sync::Arc;

/// The flags every command with capabilities shares.
pub(crate) struct SharedFlags<'a> {
    /// The command, for its messages (`lovia run`).
    pub(crate) command: &'static str,
    /// `--mcp-servers FILE`.
    pub(crate) mcp_servers: Option<&'a Path>,
    /// `--read-page`, `--searxng`, `--brave-search` and their options.
    pub(crate) web: &'a WebOptions,
    /// `--workspace DIR` and its options.
    pub(crate) workspace: Option<(&'a Path, &'a WorkspaceOptions)>,
}

/// Adds the workspace, the MCP servers of `--mcp-servers` (started and
/// listed now; the deferred ones behind their two tools) and the web tools
/// to `door`. The workspace is returned too, for its callers
/// that keep it.
pub(crate) async fn add_shared(
    door: &mut Composition,
    flags: SharedFlags<'_>,
) -> Result<Option<lovia_workspace::Workspace>, CliError> {
    // The workspace first: its section leads the system message.
    let workspace = match flags.workspace {
        Some((dir, options)) => {
            let workspace = crate::workspace::open(dir, options)?;
            if let Some(reason) = workspace.unavailable_reason() {
                eprintln!("{}: the workspace's shell tools are not offered: {reason}", flags.command);
            }
            door.push(Arc::new(workspace.clone()));
            Some(workspace)
        }
        None => None,
    };
    if let Some(path) = flags.mcp_servers {
        let sources = crate::mcp_sources::start(path).await?;
        let (deferred, listed): (Vec<_>, Vec<_>) = sources.into_iter().partition(|s| s.deferred());
        for source in listed {
            door.push(source);
        }
        if !deferred.is_empty() {
            door.push(Arc::new(lovia_mcp::source::DeferredMcpTools::new(deferred)));
        }
    }
    let web = crate::web::tools(flags.web)?;
    if !web.is_empty() {
        door.push(Arc::new(lovia_web::capability(web)));
    }
    Ok(workspace)
}

/// The error of `command` for capabilities that cannot be composed.
pub(crate) fn refusal(command: &str, e: ComposeError) -> CliError {
    match e {
        ComposeError::Conflict { capability, conflict } => CliError::new(format!("{capability}: {}", conflict.message()))
            .hint(format!(
                "two of what you gave have a tool of this name: give them to separate `{command}` processes, rename the tool in one of them (an MCP server's `prefix` renames its tools), or leave one out"
            )),
        other => CliError::new(other.to_string()),
    }
}
