//! `lovia serve`'s TOML config. Unknown keys are an error.
//!
//! ```toml
//! listen = "127.0.0.1:8700"          # default
//! store = "lovia.db"                 # default: ./lovia.db (sessions, checkpoints)
//! approval_timeout_secs = 600        # default; an undecided approval is then denied
//! question_timeout_secs = 600        # default; an unanswered ask_human question is then withdrawn
//! sse_keep_alive_secs = 15           # default; a keep-alive comment after this much silence
//! max_plugin_bytes = 33554432        # default (32 MiB) for POST /api/plugins
//! max_body_bytes_in_flight = 134217728  # default (128 MiB): request bodies held at once, all tenants
//! body_read_timeout_secs = 30        # default; a body must arrive within this
//! metrics_token = "<sha-256 hex>"    # default: none; then /metrics is refused unless
//! metrics_public = false             # … this is true (it is false by default)
//! max_connections = 1024             # default: connections held at once, in all
//! max_connections_per_ip = 64        # default: from one peer address (raise it behind a proxy)
//! max_connections_per_ipv6_48 = 128  # default: from one IPv6 /48, whatever its /64s
//! idle_connection_secs = 60          # default: a connection silent this long is closed
//! first_byte_secs = 10               # default: a new connection's first byte must come within this
//! request_head_secs = 10             # default: a request head must be whole this long after its first byte
//! authenticated_connections_percent = 25  # default: the share of max_connections kept for connections with a valid key
//! poll_interval_ms = 2000            # default: a shared store is read again this often
//! run_lease_ms = 10000               # default: a replica's hold on a run lasts this long unrenewed
//! lease_renew_ms = 3000              # default: … and is renewed this often
//! workspaces_dir = "workspaces"      # default: none; needed by a [tenants.workspace]
//!
//! [[tenants]]
//! name = "acme"
//! # SHA-256 (hex) of each API key; `lovia serve --hash-key` prints one.
//! api_keys = ["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]
//! max_concurrent_calls = 16            # default; more at once get 429
//! calls_per_minute = 600               # default; more get 429
//! max_concurrent_runs = 4              # default; more chat runs at once get 429
//! fuel_per_minute = 5_000_000_000      # default: none
//! max_body_bytes_in_flight = 41943040  # default (40 MiB): this tenant's request bodies held at once
//! max_plugins = 16                     # default: plugins it may upload
//! max_uploaded_bytes = 67108864        # default (64 MiB): bytes of all its uploads
//! max_mcp_sessions = 100               # default: MCP sessions (2025-11-25) open at once on /mcp
//! max_mcp_tasks = 100                  # default: MCP tasks kept at once for /mcp (0: none)
//! guest_log_bytes_per_minute = 1048576 # default (1 MiB): what its plugins may write to the log
//! guest_log_level = "info"             # default: its plugins' lines below this level are dropped
//! provider = { kind = "env" }          # default: OPENAI_API_KEY / ANTHROPIC_API_KEY …
//! agent = { name = "assistant", instructions = "Be brief.", max_turns = 50 }
//!
//! [tenants.web]                       # docs/web.md; default: no web tools
//! read_page = true
//! searxng_url = "http://127.0.0.1:8888"
//!
//! [tenants.workspace]                 # docs/workspace.md; default: no workspace tools
//! mode = "coding"                      # default; readonly, coding or trusted
//! shell_sandbox = "required"           # default; or "off"
//! shell_network = false                # default: confined commands open no TCP or UDP socket
//! max_bytes = 268435456                # default (256 MiB) in all its sessions' workspaces
//!
//! [[tenants.plugins]]
//! path = "target/plugins/orders.wasm"  # relative to this file
//! instance = "fresh"
//! grants = { env = ["LANG"] }
//! limits = { memory_mib = 32 }
//!
//! [[tenants.mcp_servers]]              # docs/mcp.md, "MCP servers as tool sources"
//! name = "search"
//! url = "https://mcp.example.com/mcp"
//! headers_from_env = { Authorization = "SEARCH_MCP_AUTH" }
//! ```

use lovia_runner::StoreUrl;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

mod agent;
mod error;
mod plugin;
mod tenant;

pub use agent::{AgentConfig, ProviderChoice, ProviderConfig};
use error::rule;
pub use error::{ConfigRuleError, ServeConfigError};
pub use plugin::PluginEntry;
use tenant::TenantBounds;
pub(crate) use tenant::default_tenant_cores;
pub use tenant::{TenantConfig, TenantTelemetry, TenantWeb, TenantWorkspace};

