//! `lovia bench`: the figures of docs/performance.md, measured
//! through the full executor (preflight, validation, scheduling,
//! instantiation, call, rendering, events) on this machine, and through
//! `lovia serve` over loopback (serve.rs), and through `lovia mcp` over
//! stdio and streamable HTTP (mcp.rs).

mod code;
mod floor;
mod load;
mod mcp;
mod serve;
mod telemetry;
mod tenants;
mod web;
mod workspace;

use crate::CliError;
use lovia_host::plugin::config::PluginConfig;
use lovia_host::{
    EventSink, ExecSettings, Executor, Host, HostConfig, InstanceMode, Plugin, RunState, Tool, ToolCall, ToolSource,
    Toolset,
};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The diagnostics example plugin (its `echo`, `spin_ms` and `sleep_ms`
    /// tools are what is measured); `scripts/demo` and `bench/run` build it.
    #[arg(long, value_name = "WASM", default_value = "target/plugins/diagnostics.wasm")]
    plugin: PathBuf,
    /// More components whose cold start (compile vs cached load) to measure
    /// besides the plugin's (repeatable).
    #[arg(long = "cold-start", value_name = "WASM")]
    cold_start: Vec<PathBuf>,
    /// `echo` calls in the overhead turn.
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    calls: u32,
    /// `sleep_ms` calls in flight at once for the memory figure.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    concurrent: u32,
    /// A Python plugin with an `echo(text)` tool (bench/python-tool; bench/run
    /// builds it): its cold start and its single-call latency, fresh and
    /// warm, are measured beside the Rust plugin's.
    #[arg(long, value_name = "WASM")]
    python: Option<PathBuf>,
    /// A TypeScript plugin with an `echo(text)` tool (bench/js-tool; bench/run
    /// builds it): its cold start and its single-call latency, fresh and
    /// warm, are measured beside the Rust plugin's.
    #[arg(long, value_name = "WASM")]
    js: Option<PathBuf>,
    /// Keep-alive connections driving `lovia serve` in `--only serve`, and
    /// concurrent clients (calls in flight) in `--only mcp`.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    connections: u32,
    /// Tenants of the many-tenant service in `--only tenants`, each with
    /// the `--plugin` and the `orders.wasm` and `docs.wasm` beside it.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    tenants: u32,
    /// Seconds `--only serve` and `--only mcp` drive each service for.
    #[arg(long, value_name = "S", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
    seconds: u64,
    /// Bytes of each pooled memory kept mapped between instances, in MiB
    /// (`HostConfig::keep_resident_bytes`), to compare settings in one
    /// sitting [default: the host's, 2 MiB].
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u32).range(0..=1024))]
    keep_resident_mib: Option<u32>,
    /// Run only these, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    only: Vec<Bench>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Only serve the HTTP floor of `--only serve` (a fixed answer to every
    /// POST, from the same axum stack) on ADDR until Ctrl-C or SIGTERM, for
    /// an external load generator to drive beside `lovia serve`
    /// (bench/wrk.sh); nothing is measured.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["only", "json"])]
    serve_floor: Option<std::net::SocketAddr>,
    /// Where `--only telemetry` sends its spans (an OTLP/HTTP endpoint)
    /// [default: a receiver in the bench process that keeps nothing].
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Bench {
    Overhead,
    Latency,
    Throughput,
    ColdStart,
    Timeout,
    Memory,
    /// `POST /api/tools/echo/call` through `lovia serve` on loopback,
    /// beside the in-process throughput of the same run.
    Serve,
    /// `tools/call` of `echo` through `lovia mcp` over stdio (a child
    /// process) and streamable HTTP (stateless 2026-07-28), beside the same
    /// call through the executor.
    Mcp,
    /// `read_file`, `edit_file` and `shell "true"` of a workspace through
    /// the executor, beside spawning `sh -c true` unconfined.
    Workspace,
    /// `read_page` and `web_search` against a server on loopback through
    /// the executor, beside a bare GET of the same URLs.
    Web,
    /// The `--python` plugin's `echo`, one call at a time, fresh and warm
    /// (also part of `latency` and `overhead`).
    Python,
    /// The `--js` plugin's `echo`, one call at a time, fresh and warm (also
    /// part of `latency` and `overhead`).
    Js,
    /// Code mode: the engine's size and compile, a program's cost beside
    /// direct calls, and a support task tool by tool and as one program.
    Code,
    /// `lovia serve` with `--tenants` tenants of three plugins each beside
    /// one tenant: start, resident memory, one tenant's call latency. Only
    /// when named: it is not part of the default set.
    Tenants,
    /// The lone call and `lovia serve`'s throughput with traces off, on
    /// with sampling 0 and on with sampling 1 (`--otlp-endpoint`). Only
    /// when named: it is not part of the default set.
    Telemetry,
}

