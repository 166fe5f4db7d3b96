//! `lovia call`.

use crate::CliError;
use lovia_host::plugin::config::PluginConfig;
use lovia_host::sandbox::{DirGrant, DirMode, Grants};
use lovia_host::{
    CallContext, CallLimits, CallRequest, DEFAULT_MAX_OUTPUT_CHARS, Host, HttpOrigin, SessionStore, SqliteStore,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The plugin (.wasm component).
    plugin: PathBuf,
    /// The tool to call.
    tool: String,
    /// The arguments as a JSON object [default: {}].
    #[arg(value_name = "ARGS_JSON")]
    arguments: Option<String>,
    /// Per-attempt timeout in milliseconds [default: the tool's timeout_ms,
    /// else none; the host's 60 s wall-clock ceiling always applies].
    #[arg(long, value_name = "N")]
    timeout_ms: Option<u64>,
    /// The session id the call runs in [default: none].
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Linear-memory limit of the instance in MiB [default: 64, or the plugin config's].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    memory_mib: Option<u32>,
    /// Mount a host directory for this call: HOST[:GUEST][:ro|rw]
    /// [default guest path: /data; default mode: ro] (repeatable).
    #[arg(long, value_name = "SPEC", value_parser = parse_dir_grant)]
    grant_dir: Vec<DirGrant>,
    /// Pass a host environment variable through, by name (repeatable).
    #[arg(long, value_name = "NAME")]
    grant_env: Vec<String>,
    /// Allow outbound HTTP to an origin for this call: scheme://host[:port],
    /// host may be *.domain or *; port * for any (repeatable). Loopback,
    /// private and metadata addresses need the host written out exactly,
    /// e.g. http://127.0.0.1:8080 [default: no network].
    #[arg(long, value_name = "ORIGIN", value_parser = parse_origin)]
    allow_http: Vec<HttpOrigin>,
    /// Grant the session store, kept in this SQLite file (needs --session).
    #[arg(long, value_name = "FILE", requires = "session")]
    store: Option<PathBuf>,
}

fn parse_origin(spec: &str) -> Result<HttpOrigin, String> {
    spec.parse::<HttpOrigin>()
        .map_err(|e| format!("{}; e.g. https://api.example.com or http://127.0.0.1:8080", e.reason))
}

/// `HOST[:GUEST][:ro|rw]`.
fn parse_dir_grant(spec: &str) -> Result<DirGrant, String> {
    let mut parts: Vec<&str> = spec.split(':').collect();
    let mode = match parts.last() {
        Some(&"ro") => {
            parts.pop();
            DirMode::Ro
        }
        Some(&"rw") => {
            parts.pop();
            DirMode::Rw
        }
        _ => DirMode::Ro,
    };
    let (host, guest) = match parts.as_slice() {
        [host] => (*host, "/data"),
        [host, guest] => (*host, *guest),
        _ => return Err("expected HOST[:GUEST][:ro|rw], e.g. ./data:/data:ro".into()),
    };
    let host = std::fs::canonicalize(host).map_err(|e| format!("{host}: {e}"))?;
    if !host.is_dir() {
        return Err(format!("{} is not a directory", host.display()));
    }
    if !guest.starts_with('/') {
        return Err(format!("guest path {guest:?} must be absolute, like /data"));
    }
    Ok(DirGrant { host, guest: guest.into(), mode })
}

pub(crate) async fn run(args: Args, host: Host) -> Result<ExitCode, CliError> {
    let arguments = args.arguments.unwrap_or_default();
    if !arguments.is_empty()
        && let Err(e) = serde_json::from_str::<serde_json::Value>(&arguments)
    {
        return Err(CliError::new(format!("ARGS_JSON is not valid JSON: {e}"))
            .hint("pass one JSON object in single quotes, e.g. '{\"query\": \"limits\"}'"));
    }
    let mut config = PluginConfig::load_beside(&args.plugin)?.unwrap_or_default();
    config.grants.extend(Grants {
        dirs: args.grant_dir,
        env: args.grant_env,
        secrets: Default::default(),
        http: args.allow_http,
    });
    let plugin = host.load_file_with(&args.plugin, config).await?;
    let session_store: Option<Arc<dyn SessionStore>> = match &args.store {
        Some(path) => Some(Arc::new(
            SqliteStore::open(path)
                .map_err(|e| CliError::new(e.to_string()).hint("pass a writable file path to --store"))?,
        )),
        None => None,
    };
    let Some(spec) = plugin.tool(&args.tool) else {
        let names: Vec<&str> = plugin.tools().map(|t| t.name.as_str()).collect();
        return Err(CliError::new(format!("{} has no tool named `{}`", args.plugin.display(), args.tool))
            .hint(format!("available tools: {}", names.join(", "))));
    };
    let limit = spec.max_output_chars.unwrap_or(DEFAULT_MAX_OUTPUT_CHARS);
    let mut limits = plugin.limits().clone();
    if let Some(mib) = args.memory_mib {
        limits = CallLimits { memory_bytes: (mib as usize) << 20, ..limits };
    }
    let request = CallRequest {
        context: CallContext {
            run_id: "cli".into(),
            call_id: "call_cli".into(),
            agent: "lovia-cli".into(),
            session_id: args.session,
            progress: Some(Arc::new(|message: &str| eprintln!("progress: {message}"))),
            ..CallContext::default()
        },
        timeout: args.timeout_ms.map(Duration::from_millis),
        limits: Some(limits),
        session_store,
        ..CallRequest::new(args.tool, arguments)
    };
    let outcome = plugin.invoke(&request).await;
    println!("{}", outcome.final_output(Some(limit)));
    Ok(if outcome.is_error() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
