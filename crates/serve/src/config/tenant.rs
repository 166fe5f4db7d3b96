//! `[[tenants]]`: one tenant, its sections, and the checks of each.

use super::{AgentConfig, ConfigRuleError, PluginEntry, ProviderChoice, ProviderConfig, is_sha256_hex, rule};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TenantConfig {
    /// Its name (in metrics and logs; never in another tenant's responses).
    pub name: String,
    /// Lower-case hex SHA-256 of each API key that acts as this tenant.
    pub api_keys: Vec<String>,
    /// Calls running at once; beyond, 429. Per replica (it bounds one
    /// process's memory and cores). Default: 16.
    #[serde(default = "default_concurrent")]
    pub max_concurrent_calls: u32,
    /// Calls started per minute; beyond, 429. With PostgreSQL, across
    /// replicas. Default: 600.
    #[serde(default = "default_per_minute")]
    pub calls_per_minute: u32,
    /// Fuel (wasm instructions, roughly) the tenant's calls may burn per
    /// minute; once spent, calls fail `CPU budget exhausted` until the
    /// minute is over. Needs a host with fuel metering (`lovia serve` turns
    /// it on when a tenant sets this). Each call's fuel is held from this
    /// budget while it runs, so a plugin entry without its own `fuel` limit
    /// gets `fuel_per_minute / max_concurrent_calls` per call (uploads too),
    /// and the tenant's calls can all run at once. With PostgreSQL the
    /// minute's fuel is held and charged across replicas, and a call whose
    /// hold does not fit gets 429. Default: none (calls are still bounded by
    /// their own time and fuel limits).
    #[serde(default)]
    pub fuel_per_minute: Option<u64>,
    /// Chat runs at once; beyond, 429. With PostgreSQL, across replicas.
    /// Default: 4.
    #[serde(default = "default_runs")]
    pub max_concurrent_runs: u32,
    /// Bytes of this tenant's request bodies being read or held at once;
    /// past it, 429. At least the service's `max_plugin_bytes`, so that one
    /// upload of the largest size fits. Default: 40 MiB.
    #[serde(default = "default_tenant_body_bytes")]
    pub max_body_bytes_in_flight: usize,
    /// Plugins the tenant may add with `POST /api/plugins`; they are kept in
    /// the store (and survive a restart), so this bounds the store as well as
    /// the memory of every replica; past it, 403. Default: 16.
    #[serde(default = "default_max_plugins")]
    pub max_plugins: u32,
    /// Bytes of all the components the tenant has uploaded and the store
    /// keeps; an upload that would pass it is refused (403) before it is
    /// compiled. Default: 64 MiB.
    #[serde(default = "default_max_uploaded_bytes")]
    pub max_uploaded_bytes: u64,
    /// The components the tenant may upload, by digest (`sha256:<64 hex>`,
    /// as `lovia inspect` prints it); any other upload is refused (403)
    /// before it is compiled. Default: empty, any component (within the
    /// other bounds).
    #[serde(default)]
    pub upload_digests: Vec<String>,
    /// Uploads of the tenant refused after they cost a compile (invalid,
    /// too slow to compile, a tool-name clash) that it may make in an hour;
    /// past it, uploads get 429 before anything is compiled until the
    /// oldest refusal is an hour old. Per replica. Default: 20; at least 1.
    #[serde(default = "default_max_rejected_uploads")]
    pub max_rejected_uploads_per_hour: u32,
    /// Public keys (from `lovia keygen`, or OpenSSH ed25519; relative to
    /// this file) one of which must have signed an upload (an embedded
    /// signature: `lovia sign`); any other upload is refused (403) before it
    /// is compiled. Default: empty, unsigned uploads too.
    #[serde(default)]
    pub upload_signers: Vec<PathBuf>,
    /// MCP sessions (2025-11-25 clients of `/mcp`) the tenant may hold open
    /// at once; each is kept in this replica's memory until the client
    /// closes it or it is idle for 5 minutes. An `initialize` past it gets
    /// 429. 2026-07-28 requests hold no session. Default: 100.
    #[serde(default = "default_max_mcp_sessions")]
    pub max_mcp_sessions: usize,
    /// Tasks (2025-11-25 clients of `/mcp` calling a long tool as a task)
    /// kept for the tenant at once, running or ended until their ttl (at
    /// most an hour) passes; the oldest ended one makes room for a new one,
    /// and past it with none ended a task is refused. With PostgreSQL they
    /// are kept in the store and count across replicas. 0 offers no tasks;
    /// at most 10,000. Default: 100.
    #[serde(default = "default_max_mcp_tasks")]
    pub max_mcp_tasks: usize,
    /// Bytes of log lines the tenant's plugins may write per minute through
    /// `context.log` (each line's message plus 128 bytes for the fields
    /// the host adds), refilled continuously. Past it their lines are
    /// dropped; a warning says so at the first, and the next line written
    /// is preceded by `suppressed N guest log lines (M bytes) over the
    /// tenant's log budget`. Default: 1,048,576 (1 MiB).
    #[serde(default = "default_guest_log_bytes")]
    pub guest_log_bytes_per_minute: u64,
    /// The least severe level of the tenant's plugins' log lines that is
    /// written (`trace`, `debug`, `info`, `warn`, `error`); lower ones are
    /// dropped and not counted. `LOVIA_LOG` still filters what is printed.
    /// Default: `info`.
    #[serde(default)]
    pub guest_log_level: lovia_host::LogLevel,
    /// The cores the tenant's plugins (and its costly argument checks) may
    /// compute on at once: each millisecond a call runs takes a token from a
    /// bucket that fills at this many a millisecond, and a call that finds
    /// none waits for one, so a tenant spinning many calls at once leaves
    /// the other cores to the others. Calls that wait (a sleep, an HTTP
    /// request) take none while they wait. Default: all the machine's cores
    /// but one (at least 1).
    #[serde(default)]
    pub max_cpu_cores: Option<f64>,
    /// The model behind `/api/chat`. Default: from the environment.
    #[serde(default)]
    pub provider: ProviderConfig,
    /// The agent `/api/chat` runs.
    #[serde(default)]
    pub agent: AgentConfig,
    /// Its plugins.
    #[serde(default)]
    pub plugins: Vec<PluginEntry>,
    /// MCP servers whose tools join the tenant's, after its plugins'
    /// (`[[tenants.mcp_servers]]`, the keys of docs/mcp.md, "MCP servers as
    /// tool sources"); each is started and listed when the service starts.
    /// Default: none.
    #[serde(default)]
    pub mcp_servers: Vec<lovia_mcp::source::McpServerConfig>,
    /// The workspace tools in the tenant's chats (`[tenants.workspace]`):
    /// each chat session gets its own root under `workspaces_dir`.
    /// Default: none (no file or shell tools).
    #[serde(default)]
    pub workspace: Option<TenantWorkspace>,
    /// The web tools in the tenant's chats (`[tenants.web]`; docs/web.md).
    /// Default: none.
    #[serde(default)]
    pub web: Option<TenantWeb>,
    /// The tenant's traces (`[tenants.telemetry]`). Default: as `[telemetry]`.
    #[serde(default)]
    pub telemetry: TenantTelemetry,
}