#[derive(Serialize, Default)]
struct Report {
    machine: Machine,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    overhead: Vec<Overhead>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency: Option<Latency>,
    /// The lone call's floor: a bare fresh call, one at a time.
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_floor: Option<Latency>,
    #[serde(skip_serializing_if = "Option::is_none")]
    throughput: Option<Throughput>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    cold_start: Vec<ColdStart>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<TimeoutFigure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<Memory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    python: Option<GuestCalls>,
    #[serde(skip_serializing_if = "Option::is_none")]
    js: Option<GuestCalls>,
    #[serde(skip_serializing_if = "Option::is_none")]
    serve: Option<serve::ServeFigure>,
    /// `serve`'s floor: an HTTP echo in this process, same connections.
    #[serde(skip_serializing_if = "Option::is_none")]
    serve_floor: Option<floor::HttpFloor>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mcp: Option<mcp::McpFigure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    workspace: Option<workspace::WorkspaceFigure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    web: Option<web::WebFigure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<code::CodeFigure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tenants: Option<tenants::TenantsFigure>,
    #[serde(skip_serializing_if = "Option::is_none")]
    telemetry: Option<telemetry::TelemetryFigure>,
}

/// Single-call latency of the Python plugin's `echo`.
#[derive(Serialize)]
struct GuestCalls {
    component: String,
    fresh: Latency,
    session: Latency,
    /// A bare fresh call of the same component, one at a time.
    fresh_floor: Latency,
    /// A bare call on one live instance of it.
    session_floor: Latency,
}

#[derive(Serialize, Default)]
struct Machine {
    cpus: usize,
    cpu_model: String,
    memory_gib: f64,
    lovia: &'static str,
    optimized: bool,
    pooling_allocator: bool,
    keep_resident_mib: f64,
}

#[derive(Serialize)]
struct Overhead {
    mode: &'static str,
    calls: u32,
    turn_ms: f64,
    us_per_call: f64,
    /// The same calls made bare: concurrent fresh instances, or one after
    /// another on one live instance (session).
    floor_us_per_call: f64,
}

#[derive(Serialize)]
struct Latency {
    samples: usize,
    p50_us: f64,
    p99_us: f64,
}

impl Latency {
    /// The p50 and p99 of `times`, in seconds.
    fn of_seconds(mut times: Vec<f64>) -> Latency {
        Latency {
            samples: times.len(),
            p50_us: percentile(&mut times, 50.0) * 1e6,
            p99_us: percentile(&mut times, 99.0) * 1e6,
        }
    }
}

#[derive(Serialize)]
struct Throughput {
    workers: usize,
    seconds: f64,
    calls: u64,
    calls_per_second: f64,
}

#[derive(Serialize)]
struct ColdStart {
    component: String,
    mib: f64,
    compile_ms: f64,
    /// A load right after the compile: the artifact is read and its tag
    /// checked in full, because its stamp has not settled yet.
    just_cached_load_ms: f64,
    /// A load of an artifact verified once before, older than
    /// `artifacts::SETTLED`: mapped, not read.
    cached_load_ms: f64,
    /// wasmtime's deserialisation of the same artifact, alone.
    floor_load_ms: f64,
}

