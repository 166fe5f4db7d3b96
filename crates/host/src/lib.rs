//! lovia's host: loads tool plugins (WebAssembly components implementing
//! `lovia:tools/tool-plugin`), validates the model's arguments against each
//! tool's JSON Schema, runs every call in a fresh sandboxed instance, and turns
//! every outcome into the exact string the model sees.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use lovia_host::{ExecSettings, Executor, Host, HostConfig, Tool, ToolSource, Toolset};
//!
//! let plugin = Host::new(HostConfig::default())?.load_file("docs.wasm").await?;
//! let tools = Toolset::new().with(ToolSource::Plugin, Tool::from_plugin(&plugin))?;
//! let exec = Executor::new(tools, ExecSettings::default());
//! let result = exec.call_tool("search_docs", r#"{"query": "timeouts"}"#).await?;
//! println!("{}", result.output);
//! # Ok(())
//! # }
//! ```
//!
//! The executor is the one path for a call: it applies approval, policies,
//! retries, timeouts, rendering and truncation ([`Executor::call`]).

pub mod approval;
pub mod args;
mod artifacts;
mod bindings;
pub mod call;
pub mod capability;
pub mod compile_worker;
pub mod engine;
pub mod error;
pub mod exec;
pub mod human;
mod live;
pub mod plugin;
pub mod policy;
pub mod sandbox;
mod setters;

pub use approval::{ApprovalChannel, ApprovalDecision, ApprovalHandler, ApprovalRequest, HandlerAnswer, NeedsApproval};
pub use args::{ArgumentError, ArgumentValidator, SchemaError};
pub use bindings::ContractVersion;
pub use call::{
    ApprovalMode, BoxFuture, CallContext, CallOutcome, ContentPart, DEFAULT_MAX_OUTPUT_CHARS, ErrorKind, FENCE_ENDED,
    Failure, Fence, LeaseToken, LogLevel, LogSink, ProgressSink, Rendered, Renderer, ToolHints, ToolOutput, ToolSpec,
    render_json, render_parts, truncate,
};
pub use capability::{Capability, Composition};
pub use engine::{Host, HostConfig};
pub use error::{CacheProblem, HostError, InvalidComponent, LoadError};
pub use exec::{
    Budget, BudgetExceeded, BudgetMeter, CancelToken, EventSink, ExecSettings, Executor, InvalidTool, NameConflict,
    RunState, Tool, ToolCall, ToolEvent, ToolResultEntry, ToolSource, Toolset, TurnError, Usage,
};
pub use plugin::{ApprovalCheckError, CallRequest, InstanceMode, Plugin, PluginInfo, manifest::Manifest};
pub use policy::{Next, Policy, RateLimit, Redact, ResultCache};
#[cfg(feature = "sqlite-session-store")]
pub use sandbox::SqliteStore;
pub use sandbox::{CallLimits, HttpOrigin, InvalidOrigin, MemoryStore, SessionStore, StoreQuota, is_special_address};
