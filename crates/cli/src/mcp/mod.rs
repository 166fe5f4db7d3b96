//! `lovia mcp`.

mod watch;

use crate::CliError;
use crate::supply::Supply;
use lovia_host::capability::Needs;
use lovia_host::plugin::config::PluginConfig;
use lovia_host::{Composition, ExecSettings, Executor, Host, Plugin, Tool, ToolSource, Toolset};
use lovia_mcp::{HttpOptions, McpOptions, McpQuestions, McpServer};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  lovia mcp orders.wasm docs.wasm                      # stdio, what desktop clients launch
  lovia mcp orders.wasm --http 127.0.0.1:8765          # streamable HTTP at http://127.0.0.1:8765/mcp
  lovia mcp orders.wasm --watch                        # reload orders.wasm when it or orders.toml changes
  lovia mcp --workspace ~/project --mode coding        # file and shell tools over ~/project
  lovia mcp orders.wasm --ask-human                    # and ask_human: questions go to the client as forms
  lovia mcp orders.wasm --code-mode                    # and run_code: programs that call the tools

Results: a text result is a text block; a JSON result is structuredContent plus
the same JSON as text; a tool error or invalid arguments is isError with the
exact string a model reads. A call that needs approval asks the client
(elicitation, or input_required on 2026-07-28) with the tool, the exact
arguments and the plugin digest, and runs only if accepted. Progress reaches
the client at most once per 100 ms per call, the latest message kept. Logs go
to stderr (LOVIA_LOG=info for more); on stdio, stdout carries only the
protocol. See docs/mcp.md.")]
pub(crate) struct Args {
    /// The plugins (.wasm components) whose tools are served, in this order.
    /// Each one's grants and limits come from the .toml beside it, as for
    /// `lovia call` [default: nothing granted, the host's limits].
    #[arg(
        value_name = "PLUGIN.wasm",
        required_unless_present_any = ["workspace", "ask_human", "mcp_servers", "read_page", "searxng", "brave_search"]
    )]
    plugins: Vec<PathBuf>,
    /// Also serve the tools of these MCP servers (`[[mcp_servers]]` tables:
    /// started as confined commands or reached by URL; docs/mcp.md, "MCP
    /// servers as tool sources"), after the plugins', so one `lovia mcp`
    /// aggregates and confines others. Their tools are the ones listed at
    /// start. Not with --watch [default: none].
    #[arg(long, value_name = "SERVERS.toml", conflicts_with = "watch")]
    mcp_servers: Option<PathBuf>,
    #[command(flatten)]
    web: crate::web::WebOptions,
    /// Also serve the workspace tools (read_file, list_files, grep_files,
    /// write_file, edit_file, shell, ...) over DIR, after the plugins' tools
    /// (docs/workspace.md). Not with --watch.
    #[arg(long, value_name = "DIR", conflicts_with = "watch")]
    workspace: Option<PathBuf>,
    #[command(flatten)]
    workspace_options: crate::workspace::WorkspaceOptions,
    /// A plugin config (TOML: grants, limits) used for every plugin listed,
    /// instead of the one beside each.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio. Only
    /// loopback Host headers are accepted (against DNS rebinding) unless
    /// --allow-host names more.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Per-attempt timeout in milliseconds for tools that declare none
    /// [default: none; the host's 60 s wall-clock ceiling always applies].
    #[arg(long, value_name = "N")]
    timeout_ms: Option<u64>,
    /// With --http: also accept this Host header (name or name:port; repeatable).
    #[arg(long, value_name = "HOST", requires = "http")]
    allow_host: Vec<String>,
    /// Also serve `ask_human`, first among the tools: the model asks the
    /// person at the client a question (free text, or 2 to 4 options), shown
    /// as a form (elicitation; input_required on 2026-07-28), and reads the
    /// answer (docs/mcp.md, "Questions"). Not with --watch.
    #[arg(long, conflicts_with = "watch")]
    ask_human: bool,
    /// Also serve `run_code` (code mode): the model sends a JavaScript
    /// program that calls the plugins' and the workspace's tools as async
    /// functions, and reads only what it logs and returns; every call it
    /// makes is checked, approved (elicitation) and limited like a direct one
    /// (docs/code-mode.md). Not with --watch.
    #[arg(long, conflicts_with = "watch")]
    code_mode: bool,
    /// How long an `ask_human` question waits for its answer, in seconds
    /// (1 to 3600); unanswered, the model reads "no answer within Ns —
    /// continue without one".
    #[arg(long, value_name = "SECS", default_value_t = 600, requires = "ask_human", value_parser = clap::value_parser!(u64).range(1..=3600))]
    question_timeout_secs: u64,
    /// How long a call that needs approval waits for the client's answer,
    /// in seconds (1 to 3600); unanswered, it is not approved.
    #[arg(long, value_name = "SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=3600))]
    approval_timeout_secs: u64,
    /// The most tasks kept at once for 2025-11-25 clients that call a long
    /// tool (one that may wait for approval, runs a program, or has no
    /// timeout or one of 10 s or more) as a task, running or ended until
    /// its ttl (at most an hour) passes; the oldest ended task makes room
    /// for a new one. 0 offers no tasks (docs/mcp.md, "Tasks").
    #[arg(long, value_name = "N", default_value_t = lovia_mcp::DEFAULT_MAX_TASKS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=10_000))]
    max_tasks: usize,
    /// Reload a plugin when its file or its config (the .toml beside it, or
    /// --config) changes (polled every 500 ms; a change is loaded once the
    /// files have stayed the same for one poll), and send
    /// notifications/tools/list_changed to every client. A plugin or config
    /// that fails to load keeps the old version, and the reason goes to
    /// stderr [default: the plugins are loaded once].
    #[arg(long)]
    watch: bool,
}

