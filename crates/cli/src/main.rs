//! `lovia`: build, inspect, pack, call, run, serve (over HTTP and MCP) and
//! bench tool plugins from the command line.

mod audit;
mod bench;
mod build;
mod call;
mod door;
mod inspect;
mod mcp;
mod mcp_sources;
mod new;
mod pack;
mod run;
mod serve;
mod sign;
mod supply;
mod telemetry;
mod web;
mod workspace;

use clap::{Parser, Subcommand};

/// See Cargo.toml: the executor's many small allocations are cheaper here.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use lovia_host::{Host, HostConfig, LoadError};
use std::path::PathBuf;
use std::process::ExitCode;

/// The heading of the options every command takes: grouped apart in each
/// command's help, after its own.
const GLOBAL: &str = "Global options";

/// Run LLM agent tools as sandboxed WebAssembly components.
#[derive(Parser)]
#[command(name = "lovia", version, about, long_about = None)]
struct Cli {
    /// Do not read or write the compiled-artifact cache.
    #[arg(long, global = true, help_heading = GLOBAL)]
    no_cache: bool,
    /// Where compiled components are cached [default: $LOVIA_CACHE_DIR,
    /// else $XDG_CACHE_HOME/lovia, else ~/.cache/lovia].
    #[arg(long, global = true, value_name = "DIR", help_heading = GLOBAL)]
    cache_dir: Option<PathBuf>,
    #[command(flatten)]
    supply: supply::SupplyOptions,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a plugin's tools as the model sees them, without running its code
    /// when it is packed (an unpacked one is loaded in a sandbox with nothing
    /// granted).
    Inspect(inspect::Args),
    /// Call one tool through the executor and print exactly what the model
    /// would see. A call that needs approval is asked about on the terminal,
    /// approved by --approve, and otherwise denied.
    ///
    /// Exit status: 0 for a successful result, 1 for an error result (still
    /// printed on stdout), 2 for usage or load errors (on stderr).
    Call(call::Args),
    /// Embed a plugin's manifest (info and tool specs) so that `inspect` can
    /// read it without running the plugin. Runs `info` and `tools` once, in
    /// a sandbox with nothing granted.
    Pack(pack::Args),
    /// Build a Python (@tool functions) or TypeScript/JavaScript (tool()
    /// declarations) tool file into a packed component, with componentize-py
    /// or esbuild and componentize-qjs: checks the declarations, compiles,
    /// embeds the manifest (docs/python.md, docs/typescript.md).
    Build(build::Args),
    /// Start a tool project, in Rust (the default), Python or TypeScript, with one example
    /// tool that builds as it is.
    New(new::Args),
    /// Run a scripted model's turns through the agent loop (the runner and
    /// its executor) and print every event as one JSON object per line.
    ///
    /// Exit status: 0 when the script ends with a text turn, 1 when the run
    /// fails (cancelled, budget exceeded, or the script ran out), 2 for usage,
    /// script or load errors.
    Run(run::Args),
    /// Measure per-call overhead, latency, throughput, cold start, timeout
    /// enforcement and memory through the full executor (build with
    /// --release for meaningful figures).
    Bench(bench::Args),
    /// Serve the tools of many tenants over HTTP: health, metrics, tool
    /// listing and direct calls, each behind a tenant's API key.
    Serve(serve::Args),
    /// Serve plugins' tools to MCP clients (Claude Desktop and Code, Cursor,
    /// VS Code, ...) over stdio, or over streamable HTTP with --http. Every
    /// call runs through the executor, sandboxed, with the plugin's grants
    /// and limits.
    Mcp(mcp::Args),
    /// Make a signing key pair: NAME.key (secret) and NAME.pub (public).
    Keygen(sign::KeygenArgs),
    /// Sign a packed plugin (embedded, or --detached beside it), in the
    /// WebAssembly signature format (wasmsign2, Ed25519).
    Sign(sign::SignArgs),
    /// Check a plugin's signature against public keys. Exit status: 0 when
    /// one of them signed it, 1 when none did, 2 for usage errors.
    Verify(sign::VerifyArgs),
    /// Publish a packed, signed plugin to an OCI registry
    /// (oci://registry/repository:tag), in the Wasm OCI artifact layout.
    Push(supply::PushArgs),
    /// Print the audit trail of a `lovia serve` store: every plugin load,
    /// pull, upload and refusal, with its tenant, digest and signer.
    Audit(audit::Args),
    /// The child `lovia serve` compiles components in (reads a component on
    /// stdin, writes the compiled artifact on stdout); not for people.
    #[command(hide = true)]
    CompileWorker {
        /// The engine settings, as the parent passes them.
        settings: String,
    },
}

/// A failure of the CLI itself: printed as one line plus a hint, exit status 2.
#[derive(Debug)]
pub(crate) struct CliError {
    message: String,
    hint: Option<String>,
}

impl CliError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), hint: None }
    }
    pub(crate) fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl From<LoadError> for CliError {
    fn from(e: LoadError) -> Self {
        CliError { message: e.to_string(), hint: e.hint().map(Into::into) }
    }
}

