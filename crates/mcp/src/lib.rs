//! lovia-mcp: serves a lovia [`lovia_host::Executor`]'s sandboxed tools to Model Context
//! Protocol clients (Claude Desktop and Code, Cursor, VS Code, any MCP
//! client) over stdio or streamable HTTP, through the official Rust SDK
//! (`rmcp`).
//!
//! Every `tools/call` is one [`lovia_host::ToolCall`] through the executor:
//! the client reads exactly the string a model reads anywhere else
//! (docs/mcp.md). A call that needs approval asks the client (elicitation
//! on 2025-11-25, an `input_required` round trip on 2026-07-28) and runs only
//! on an explicit accept; anything else gets lovia's not-approved result.
//!
//! The other way round, [`source`] makes external MCP servers (started as a
//! command or reached by URL) tool sources: the tools they list join a
//! toolset as host-native tools, under the executor's semantics.
//!
//! Two features, both on by default: `server` (the server side, [`McpServer`])
//! and `client` ([`source`]); an embedder of one does not compile the other.

// One condition for the server's modules and exports, not one attribute
// on each (cfg-if, already in the build through tokio and wasmtime).
cfg_if::cfg_if! {
    if #[cfg(feature = "server")] {
        mod approve;
        mod call;
        mod catalog;
        mod elicit;
        mod hook;
        mod http;
        mod live;
        mod logging;
        mod loose;
        mod progress;
        mod question;
        mod redeemed;
        mod server;
        mod sessions;
        mod tasks;

        pub use catalog::CatalogError;
        pub use hook::{CallHook, CallOutcome, CallPermit, CallStart};
        pub use http::{DEFAULT_MAX_SESSIONS, DEFAULT_SSE_KEEP_ALIVE, Guarded, HttpOptions, McpHttpService};
        pub use progress::PROGRESS_INTERVAL;
        pub use question::{DEFAULT_QUESTION_TIMEOUT, McpQuestions};
        pub use redeemed::{MAX_REDEEMED_IN_MEMORY, RedeemedStates, StateKey};
        pub use server::{MAX_APPROVAL_TIMEOUT, McpOptions, McpServer, NewServerError, ServeError, TOOLS_PAGE};
        pub use sessions::{BoundedSessions, IDLE_SESSION, SessionLimitReached, SessionsError};
        pub use tasks::{
            Created, DEFAULT_MAX_TASKS, InMemoryTasks, KEPT_AFTER_END_MS, MAX_TASK_TTL, MAX_TASKS_IN_MEMORY, MIN_TASK_TTL,
            TASK_POLL_INTERVAL, TASKS_PAGE, TaskOptions, TaskRow, TaskStatus, TaskStore, TaskStoreError, TaskWire,
        };
    }
}
#[cfg(feature = "client")]
pub mod source;
mod trace;
