//! lovia-mcp: serves a lovia [`Executor`]'s sandboxed tools to Model Context
//! Protocol clients (Claude Desktop and Code, Cursor, VS Code, any MCP
//! client) over stdio or streamable HTTP, through the official Rust SDK
//! (`rmcp`).
//!
//! Every `tools/call` is one [`lovia_host::ToolCall`] through the executor:
//! the client reads exactly the string a model reads anywhere else
//! (docs/mcp.md). A call that needs approval is refused with lovia's
//! not-approved result, because this slice cannot ask the client yet.

mod call;
mod catalog;

pub use catalog::CatalogError;

use lovia_host::{Executor, ToolCall};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why serving stopped or could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The MCP session could not start (the client's `initialize` failed or
    /// the transport closed first).
    #[error("the MCP session did not start: {reason}")]
    Start {
        /// What went wrong.
        reason: String,
    },
    /// The session's task ended abnormally.
    #[error("the MCP session ended abnormally: {reason}")]
    Session {
        /// What went wrong.
        reason: String,
    },
}

/// An MCP server over one executor's tools. Cheap to clone: every clone
/// shares the executor and the tool catalog.
#[derive(Clone)]
pub struct McpServer {
    exec: Executor,
    /// Built once: a listing is the same bytes for every client.
    tools: Arc<Vec<Tool>>,
    /// Numbers the calls: lovia call ids must be unique within a run, and
    /// the run of each call is its own.
    next_call: Arc<AtomicU64>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").field("tools", &self.tools.len()).finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server for the tools of `exec`, listed in the toolset's order.
    pub fn new(exec: Executor) -> Result<Self, CatalogError> {
        let tools = catalog::describe(exec.tools())?;
        Ok(Self { exec, tools: Arc::new(tools), next_call: Arc::new(AtomicU64::new(1)) })
    }

    /// The tools as `tools/list` gives them.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Serves one client on this process's stdin and stdout until the client
    /// closes them. Nothing else may write to stdout: it is the protocol.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let service =
            self.serve(rmcp::transport::stdio()).await.map_err(|e| ServeError::Start { reason: e.to_string() })?;
        service.waiting().await.map_err(|e| ServeError::Session { reason: e.to_string() })?;
        Ok(())
    }

    /// A tower service answering streamable HTTP (mount it at `/mcp`).
    /// `allowed_hosts` is the `Host` allowlist against DNS rebinding
    /// [default in [`HttpOptions`]: loopback names only].
    pub fn http_service(self, options: HttpOptions) -> StreamableHttpService<McpServer, LocalSessionManager> {
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(options.allowed_hosts)
            .with_cancellation_token(options.shutdown);
        StreamableHttpService::new(move || Ok(self.clone()), Arc::new(LocalSessionManager::default()), config)
    }
}

/// Options of [`McpServer::http_service`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Hosts (`name` or `name:port`) accepted in the `Host` header.
    /// Default: `localhost`, `127.0.0.1`, `::1`, so a web page cannot reach
    /// a local server through DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// Cancelled to end every session and refuse new requests. Default: a
    /// fresh token nobody cancels.
    pub shutdown: tokio_util::sync::CancellationToken,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            shutdown: tokio_util::sync::CancellationToken::new(),
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("lovia", env!("CARGO_PKG_VERSION")))
            .with_instructions("Tools running as sandboxed WebAssembly components under lovia.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    // No `get_tool`: rmcp would validate arguments against the schema itself
    // and answer with a protocol error; lovia validates, and an invalid call
    // is an `isError` result with lovia's exact message.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let n = self.next_call.fetch_add(1, Ordering::Relaxed);
        // The argument text as the client sent it, re-serialised: an absent
        // `arguments` is the empty text lovia reads as `{}`.
        let arguments = request.arguments.map(|a| serde_json::Value::Object(a).to_string()).unwrap_or_default();
        let token =
            context.meta.get_progress_token().or_else(|| request.meta.as_ref().and_then(|m| m.get_progress_token()));
        let call = call::Request {
            call: ToolCall::new(format!("mcp_{n}"), request.name.into_owned(), arguments),
            cancelled: context.ct.clone(),
            progress: token.map(|t| (context.peer.clone(), t)),
        };
        Ok(call::run(&self.exec, call).await.into())
    }
}