/// The longest an approval or a question may wait, in seconds: an hour, as
/// at `lovia mcp` (`lovia_mcp::MAX_APPROVAL_TIMEOUT`).
const MAX_WAIT_SECS: u64 = 3600;

/// The whole service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ServeConfig {
    /// Where to listen. Default: `127.0.0.1:8700` (loopback only).
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Where sessions, transcripts and checkpoints go: a SQLite file, or a
    /// PostgreSQL URL (`postgres://user@host/db`). Default: the SQLite file
    /// `lovia.db` in the directory `lovia serve` starts in; a path set here
    /// is relative to this file.
    #[serde(default)]
    pub store: Option<StoreUrl>,
    /// Seconds an approval waits for `POST /api/chat/approve` before it is
    /// denied. Default: 600; 1 to 3600.
    #[serde(default = "default_approval_timeout")]
    pub approval_timeout_secs: u64,
    /// The signatures of the configured plugins (`[[tenants.plugins]]`):
    /// `[signatures] mode = "require"`, `trusted_keys = ["keys/acme.pub"]`.
    /// Default: mode `off` (said at start), no key.
    #[serde(default)]
    pub signatures: SignaturesConfig,
    /// Plugins given as `oci://` references: `[oci] cache_dir`,
    /// `insecure_registries`. Default: the cache `lovia-oci` beside this
    /// file, every registry over HTTPS.
    #[serde(default)]
    pub oci: OciConfig,
    /// Traces (`[telemetry]`, docs/telemetry.md): the OTLP endpoint,
    /// protocol, sampling, queue, content capture and a trace UI's link.
    /// Default: off unless an `OTEL_EXPORTER_OTLP_*ENDPOINT` variable names
    /// a collector; content is never recorded unless turned on.
    #[serde(default)]
    pub telemetry: lovia_telemetry::export::TelemetrySection,
    /// Seconds a component may take to compile (an upload, or a configured
    /// plugin not in the artifact cache); past it the compile, which runs in
    /// a child process of `lovia serve`, is killed and the component refused.
    /// Default: 60; at least 1.
    #[serde(default = "default_compile_timeout")]
    pub compile_timeout_secs: u64,
    /// Seconds an `ask_human` question waits for `POST /api/chat/answer`;
    /// then the model reads `Tool error: no answer within <N>s — continue
    /// without one`. Default: 600; 1 to 3600.
    #[serde(default = "default_approval_timeout")]
    pub question_timeout_secs: u64,
    /// Seconds of silence on a chat's SSE stream before a keep-alive comment
    /// (`:`) is sent, so that proxies do not cut a stream that waits.
    /// Default: 15; at least 1.
    #[serde(default = "default_sse_keep_alive")]
    pub sse_keep_alive_secs: u64,
    /// The largest `.wasm` `POST /api/plugins` accepts. Default: 32 MiB.
    #[serde(default = "default_max_plugin_bytes")]
    pub max_plugin_bytes: usize,
    /// Bytes of request bodies being read or held by a request at once,
    /// across all tenants; past it, 503. A body reserves its
    /// `Content-Length` (else its route's limit) before a byte of it is read,
    /// so the service's memory for bodies stays bounded however many
    /// clients send at once. At least `max_plugin_bytes`. Default: 128 MiB.
    #[serde(default = "default_service_body_bytes")]
    pub max_body_bytes_in_flight: usize,
    /// Seconds a request body may take to arrive; past it, 408. A slow
    /// sender otherwise holds its reservation for ever. Default: 30; at least 1.
    #[serde(default = "default_body_read_timeout")]
    pub body_read_timeout_secs: u64,
    /// The lower-case hex SHA-256 of the token `GET /metrics` needs
    /// (`Authorization: Bearer <token>`; `lovia serve --hash-key` prints
    /// it). Default: none, and then `/metrics` is refused (403) unless
    /// `metrics_public` is true: the metrics name every tenant and its tools.
    #[serde(default)]
    pub metrics_token: Option<String>,
    /// Serve `/metrics` to anyone, without a token (for a port only a
    /// scraper can reach). Default: false. It never opens `/audit`, every
    /// tenant's audit trail, which needs `metrics_token` (with both set,
    /// `/metrics` is public and the token guards `/audit`).
    #[serde(default)]
    pub metrics_public: bool,
    /// Connections held at once, in all; more wait in the kernel's backlog.
    /// Default: 1,024.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Connections held at once from one peer IP address; more are closed
    /// on accept. Default: 64. Behind a reverse proxy every client has the
    /// proxy's address: raise it to `max_connections` and bound clients at
    /// the proxy.
    #[serde(default = "default_max_connections_per_ip")]
    pub max_connections_per_ip: usize,
    /// Connections held at once from one IPv6 /48, whatever /64s inside it
    /// they come from (an IPv6 peer is otherwise counted by its /64).
    /// Default: 128.
    #[serde(default = "default_max_connections_per_ipv6_48")]
    pub max_connections_per_ipv6_48: usize,
    /// Seconds a connection may pass without a byte either way before it is
    /// closed (a streamed SSE response, with its keep-alive comments, is
    /// traffic; the time a request is being answered does not count).
    /// Default: 60; at least 1, and more than `sse_keep_alive_secs`.
    #[serde(default = "default_idle_connection")]
    pub idle_connection_secs: u64,
    /// Seconds a new connection may take to send its first byte before it
    /// is closed. Default: 10; at least 1.
    #[serde(default = "default_head_secs")]
    pub first_byte_secs: u64,
    /// Seconds a request head (request line and headers) may take to arrive
    /// whole after its first byte, however steadily it trickles, before the
    /// connection is closed. Default: 10; at least 1.
    #[serde(default = "default_head_secs")]
    pub request_head_secs: u64,
    /// The percentage of `max_connections` kept for connections that have
    /// presented a valid API key: the others hold the rest at most, and past
    /// it the oldest one waiting for a request head is closed to make room.
    /// Default: 25; at most 90.
    #[serde(default = "default_authenticated_connections_percent")]
    pub authenticated_connections_percent: u8,
    /// Milliseconds between two reads of a PostgreSQL store for what other
    /// replicas changed (uploads now). A `NOTIFY` brings a change at once;
    /// this poll is the backstop for a notification lost while the listening
    /// connection was down, so it bounds how late a change can be seen.
    /// Default: 2,000; at least 100. Unused with SQLite (one process).
    #[serde(default = "default_poll_interval")]
    pub poll_interval_ms: u64,
    /// Milliseconds a replica's lease of a run lasts after its last renewal
    /// (docs/replicas.md, "Run ownership"). Another replica takes a run
    /// over at its first poll after the lease expired, so a run of a dead
    /// replica waits at most this plus `poll_interval_ms`. Default: 10,000;
    /// at least twice `lease_renew_ms`, so one late renewal loses nothing.
    /// Unused with SQLite (one process).
    #[serde(default = "default_run_lease")]
    pub run_lease_ms: u64,
    /// Milliseconds between two renewals of this replica's run leases (one
    /// statement for all of them). Default: 3,000; at least 100.
    #[serde(default = "default_lease_renew")]
    pub lease_renew_ms: u64,
    /// The directory that holds the chat workspaces of the tenants that
    /// have a `workspace` table: `<dir>/<tenant>/<session id>`, created
    /// 0700. Relative to this file. Default: none; required when a tenant
    /// has a workspace. With replicas, put it on storage every replica
    /// mounts, or a run taken over elsewhere finds its workspace empty.
    #[serde(default)]
    pub workspaces_dir: Option<PathBuf>,
    /// The tenants; each sees only its own tools.
    pub tenants: Vec<TenantConfig>,
}

