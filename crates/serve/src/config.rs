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

use lovia_host::plugin::InstanceMode;
use lovia_host::plugin::config::{LimitOverrides, PluginConfig};
use lovia_host::sandbox::Grants;
use lovia_runner::StoreUrl;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

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

fn default_tenant_body_bytes() -> usize {
    40 << 20
}

fn default_max_plugins() -> u32 {
    16
}

fn default_max_uploaded_bytes() -> u64 {
    64 << 20
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8700))
}

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
}

/// A tenant's web tools (`[tenants.web]`): lovia-web's own section,
/// which the CLI's web flags spell too; one page reader per tenant, so its
/// reads in flight and its cache are the tenant's alone.
pub type TenantWeb = lovia_web::WebSection;

/// A tenant's chat workspaces (docs/workspace.md, "In lovia serve").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TenantWorkspace {
    /// `readonly`, `coding` or `trusted` (docs/workspace.md, "Modes").
    /// Default: `coding`, whose commands and reads outside ask.
    #[serde(default)]
    pub mode: WorkspaceMode,
    /// `required`: every command runs under kernel confinement, and where
    /// the kernel cannot confine, the shell tools are not offered; `off`:
    /// commands run unconfined. Default: `required`.
    #[serde(default)]
    pub shell_sandbox: ShellSandboxChoice,
    /// Whether a confined command may open TCP and UDP sockets (any
    /// address) and read the resolver's configuration. Default: false.
    #[serde(default)]
    pub shell_network: bool,
    /// Paths of the service's machine a confined command may read and
    /// execute, such as a toolchain outside the system directories; each
    /// must exist when the service starts. Default: none.
    #[serde(default)]
    pub shell_read_only: Vec<std::path::PathBuf>,
    /// Paths of the service's machine a confined command may also write,
    /// such as a package cache (`--shell-write` of `lovia run` and `lovia
    /// mcp`); each must exist when the service starts. Default: none.
    #[serde(default)]
    pub shell_read_write: Vec<std::path::PathBuf>,
    /// Bytes of disk all the tenant's session workspaces may use; a write
    /// or command past it fails with a tool error. A confined command's
    /// largest file is bounded by it too. Default: 268,435,456 (256 MiB).
    #[serde(default = "default_workspace_bytes")]
    pub max_bytes: u64,
    /// Files and directories in all of them. Default: 10,000.
    #[serde(default = "default_workspace_files")]
    pub max_files: u64,
    /// Shell commands (background ones included) running at once in all of
    /// them, per replica. Default: 2.
    #[serde(default = "default_workspace_commands")]
    pub max_running_commands: u32,
    /// Background processes one session may hold. Default: 2.
    #[serde(default = "default_workspace_background")]
    pub max_background_processes: usize,
    /// Seconds a session's workspace is kept after its last run ended;
    /// then it is removed. Default: 86,400 (a day).
    #[serde(default = "default_workspace_retention")]
    pub retention_secs: u64,
}

impl Default for TenantWorkspace {
    fn default() -> Self {
        Self {
            mode: WorkspaceMode::default(),
            shell_sandbox: ShellSandboxChoice::default(),
            shell_network: false,
            shell_read_only: Vec::new(),
            shell_read_write: Vec::new(),
            max_bytes: default_workspace_bytes(),
            max_files: default_workspace_files(),
            max_running_commands: default_workspace_commands(),
            max_background_processes: default_workspace_background(),
            retention_secs: default_workspace_retention(),
        }
    }
}

/// [`TenantWorkspace::mode`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum WorkspaceMode {
    /// Reads inside the root only.
    Readonly,
    /// Writes inside; reads outside and commands ask.
    #[default]
    Coding,
    /// Reads outside and commands allowed; writes outside ask.
    Trusted,
}

/// [`TenantWorkspace::shell_sandbox`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ShellSandboxChoice {
    /// Kernel confinement, or no shell.
    #[default]
    Required,
    /// No kernel confinement.
    Off,
}

fn default_workspace_bytes() -> u64 {
    256 << 20
}

fn default_workspace_files() -> u64 {
    10_000
}

fn default_workspace_commands() -> u32 {
    2
}

fn default_workspace_background() -> usize {
    2
}

fn default_workspace_retention() -> u64 {
    86_400
}

fn default_runs() -> u32 {
    4
}

fn default_max_mcp_sessions() -> usize {
    100
}

fn default_guest_log_bytes() -> u64 {
    lovia_host::sandbox::DEFAULT_GUEST_LOG_BYTES_PER_MINUTE
}

