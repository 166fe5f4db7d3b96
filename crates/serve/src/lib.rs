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
mod shared_counts;
mod sse;
mod stored;
mod stores;
mod takeover;
mod upload;
mod upload_sync;
mod workspace;

/// The embedders' pages, whose Rust snippets rustdoc compiles as this
/// crate's doctests: its dependencies (the host, the runner, the MCP server,
/// axum, tokio, tracing, serde_json) cover every snippet, so a snippet that
/// drifts from the API fails `cargo test --doc -p lovia-serve`.
#[cfg(doctest)]
mod embedder_docs {
    #[doc = include_str!("../../../docs/applications.md")]
    mod applications {}
    #[doc = include_str!("../../../docs/mcp.md")]
    mod mcp {}
}

pub use audit::{AuditAction, AuditEntry, KEEP_PER_TENANT, MAX_READ, read_trail};
pub use auth::hash_key;
pub use config::{
    AgentConfig, ConfigRuleError, PluginEntry, ProviderChoice, ProviderConfig, ServeConfig, ServeConfigError,
    ShellSandboxChoice, TenantConfig, TenantWeb, TenantWorkspace, WorkspaceMode,
};
pub use lease::LeaseError;
pub use listener::{Connection, ConnectionLimits, LimitedListener, LimitedStream};
pub use shared_counts::SharedCountError;
pub use stored::PluginStoreError;

use auth::{Caller, Operator};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, get, post};
use axum::{Json, Router};
use lovia_host::Host;
use lovia_host::Tool;
use lovia_host::call::text;
use lovia_host::error::LoadError;
use lovia_host::exec::{ExecSettings, Executor};
use lovia_host::{ToolSource, Toolset};
use lovia_runner::{RunStore, StoreError};
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::Semaphore;

/// The body of `POST /api/tools/{name}/call` is limited to this many bytes.
pub const MAX_ARGUMENTS_BYTES: usize = 1 << 20;

/// A running service's state: the tenants with their loaded plugins.
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

struct Inner {
    host: Host,
    /// Code mode's engine, compiled once when a tenant's agent has `code_mode`.
    code_engine: Option<Arc<lovia_code::CodeEngine>>,
    tenants: Vec<Tenant>,
    /// Key hash → index into `tenants` ([`auth`]).
    keys: HashMap<String, usize>,
    metrics: Arc<metrics::Metrics>,
    calls: AtomicU64,
    /// The run store, the uploads, the leases and the MCP request states.
    stores: stores::Stores,
    /// Runs in progress by (tenant index, session id).
    live: Mutex<HashMap<(usize, String), Arc<chat::LiveRun>>>,
    /// The config's service-wide bounds and timings.
    limits: limits::ServiceLimits,
    /// Bytes of request bodies held at once, across tenants ([`door`]).
    bodies: Arc<Semaphore>,
    /// Who may read `/metrics` and `/audit`.
    operator: auth::OperatorAccess,
    /// Where this process is in the stored uploads.
    uploads: upload_sync::UploadSync,
    /// Set by [`Service::drain`]: `/readyz` answers 503 from then on.
    draining: std::sync::atomic::AtomicBool,
    /// Bumped on each notification of new run events, for the readers of
    /// other replicas' runs (`relay`).
    events_seen: Arc<tokio::sync::watch::Sender<u64>>,
}

