//! lovia's host: loads tool plugins (WebAssembly components implementing
//! `lovia:tools/tool-plugin`), validates the model's arguments against each
//! tool's JSON Schema, runs every call in a fresh sandboxed instance, and turns
//! every outcome into the exact string the model sees.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use lovia_host::{CallRequest, Host, HostConfig};
//!
//! let host = Host::new(HostConfig::default())?;
//! let plugin = host.load_file("docs.wasm").await?;
//! let outcome = plugin.invoke(&CallRequest::new("search_docs", r#"{"query": "timeouts"}"#)).await;
//! println!("{}", outcome.model_output());
//! # Ok(())
//! # }
//! ```

pub mod approval;
mod bindings;
pub mod engine;
pub mod error;
pub mod exec;
pub mod plugin;
pub mod policy;
pub mod runner;
pub mod sandbox;
pub mod serve;
pub mod tool;

pub use approval::{ApprovalChannel, ApprovalDecision, ApprovalHandler, ApprovalRequest, HandlerAnswer, NeedsApproval};
pub use engine::{Host, HostConfig};
pub use error::{HostError, LoadError};
pub use exec::{
    Budget, BudgetMeter, CancelToken, EventSink, ExecSettings, Executor, RunState, ToolCall, ToolEvent,
    ToolResultEntry, TurnError, Usage,
};
pub use plugin::{InstanceMode, Plugin, PluginInfo, manifest::Manifest};
pub use policy::{Next, Policy, RateLimit, Redact, ResultCache};
pub use sandbox::{
    CallContext, CallLimits, HttpOrigin, InvalidOrigin, MemoryStore, SessionStore, SqliteStore, StoreQuota,
    is_special_address,
};
pub use tool::{
    ApprovalMode, ToolHints, ToolSpec,
    args::{ArgumentError, ArgumentValidator},
    def::{Tool, ToolOutput},
    outcome::{CallOutcome, CallRequest, Failure},
    registry::{NameConflict, ToolSource, Toolset},
    render::render_json,
    render::{Rendered, Renderer},
    truncate::{DEFAULT_MAX_OUTPUT_CHARS, truncate},
};