/// Which model a tenant's chats use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ProviderConfig {
    /// `env` (default: `LOVIA_PROVIDER`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`,
    /// `ANTHROPIC_API_KEY`, `LOVIA_MODEL`, as
    /// [`lovia_runner::providers::from_env`] documents; also
    /// `LOVIA_PROVIDER=scripted` with `LOVIA_SCRIPT=<file>`),
    /// `openai-chat`, `openai-responses`, `anthropic`, or `scripted` (a
    /// JSON file of replies; a conversation with *n* assistant messages gets
    /// reply *n*, so every chat replays it from the start).
    #[serde(default)]
    pub kind: ProviderChoice,
    /// The API's base URL. Default: the vendor's.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the key. Default:
    /// `OPENAI_API_KEY` or `ANTHROPIC_API_KEY`. Keys never go in this file.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The model. Default: the provider's default.
    #[serde(default)]
    pub model: Option<String>,
    /// Stream replies. Default: true.
    #[serde(default)]
    pub stream: Option<bool>,
    /// For `scripted`: the replies file, relative to this config.
    #[serde(default)]
    pub script: Option<PathBuf>,
}

impl ProviderConfig {
    /// A scripted model: the replies in the JSON file `script` (relative to
    /// the config file when it is read from one), every other field its default.
    pub fn scripted(script: impl Into<PathBuf>) -> ProviderConfig {
        ProviderConfig { kind: ProviderChoice::Scripted, script: Some(script.into()), ..ProviderConfig::default() }
    }
}

/// The provider kinds of [`ProviderConfig`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ProviderChoice {
    /// From the environment.
    #[default]
    Env,
    /// OpenAI Chat Completions.
    OpenaiChat,
    /// OpenAI Responses.
    OpenaiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Replies from a file.
    Scripted,
}

/// The agent a tenant's chats run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AgentConfig {
    /// Its name; `/api/chat`'s `agent` must match it. Default: `assistant`.
    #[serde(default = "default_agent_name")]
    pub name: String,
    /// The system message. Default: none.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Model turns per run. Default: 50.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    /// Token, tool-call and time limits per run. Default: unconstrained.
    #[serde(default)]
    pub budget: lovia_host::exec::Budget,
    /// Whether the model may ask for several calls at once. Default: true.
    #[serde(default = "default_true")]
    pub parallel_tool_calls: bool,
    /// The model's window in tokens: each request is compacted to fit it
    /// (the stored transcript never is) and the agent gets
    /// `recall_tool_result`. Default: none, no compaction.
    #[serde(default)]
    pub context_window_tokens: Option<usize>,
    /// Whether the agent has `ask_human`: its question reaches the chat's
    /// stream as a `question` event and the console, and
    /// `POST /api/chat/answer` answers it. Default: false.
    #[serde(default)]
    pub ask_human: bool,
    /// Whether the agent has `run_code` (code mode): the model may send a
    /// JavaScript program that calls the chat's other tools, each call under
    /// the same quotas, approvals and limits as a direct one; the stream and
    /// the console show them under their program (docs/code-mode.md).
    /// Default: false.
    #[serde(default)]
    pub code_mode: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            name: default_agent_name(),
            instructions: None,
            max_turns: default_max_turns(),
            budget: lovia_host::exec::Budget::default(),
            parallel_tool_calls: true,
            context_window_tokens: None,
            ask_human: false,
            code_mode: false,
        }
    }
}

fn default_agent_name() -> String {
    "assistant".into()
}

fn default_max_turns() -> u32 {
    lovia_runner::DEFAULT_MAX_TURNS
}

fn default_true() -> bool {
    true
}

fn default_concurrent() -> u32 {
    16
}

fn default_per_minute() -> u32 {
    600
}

/// One plugin of a tenant: its path plus the fields of a [`PluginConfig`].
/// (Spelled out rather than `#[serde(flatten)]`ed: serde cannot deny
/// unknown keys through a flattened struct.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PluginEntry {
    /// The `.wasm` component (relative to the config file).
    pub path: PathBuf,
    /// The component's pinned SHA-256, `sha256:<64 hex digits>`: another
    /// component at `path` is refused at start. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Fresh instance per call (default) or one per session.
    #[serde(default)]
    pub instance: InstanceMode,
    /// What it may touch. Default: nothing.
    #[serde(default)]
    pub grants: Grants,
    /// Limits over the host's.
    #[serde(default)]
    pub limits: LimitOverrides,
}

/// A tenant's default `max_cpu_cores`: every core but one, at least one.
pub(crate) fn default_tenant_cores() -> f64 {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    cores.saturating_sub(1).max(1) as f64
}

fn default_compile_timeout() -> u64 {
    60
}

fn default_max_rejected_uploads() -> u32 {
    20
}

/// `[signatures]`: whether the configured plugins must be signed, and by whom.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SignaturesConfig {
    /// `require` (a plugin no trusted key signed stops the start), `warn`
    /// (it loads, with a warning), or `off`. Default: `off`.
    #[serde(default)]
    pub mode: lovia_supply::SignatureMode,
    /// The publishers' public keys (relative to this file). Default: none;
    /// `require` needs one.
    #[serde(default)]
    pub trusted_keys: Vec<PathBuf>,
}

