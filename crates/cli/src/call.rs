//! `lovia call`.

use crate::CliError;
use lovia_host::call::text;
use lovia_host::plugin::config::PluginConfig;
use lovia_host::sandbox::{DirGrant, DirMode, Grants};
use lovia_host::{
    ApprovalHandler, ApprovalRequest, BoxFuture, CallContext, EventSink, ExecSettings, Executor, HandlerAnswer, Host,
    HttpOrigin, RunState, SessionStore, SqliteStore, Tool, ToolCall, ToolEvent, ToolSource, Toolset, TurnError,
};
use std::io::{BufRead, IsTerminal, Write};
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
    /// Approve the call if the tool asks for approval. Without it, a call
    /// that needs approval is asked about on the terminal when stdin is
    /// one (y/N), and otherwise denied [default: deny].
    #[arg(long)]
    approve: bool,
}

impl Args {
    /// The memory `--memory-mib` asks for, if it was given.
    pub(crate) fn memory_mib(&self) -> Option<u32> {
        self.memory_mib
    }
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

pub(crate) async fn run(args: Args, host: Host, supply: &crate::supply::Supply) -> Result<ExitCode, CliError> {
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
        http_trace_context: Vec::new(),
    });
    // The executor passes no per-call limits, so --memory-mib becomes the
    // plugin's own limit, exactly as a `memory_mib` in its config would.
    if let Some(mib) = args.memory_mib {
        config.limits.memory_mib = Some(mib);
    }
    let plugin = supply.load(&host, &args.plugin, config).await?;
    let session_store: Option<Arc<dyn SessionStore>> = match &args.store {
        Some(path) => Some(Arc::new(
            SqliteStore::open(path)
                .map_err(|e| CliError::new(e.to_string()).hint("pass a writable file path to --store"))?,
        )),
        None => None,
    };
    // A one-call toolset holding only the tool asked for: the call runs with
    // every semantic of the executor (retries, approvals, rendering,
    // truncation at the tool's cap, else 200,000; docs/semantics.md §4).
    let Some(mut tool) =
        Tool::from_plugin_with_store(&plugin, session_store).into_iter().find(|t| t.name() == args.tool)
    else {
        let names: Vec<&str> = plugin.tools().map(|t| t.name.as_str()).collect();
        return Err(CliError::new(format!("{} has no tool named `{}`", args.plugin.display(), args.tool))
            .hint(format!("available tools: {}", names.join(", "))));
    };
    if let Some(ms) = args.timeout_ms {
        tool = tool.with_timeout(Duration::from_millis(ms));
    }
    let mut tools = Toolset::new();
    tools.add(ToolSource::Plugin, [tool]).map_err(|e| CliError::new(e.message()))?;
    let approver = if args.approve {
        Approver::Allow
    } else if std::io::stdin().is_terminal() {
        Approver::Terminal
    } else {
        // Defaults deny: with nobody to ask, a gated call does not run (docs/semantics.md §13).
        Approver::Deny
    };
    let settings = ExecSettings::default()
        .with_agent("lovia-cli".into())
        .with_approval_handler(Some(Arc::new(approver)))
        .with_telemetry(crate::telemetry::handle());
    let exec = Executor::new(tools, settings);
    let state = RunState { run_id: "cli".into(), session_id: args.session, turn: 1, ..RunState::default() };
    // Only progress is printed; an ApprovalRequired dropped here goes to the handler at once.
    let sink = EventSink::from_fn(|event| {
        if let ToolEvent::ToolProgress { message, .. } = event {
            eprintln!("progress: {message}");
        }
    });
    let call = ToolCall::new("call_cli", args.tool, arguments);
    let (output, is_error) = match exec.call(&call, &state, &sink).await {
        Ok(r) => (r.output, r.is_error),
        // The tool cancelled the run: the call has no result, and a runner
        // would answer it with the cancellation filler (docs/semantics.md D8).
        Err(TurnError::Cancelled { .. }) => (text::RUN_CANCELLED.to_owned(), true),
        Err(TurnError::BudgetExceeded { .. }) => (text::NOT_RUN_BUDGET.to_owned(), true),
        Err(_) => (text::RUN_CANCELLED.to_owned(), true),
    };
    println!("{output}");
    Ok(if is_error { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Who answers for a call that needs approval: `lovia call` has no event
/// consumer, so the approval handler decides (docs/semantics.md §13).
#[derive(Clone, Copy)]
enum Approver {
    /// `--approve`.
    Allow,
    /// Stdin is a terminal: ask the person at it.
    Terminal,
    /// Nobody to ask.
    Deny,
}

impl ApprovalHandler for Approver {
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        _ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<HandlerAnswer, String>> {
        let approver = *self;
        let request = request.clone();
        Box::pin(async move {
            match approver {
                Approver::Allow => Ok(HandlerAnswer::Allow),
                Approver::Deny => {
                    // The model-facing denial goes to stdout; the person
                    // who piped the call in learns why, and what to do.
                    eprintln!(
                        "lovia call: tool {} needs approval, and stdin is not a terminal to ask at, so it is denied",
                        request.tool
                    );
                    eprintln!("  hint: pass --approve to approve it, or run lovia call from a terminal to be asked");
                    Ok(HandlerAnswer::Deny)
                }
                // Reading stdin blocks: keep it off the async workers.
                Approver::Terminal => tokio::task::spawn_blocking(move || ask_on_terminal(&request))
                    .await
                    .map_err(|e| format!("the approval prompt failed: {e}")),
            }
        })
    }
}

/// Shows what would run (the decision is bound to the tool, the exact
/// argument text and the plugin digest, docs/semantics.md D7) and reads y/N.
/// Anything but `y` or `yes`, an empty line or end of input included, denies.
fn ask_on_terminal(request: &ApprovalRequest) -> HandlerAnswer {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "Tool {} needs approval.", request.tool);
    let _ = writeln!(err, "  arguments: {}", if request.arguments.is_empty() { "{}" } else { &request.arguments });
    if let Some(digest) = &request.plugin_digest {
        let _ = writeln!(err, "  plugin:    sha256:{digest}");
    }
    let _ = write!(err, "Run it? [y/N] ");
    let _ = err.flush();
    drop(err);
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(_) if matches!(line.trim().to_lowercase().as_str(), "y" | "yes") => HandlerAnswer::Allow,
        _ => HandlerAnswer::Deny,
    }
}