#[derive(Serialize)]
struct TimeoutFigure {
    timeout_ms: u64,
    returned_after_ms: f64,
    cpu_ms_in_next_second: f64,
    idle_cpu_ms_per_second: f64,
}

#[derive(Serialize)]
struct Memory {
    concurrent_calls: u32,
    all_answered: bool,
    baseline_mib: f64,
    peak_mib: f64,
}

pub(crate) async fn run(args: Args) -> Result<ExitCode, CliError> {
    if let Some(addr) = args.serve_floor {
        floor::serve_until_stopped(addr).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let wants = |b: Bench| args.only.is_empty() || args.only.contains(&b);
    if args.only.contains(&Bench::Python) && args.python.is_none() {
        return Err(CliError::new("--only python measures the plugin of --python, and none was given")
            .hint("build one with bench/run (target/bench/pyecho.wasm), then pass --python PATH"));
    }
    // Many tenants only when asked for by name: it starts a thousand-tenant
    // service. Its plugins are checked before anything runs.
    let tenant_plugins = match args.only.contains(&Bench::Tenants) {
        true => {
            let dir = args.plugin.parent().unwrap_or(Path::new("."));
            let plugins = vec![args.plugin.clone(), dir.join("orders.wasm"), dir.join("docs.wasm")];
            if let Some(missing) = plugins.iter().find(|p| !p.exists()) {
                return Err(CliError::new(format!("--only tenants loads {}, which does not exist", missing.display()))
                    .hint(
                        "it takes orders.wasm and docs.wasm from the --plugin's directory: build them with bench/run",
                    ));
            }
            Some(plugins)
        }
        false => None,
    };
    if args.only.contains(&Bench::Js) && args.js.is_none() {
        return Err(CliError::new("--only js measures the plugin of --js, and none was given")
            .hint("build one with bench/run (target/bench/jsecho.wasm), then pass --js PATH"));
    }
    let bytes = std::fs::read(&args.plugin).map_err(|e| {
        CliError::new(format!("cannot read {}: {e}", args.plugin.display()))
            .hint("build the example plugins first: scripts/demo (or bench/run), or pass --plugin PATH")
    })?;
    // Enough pool slots for every sleeping call plus headroom, so the memory
    // figure measures the pooling allocator as a server would size it.
    let mut config = HostConfig::default().with_pool_slots(args.concurrent + 64);
    if let Some(mib) = args.keep_resident_mib {
        config.keep_resident_bytes = (mib as usize) << 20;
    }
    let keep_resident_bytes = config.keep_resident_bytes;
    let host = Host::new(config)?;
    let origin = args.plugin.display().to_string();
    let fresh = host.load_bytes(&bytes, &origin).await?;
    let for_tool = |plugin: &Plugin, tool: &str| -> Result<(), CliError> {
        match plugin.tool(tool) {
            Some(_) => Ok(()),
            None => Err(CliError::new(format!("{origin} has no `{tool}` tool"))
                .hint("pass the diagnostics example plugin (example-tools/diagnostics)")),
        }
    };
    for tool in ["echo", "spin_ms", "sleep_ms"] {
        for_tool(&fresh, tool)?;
    }
    let mut report = Report { machine: machine(&host, keep_resident_bytes), ..Report::default() };
    let exec = executor(&fresh);

    // Memory first: the baseline is then this process before any other work.
    if wants(Bench::Memory) {
        report.memory = Some(memory(&exec, args.concurrent).await);
    }
    if wants(Bench::Overhead) {
        let mut figure = overhead(&exec, args.calls, None).await;
        figure.floor_us_per_call = floor::fresh_per_call(&fresh, "echo", ECHO_ARGS, args.calls).await?;
        report.overhead.push(figure);
        let session = PluginConfig::default().with_instance(InstanceMode::Session);
        let warm = host.load_bytes_with(&bytes, &origin, session).await?;
        let mut figure = overhead(&executor(&warm), args.calls, Some("bench")).await;
        figure.floor_us_per_call = floor::warm_per_call(&warm, "echo", ECHO_ARGS, args.calls).await?;
        report.overhead.push(figure);
    }
    if wants(Bench::Latency) {
        report.latency = Some(latency(&exec).await);
        report.latency_floor = Some(floor::fresh_latency(&fresh, "echo", ECHO_ARGS, 200, 5_000).await?);
    }
    if wants(Bench::Throughput) || wants(Bench::Serve) {
        report.throughput = Some(throughput(&exec).await);
    }
    if wants(Bench::Serve) {
        let window = Duration::from_secs(args.seconds);
        report.serve = Some(serve::serve(&host, &args.plugin, args.connections, window).await?);
        report.serve_floor = Some(floor::http(args.connections, window).await?);
    }
    if wants(Bench::Mcp) {
        let window = Duration::from_secs(args.seconds);
        report.mcp = Some(mcp::mcp(&exec, &args.plugin, args.connections, window).await?);
    }
    if wants(Bench::Workspace) {
        report.workspace = Some(workspace::workspace().await?);
    }
    if wants(Bench::Web) {
        report.web = Some(web::web().await?);
    }
    if wants(Bench::Code) {
        report.code = Some(code::code(&host).await?);
    }
    if let Some(plugins) = &tenant_plugins {
        let window = Duration::from_secs(args.seconds);
        report.tenants = Some(tenants::tenants(&host, plugins, args.tenants, window).await?);
    }
    if args.only.contains(&Bench::Telemetry) {
        let window = Duration::from_secs(args.seconds);
        report.telemetry = Some(
            telemetry::telemetry(&host, &fresh, &args.plugin, args.connections, window, args.otlp_endpoint.clone())
                .await?,
        );
    }
    if let Some(path) = &args.python
        && (wants(Bench::Latency) || wants(Bench::Overhead) || wants(Bench::Python))
    {
        report.python = Some(guest_calls(&host, path, "bench/python-tool").await?);
    }
    if let Some(path) = &args.js
        && (wants(Bench::Latency) || wants(Bench::Overhead) || wants(Bench::Js))
    {
        report.js = Some(guest_calls(&host, path, "bench/js-tool").await?);
    }
    if wants(Bench::Timeout) {
        report.timeout = Some(timeout(&exec).await);
    }
    // Cold start last: compiling large components grows this process.
    if wants(Bench::ColdStart) {
        let mut paths = vec![args.plugin.clone()];
        paths.extend(args.cold_start.iter().cloned());
        paths.extend(args.python.iter().cloned());
        paths.extend(args.js.iter().cloned());
        for path in paths {
            report.cold_start.push(cold_start(&path).await?);
        }
    }

    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| CliError::new(e.to_string()))?);
    } else {
        print!("{}", table(&report));
    }
    Ok(ExitCode::SUCCESS)
}

