//! `lovia serve`: the tool host as a multi-tenant HTTP service (axum).
//!
//! Every `/api` route needs `Authorization: Bearer <key>`; the key's
//! SHA-256 picks the tenant, before any of the body is read (`door`). A
//! tenant sees and calls only its own tools: another tenant's tool is a 404,
//! exactly like a tool that does not exist.
//!
//! - `GET /healthz` → `ok` (liveness: the process answers)
//! - `GET /readyz` → `ready`, or 503 `not ready: <reason>` while the store
//!   is unreachable, new uploads could not be read, or the service drains
//! - `GET /metrics` → Prometheus text (calls, errors, latency, in flight,
//!   refusals), with the `metrics_token`, or to anyone with `metrics_public`
//! - `GET /api/tools` → the tenant's tools in OpenAI's function format
//! - `GET /api/status` → whether the tenant's MCP servers are up (one that
//!   did not start is retried in the background, its error shown here)
//! - `POST /api/tools/{name}/call`, body = the arguments as JSON →
//!   `{"output": "...", "is_error": false}`: the string the model would see,
//!   after the executor's checks, timeout, rendering and truncation.
//!
//! - `POST /api/chat`, body `{session_id?, input, agent?}` → an SSE stream
//!   of the run: `run_started`, `text_delta`, `tool_call`, `tool_result`,
//!   `tool_progress`, `approval_required`, `question`, `context_compacted`,
//!   `handoff`, `error`, `run_completed`. Without `input`, it attaches to the session's run in
//!   progress (re-emitting pending approvals) or resumes an interrupted one.
//! - `POST /api/chat/approve`, `{session_id, call_id, decision}` →
//!   `{"ok": true}` or 404 `no pending approval matches`.
//! - `POST /api/chat/answer`, `{session_id, answer}` (a string, or the
//!   chosen labels) → `{"ok": true}`, or 404 `no question channel` (the
//!   agent has no `ask_human`) / `no pending question matches`;
//!   `GET /api/questions` → the tenant's open questions.
//! - `POST /api/chat/cancel`, `{session_id}` → cancels the session's run.
//! - `GET /api/chat/{session_id}` → the session's transcript and status.
//! - `GET /api/chat?limit=&before=` → a page of the tenant's sessions from the run store, newest first;
//!   `GET /api/approvals` → its pending approvals; `GET /api/tools/detailed`
//!   → its tools with hints, limits, grants and plugin digest;
//!   `GET /api/metrics` → its own metrics as JSON, with its calls per minute
//!   as the service counted them (all for the console).
//! - `GET /console` → the web console (docs/console.md), no key needed to
//!   load it: it asks for one and sends it on every `/api` request.
//! - `POST /api/plugins`, body = a `.wasm` component → validated, compiled,
//!   cached and added to the tenant, with nothing granted.
//! - `/mcp` (POST, GET, DELETE) → the tenant's tools over MCP streamable
//!   HTTP, with the same quotas, metrics and approvals (`mcp`).
//!
//! Sessions are the tenant's own: another tenant's session id is a 404.

mod audit;
mod auth;
mod call_rate;
mod chat;
mod config;
mod console;
mod direct;
mod door;
mod error;
mod lease;
mod limits;
mod listener;
mod mcp;
mod mcp_sources;
mod metrics;
mod model;
mod notifications;
mod offer;
mod question;
mod quota;
mod relay;
mod remote;
mod response;
mod routes;
mod shared_counts;
mod sse;
mod start;
mod stored;
mod stores;
mod takeover;
mod upload;
mod upload_sync;
mod workspace;

/// The embedders' pages, whose Rust snippets rustdoc compiles as this
/// crate's doctests: its dependencies (the host, the runner, the MCP server,
/// telemetry, axum, tokio, tracing, serde_json) cover every snippet, so a snippet that
/// drifts from the API fails `cargo test --doc -p lovia-serve`.
#[cfg(doctest)]
mod embedder_docs {
    #[doc = include_str!("../../../docs/applications.md")]
    mod applications {}
    #[doc = include_str!("../../../docs/mcp.md")]
    mod mcp {}
    #[doc = include_str!("../../../docs/telemetry.md")]
    mod telemetry {}
}