/// A tenant's traces (`[tenants.telemetry]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TenantTelemetry {
    /// Record this tenant's arguments, results, prompts and command lines
    /// in its spans. Default: `[telemetry] capture_content`, which is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_content: Option<bool>,
}

/// A tenant's web tools (`[tenants.web]`): lovia-web's own section,
/// which the CLI's web flags spell too; one page reader per tenant, so its
/// reads in flight and its cache are the tenant's alone.
pub type TenantWeb = lovia_web::WebSection;

/// A tenant's chat workspaces (`[tenants.workspace]`; docs/workspace.md,
/// "In lovia serve"): lovia-workspace's own section, which the workspace
/// flags of `lovia run` and `lovia mcp` spell too. Its bounds hold over all
/// the tenant's session workspaces together.
pub type TenantWorkspace = lovia_workspace::WorkspaceSection;

fn default_runs() -> u32 {
    4
}

fn default_max_mcp_sessions() -> usize {
    100
}

fn default_max_mcp_tasks() -> usize {
    lovia_mcp::DEFAULT_MAX_TASKS
}

fn default_guest_log_bytes() -> u64 {
    lovia_host::sandbox::DEFAULT_GUEST_LOG_BYTES_PER_MINUTE
}

fn default_concurrent() -> u32 {
    16
}

fn default_per_minute() -> u32 {
    600
}

/// A tenant's default `max_cpu_cores`: every core but one, at least one.
pub(crate) fn default_tenant_cores() -> f64 {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    cores.saturating_sub(1).max(1) as f64
}

fn default_max_rejected_uploads() -> u32 {
    20
}

/// The setting of `[tenants.web]`'s `key`, as [`ConfigRuleError::setting`] names it.
fn web_setting(key: &str) -> &'static str {
    match key {
        "allow" => "web.allow",
        "max_concurrent_reads" => "web.max_concurrent_reads",
        "searxng_url" => "web.searxng_url",
        "searxng_key_env" => "web.searxng_key_env",
        "brave_key_env" => "web.brave_key_env",
        _ => "web",
    }
}