fn executor(plugin: &Plugin) -> Executor {
    // Names are unique within one plugin, so this cannot conflict.
    let tools = Toolset::new().with(ToolSource::Plugin, Tool::from_plugin(plugin)).unwrap_or_default();
    Executor::new(tools, ExecSettings::default())
}

/// Runs one turn, draining its events as a consumer would. A lone call's
/// events are drained in the same task, beside the turn (`tokio::join!`):
/// a consumer in a task of its own costs a spawn per turn and a
/// cross-thread wake per event, which on a 2-vCPU VM was most of a lone
/// call's time. A turn of many calls is drained by a task of its own, on
/// the other core, which is the faster way there. docs/performance.md
/// ("Round three") has both ways' figures.
async fn turn(exec: &Executor, calls: &[ToolCall], run: &RunState) -> (Duration, usize) {
    let (sink, mut rx) = EventSink::channel();
    let drain = async move {
        let mut n = 0;
        while rx.recv().await.is_some() {
            n += 1;
        }
        n
    };
    let start = Instant::now();
    let run = async move {
        let answered = exec.run_turn(calls, run, &sink).await.map(|r| r.len()).unwrap_or(0);
        let elapsed = start.elapsed();
        // The sink goes with the turn, so the drain ends.
        drop(sink);
        (elapsed, answered)
    };
    if calls.len() == 1 {
        tokio::join!(run, drain).0
    } else {
        let drain = tokio::spawn(drain);
        let done = run.await;
        let _ = drain.await;
        done
    }
}