fn default_approval_timeout() -> u64 {
    600
}

fn default_sse_keep_alive() -> u64 {
    15
}

fn default_max_plugin_bytes() -> usize {
    32 << 20
}

fn default_service_body_bytes() -> usize {
    128 << 20
}

fn default_max_connections() -> usize {
    1024
}

fn default_max_connections_per_ip() -> usize {
    64
}

fn default_max_connections_per_ipv6_48() -> usize {
    128
}

fn default_idle_connection() -> u64 {
    60
}

fn default_head_secs() -> u64 {
    10
}

fn default_authenticated_connections_percent() -> u8 {
    25
}

fn default_poll_interval() -> u64 {
    2000
}

fn default_run_lease() -> u64 {
    10_000
}

fn default_lease_renew() -> u64 {
    3_000
}

fn default_body_read_timeout() -> u64 {
    30
}

fn default_compile_timeout() -> u64 {
    60
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8700))
}

/// `[signatures]`: whether the configured plugins must be signed, and by
/// whom; lovia-supply's own section, which the CLI's `--signatures` and
/// `--trusted-key` spell too. Its keys are relative to this file.
pub type SignaturesConfig = lovia_supply::SignaturesSection;

/// `[oci]`: where pulled plugins are kept (default: `lovia-oci` beside this
/// file) and which registries speak HTTP; lovia-supply's own section, which
/// the CLI's `--insecure-registry` spells too.
pub type OciConfig = lovia_supply::oci::OciOptions;

