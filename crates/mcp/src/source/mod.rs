//! MCP servers as tool sources: the tools an external MCP server lists join
//! a lovia toolset as host-native [`Tool`]s, so the executor gives them the
//! same validation, approvals, timeouts, retries, truncation and events as
//! a component's (docs/mcp.md, "MCP servers as tool sources"; docs/semantics.md §20).
//!
//! A server started as a command runs under the kernel confinement of
//! lovia-confine unless its `sandbox` table says `mode = "off"`: its own
//! working directory, only the paths its configuration grants, no network
//! unless granted, rlimits, and its process group and cgroup killed with it
//! (sandbox.rs, process.rs). A server reached by URL is a service the
//! operator trusts. lovia bounds what reaches the model from either.

mod adapter;
mod approval;
mod bounded;
mod config;
mod connection;
mod content;
mod deferred;
mod http_client;
mod process;
mod progress;
mod sandbox;
mod start_error;
mod supervisor;
mod task_call;
mod task_support;

pub use adapter::Refused;
pub use approval::{ApprovalNeed, ApprovalRule};
pub use config::{
    ConfigError, DEFAULT_TIMEOUT, MAX_LIST_PAGES, MAX_MESSAGE_BYTES, MAX_SCHEMA_BYTES, MAX_SERVER_NAME,
    MAX_TOOLS_PER_SERVER, McpServerConfig, START_TIMEOUT, check_all,
};
pub use deferred::{CALL_MCP_TOOL, DeferredMcpTools, SEARCH_MCP_TOOLS};
pub use sandbox::{SandboxConfig, SandboxMode};
pub use start_error::StartError;
pub use supervisor::{RESTART_BACKOFF_FIRST, RESTART_BACKOFF_MAX};

use lovia_host::{BoxFuture, Capability, Tool, ToolSource};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use supervisor::Supervisor;

/// Why a server's tools are not available.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The configuration is refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The server did not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The server did not list its tools.
    #[error("mcp server '{server}': tools/list failed: {reason}")]
    List {
        /// The server.
        server: String,
        /// What went wrong.
        reason: String,
    },
}

/// The tools of one MCP server, kept up to date between turns.
pub struct McpSource {
    supervisor: Arc<Supervisor>,
    listed: Mutex<Listed>,
    /// Bumped each time the list is replaced ([`Capability::generation`]).
    generation: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Listed {
    tools: Vec<Tool>,
    refused: Vec<Refused>,
}

impl std::fmt::Debug for McpSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSource").field("server", &self.supervisor.config.name).finish_non_exhaustive()
    }
}

impl McpSource {
    /// Checks `config`, starts the server and lists its tools: a server
    /// that cannot start or list is an error before anything runs.
    pub async fn start(config: McpServerConfig) -> Result<Self, SourceError> {
        config.check()?;
        if config.command.is_some() && !config.sandbox.confined() {
            tracing::warn!(
                server = %config.name,
                "mcp server '{}' runs unconfined (sandbox.mode = \"off\"): it may read, write and connect to whatever lovia may",
                config.name
            );
        }
        let supervisor = Arc::new(Supervisor::new(config));
        supervisor.start().await?;
        let source = Self { supervisor, listed: Mutex::new(Listed::default()), generation: Default::default() };
        source.relist().await?;
        Ok(source)
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.supervisor.config.name
    }

    /// Whether the server is configured with `defer = true`.
    pub fn deferred(&self) -> bool {
        self.supervisor.config.defer
    }

    /// The prefix of its tools' names.
    pub(crate) fn prefix(&self) -> String {
        self.supervisor.config.prefix()
    }

    /// The server's own name of `name` (a listed tool's name).
    pub(crate) fn raw_name(&self, name: &str) -> String {
        name.strip_prefix(self.prefix().as_str()).unwrap_or(name).to_owned()
    }

    /// Whether a call of the listed tool `name` with `arguments` asks for
    /// approval; false for a name it does not list.
    pub(crate) fn asks(&self, name: &str, arguments: &serde_json::Value) -> bool {
        let listed = self.listed.lock().unwrap_or_else(|p| p.into_inner()).tools.iter().any(|t| t.name() == name);
        listed && self.supervisor.config.needs_approval.asks(&self.raw_name(name), arguments)
    }

    /// The tools as last listed, in the server's order.
    pub fn tools(&self) -> Vec<Tool> {
        self.listed.lock().unwrap_or_else(|p| p.into_inner()).tools.clone()
    }

    /// The listed tools lovia did not take, and why.
    pub fn refused(&self) -> Vec<Refused> {
        self.listed.lock().unwrap_or_else(|p| p.into_inner()).refused.clone()
    }

    /// Lists the tools again if the server announced a change (or was
    /// restarted) since the last listing; true when the list was replaced.
    /// A failed listing keeps the old tools (their calls fail and restart
    /// the server) and is logged.
    pub async fn refresh(&self) -> bool {
        // rmcp handles a notification on a task of its own: let one that
        // arrived with the turn's last result land before the flag is read.
        tokio::task::yield_now().await;
        if !self.supervisor.changed.load(Ordering::SeqCst) {
            return false;
        }
        match self.relist().await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(server = %self.server(), "{e}");
                false
            }
        }
    }

    async fn relist(&self) -> Result<(), SourceError> {
        let config = &self.supervisor.config;
        let raws = self
            .supervisor
            .list()
            .await
            .map_err(|e| SourceError::List { server: config.name.clone(), reason: e.reason })?;
        let mut listed = Listed::default();
        let mut names = HashSet::new();
        for (i, raw) in raws.iter().enumerate() {
            let raw_name = raw.get("name").and_then(serde_json::Value::as_str).unwrap_or_default();
            if !config.selects(raw_name) {
                continue;
            }
            if i >= MAX_TOOLS_PER_SERVER {
                listed.refused.push(Refused {
                    tool: raw_name.chars().take(80).collect(),
                    reason: format!("the server lists more than {MAX_TOOLS_PER_SERVER} tools"),
                });
                break;
            }
            if !names.insert(raw_name.to_owned()) {
                listed.refused.push(Refused {
                    tool: raw_name.chars().take(80).collect(),
                    reason: "the server lists this name twice; the first is kept".into(),
                });
                continue;
            }
            match adapter::adapt(&self.supervisor, raw) {
                Ok(tool) => listed.tools.push(tool),
                Err(refused) => listed.refused.push(refused),
            }
        }
        for r in &listed.refused {
            tracing::warn!(server = %config.name, tool = %r.tool, "MCP tool refused: {}", r.reason);
        }
        *self.listed.lock().unwrap_or_else(|p| p.into_inner()) = listed;
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// An MCP server: its tools as last listed, refreshed before each model
/// turn (its `notifications/tools/list_changed`, or its restart).
impl Capability for McpSource {
    fn name(&self) -> String {
        format!("MCP server '{}'", self.server())
    }

    fn source(&self) -> ToolSource {
        ToolSource::Mcp(self.server().to_owned())
    }

    fn tools(&self) -> Vec<Tool> {
        McpSource::tools(self)
    }

    fn refresh(&self) -> BoxFuture<'_, bool> {
        Box::pin(McpSource::refresh(self))
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}