/// The config key of a workspace section's key, as `ConfigRuleError::setting`.
fn workspace_setting(key: &str) -> &'static str {
    match key {
        "shell_sandbox" => "workspace.shell_sandbox",
        "max_background_processes" => "workspace.max_background_processes",
        "max_bytes" => "workspace.max_bytes",
        "max_files" => "workspace.max_files",
        "max_running_commands" => "workspace.max_running_commands",
        "retention_secs" => "workspace.retention_secs",
        _ => "workspace",
    }
}

impl TenantConfig {
    /// A tenant with the keys whose hashes are `api_keys`, no plugins, and
    /// every other field at its default.
    pub fn new(name: impl Into<String>, api_keys: Vec<String>) -> Self {
        Self {
            name: name.into(),
            api_keys,
            max_concurrent_calls: default_concurrent(),
            calls_per_minute: default_per_minute(),
            max_concurrent_runs: default_runs(),
            max_body_bytes_in_flight: default_tenant_body_bytes(),
            max_plugins: default_max_plugins(),
            max_uploaded_bytes: default_max_uploaded_bytes(),
            upload_digests: Vec::new(),
            max_cpu_cores: None,
            max_rejected_uploads_per_hour: default_max_rejected_uploads(),
            upload_signers: Vec::new(),
            max_mcp_sessions: default_max_mcp_sessions(),
            max_mcp_tasks: default_max_mcp_tasks(),
            guest_log_bytes_per_minute: default_guest_log_bytes(),
            guest_log_level: lovia_host::LogLevel::default(),
            fuel_per_minute: None,
            provider: ProviderConfig::default(),
            agent: AgentConfig::default(),
            plugins: Vec::new(),
            mcp_servers: Vec::new(),
            workspace: None,
            web: None,
            telemetry: TenantTelemetry::default(),
        }
    }
}

/// What a tenant's checks need of the service's settings.
pub(super) struct TenantBounds {
    /// `max_plugin_bytes`: a tenant's body budget must hold one upload.
    pub(super) max_plugin_bytes: usize,
    /// Whether `workspaces_dir` is set, which a `[tenants.workspace]` needs.
    pub(super) workspaces: bool,
}

impl TenantConfig {
    /// Checks the tenant, one section at a time, and resolves its relative
    /// paths against `base`. Uniqueness across tenants is the service's check.
    pub(super) fn resolve(&mut self, base: &Path, bounds: &TenantBounds) -> Result<(), ConfigRuleError> {
        self.check_identity()?;
        self.resolve_provider(base)?;
        self.check_quotas(bounds)?;
        self.check_agent()?;
        self.check_web()?;
        self.resolve_workspace(base, bounds)?;
        let name = self.name.clone();
        lovia_mcp::source::check_all(&self.mcp_servers).map_err(|e| {
            let message = format!("tenant {name:?}: {e}");
            rule("mcp_servers", Some(&name), message).caused_by(e)
        })?;
        self.resolve_uploads(base)?;
        self.resolve_plugins(base)
    }

    /// Its name and keys.
    fn check_identity(&self) -> Result<(), ConfigRuleError> {
        let valid = |c: char| c.is_ascii_alphanumeric() || "_.-".contains(c);
        if self.name.is_empty() || !self.name.chars().all(valid) {
            return Err(rule(
                "name",
                Some(&self.name),
                format!("tenant name {:?} must be letters, digits, _ . or -", self.name),
            ));
        }
        if self.api_keys.is_empty() {
            return Err(rule("api_keys", Some(&self.name), format!("tenant {:?} has no api_keys", self.name)));
        }
        if self.api_keys.iter().any(|key| !is_sha256_hex(key)) {
            return Err(rule(
                "api_keys",
                Some(&self.name),
                format!(
                    "tenant {:?}: api_keys hold the lower-case hex SHA-256 of a key (64 characters); `lovia serve --hash-key` prints one",
                    self.name
                ),
            ));
        }
        Ok(())
    }

    /// `[tenants.provider]`: a scripted model's script, relative to `base`.
    fn resolve_provider(&mut self, base: &Path) -> Result<(), ConfigRuleError> {
        if let Some(script) = &mut self.provider.script
            && script.is_relative()
        {
            *script = base.join(&*script);
        }
        if self.provider.kind == ProviderChoice::Scripted && self.provider.script.is_none() {
            return Err(rule(
                "provider.script",
                Some(&self.name),
                format!("tenant {:?}: a scripted provider needs `script`", self.name),
            ));
        }
        Ok(())
    }