struct Tenant {
    index: usize,
    name: String,
    /// Replaced whole when a plugin is uploaded ([`Tenant::replace_tools`]).
    executor: RwLock<Executor>,
    /// `executor`'s tools and then the web tools: what direct calls, the
    /// console and `/mcp` reach. Made when `executor` is, not per call.
    direct: RwLock<Executor>,
    /// Code mode at its direct route and `/mcp`, when its agent has it.
    code_mode: Option<offer::AdmittedCodeMode>,
    /// Its direct calls in flight, by id, for their cancellation.
    direct_calls: direct::DirectCalls,
    /// The MCP servers' list generation `direct` was built from.
    direct_generation: std::sync::atomic::AtomicU64,
    /// Its MCP servers (their tools are in `executor` as listed at start,
    /// for the uploads' name checks; the doors take them from the servers).
    mcp_servers: mcp_sources::TenantSources,
    model: model::TenantModel,
    agent: config::AgentConfig,
    /// Its runs here, and their bound across replicas.
    runs: chat::TenantRuns,
    /// With `fuel_per_minute`, each call's fuel unless its plugin sets one:
    /// `fuel_per_minute / max_concurrent_calls`.
    fuel_cap: Option<u64>,
    /// What bounds its uploads.
    uploads: upload::TenantUploads,
    quota: Arc<quota::Quota>,
    /// Bytes of this tenant's request bodies held at once ([`door`]).
    bodies: Arc<Semaphore>,
    /// Its `/mcp`.
    mcp: mcp::TenantMcp,
    /// Its chat workspaces, with a `[tenants.workspace]` table.
    workspaces: Option<Arc<workspace::TenantWorkspaces>>,
    /// Its web tools, with a `[tenants.web]` table: one page reader for all
    /// its chats.
    web_tools: Vec<lovia_host::Tool>,
}