/// The arguments of every `echo` call measured, and of its floors.
const ECHO_ARGS: &str = r#"{"text": "hi"}"#;

fn echo_calls(n: u32) -> Vec<ToolCall> {
    (0..n).map(|i| ToolCall::new(format!("call_{i}"), "echo", ECHO_ARGS)).collect()
}

async fn overhead(exec: &Executor, n: u32, session: Option<&str>) -> Overhead {
    let calls = echo_calls(n);
    let run = RunState { session_id: session.map(str::to_owned), ..RunState::default() };
    for _ in 0..5 {
        turn(exec, &calls, &run).await;
    }
    let mut times: Vec<f64> = Vec::new();
    for _ in 0..25 {
        times.push(turn(exec, &calls, &run).await.0.as_secs_f64());
    }
    let median = percentile(&mut times, 50.0);
    Overhead {
        mode: if session.is_some() { "session" } else { "fresh" },
        calls: n,
        turn_ms: median * 1e3,
        us_per_call: median * 1e6 / f64::from(n),
        floor_us_per_call: 0.0,
    }
}

async fn latency(exec: &Executor) -> Latency {
    latency_of(exec, &RunState::default(), 200, 5_000).await
}

/// `samples` single-call turns after `warm_up` ones.
async fn latency_of(exec: &Executor, run: &RunState, warm_up: u32, samples: u32) -> Latency {
    let calls = echo_calls(1);
    for _ in 0..warm_up {
        turn(exec, &calls, run).await;
    }
    let mut times: Vec<f64> = Vec::new();
    for _ in 0..samples {
        times.push(turn(exec, &calls, run).await.0.as_secs_f64());
    }
    Latency::of_seconds(times)
}

/// A Python or TypeScript plugin's `echo` (the plugin of `source`), one
/// call per turn: a fresh instance each time, then one warm instance for a session.
async fn guest_calls(host: &Host, path: &Path, source: &str) -> Result<GuestCalls, CliError> {
    let bytes = std::fs::read(path).map_err(|e| CliError::new(format!("cannot read {}: {e}", path.display())))?;
    let origin = path.display().to_string();
    let fresh = host.load_bytes(&bytes, &origin).await?;
    if fresh.tool("echo").is_none() {
        return Err(
            CliError::new(format!("{origin} has no `echo` tool")).hint(format!("pass {source}, built by bench/run"))
        );
    }
    let session = PluginConfig::default().with_instance(InstanceMode::Session);
    let warm = host.load_bytes_with(&bytes, &origin, session).await?;
    let run = RunState { session_id: Some("bench".into()), ..RunState::default() };
    Ok(GuestCalls {
        component: path.file_name().map_or(origin.clone(), |n| n.to_string_lossy().into_owned()),
        fresh: latency_of(&executor(&fresh), &RunState::default(), 20, 500).await,
        session: latency_of(&executor(&warm), &run, 20, 2_000).await,
        fresh_floor: floor::fresh_latency(&fresh, "echo", ECHO_ARGS, 20, 500).await?,
        session_floor: floor::warm_latency(&warm, "echo", ECHO_ARGS, 20, 2_000).await?,
    })
}

async fn throughput(exec: &Executor) -> Throughput {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()) * 2;
    let window = Duration::from_secs(3);
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let exec = exec.clone();
        tasks.spawn(async move {
            let calls = echo_calls(50);
            let run = RunState::default();
            let mut done = 0u64;
            while start.elapsed() < window {
                done += turn(&exec, &calls, &run).await.1 as u64;
            }
            done
        });
    }
    let mut calls = 0;
    while let Some(done) = tasks.join_next().await {
        calls += done.unwrap_or(0);
    }
    let seconds = start.elapsed().as_secs_f64();
    Throughput { workers, seconds, calls, calls_per_second: calls as f64 / seconds }
}