impl ServeConfig {
    /// Whether a tenant sets a fuel quota (the host then needs fuel metering).
    pub fn needs_fuel_metering(&self) -> bool {
        self.tenants.iter().any(|t| t.fuel_per_minute.is_some())
    }

    /// A config of `tenants` with every other field at its default.
    pub fn new(tenants: Vec<TenantConfig>) -> Self {
        Self {
            listen: default_listen(),
            store: None,
            approval_timeout_secs: default_approval_timeout(),
            signatures: SignaturesConfig::default(),
            oci: OciConfig::default(),
            telemetry: Default::default(),
            compile_timeout_secs: default_compile_timeout(),
            question_timeout_secs: default_approval_timeout(),
            sse_keep_alive_secs: default_sse_keep_alive(),
            max_plugin_bytes: default_max_plugin_bytes(),
            max_body_bytes_in_flight: default_service_body_bytes(),
            body_read_timeout_secs: default_body_read_timeout(),
            metrics_token: None,
            metrics_public: false,
            max_connections: default_max_connections(),
            max_connections_per_ip: default_max_connections_per_ip(),
            max_connections_per_ipv6_48: default_max_connections_per_ipv6_48(),
            idle_connection_secs: default_idle_connection(),
            first_byte_secs: default_head_secs(),
            request_head_secs: default_head_secs(),
            authenticated_connections_percent: default_authenticated_connections_percent(),
            poll_interval_ms: default_poll_interval(),
            run_lease_ms: default_run_lease(),
            lease_renew_ms: default_lease_renew(),
            workspaces_dir: None,
            tenants,
        }
    }