/// One plugin file served, and the file its config comes from (read again
/// by `--watch` when either changes).
pub(crate) struct Served {
    path: PathBuf,
    config_file: ConfigFile,
    plugin: Plugin,
}

/// Where a served plugin's config comes from.
#[derive(Debug, Clone)]
pub(crate) enum ConfigFile {
    /// `--config FILE`: it must exist.
    Shared(PathBuf),
    /// The `.toml` beside the plugin: without one, the defaults.
    Beside(PathBuf),
    /// Neither (a plugin whose name does not end in `.wasm`).
    None,
}

impl ConfigFile {
    /// The file to watch, if any.
    pub(crate) fn path(&self) -> Option<&Path> {
        match self {
            Self::Shared(path) | Self::Beside(path) => Some(path),
            Self::None => None,
        }
    }

    /// Reads the config as it is now.
    pub(crate) fn read(&self) -> Result<PluginConfig, lovia_host::LoadError> {
        match self {
            Self::Shared(path) => PluginConfig::load(path),
            Self::Beside(path) if path.exists() => PluginConfig::load(path),
            Self::Beside(_) | Self::None => Ok(PluginConfig::default()),
        }
    }
}

/// The toolset of `served`, in their order, and their names by digest for
/// the approval prompt.
fn toolset(served: &[&Served]) -> Result<(Toolset, HashMap<String, String>), CliError> {
    let mut tools = Toolset::new();
    let mut names = HashMap::new();
    for s in served {
        // The approval prompt names the plugin beside its digest.
        names.insert(s.plugin.digest().to_owned(), s.plugin.info().name.clone());
        tools.add(ToolSource::Plugin, Tool::from_plugin(&s.plugin)).map_err(|e| {
            CliError::new(format!("{}: {}", s.path.display(), e.message()))
                .hint("two plugins have a tool of this name: serve them from separate `lovia mcp` processes, or rename the tool in one of them")
        })?;
    }
    Ok((tools, names))
}

async fn load(
    host: &Host,
    path: &Path,
    shared: Option<(&Path, &PluginConfig)>,
    supply: &Supply,
) -> Result<Served, CliError> {
    let (config, config_file) = match shared {
        Some((file, c)) => (c.clone(), ConfigFile::Shared(file.to_owned())),
        None => (
            PluginConfig::load_beside(path)?.unwrap_or_default(),
            PluginConfig::path_beside(path).map_or(ConfigFile::None, ConfigFile::Beside),
        ),
    };
    let plugin = supply.load(host, path, config).await?;
    Ok(Served { path: path.to_owned(), config_file, plugin })
}