/// `[oci]`: where pulled plugins are kept and which registries speak HTTP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OciConfig {
    /// Where pulled components are kept by digest, so that they load while
    /// their registry is down (relative to this file). Default:
    /// `lovia-oci` beside this file.
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// Registries (`host:port`) reached over plain HTTP. Default: none.
    #[serde(default)]
    pub insecure_registries: Vec<String>,
}

/// Why a config was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TOML is malformed or has unknown keys.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the key.
        reason: String,
    },
    /// A setting breaks one of its rules ([`ServeConfig::resolve`]).
    #[error("{path}: {source}")]
    Rule {
        /// The file.
        path: PathBuf,
        /// Which setting, and the rule.
        source: ConfigRuleError,
    },
}

/// A setting of the serve config that breaks one of its rules: which one,
/// whose (a tenant's, or the server's), and why. `Display` is the message
/// `lovia serve` prints after the file's path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
#[error("{message}")]
pub struct ConfigRuleError {
    /// The setting, as its key is written under `[[tenants]]` or at the top
    /// level: `compile_timeout_secs`, `web.allow`, `plugins`.
    pub setting: &'static str,
    /// The tenant whose setting it is; `None` for the server's own.
    pub tenant: Option<String>,
    /// The rule, as printed.
    message: String,
    /// The error beneath it: a plugin entry's or an MCP server's.
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ConfigRuleError {
    fn caused_by(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }
}

/// The error of `setting` (of `tenant`, if a tenant's) breaking a rule.
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

fn rule(setting: &'static str, tenant: Option<&str>, message: impl Into<String>) -> ConfigRuleError {
    ConfigRuleError { setting, tenant: tenant.map(str::to_owned), message: message.into(), source: None }
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
            guest_log_bytes_per_minute: default_guest_log_bytes(),
            guest_log_level: lovia_host::LogLevel::default(),
            fuel_per_minute: None,
            provider: ProviderConfig::default(),
            agent: AgentConfig::default(),
            plugins: Vec::new(),
            mcp_servers: Vec::new(),
            workspace: None,
            web: None,
        }
    }
}

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
        for key in &mut self.signatures.trusted_keys {
            if key.is_relative() {
                *key = base.join(&*key);
            }
        }
        if let Some(dir) = &mut self.workspaces_dir
            && dir.is_relative()
        {
            *dir = base.join(&*dir);
        }
    }

    /// `[signatures]` and `compile_timeout_secs`: what runs, and how long
    /// it may take to compile.
    fn check_supply(&self) -> Result<(), ConfigRuleError> {
        if self.signatures.mode == lovia_supply::SignatureMode::Require && self.signatures.trusted_keys.is_empty() {
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

/// What a tenant's checks need of the service's settings.
struct TenantBounds {
    /// `max_plugin_bytes`: a tenant's body budget must hold one upload.
    max_plugin_bytes: usize,
    /// Whether `workspaces_dir` is set, which a `[tenants.workspace]` needs.
    workspaces: bool,
}

impl TenantConfig {
    /// Checks the tenant, one section at a time, and resolves its relative
    /// paths against `base`. Uniqueness across tenants is the service's check.
    fn resolve(&mut self, base: &Path, bounds: &TenantBounds) -> Result<(), ConfigRuleError> {
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
        if w.max_bytes == 0 || w.max_files == 0 || w.max_running_commands == 0 || w.retention_secs == 0 {
            return Err(rule(
                "workspace",
                Some(&self.name),
                format!(
                    "tenant {:?}: workspace max_bytes, max_files, max_running_commands and retention_secs must be at least 1",
                    self.name
                ),
            ));
        }
        if w.shell_sandbox == ShellSandboxChoice::Off
            && (w.shell_network || !w.shell_read_only.is_empty() || !w.shell_read_write.is_empty())
        {
            return Err(rule(
                "workspace.shell_sandbox",
                Some(&self.name),
                format!(
                    "tenant {:?}: workspace shell_network, shell_read_only and shell_read_write grant a confined shell more, and shell_sandbox = \"off\" confines nothing; drop them or confine the shell",
                    self.name
                ),
            ));
        }
        for path in w.shell_read_only.iter_mut().chain(w.shell_read_write.iter_mut()) {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        }
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

impl PluginEntry {
    /// An entry for the plugin at `path`, with no digest pinned, the
    /// default instance mode, and no grants or limit overrides: what a
    /// `[[tenants.plugins]]` table with only `path` gives.
    pub fn new(path: impl Into<PathBuf>) -> PluginEntry {
        PluginEntry {
            path: path.into(),
            digest: None,
            instance: Default::default(),
            grants: Default::default(),
            limits: Default::default(),
        }
    }

    /// The plugin config this entry describes.
    pub fn plugin_config(&self) -> PluginConfig {
        PluginConfig::default()
            .with_digest(self.digest.clone())
            .with_instance(self.instance)
            .with_grants(self.grants.clone())
            .with_limits(self.limits.clone())
    }
}

/// Whether `text` is a lower-case hex SHA-256, as `api_keys` and `metrics_token` hold.
fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