impl From<lovia_host::HostError> for CliError {
    fn from(e: lovia_host::HostError) -> Self {
        CliError::new(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A compile worker compiles and exits: no runtime, no log set-up.
    if let Command::CompileWorker { settings } = &cli.command {
        return lovia_host::engine::serve_compile_worker(settings);
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("LOVIA_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal: in a file or a
        // collector they are noise (and were most of a line's prefix).
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none())
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return report(&CliError::new(format!("cannot start the async runtime: {e}"))),
    };
    // Pulled components are kept beside the compiled ones, also with
    // --no-cache (which is about compiled artifacts): a pulled component
    // must load while its registry is down.
    let oci_cache = cli.cache_dir.clone().or_else(default_cache_dir).map(|d| d.join("oci"));
    let supply = || cli.supply.supply(oci_cache.clone());
    // Traces for the commands that run tools; `lovia serve` reads its
    // `[telemetry]` table itself. Started inside the runtime: an OTLP/gRPC
    // channel is driven by the runtime it is made in.
    let export = match &cli.command {
        Command::Call(_) | Command::Run(_) | Command::Mcp(_) => {
            match runtime.block_on(async { telemetry::start(&Default::default()) }) {
                Ok(export) => export,
                Err(e) => return report(&e),
            }
        }
        _ => None,
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Inspect(args) => inspect::run(args, || host(cli.no_cache, cli.cache_dir.clone())).await,
            Command::Call(args) => {
                // --memory-mib may ask for more than the default: the host's
                // instance slots are sized to what this one call may use.
                let mut config = host_config(cli.no_cache, cli.cache_dir.clone());
                if let Some(mib) = args.memory_mib() {
                    config.limits.memory_bytes = config.limits.memory_bytes.max((mib as usize) << 20);
                }
                call::run(args, Host::new(config)?, &supply()?).await
            }
            Command::Pack(args) => pack::run(args, host(cli.no_cache, cli.cache_dir.clone())?).await,
            Command::Run(args) => run::run(args, host(cli.no_cache, cli.cache_dir.clone())?, &supply()?).await,
            Command::Mcp(args) => mcp::run(args, host(cli.no_cache, cli.cache_dir.clone())?, supply()?).await,
            Command::Push(args) => supply::push(args, &supply()?).await,
            Command::Audit(args) => audit::run(args).await,
            Command::CompileWorker { .. } => Ok(ExitCode::SUCCESS),
            Command::Keygen(args) => sign::keygen(args),
            Command::Sign(args) => sign::sign(args),
            Command::Verify(args) => sign::verify(args),
            Command::Bench(args) => bench::run(args).await,
            Command::Build(args) => build::run(args, host(cli.no_cache, cli.cache_dir.clone())?).await,
            Command::New(args) => new::run(args),
            Command::Serve(args) => {
                serve::run(args, &cli.supply, |fuel_metering, compile_timeout| {
                    let mut config = host_config(cli.no_cache, cli.cache_dir.clone());
                    // A service's compiles (a tenant's uploads among them) go to
                    // its log, not to raw stderr lines a tenant could cause.
                    config.on_compile =
                        Some(lovia_host::engine::CompileNotice(std::sync::Arc::new(|origin: &str, bytes: usize| {
                            tracing::info!(%origin, bytes, "compiling a component");
                        })));
                    config.fuel_metering = fuel_metering;
                    // Every compile in a child of this same binary, killed past the timeout.
                    let program = std::env::current_exe()
                        .map_err(|e| CliError::new(format!("cannot find this program for its compile worker: {e}")))?;
                    config.compile_worker = Some(lovia_host::compile_worker::CompileWorker::new(
                        program,
                        ["compile-worker"],
                        compile_timeout,
                    ));
                    Ok(Host::new(config)?)
                })
                .await
            }
        }
    });
    if let Some(export) = export {
        // The spans still queued go before the process ends.
        export.shutdown();
    }
    match result {
        Ok(code) => code,
        Err(e) => report(&e),
    }
}

fn report(e: &CliError) -> ExitCode {
    eprintln!("error: {}", e.message);
    if let Some(h) = &e.hint {
        eprintln!("  hint: {h}");
    }
    ExitCode::from(2)
}

fn host(no_cache: bool, cache_dir: Option<PathBuf>) -> Result<Host, CliError> {
    Ok(Host::new(host_config(no_cache, cache_dir))?)
}

fn host_config(no_cache: bool, cache_dir: Option<PathBuf>) -> HostConfig {
    let cache_dir = if no_cache { None } else { cache_dir.or_else(default_cache_dir) };
    let kept = cache_dir.is_some();
    // A compile of a large component takes long enough to look like a
    // hang: say so before it starts. Its time is estimated at 0.4 s per MB
    // (`lovia --no-cache call` of an 18 MB Python component took 6.5 s, of a
    // 6.7 MB TypeScript one 1.2 s, debug build here); a compile of 2 s or
    // less goes unannounced.
    let notice = lovia_host::engine::CompileNotice(std::sync::Arc::new(move |origin: &str, bytes: usize| {
        let mb = bytes as f64 / 1_048_576.0;
        let secs = mb * 0.4;
        if secs > 2.0 {
            let then = if kept { "once: later loads use the cache" } else { "at every load without a cache" };
            eprintln!("lovia: compiling {origin} ({mb:.0} MB, about {secs:.0} s; {then})");
        }
    }));
    HostConfig::default().with_cache_dir(cache_dir).with_on_compile(Some(notice))
}

fn default_cache_dir() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("LOVIA_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("lovia")))
        .or_else(|| env("HOME").map(|h| h.join(".cache").join("lovia")))
}

/// The code-mode engine, loaded from the artifact cache, or compiled (and
/// kept there) with a line on stderr first: the compile takes seconds, once.
fn code_engine(host: &Host, door: &str) -> Result<std::sync::Arc<lovia_code::CodeEngine>, CliError> {
    let engine = lovia_code::CodeEngine::new_announcing(host, || {
        let kept = if host.config().cache_dir.is_some() {
            "once; later starts load it from the cache"
        } else {
            "every start without a cache"
        };
        eprintln!("{door}: compiling the code-mode engine (a few seconds, {kept})");
    })
    .map_err(|e| CliError::new(format!("--code-mode: {e}")))?;
    Ok(std::sync::Arc::new(engine))
}
