//! How the service starts: the stores opened, each tenant's plugins, MCP
//! servers, web tools, workspaces and doors built from its config, and the
//! background work (lease renewal, upload following, takeover) begun.

use crate::ServeConfig;
use crate::error::ServeError;
use crate::{Inner, Service, Tenant};
use crate::{
    auth, chat, config, direct, door, limits, mcp, mcp_sources, metrics, model, offer, quota, stores, upload,
    upload_sync, workspace,
};
use lovia_host::Host;
use lovia_host::Tool;
use lovia_host::exec::{ExecSettings, Executor};
use lovia_host::{ToolSource, Toolset};
use lovia_runner::RunStore;
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

impl Service {
    /// Loads every tenant's plugins on `host` (its configured ones and those
    /// uploaded before, from the store), opens the session store and resumes
    /// the runs a previous process left unfinished. With a PostgreSQL store
    /// it also follows the uploads of other replicas (docs/replicas.md).
    pub async fn new(host: &Host, config: &ServeConfig) -> Result<Service, ServeError> {
        Self::new_traced(host, config, lovia_telemetry::Telemetry::off()).await
    }

    /// [`Service::new`] with its runs, model requests, calls and MCP
    /// requests traced through `telemetry` (docs/telemetry.md); each
    /// tenant's spans record content as `[tenants.telemetry]` and
    /// `[telemetry]` say.
    pub async fn new_traced(
        host: &Host,
        config: &ServeConfig,
        telemetry: lovia_telemetry::Telemetry,
    ) -> Result<Service, ServeError> {
        let url = config.store.clone().unwrap_or_else(|| "lovia.db".into());
        let stores = stores::Stores::open(&url, Duration::from_millis(config.run_lease_ms)).await?;
        let service = Self::build(host, config, stores, telemetry).await?;
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
        let service =
            Self::build(host, config, stores::Stores::beside(store), lovia_telemetry::Telemetry::off()).await?;
        service.retry_mcp_servers();
        Ok(service)
    }

    /// Shows `export`'s counts on `/metrics` (`lovia_telemetry_spans_exported_total`,
    /// `lovia_telemetry_spans_dropped_total`). Once; later calls are ignored.
    pub fn count_spans(&self, export: lovia_telemetry::export::Export) {
        let _ = self.inner.metrics.spans.set(export);
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

    async fn build(
        host: &Host,
        config: &ServeConfig,
        stores: stores::Stores,
        telemetry: lovia_telemetry::Telemetry,
    ) -> Result<Service, ServeError> {
        let plugins = stores.plugins.clone();
        let mut tenants = Vec::new();
        let metrics = Arc::new(metrics::Metrics::default());
        let mut keys = HashMap::new();
        let signatures =
            config.signatures.policy().map_err(|source| ServeError::Supply { tenant: "*".into(), source })?;
        let oci = config.oci.clone();
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
            let telemetry = telemetry
                .clone()
                .with_content(t.telemetry.capture_content.unwrap_or_else(|| config.telemetry.captures_content()));
            let settings = ExecSettings::default().with_agent("lovia-serve".into()).with_telemetry(telemetry.clone());
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
                Some(web) => web.tools().map_err(|source| ServeError::Web { tenant: t.name.clone(), source })?,
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
                max_tasks: t.max_mcp_tasks,
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
                .map_err(|source| ServeError::Mcp { tenant: t.name.clone(), source })?;
            tenants.push(Tenant {
                index,
                telemetry,
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
                traces: config.telemetry.clone(),
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
}