    /// Reads and checks the config at `path`; relative plugin paths and
    /// directory grants are resolved against its directory.
    pub fn load(path: &Path) -> Result<ServeConfig, ServeConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ServeConfigError::Read { path: path.to_owned(), source })?;
        let invalid = |reason: String| ServeConfigError::Invalid { path: path.to_owned(), reason };
        let mut config: ServeConfig = toml::from_str(&text).map_err(|e| invalid(e.message().to_owned()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.resolve(base).map_err(|source| ServeConfigError::Rule { path: path.to_owned(), source })?;
        Ok(config)
    }

    /// Checks names, keys and quotas, and resolves relative paths against
    /// `base`: one check per section, the service's own, then each
    /// tenant's ([`TenantConfig`]'s own checks).
    pub fn resolve(&mut self, base: &Path) -> Result<(), ConfigRuleError> {
        self.resolve_paths(base);
        self.check_supply()?;
        self.telemetry.check().map_err(|e| rule("telemetry", None, e.to_string()))?;
        self.check_waits()?;
        self.check_connections()?;
        self.check_replicas()?;
        self.check_operator()?;
        let bounds =
            TenantBounds { max_plugin_bytes: self.max_plugin_bytes, workspaces: self.workspaces_dir.is_some() };
        let mut names = std::collections::HashSet::new();
        let mut keys = std::collections::HashSet::new();
        for tenant in &mut self.tenants {
            tenant.resolve(base, &bounds)?;
            if !names.insert(tenant.name.clone()) {
                return Err(rule("name", Some(&tenant.name), format!("tenant name {:?} is used twice", tenant.name)));
            }
            if tenant.api_keys.iter().any(|key| !keys.insert(key.clone())) {
                return Err(rule(
                    "api_keys",
                    Some(&tenant.name),
                    format!("tenant {:?}: an API key is listed twice", tenant.name),
                ));
            }
        }
        Ok(())
    }

    /// The store, the OCI cache, the trusted keys and the workspaces'
    /// directory, relative to `base`.
    fn resolve_paths(&mut self, base: &Path) {
        if let Some(store) = self.store.take() {
            self.store = Some(store.relative_to(base));
        }
        let cache = self.oci.cache_dir.take().unwrap_or_else(|| PathBuf::from("lovia-oci"));
        self.oci.cache_dir = Some(if cache.is_relative() { base.join(cache) } else { cache });
        self.signatures.resolve_paths(base);
        if let Some(dir) = &mut self.workspaces_dir
            && dir.is_relative()
        {
            *dir = base.join(&*dir);
        }
    }

    /// `[signatures]` and `compile_timeout_secs`: what runs, and how long
    /// it may take to compile.
    fn check_supply(&self) -> Result<(), ConfigRuleError> {
        if self.signatures.check().is_err() {
            return Err(rule("signatures.trusted_keys", None, "[signatures] mode = \"require\" needs trusted_keys"));
        }
        if self.compile_timeout_secs == 0 {
            return Err(rule("compile_timeout_secs", None, "compile_timeout_secs must be at least 1"));
        }
        Ok(())
    }

    /// The waits for a person, and the keep-alive of the streams that wait.
    fn check_waits(&self) -> Result<(), ConfigRuleError> {
        // The bounds of `lovia mcp`'s --approval-timeout-secs and
        // --question-timeout-secs: the same wait means the same at every door.
        for (key, secs) in [
            ("approval_timeout_secs", self.approval_timeout_secs),
            ("question_timeout_secs", self.question_timeout_secs),
        ] {
            if !(1..=MAX_WAIT_SECS).contains(&secs) {
                return Err(rule(key, None, format!("{key} is {secs}; it must be 1 to {MAX_WAIT_SECS} (an hour)")));
            }
        }
        if self.sse_keep_alive_secs == 0 {
            return Err(rule("sse_keep_alive_secs", None, "sse_keep_alive_secs must be at least 1"));
        }
        Ok(())
    }

    /// The door: connections, their timings, and request bodies.
    fn check_connections(&self) -> Result<(), ConfigRuleError> {
        if self.max_connections == 0 || self.max_connections_per_ip == 0 || self.max_connections_per_ipv6_48 == 0 {
            return Err(rule(
                "max_connections",
                None,
                "max_connections, max_connections_per_ip and max_connections_per_ipv6_48 must be at least 1",
            ));
        }
        if self.idle_connection_secs <= self.sse_keep_alive_secs {
            return Err(rule(
                "idle_connection_secs",
                None,
                format!(
                    "idle_connection_secs ({}) must be more than sse_keep_alive_secs ({}), or a waiting chat stream would be cut",
                    self.idle_connection_secs, self.sse_keep_alive_secs
                ),
            ));
        }
        if self.first_byte_secs == 0 || self.request_head_secs == 0 {
            return Err(rule("first_byte_secs", None, "first_byte_secs and request_head_secs must be at least 1"));
        }
        if self.authenticated_connections_percent > 90 {
            return Err(rule(
                "authenticated_connections_percent",
                None,
                format!(
                    "authenticated_connections_percent ({}) must be at most 90, or no client could connect to present its key",
                    self.authenticated_connections_percent
                ),
            ));
        }
        if self.body_read_timeout_secs == 0 {
            return Err(rule("body_read_timeout_secs", None, "body_read_timeout_secs must be at least 1"));
        }
        if self.max_body_bytes_in_flight < self.max_plugin_bytes {
            return Err(rule(
                "max_body_bytes_in_flight",
                None,
                format!(
                    "max_body_bytes_in_flight ({}) must be at least max_plugin_bytes ({}), or no upload of the largest size could be read",
                    self.max_body_bytes_in_flight, self.max_plugin_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Replicas: the poll of other replicas' changes, and the run leases.
    fn check_replicas(&self) -> Result<(), ConfigRuleError> {
        if self.poll_interval_ms < 100 {
            return Err(rule(
                "poll_interval_ms",
                None,
                format!("poll_interval_ms ({}) must be at least 100", self.poll_interval_ms),
            ));
        }
        if self.lease_renew_ms < 100 {
            return Err(rule(
                "lease_renew_ms",
                None,
                format!("lease_renew_ms ({}) must be at least 100", self.lease_renew_ms),
            ));
        }
        if self.run_lease_ms < self.lease_renew_ms.saturating_mul(2) {
            return Err(rule(
                "run_lease_ms",
                None,
                format!(
                    "run_lease_ms ({}) must be at least twice lease_renew_ms ({}), or one late renewal would lose the runs",
                    self.run_lease_ms, self.lease_renew_ms
                ),
            ));
        }
        Ok(())
    }

    /// The operator's own access: `metrics_token`.
    fn check_operator(&self) -> Result<(), ConfigRuleError> {
        let Some(token) = &self.metrics_token else { return Ok(()) };
        if !is_sha256_hex(token) {
            return Err(rule(
                "metrics_token",
                None,
                "metrics_token holds the lower-case hex SHA-256 of the token (64 characters); `lovia serve --hash-key` prints one",
            ));
        }
        if self.tenants.iter().any(|t| t.api_keys.contains(token)) {
            return Err(rule(
                "metrics_token",
                None,
                "metrics_token must not be a tenant's API key: the metrics show every tenant",
            ));
        }
        Ok(())
    }
}

/// Whether `text` is a lower-case hex SHA-256, as `api_keys` and `metrics_token` hold.
fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