/// Uploads compiling at once across all tenants: one per core of the
/// machines lovia is sized for, so calls keep a core while uploads compile.
pub(crate) const COMPILE_SLOTS: usize = 2;

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Code mode's engine did not compile (a tenant's agent has `code_mode`).
    #[error("code mode: {0}")]
    CodeMode(#[from] lovia_code::CodeModeError),
    /// A plugin failed to load.
    #[error("tenant {tenant}: {source}")]
    Load {
        /// The tenant whose plugin it is.
        tenant: String,
        /// The load error.
        source: LoadError,
    },
    /// An MCP server of the tenant did not start or list its tools.
    #[error("tenant {tenant}: {source}")]
    McpServer {
        /// The tenant.
        tenant: String,
        /// Why.
        source: lovia_mcp::source::SourceError,
    },
    /// Two plugins (or a plugin and an MCP server) of one tenant declare the same tool name.
    #[error("tenant {tenant}: {reason}")]
    Conflict {
        /// The tenant.
        tenant: String,
        /// Which name.
        reason: String,
    },
    /// A tenant's `[tenants.web]` table cannot be set up (a key variable
    /// that is not set, an endpoint that is not a URL).
    #[error("tenant {tenant}: [tenants.web]: {reason}")]
    Web {
        /// The tenant.
        tenant: String,
        /// What is wrong.
        reason: String,
    },
    /// A tenant's workspace directory could not be created.
    #[error("tenant {tenant}: cannot create its workspace directory {path}: {source}")]
    Workspace {
        /// The tenant.
        tenant: String,
        /// The directory.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A configured plugin could not be pulled (`oci://`) or was refused
    /// by `[signatures]`, or a key of `[signatures]` or of a tenant's
    /// `upload_signers` cannot be read.
    #[error("tenant {tenant}: {source}")]
    Supply {
        /// The tenant (`*` for the service's `[signatures]`).
        tenant: String,
        /// Why.
        source: lovia_supply::SupplyError,
    },
    /// A tenant's scripted model cannot be read: its file is missing or a
    /// reply in it is not one a script may have.
    #[error("tenant {tenant}: the scripted model: {reason}")]
    Model {
        /// The tenant.
        tenant: String,
        /// What is wrong, naming the reply and the key.
        reason: String,
    },
    /// A tenant sets `fuel_per_minute` on a host that does not meter fuel.
    #[error("tenant {tenant}: fuel_per_minute needs a host with fuel metering (HostConfig::fuel_metering)")]
    FuelMetering {
        /// The tenant.
        tenant: String,
    },
    /// The session store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored uploads could not be read.
    #[error(transparent)]
    Plugins(#[from] PluginStoreError),
    /// The run leases could not be opened.
    #[error(transparent)]
    Leases(#[from] LeaseError),
    /// The replicas' shared call counts could not be opened.
    #[error(transparent)]
    SharedCounts(#[from] SharedCountError),
    /// A tenant's `/mcp` could not be made.
    #[error("tenant {tenant}: /mcp: {reason}")]
    Mcp {
        /// The tenant.
        tenant: String,
        /// What failed.
        reason: String,
    },
    /// The MCP request states shared by the replicas could not be opened.
    #[error("MCP request states in {location}: {message}")]
    McpStates {
        /// The URL without its password.
        location: String,
        /// What failed.
        message: String,
    },
}

impl Service {
    /// Loads every tenant's plugins on `host` (its configured ones and those
    /// uploaded before, from the store), opens the session store and resumes
    /// the runs a previous process left unfinished. With a PostgreSQL store
    /// it also follows the uploads of other replicas (docs/replicas.md).
    pub async fn new(host: &Host, config: &ServeConfig) -> Result<Service, ServeError> {
        let url = config.store.clone().unwrap_or_else(|| "lovia.db".into());
        let stores = stores::Stores::open(&url, Duration::from_millis(config.run_lease_ms)).await?;
        let service = Self::build(host, config, stores).await?;
        service.read_uploads().await?;
        service.retry_mcp_servers();
        service.keep_leases();
        service.follow_uploads();
        service.resume_unfinished().await;
        Ok(service)
    }

    /// [`Service::new`] with any store, resuming nothing; uploads are kept in
    /// this process's memory only.
    pub async fn with_store(
        host: &Host,
        config: &ServeConfig,
        store: Arc<dyn RunStore>,
    ) -> Result<Service, ServeError> {
        let service = Self::build(host, config, stores::Stores::beside(store)).await?;
        service.retry_mcp_servers();
        Ok(service)
    }

    /// Starts again, in the background, each tenant's MCP server that did
    /// not start, first after [`mcp_sources::RETRY_FIRST`] and then twice as
    /// long each time up to [`mcp_sources::RETRY_MAX`]; when one comes up,
    /// its tools join the tenant's tools (the direct routes, `/mcp` and
    /// chats). Until the service is dropped.
    fn retry_mcp_servers(&self) {
        for tenant in &self.inner.tenants {
            for config in tenant.mcp_servers.waiting() {
                let service = Arc::downgrade(&self.inner);
                let index = tenant.index;
                tokio::spawn(async move {
                    let mut wait = mcp_sources::RETRY_FIRST;
                    loop {
                        tokio::time::sleep(wait).await;
                        if service.strong_count() == 0 {
                            return;
                        }
                        let started = lovia_mcp::source::McpSource::start(config.clone()).await;
                        let Some(inner) = service.upgrade() else { return };
                        let tenant = &inner.tenants[index];
                        let source = match started {
                            Ok(source) => source,
                            Err(e) => {
                                tracing::warn!(
                                    tenant = %tenant.name, server = %config.name, error = %e, retry_in = ?(wait * 2).min(mcp_sources::RETRY_MAX),
                                    "MCP server still does not start"
                                );
                                tenant.mcp_servers.failed_again(&config.name, e.to_string());
                                wait = (wait * 2).min(mcp_sources::RETRY_MAX);
                                continue;
                            }
                        };
                        let mut current = tenant.executor.write().unwrap_or_else(|e| e.into_inner());
                        let mut set: Toolset = current.tools().clone();
                        match tenant.mcp_servers.started(source, &mut set) {
                            Ok(()) => {
                                tenant.replace_tools(&mut current, set);
                                tracing::info!(tenant = %tenant.name, server = %config.name, "MCP server started; its tools are added");
                            }
                            Err(reason) => {
                                // A name another source now has: retrying
                                // will not change it; the operator must.
                                tracing::error!(tenant = %tenant.name, server = %config.name, %reason, "MCP server started but its tools cannot be added");
                                tenant.mcp_servers.failed_again(&config.name, reason);
                            }
                        }
                        return;
                    }
                });
            }
        }
    }

    async fn build(host: &Host, config: &ServeConfig, stores: stores::Stores) -> Result<Service, ServeError> {
        let plugins = stores.plugins.clone();
        let mut tenants = Vec::new();
        let metrics = Arc::new(metrics::Metrics::default());
        let mut keys = HashMap::new();
        let signatures = lovia_supply::SignaturePolicy::new(config.signatures.mode, &config.signatures.trusted_keys)
            .map_err(|source| ServeError::Supply { tenant: "*".into(), source })?;
        let mut oci = lovia_supply::oci::OciOptions::default();
        oci.cache_dir = config.oci.cache_dir.clone();
        oci.insecure_registries = config.oci.insecure_registries.clone();
        if signatures.mode == lovia_supply::SignatureMode::Off {
            tracing::warn!(
                "the configured plugins' signatures are not checked ([signatures] mode = \"off\", the default)"
            );
        }
        let code_engine = match config.tenants.iter().any(|t| t.agent.code_mode) {
            true => Some(Arc::new(lovia_code::CodeEngine::new_announcing(host, || {
                tracing::info!(
                    "compiling the code-mode engine (a few seconds; kept in the artifact cache for the next start)"
                )
            })?)),
            false => None,
        };
        for (index, t) in config.tenants.iter().enumerate() {
            let uploads = upload::TenantUploads::new(t)
                .map_err(|source| ServeError::Supply { tenant: t.name.clone(), source })?;
            if let Some(fuel) = t.fuel_per_minute {
                if !host.config().fuel_metering {
                    return Err(ServeError::FuelMetering { tenant: t.name.clone() });
                }
                host.tenant_fuel().limit_per_period(&t.name, fuel, Duration::from_secs(60));
            }
            host.guest_logs().limit(
                &t.name,
                lovia_host::sandbox::GuestLogLimits::new(t.guest_log_bytes_per_minute, t.guest_log_level),
            );
            host.cpu_shares().limit(&t.name, t.max_cpu_cores.unwrap_or_else(config::default_tenant_cores));
            let fuel_cap = t.fuel_per_minute.map(|fuel| (fuel / u64::from(t.max_concurrent_calls.max(1))).max(1));
            let mut tools = Toolset::new();
            for entry in &t.plugins {
                let mut plugin_config = entry.plugin_config();
                // Fuel is held from the tenant's budget before a call runs, and
                // an uncapped call would hold all of it, failing every call
                // beside it: each call gets an equal share of the minute's
                // fuel by default.
                if plugin_config.limits.fuel.is_none() {
                    plugin_config.limits.fuel = fuel_cap;
                }
                let plugin =
                    upload::load_configured(host, &entry.path, plugin_config, (&signatures, &oci), &plugins, &t.name)
                        .await?;
                tools
                    .add(ToolSource::Plugin, Tool::from_plugin(&plugin))
                    .map_err(|e| ServeError::Conflict { tenant: t.name.clone(), reason: e.to_string() })?;
            }
            let mcp_servers = mcp_sources::add(&t.name, &t.mcp_servers, &mut tools).await?;
            let settings = ExecSettings::default().with_agent("lovia-serve".into());
            for key in &t.api_keys {
                keys.insert(key.clone(), index);
            }
            let executor = Executor::new(tools, settings);
            let quota = Arc::new(quota::Quota::new(
                &t.name,
                t.max_concurrent_calls,
                t.calls_per_minute,
                metrics.clone(),
                stores.counts.clone(),
                t.fuel_per_minute.map(|fuel| (fuel, host.clone())),
            ));
            let web_tools = match &t.web {
                Some(web) => web_tools(web).map_err(|reason| ServeError::Web { tenant: t.name.clone(), reason })?,
                None => Vec::new(),
            };
            let chats_add = [
                t.agent.ask_human.then_some(lovia_host::human::ASK_HUMAN),
                t.agent.code_mode.then_some(lovia_code::RUN_CODE),
            ];
            if let Some(name) = chats_add.into_iter().flatten().find(|n| executor.tools().get(n).is_some()) {
                return Err(ServeError::Conflict {
                    tenant: t.name.clone(),
                    reason: format!(
                        "the tool {name} of a plugin or MCP server clashes with the tool of that name the tenant's chats have"
                    ),
                });
            }
            if let Some(tool) = web_tools.iter().find(|w| executor.tools().get(w.name()).is_some()) {
                return Err(ServeError::Conflict {
                    tenant: t.name.clone(),
                    reason: format!(
                        "the tool {} of a plugin or MCP server clashes with the web tool of that name",
                        tool.name()
                    ),
                });
            }
            let workspaces = match (&t.workspace, &config.workspaces_dir) {
                (Some(w), Some(dir)) => {
                    // The workspace's tools join each chat's table after the plugins'.
                    if let Some(name) = lovia_workspace::TOOL_NAMES.iter().find(|n| executor.tools().get(n).is_some()) {
                        return Err(ServeError::Conflict {
                            tenant: t.name.clone(),
                            reason: format!(
                                "the tool {name} of a plugin or MCP server clashes with the workspace's tool of that name"
                            ),
                        });
                    }
                    Some(workspace::TenantWorkspaces::new(dir, &t.name, w).map_err(|e| match e {
                        workspace::WorkspaceError::Create { path, source } => {
                            ServeError::Workspace { tenant: t.name.clone(), path, source }
                        }
                        other => ServeError::Workspace {
                            tenant: t.name.clone(),
                            path: dir.clone(),
                            source: std::io::Error::other(other.to_string()),
                        },
                    })?)
                }
                _ => None,
            };
            // `/mcp`'s one root, beside the chats' roots and under the same bounds.
            let mcp_workspace = match &workspaces {
                Some(w) => Some(w.open_for_mcp().map_err(|e| match e {
                    workspace::WorkspaceError::Create { path, source } => {
                        ServeError::Workspace { tenant: t.name.clone(), path, source }
                    }
                    other => ServeError::Workspace {
                        tenant: t.name.clone(),
                        path: config.workspaces_dir.clone().unwrap_or_default(),
                        source: std::io::Error::other(other.to_string()),
                    },
                })?),
                None => None,
            };
            // Code mode at the direct route and `/mcp`, as the tenant's chats have it.
            let code_mode = match (&code_engine, t.agent.code_mode) {
                (Some(engine), true) => Some(offer::AdmittedCodeMode { engine: engine.clone(), quota: quota.clone() }),
                _ => None,
            };
            let setup = mcp::Setup {
                tenant: &t.name,
                quota: quota.clone(),
                metrics: metrics.clone(),
                approval_timeout: Duration::from_secs(config.approval_timeout_secs),
                max_sessions: t.max_mcp_sessions,
                sse_keep_alive: Duration::from_secs(config.sse_keep_alive_secs.max(1)),
                shared: stores.mcp_states.as_deref(),
                questions: t.agent.ask_human.then(|| Duration::from_secs(config.question_timeout_secs.max(1))),
                workspace: mcp_workspace,
                code_mode: code_mode.clone(),
            };
            let shared = offer::shared_capabilities(&executor, &mcp_servers, &web_tools);
            let direct_capabilities = match &code_mode {
                Some(code_mode) => code_mode.add_to(&t.name, &shared),
                None => shared.clone(),
            };
            let direct = offer::direct_tools(&t.name, &direct_capabilities, &executor);
            let mcp = mcp::TenantMcp::new(&shared, &direct, setup)
                .map_err(|e| ServeError::Mcp { tenant: t.name.clone(), reason: e.to_string() })?;
            tenants.push(Tenant {
                index,
                name: t.name.clone(),
                executor: RwLock::new(executor),
                direct: RwLock::new(direct),
                direct_generation: shared.generation().into(),
                direct_calls: direct::DirectCalls::default(),
                code_mode,
                mcp_servers,
                model: model::TenantModel::from_config(&t.provider)
                    .map_err(|reason| ServeError::Model { tenant: t.name.clone(), reason })?,
                agent: t.agent.clone(),
                runs: chat::TenantRuns::new(t.max_concurrent_runs),
                fuel_cap,
                uploads,
                quota,
                bodies: door::budget(t.max_body_bytes_in_flight),
                mcp,
                workspaces,
                web_tools,
            });
        }
        // Idle session workspaces go after their tenant's retention; the sweep
        // ends with the service (it holds the workspaces weakly).
        workspace::TenantWorkspaces::spawn_sweeper(tenants.iter().filter_map(|t| t.workspaces.clone()).collect());
        Ok(Service {
            inner: Arc::new(Inner {
                host: host.clone(),
                code_engine,
                tenants,
                keys,
                metrics,
                calls: AtomicU64::new(0),
                live: Mutex::default(),
                limits: limits::ServiceLimits::from_config(config),
                bodies: door::budget(config.max_body_bytes_in_flight),
                operator: auth::OperatorAccess {
                    token_hash: config.metrics_token.clone(),
                    public: config.metrics_public,
                },
                uploads: upload_sync::UploadSync::default(),
                draining: Default::default(),
                events_seen: Arc::new(tokio::sync::watch::Sender::new(0)),
                stores,
            }),
        })
    }

    /// `listener` bounded by the config's connection limits
    /// (`max_connections`, `max_connections_per_ip`, `idle_connection_secs`,
    /// `first_byte_secs`, `request_head_secs`, `authenticated_connections_percent`):
    /// serve the [`Service::app`] on it with `axum::serve`.
    pub fn listener(&self, listener: tokio::net::TcpListener) -> LimitedListener {
        LimitedListener::new(listener, self.inner.limits.connections, self.inner.metrics.clone())
    }

    /// The routes, to serve on a [`Service::listener`]: each request carries
    /// its [`Connection`], so that a connection which presented a valid key
    /// may use the places kept for authenticated traffic.
    pub fn app(&self) -> axum::extract::connect_info::IntoMakeServiceWithConnectInfo<Router, Connection> {
        self.router().into_make_service_with_connect_info::<Connection>()
    }

    /// The routes (without [`Service::app`]'s connection: every connection
    /// then counts as unauthenticated).
    pub fn router(&self) -> Router {
        // Each group of `/api` routes has its own door, with its body limit:
        // the key is checked and the body read (into a reservation) there,
        // before any handler or body extractor runs.
        let door = |limit: usize, upload: bool| {
            axum::middleware::from_fn_with_state(door::Door { service: self.clone(), limit, upload }, door::admit)
        };
        let api = Router::new()
            .route("/api/tools", get(list_tools))
            .route("/api/tools/{name}/call", post(direct::call_tool))
            .route("/api/tools/calls/{id}", delete(direct::cancel_call))
            .route("/api/tools/detailed", get(console::tools))
            .route("/api/chat", post(chat::chat).get(console::sessions))
            .route("/api/approvals", get(console::approvals))
            .route("/api/metrics", get(console::metrics))
            .route("/api/status", get(status))
            .route("/api/audit", get(tenant_audit))
            .route("/api/chat/approve", post(chat::approve))
            .route("/api/chat/answer", post(chat::answer))
            .route("/api/questions", get(console::questions))
            .route("/api/chat/cancel", post(chat::cancel))
            .route("/api/chat/{session_id}", get(chat::transcript))
            .route("/mcp", any(mcp::serve))
            .route_layer(door(MAX_ARGUMENTS_BYTES, false));
        let uploads = Router::new()
            .route(
                "/api/plugins",
                post(upload::upload)
                    .layer(axum::extract::DefaultBodyLimit::max(self.inner.limits.max_plugin_bytes.saturating_add(1))),
            )
            .route_layer(door(self.inner.limits.max_plugin_bytes, true));
        Router::new()
            .route("/healthz", get(|| async { "ok\n" }))
            .route("/readyz", get(readyz))
            .route("/metrics", get(metrics_text))
            .route("/audit", get(operator_audit))
            .route("/console", get(console::index))
            .route("/console/", get(console::index))
            .route("/console/app.js", get(console::app_js))
            .route("/console/dom.js", get(console::dom_js))
            .route("/console/parts.js", get(console::parts_js))
            .route("/console/schema-form.js", get(console::schema_form_js))
            .route("/console/console.css", get(console::console_css))
            .route("/console/icon.svg", get(console::icon))
            .merge(api)
            .merge(uploads)
            .fallback(|| async { error(StatusCode::NOT_FOUND, "no such route") })
            .layer(axum::extract::DefaultBodyLimit::max(MAX_ARGUMENTS_BYTES))
            .with_state(self.clone())
    }

    /// What `lovia serve` shows at its start for a first try, taken from
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

/// How long `/readyz` waits for the store before it calls it unreachable.
const READY_STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /readyz`: 200 `ready` when this replica should get requests: the
/// store answers, the stored uploads are loaded (they are before the
/// service listens; this says whether the last read of new ones failed) and
/// it is not draining. Else 503 with the reason, for a load balancer's log.
async fn readyz(State(service): State<Service>) -> Response {
    let unready = |reason: String| (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {reason}\n")).into_response();
    if service.inner.draining.load(Ordering::Acquire) {
        return unready("draining (the process is stopping)".into());
    }
    match tokio::time::timeout(READY_STORE_TIMEOUT, service.inner.stores.plugins.ping()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return unready(format!("the store is unreachable: {e}")),
        Err(_) => return unready(format!("the store did not answer within {} s", READY_STORE_TIMEOUT.as_secs())),
    }
    let failed = service.inner.uploads.failed.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Some(e) = failed {
        return unready(format!("the stored uploads could not be read: {e}"));
    }
    "ready\n".into_response()
}

/// `?limit=N` of the audit routes: at most [`audit::MAX_READ`], default 100.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    #[serde(default = "default_audit_limit")]
    limit: usize,
}

fn default_audit_limit() -> usize {
    100
}

/// `GET /api/audit`: the tenant's own audit trail, newest first.
async fn tenant_audit(
    caller: Caller,
    query: Result<axum::extract::Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
    let Ok(axum::extract::Query(query)) = query else {
        return error(StatusCode::BAD_REQUEST, "the only query parameter is limit, a number");
    };
    match service.inner.stores.plugins.trail(Some(&tenant.name), query.limit).await {
        Ok(entries) => Json(json!({ "entries": entries })).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "the audit trail could not be read");
            error(StatusCode::SERVICE_UNAVAILABLE, "the store is unreachable; retry later")
        }
    }
}

/// `GET /audit`: every tenant's audit trail, for the operator (the metrics
/// token, as `/metrics`).
async fn operator_audit(
    _: Operator,
    State(service): State<Service>,
    query: Result<axum::extract::Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(axum::extract::Query(query)) = query else {
        return error(StatusCode::BAD_REQUEST, "the only query parameter is limit, a number");
    };
    match service.inner.stores.plugins.trail(None, query.limit).await {
        Ok(entries) => Json(json!({ "entries": entries })).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "the audit trail could not be read");
            error(StatusCode::SERVICE_UNAVAILABLE, "the store is unreachable; retry later")
        }
    }
}

/// `GET /api/status`: whether the tenant has all it was configured with:
/// `{"ready": bool, "mcp_servers": [{"name", "ready", "error"?}]}`. An MCP
/// server that did not start is not ready (with its last error) while the
/// service retries it; the rest of the tenant is served meanwhile.
async fn status(caller: Caller) -> Response {
    let tenant = caller.tenant();
    let servers = tenant.mcp_servers.status();
    let ready = servers.iter().all(|s| s["ready"] == true);
    Json(json!({ "tenant": tenant.name, "ready": ready, "mcp_servers": servers })).into_response()
}

fn unauthorized() -> Response {
    let mut response = error(StatusCode::UNAUTHORIZED, "missing or unknown API key");
    response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
    response
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// `GET /metrics`: the metrics name every tenant and its tools, so only
/// the [`Operator`] reads them (never anyone by default).
async fn metrics_text(_: Operator, State(service): State<Service>) -> Response {
    let in_flight: Vec<(String, usize)> =
        service.inner.tenants.iter().map(|t| (t.name.clone(), t.quota.in_flight())).collect();
    let pending = service.pending_approvals();
    let fuel: Vec<(String, u64)> = service
        .inner
        .tenants
        .iter()
        .map(|t| (t.name.clone(), service.inner.host.tenant_fuel().used(&t.name)))
        .collect();
    let body = service.inner.metrics.render(&in_flight, &pending, &fuel);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

async fn list_tools(caller: Caller) -> Response {
    let tenant = caller.tenant();
    tenant.follow_sources().await;
    // What the tenant's chats offer beside its plugins and MCP servers: the
    // web tools, and `ask_human` (listed; it has no direct call).
    let mut tools: Vec<serde_json::Value> =
        tenant.direct_executor().tools().iter().map(|t| t.spec().openai_function()).collect();
    if tenant.agent.ask_human {
        tools.push(lovia_host::human::ask_human_spec().openai_function());
    }
    Json(tools).into_response()
}

impl Tenant {
    /// The tenant's tools as they are now.
    fn executor(&self) -> Executor {
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

/// The web tools of a `[tenants.web]` table (lovia-web's section): a key
/// variable that is not set is an error.
fn web_tools(web: &TenantWeb) -> Result<Vec<lovia_host::Tool>, String> {
    web.tools().map_err(|e| format!("web.{}: {e}", e.key()))
}