pub use audit::{AuditAction, AuditEntry, KEEP_PER_TENANT, MAX_READ, read_trail};
pub use auth::hash_key;
pub use config::{
    AgentConfig, ConfigRuleError, OciConfig, PluginEntry, ProviderChoice, ProviderConfig, ServeConfig,
    ServeConfigError, SignaturesConfig, TenantConfig, TenantTelemetry, TenantWeb, TenantWorkspace,
};
pub use lease::LeaseError;
pub use listener::{Connection, ConnectionLimits, LimitedListener, LimitedStream};
pub use shared_counts::SharedCountError;
pub use stored::PluginStoreError;

pub use error::ServeError;

/// The body of `POST /api/tools/{name}/call` is limited to this many bytes.
pub const MAX_ARGUMENTS_BYTES: usize = 1 << 20;

use lovia_host::Host;
use lovia_host::Toolset;
use lovia_host::exec::Executor;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::Semaphore;

/// A running service's state: the tenants with their loaded plugins.
#[derive(Clone)]
pub struct Service {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) host: Host,
    /// Code mode's engine, compiled once when a tenant's agent has `code_mode`.
    pub(crate) code_engine: Option<Arc<lovia_code::CodeEngine>>,
    pub(crate) tenants: Vec<Tenant>,
    /// Key hash → index into `tenants` ([`auth`]).
    pub(crate) keys: HashMap<String, usize>,
    pub(crate) metrics: Arc<metrics::Metrics>,
    pub(crate) calls: AtomicU64,
    /// The run store, the uploads, the leases and the MCP request states.
    pub(crate) stores: stores::Stores,
    /// Runs in progress by (tenant index, session id).
    pub(crate) live: Mutex<HashMap<(usize, String), Arc<chat::LiveRun>>>,
    /// The config's service-wide bounds and timings.
    pub(crate) limits: limits::ServiceLimits,
    /// `[telemetry]`, for the trace UI's link of a run.
    pub(crate) traces: lovia_telemetry::export::TelemetrySection,
    /// Bytes of request bodies held at once, across tenants ([`door`]).
    pub(crate) bodies: Arc<Semaphore>,
    /// Who may read `/metrics` and `/audit`.
    pub(crate) operator: auth::OperatorAccess,
    /// Where this process is in the stored uploads.
    pub(crate) uploads: upload_sync::UploadSync,
    /// Set by [`Service::drain`]: `/readyz` answers 503 from then on.
    pub(crate) draining: std::sync::atomic::AtomicBool,
    /// Bumped on each notification of new run events, for the readers of
    /// other replicas' runs (`relay`).
    pub(crate) events_seen: Arc<tokio::sync::watch::Sender<u64>>,
}

pub(crate) struct Tenant {
    pub(crate) index: usize,
    pub(crate) name: String,
    /// Where its spans go, with its content setting (docs/telemetry.md).
    pub(crate) telemetry: lovia_telemetry::Telemetry,
    /// Replaced whole when a plugin is uploaded ([`Tenant::replace_tools`]).
    pub(crate) executor: RwLock<Executor>,
    /// `executor`'s tools and then the web tools: what direct calls, the
    /// console and `/mcp` reach. Made when `executor` is, not per call.
    pub(crate) direct: RwLock<Executor>,
    /// Code mode at its direct route and `/mcp`, when its agent has it.
    pub(crate) code_mode: Option<offer::AdmittedCodeMode>,
    /// Its direct calls in flight, by id, for their cancellation.
    pub(crate) direct_calls: direct::DirectCalls,
    /// The MCP servers' list generation `direct` was built from.
    pub(crate) direct_generation: std::sync::atomic::AtomicU64,
    /// Its MCP servers (their tools are in `executor` as listed at start,
    /// for the uploads' name checks; the doors take them from the servers).
    pub(crate) mcp_servers: mcp_sources::TenantSources,
    pub(crate) model: model::TenantModel,
    pub(crate) agent: config::AgentConfig,
    /// Its runs here, and their bound across replicas.
    pub(crate) runs: chat::TenantRuns,
    /// With `fuel_per_minute`, each call's fuel unless its plugin sets one:
    /// `fuel_per_minute / max_concurrent_calls`.
    pub(crate) fuel_cap: Option<u64>,
    /// What bounds its uploads.
    pub(crate) uploads: upload::TenantUploads,
    pub(crate) quota: Arc<quota::Quota>,
    /// Bytes of this tenant's request bodies held at once ([`door`]).
    pub(crate) bodies: Arc<Semaphore>,
    /// Its `/mcp`.
    pub(crate) mcp: mcp::TenantMcp,
    /// Its chat workspaces, with a `[tenants.workspace]` table.
    pub(crate) workspaces: Option<Arc<workspace::TenantWorkspaces>>,
    /// Its web tools, with a `[tenants.web]` table: one page reader for all
    /// its chats.
    pub(crate) web_tools: Vec<lovia_host::Tool>,
}

