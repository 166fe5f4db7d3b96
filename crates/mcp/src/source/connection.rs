//! One live session with an MCP server: the process started with exactly
//! the environment the configuration names (or the URL reached with the
//! configured headers), `initialize` done, and a flag that
//! `notifications/tools/list_changed` raises.

use super::config::{McpServerConfig, START_TIMEOUT};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{NotificationContext, Peer, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why a server could not be started or reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A variable that `env_from` or `headers_from_env` names is not set.
    #[error("mcp server '{server}': the environment variable {variable} is not set (named in `{key}`)")]
    MissingVariable {
        /// The server.
        server: String,
        /// The variable.
        variable: String,
        /// The key that names it.
        key: &'static str,
    },
    /// The process did not start.
    #[error("mcp server '{server}': cannot start {command:?}: {reason}")]
    Spawn {
        /// The server.
        server: String,
        /// The command.
        command: String,
        /// What the operating system said.
        reason: String,
    },
    /// The session did not start (`initialize` failed or timed out).
    #[error("mcp server '{server}': the MCP session did not start: {reason}")]
    Handshake {
        /// The server.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// The transport is not available in this build.
    #[error("mcp server '{server}': {reason}")]
    Unsupported {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
}

/// The client side of a session: raises `changed` on a tool-list change.
#[derive(Debug, Clone)]
pub(crate) struct Listener {
    pub(crate) changed: Arc<AtomicBool>,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.store(true, Ordering::SeqCst);
    }

    fn get_info(&self) -> ClientConfig {
        // 2025-11-25 is the newest revision with a session, where a server
        // sends list changes unasked; lovia asks for no client features.
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("lovia", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

/// A running session. Dropping it ends the session and kills the process.
pub(crate) struct Connection {
    service: RunningService<RoleClient, Listener>,
}

impl Connection {
    /// Starts `config`'s server; a tool-list change raises `changed`.
    pub(crate) async fn open(config: &McpServerConfig, changed: Arc<AtomicBool>) -> Result<Self, StartError> {
        let listener = Listener { changed };
        let server = || config.name.clone();
        let service = match (&config.command, &config.url) {
            (Some(command), _) => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(&config.args).env_clear().envs(&config.env).kill_on_drop(true);
                for name in &config.env_from {
                    let value = std::env::var_os(name).ok_or_else(|| StartError::MissingVariable {
                        server: server(),
                        variable: name.clone(),
                        key: "env_from",
                    })?;
                    cmd.env(name, value);
                }
                // The server's log goes where lovia's goes; stdout is the protocol.
                let (transport, _) = TokioChildProcess::builder(cmd).stderr(Stdio::inherit()).spawn().map_err(|e| {
                    StartError::Spawn { server: server(), command: command.clone(), reason: e.to_string() }
                })?;
                tokio::time::timeout(START_TIMEOUT, listener.serve(transport))
                    .await
                    .map_err(|_| StartError::Handshake {
                        server: server(),
                        reason: format!("no answer to initialize within {} s", START_TIMEOUT.as_secs()),
                    })?
                    .map_err(|e| StartError::Handshake { server: server(), reason: e.to_string() })?
            }
            (None, _) => {
                return Err(StartError::Unsupported {
                    server: server(),
                    reason: "a `url` server needs the streamable HTTP client, which this build does not have".into(),
                });
            }
        };
        Ok(Self { service })
    }

    /// The handle requests are sent through.
    pub(crate) fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    /// Whether the session has ended (the process died or closed stdout).
    pub(crate) fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }
}