pub(crate) async fn run(args: Args, host: Host, supply: Supply) -> Result<ExitCode, CliError> {
    let shared = match &args.config {
        Some(path) => Some((path.as_path(), PluginConfig::load(path)?)),
        None => None,
    };
    let mut served = Vec::with_capacity(args.plugins.len());
    for path in &args.plugins {
        served.push(load(&host, path, shared.as_ref().map(|(p, c)| (*p, c)), &supply).await?);
    }
    // The approval prompt names each plugin beside its digest.
    let plugin_names: HashMap<String, String> =
        served.iter().map(|s| (s.plugin.digest().to_owned(), s.plugin.info().name.clone())).collect();
    let mut door = Composition::new();
    for s in &served {
        door.push(Arc::new(s.plugin.clone()));
    }
    // The MCP servers (they live as long as the server does: a command
    // server is stopped when its source goes), the web tools and the
    // workspace, from the flags `lovia run` shares.
    // The workspace is the door's from here (its tools hold it).
    let _workspace = crate::door::add_shared(
        &mut door,
        crate::door::SharedFlags {
            command: "lovia mcp",
            mcp_servers: args.mcp_servers.as_deref(),
            web: &args.web,
            workspace: args.workspace.as_deref().map(|dir| (dir, &args.workspace_options)),
        },
    )
    .await?;
    let mut options = McpOptions::default();
    // ask_human before code mode, so that a program can ask too.
    if args.ask_human {
        let questions = McpQuestions::with_timeout(std::time::Duration::from_secs(args.question_timeout_secs));
        door.push(Arc::new(lovia_host::human::ask_human_capability(questions.tool())));
        options.questions = Some(questions);
    }
    if args.code_mode {
        let engine = crate::code_engine(&host, "lovia mcp")?;
        let code_mode = lovia_code::code_mode(engine, &door, lovia_code::CodeLimits::default())
            .map_err(|e| CliError::new(format!("--code-mode: {e}")))?;
        door.push(Arc::new(code_mode));
    }
    // The MCP client answers questions (elicitation) and decides approvals.
    door.check_needs("lovia mcp", Needs::NOTHING.questions().approvals())
        .map_err(|e| crate::door::refusal("lovia mcp", e))?;
    let tools = door.toolset().map_err(|e| crate::door::refusal("lovia mcp", e))?;
    // The sections a model would read in its system message (the
    // workspace's, the deferred servers') go where MCP puts text for the
    // model; the server adds each plugin's instructions itself.
    let sections: Vec<String> = door
        .capabilities()
        .iter()
        .filter(|c| c.source() != ToolSource::Plugin)
        .filter_map(|c| c.instructions())
        .collect();
    let context = (!sections.is_empty()).then(|| sections.join("\n\n"));
    options.instructions = context;
    options.approval_timeout = std::time::Duration::from_secs(args.approval_timeout_secs);
    options.plugin_names = plugin_names;
    options.list_changed = args.watch;
    options.tasks.max_kept = args.max_tasks;
    // No approval handler: lovia-mcp asks the client and decides every gated
    // call itself; one nobody decided is denied (docs/semantics.md §13).
    let settings = ExecSettings::default()
        .with_agent("lovia-mcp".into())
        .with_telemetry(crate::telemetry::handle())
        .with_default_timeout(args.timeout_ms.map(std::time::Duration::from_millis));
    let server = McpServer::with_options(Executor::new(tools, settings.clone()), options)
        .map_err(|e| CliError::new(e.to_string()))?;
    let count = server.tools().len();
    if supply.policy.mode == lovia_supply::SignatureMode::Off {
        eprintln!("lovia mcp: plugin signatures are not checked (--signatures off, the default)");
    }
    // Polls for as long as the process serves; it only reads files.
    if args.watch {
        tokio::spawn(watch::watch(host, served, settings, server.clone(), supply));
    }
    match args.http {
        None => {
            tracing::info!(tools = count, "serving MCP on stdio");
            server.serve_stdio().await.map_err(|e| CliError::new(e.to_string()))?;
        }
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| CliError::new(format!("cannot listen on {addr}: {e}")).hint("pick another port"))?;
            let local = listener.local_addr().map_err(|e| CliError::new(e.to_string()))?;
            // A bare name in the allowlist matches any port.
            let mut options = HttpOptions::default();
            options.allowed_hosts.extend(args.allow_host);
            let shutdown = options.shutdown.clone();
            let router = axum::Router::new().route_service("/mcp", server.http_service(options));
            // The address goes to stderr, as every log line: a test or a
            // supervisor reads it there.
            eprintln!("lovia mcp: {count} tools at http://{local}/mcp");
            // Without TCP_NODELAY an answer written in pieces (an SSE
            // stream) waits for the client's delayed ACK: 40 ms per call.
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            });
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = tokio::signal::ctrl_c().await;
                    // Ends open SSE streams, which would otherwise hold the shutdown.
                    shutdown.cancel();
                })
                .await
                .map_err(|e| CliError::new(format!("server error: {e}")))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