async fn cold_start(path: &Path) -> Result<ColdStart, CliError> {
    let bytes = std::fs::read(path).map_err(|e| CliError::new(format!("cannot read {}: {e}", path.display())))?;
    let origin = path.display().to_string();
    let mut compile = Vec::new();
    for _ in 0..3 {
        let host = Host::new(HostConfig::default().with_pool_slots(16))?;
        let start = Instant::now();
        host.load_bytes(&bytes, &origin).await?;
        compile.push(start.elapsed().as_secs_f64());
    }
    // A private directory of its own, removed however this returns.
    let cache = tempfile::tempdir().map_err(|e| CliError::new(format!("cannot make a temporary directory: {e}")))?;
    let cached_host =
        || Host::new(HostConfig::default().with_pool_slots(16).with_cache_dir(Some(cache.path().join("cache"))));
    let host = cached_host()?;
    host.load_bytes(&bytes, &origin).await?;
    let timed_loads = |n: usize| async move {
        let mut times = Vec::new();
        for _ in 0..n {
            // A host of its own per load, as a new process has: a host shares
            // a live plugin's compiled component with the next load of the
            // same bytes (the many-tenants figure), which is not what this
            // one measures.
            let host = cached_host()?;
            let start = Instant::now();
            host.load_file(path).await?;
            times.push(start.elapsed().as_secs_f64());
        }
        Ok::<_, CliError>(times)
    };
    let mut just_cached = timed_loads(5).await?;
    // A stamp is trusted only once the files it stands for are settled
    // (lovia_host's artifacts.rs); until then every load checks the
    // artifact in full, as the loads above did.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let plugin = host.load_file(path).await?;
    let mut cached = timed_loads(30).await?;
    let floor_load_ms = floor::cached_load_ms(&plugin, 30)?;
    Ok(ColdStart {
        component: path.file_name().map_or(origin.clone(), |n| n.to_string_lossy().into_owned()),
        mib: bytes.len() as f64 / f64::from(1 << 20),
        compile_ms: percentile(&mut compile, 50.0) * 1e3,
        just_cached_load_ms: percentile(&mut just_cached, 50.0) * 1e3,
        cached_load_ms: percentile(&mut cached, 50.0) * 1e3,
        floor_load_ms,
    })
}

async fn timeout(exec: &Executor) -> TimeoutFigure {
    let idle_before = cpu_time();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = cpu_time() - idle_before;
    let timeout_ms = 50;
    let calls = [ToolCall::new("spin", "spin_ms", r#"{"ms": 10000}"#)];
    let exec = {
        let settings = exec.settings().clone().with_default_timeout(Some(Duration::from_millis(timeout_ms)));
        Executor::new(exec.tools().clone(), settings)
    };
    let mut returned = Vec::new();
    let mut after = Vec::new();
    for _ in 0..5 {
        returned.push(turn(&exec, &calls, &RunState::default()).await.0.as_secs_f64());
        let before = cpu_time();
        tokio::time::sleep(Duration::from_secs(1)).await;
        after.push((cpu_time() - before).as_secs_f64());
    }
    TimeoutFigure {
        timeout_ms,
        returned_after_ms: percentile(&mut returned, 100.0) * 1e3,
        cpu_ms_in_next_second: percentile(&mut after, 100.0) * 1e3,
        idle_cpu_ms_per_second: idle.as_secs_f64() * 1e3,
    }
}

async fn memory(exec: &Executor, n: u32) -> Memory {
    let baseline = rss_mib();
    let calls: Vec<ToolCall> =
        (0..n).map(|i| ToolCall::new(format!("sleep_{i}"), "sleep_ms", r#"{"ms": 2000}"#)).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut peak: f64 = 0.0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss_mib());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            peak
        })
    };
    let (_, answered) = turn(exec, &calls, &RunState::default()).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.await.unwrap_or(0.0).max(rss_mib());
    Memory { concurrent_calls: n, all_answered: answered == n as usize, baseline_mib: baseline, peak_mib: peak }
}

/// The `p`th percentile (nearest rank) of `values`.
pub(super) fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// CPU time (user + system) of this process so far, from /proc/self/stat.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<u64> = rest.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect();
    // utime and stime are fields 14 and 15, in clock ticks (100 per second on Linux).
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// Resident memory of this process in MiB, from /proc/self/status.
fn rss_mib() -> f64 {
    proc_kib("/proc/self/status", "VmRSS:") / 1024.0
}

fn proc_kib(file: &str, key: &str) -> f64 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

fn machine(host: &Host, keep_resident_bytes: usize) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "unknown".into());
    Machine {
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        cpu_model,
        memory_gib: (proc_kib("/proc/meminfo", "MemTotal:") / f64::from(1 << 20) * 10.0).round() / 10.0,
        lovia: env!("CARGO_PKG_VERSION"),
        optimized: !cfg!(debug_assertions),
        pooling_allocator: host.is_pooled(),
        keep_resident_mib: keep_resident_bytes as f64 / f64::from(1 << 20),
    }
}