/// Uploads compiling at once across all tenants: one per core of the
/// machines lovia is sized for, so calls keep a core while uploads compile.
pub(crate) const COMPILE_SLOTS: usize = 2;

impl Service {
    /// the config it runs; `None` without a tenant.
    pub fn first_steps(&self) -> Option<FirstSteps> {
        let tenant = self.inner.tenants.first()?;
        let exec = tenant.executor();
        let tool = exec.tools().iter().next().map(|t| (t.name().to_owned(), t.spec().parameters.clone()));
        let chats = !matches!(tenant.model, model::TenantModel::Missing(_));
        Some(FirstSteps { tenant: tenant.name.clone(), tool, chats })
    }

    /// Marks the service as stopping: `/readyz` answers 503 `draining`, so a
    /// load balancer sends no new requests while those in flight finish.
    pub fn drain(&self) {
        self.inner.draining.store(true, Ordering::Release);
    }

    /// Writes `entry` to the audit trail and the log; a store that fails
    /// loses the entry (a warning says so), never the request.
    pub(crate) async fn audit(&self, entry: audit::AuditEntry) {
        tracing::info!(
            tenant = %entry.tenant, action = ?entry.action, source = %entry.source, digest = ?entry.digest,
            signer = ?entry.signer, outcome = %entry.outcome, "audit"
        );
        if let Err(e) = self.inner.stores.plugins.record(entry).await {
            tracing::warn!(error = %e, "the audit trail could not be written");
        }
    }
}

/// What a first try of a service can call ([`Service::first_steps`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FirstSteps {
    /// The first tenant's name.
    pub tenant: String,
    /// Its first tool: name and parameters schema.
    pub tool: Option<(String, serde_json::Value)>,
    /// Whether its chats have a model.
    pub chats: bool,
}

impl Tenant {
    /// The tenant's tools as they are now.
    pub(crate) fn executor(&self) -> Executor {
        self.executor.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether `name` is taken by a tool the tenant's chats add: `ask_human`,
    /// `run_code`, or a workspace tool, as its agent has them.
    pub(crate) fn reserved_name(&self, name: &str) -> bool {
        (self.agent.ask_human && name == lovia_host::human::ASK_HUMAN)
            || (self.agent.code_mode && name == lovia_code::RUN_CODE)
            || (self.workspaces.is_some() && lovia_workspace::TOOL_NAMES.contains(&name))
    }

    /// The tools a direct call (and the console's Tools tab) reaches: the
    /// capabilities every door of the tenant shares ([`offer`]).
    pub(crate) fn direct_executor(&self) -> Executor {
        self.direct.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Makes `tools` the tenant's, in `current` (its executor, write-locked
    /// by the caller, so that two changes reach the direct tools and `/mcp`
    /// in the order they were made).
    pub(crate) fn replace_tools(&self, current: &mut Executor, tools: Toolset) {
        *current = Executor::new(tools, current.settings().clone());
        self.rebuild_direct(current);
    }
}