    /// Its quotas and budgets.
    fn check_quotas(&self, bounds: &TenantBounds) -> Result<(), ConfigRuleError> {
        if let Some(cores) = self.max_cpu_cores
            && !(cores > 0.0 && cores.is_finite())
        {
            return Err(rule(
                "max_cpu_cores",
                Some(&self.name),
                format!("tenant {:?}: max_cpu_cores ({cores}) must be a positive number of cores", self.name),
            ));
        }
        if self.max_rejected_uploads_per_hour == 0 {
            return Err(rule(
                "max_rejected_uploads_per_hour",
                Some(&self.name),
                format!("tenant {:?}: max_rejected_uploads_per_hour must be at least 1", self.name),
            ));
        }
        if self.max_concurrent_calls == 0 || self.calls_per_minute == 0 || self.max_concurrent_runs == 0 {
            return Err(rule(
                "max_concurrent_calls",
                Some(&self.name),
                format!("tenant {:?}: quotas must be at least 1", self.name),
            ));
        }
        if self.max_mcp_tasks > lovia_mcp::MAX_TASKS_IN_MEMORY {
            return Err(rule(
                "max_mcp_tasks",
                Some(&self.name),
                format!(
                    "tenant {:?}: max_mcp_tasks ({}) must be 0 to {}",
                    self.name,
                    self.max_mcp_tasks,
                    lovia_mcp::MAX_TASKS_IN_MEMORY
                ),
            ));
        }
        if self.max_body_bytes_in_flight < bounds.max_plugin_bytes {
            return Err(rule(
                "max_body_bytes_in_flight",
                Some(&self.name),
                format!(
                    "tenant {:?}: max_body_bytes_in_flight ({}) must be at least max_plugin_bytes ({})",
                    self.name, self.max_body_bytes_in_flight, bounds.max_plugin_bytes
                ),
            ));
        }
        Ok(())
    }

    /// `[tenants.agent]`.
    fn check_agent(&self) -> Result<(), ConfigRuleError> {
        if self.agent.context_window_tokens.is_some_and(|n| n < lovia_runner::MIN_CONTEXT_WINDOW) {
            return Err(rule(
                "agent.context_window_tokens",
                Some(&self.name),
                format!(
                    "tenant {}: agent.context_window_tokens must be at least {}",
                    self.name,
                    lovia_runner::MIN_CONTEXT_WINDOW
                ),
            ));
        }
        Ok(())
    }

    /// `[tenants.web]`: lovia-web's own check of its section.
    fn check_web(&self) -> Result<(), ConfigRuleError> {
        let Some(web) = &self.web else { return Ok(()) };
        web.check().map_err(|e| {
            let (name, key) = (&self.name, e.key());
            rule(web_setting(key), Some(name), format!("tenant {name}: web.{key}: {e}"))
        })
    }

    /// `[tenants.workspace]`: its bounds, and its grants relative to `base`.
    fn resolve_workspace(&mut self, base: &Path, bounds: &TenantBounds) -> Result<(), ConfigRuleError> {
        let Some(w) = &mut self.workspace else { return Ok(()) };
        if !bounds.workspaces {
            return Err(rule(
                "workspace",
                Some(&self.name),
                format!(
                    "tenant {:?} has a workspace table, which needs workspaces_dir (the directory that holds the tenants' chat workspaces)",
                    self.name
                ),
            ));
        }
        w.check().map_err(|e| {
            rule(workspace_setting(e.key()), Some(&self.name), format!("tenant {:?}: workspace {e}", self.name))
        })?;
        w.resolve_paths(base);
        Ok(())
    }

    /// Who may sign its uploads, relative to `base`, and which digests it takes.
    fn resolve_uploads(&mut self, base: &Path) -> Result<(), ConfigRuleError> {
        for key in &mut self.upload_signers {
            if key.is_relative() {
                *key = base.join(&*key);
            }
        }
        if let Some(bad) = self.upload_digests.iter().find(|d| lovia_host::plugin::config::pinned_sha256(d).is_none()) {
            return Err(rule(
                "upload_digests",
                Some(&self.name),
                format!("tenant {:?}: upload_digests: {bad:?} must be sha256: followed by 64 hex digits", self.name),
            ));
        }
        Ok(())
    }

    /// `[[tenants.plugins]]`: each one's path (an OCI reference as it is)
    /// and config, relative to `base`.
    fn resolve_plugins(&mut self, base: &Path) -> Result<(), ConfigRuleError> {
        for plugin in &mut self.plugins {
            let reference = lovia_supply::oci::is_reference(&plugin.path.display().to_string());
            if plugin.path.is_relative() && !reference {
                plugin.path = base.join(&plugin.path);
            }
            let mut config = plugin.plugin_config();
            config.resolve(base).map_err(|e| {
                let message = format!("tenant {:?}: plugin {}: {e}", self.name, plugin.path.display());
                rule("plugins", Some(&self.name), message).caused_by(e)
            })?;
            plugin.grants = config.grants;
        }
        Ok(())
    }
}

fn default_tenant_body_bytes() -> usize {
    40 << 20
}

fn default_max_plugins() -> u32 {
    16
}

fn default_max_uploaded_bytes() -> u64 {
    64 << 20
}