/// `figure` as a multiple of `floor`, as the table prints it.
fn times(figure: f64, floor: f64) -> String {
    if floor > 0.0 { format!("{:.2}×", figure / floor) } else { "—".into() }
}

fn table(r: &Report) -> String {
    let m = &r.machine;
    let mut out = format!("lovia {} bench on {} CPUs ({}), {} GiB RAM\n", m.lovia, m.cpus, m.cpu_model, m.memory_gib);
    if !m.optimized {
        out += "warning: a debug build; figures mean little (cargo build --release -p lovia-host)\n";
    }
    if m.pooling_allocator {
        out +=
            &format!("pooling allocator, {} MiB of each memory kept resident between instances\n", m.keep_resident_mib);
    }
    out +=
        "each figure is followed by its floor measured in this run (docs/performance.md, \"Floors\") and the ratio\n";
    for o in &r.overhead {
        out += &format!(
            "overhead    {} echo calls in one turn, {:<7} {:>8.2} ms per turn  {:>7.1} µs per call   floor {:>6.1} µs = {}\n",
            o.calls,
            o.mode,
            o.turn_ms,
            o.us_per_call,
            o.floor_us_per_call,
            times(o.us_per_call, o.floor_us_per_call)
        );
    }
    if let Some(l) = &r.latency {
        let floor = r.latency_floor.as_ref().map_or(String::new(), |f| {
            format!("   floor p50 {:>6.1} µs p99 {:>6.1} µs = {}", f.p50_us, f.p99_us, times(l.p50_us, f.p50_us))
        });
        out += &format!(
            "latency     one call through the executor      p50 {:>7.1} µs   p99 {:>7.1} µs{floor}\n",
            l.p50_us, l.p99_us
        );
    }
    if let Some(t) = &r.throughput {
        out += &format!(
            "throughput  {} workers for {:.1} s                {:>9.0} calls/s ({} calls)\n",
            t.workers, t.seconds, t.calls_per_second, t.calls
        );
    }
    for c in &r.cold_start {
        out += &format!(
            "cold start  {} ({:.1} MiB)   compile {:>8.1} ms   cached load {:>6.2} ms (just written: {:.2} ms)   floor {:.2} ms = {}\n",
            c.component,
            c.mib,
            c.compile_ms,
            c.cached_load_ms,
            c.just_cached_load_ms,
            c.floor_load_ms,
            times(c.cached_load_ms, c.floor_load_ms)
        );
    }
    for (label, p) in [("python", &r.python), ("js", &r.js)] {
        let Some(p) = p else { continue };
        out += &format!(
            "{label:<11} one echo call, {}   fresh p50 {:>7.1} µs  p99 {:>7.1} µs   floor p50 {:>7.1} µs = {}\n",
            p.component,
            p.fresh.p50_us,
            p.fresh.p99_us,
            p.fresh_floor.p50_us,
            times(p.fresh.p50_us, p.fresh_floor.p50_us)
        );
        out += &format!(
            "{label:<11} one echo call, {}   warm  p50 {:>7.1} µs  p99 {:>7.1} µs   floor p50 {:>7.1} µs = {}\n",
            p.component,
            p.session.p50_us,
            p.session.p99_us,
            p.session_floor.p50_us,
            times(p.session.p50_us, p.session_floor.p50_us)
        );
    }
    if let Some(s) = &r.serve {
        let ratio = r.throughput.as_ref().map_or(String::new(), |t| {
            format!(" = {:.0}% of in-process", 100.0 * s.calls_per_second / t.calls_per_second)
        });
        out += &format!(
            "serve       POST /api/tools/echo/call, {} connections, {:.1} s   {:>7.0} calls/s{ratio}   p50 {:.2} ms   p99 {:.2} ms{}\n",
            s.connections,
            s.seconds,
            s.calls_per_second,
            s.p50_ms,
            s.p99_ms,
            if s.errors == 0 { String::new() } else { format!("; {} FAILED", s.errors) }
        );
        if let Some(f) = &r.serve_floor {
            out += &format!(
                "serve       floor: HTTP echo in this process, {} connections   {:>7.0} calls/s   p50 {:.2} ms   p99 {:.2} ms{}   serve = {:.0}% of its calls/s, p99 {}\n",
                f.connections,
                f.calls_per_second,
                f.p50_us / 1e3,
                f.p99_us / 1e3,
                if f.errors == 0 { String::new() } else { format!("; {} FAILED", f.errors) },
                100.0 * s.calls_per_second / f.calls_per_second.max(f64::MIN_POSITIVE),
                times(s.p99_ms * 1e3, f.p99_us)
            );
        }
    }
    if let Some(m) = &r.mcp {
        out += &format!(
            "mcp         tools/call echo, one at a time       direct p50 {:>7.1} µs  p99 {:>7.1} µs\n",
            m.direct.p50_us, m.direct.p99_us
        );
        for (name, t, transport_floor) in
            [("stdio", &m.stdio, m.stdio_floor.p50_us), ("http ", &m.http, m.http_floor.p50_us)]
        {
            let floor = m.direct.p50_us + transport_floor;
            out += &format!(
                "mcp {name}   one at a time p50 {:>7.1} µs (+{:.1} over direct)  p99 {:>7.1} µs   floor {:.1} µs = {};   {} concurrent: {:>7.0} calls/s  p50 {:.0} µs  p99 {:.0} µs{}\n",
                t.lone.p50_us,
                t.lone.p50_us - m.direct.p50_us,
                t.lone.p99_us,
                floor,
                times(t.lone.p50_us, floor),
                t.concurrent,
                t.calls_per_second,
                t.loaded_p50_us,
                t.loaded_p99_us,
                if t.errors == 0 { String::new() } else { format!("; {} FAILED", t.errors) }
            );
        }
    }
    if let Some(w) = &r.workspace {
        out += &workspace::rows(w);
    }
    if let Some(c) = &r.code {
        out += &code::rows(c);
    }
    if let Some(w) = &r.web {
        out += &web::rows(w);
    }
    if let Some(t) = &r.tenants {
        out += &tenants::rows(t);
    }
    if let Some(t) = &r.telemetry {
        out += &telemetry::rows(t);
    }
    if let Some(t) = &r.timeout {
        out += &format!(
            "timeout     spin_ms with a {} ms timeout         returned after {:.1} ms; CPU in the next second {:.0} ms (idle host: {:.0} ms/s)\n",
            t.timeout_ms, t.returned_after_ms, t.cpu_ms_in_next_second, t.idle_cpu_ms_per_second
        );
    }
    if let Some(m) = &r.memory {
        out += &format!(
            "memory      {} concurrent sleep_ms calls         peak {:.0} MiB resident (baseline {:.0} MiB){}\n",
            m.concurrent_calls,
            m.peak_mib,
            m.baseline_mib,
            if m.all_answered { "" } else { "; NOT every call was answered" }
        );
    }
    out
}
