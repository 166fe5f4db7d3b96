//! `lovia serve`.

use crate::CliError;
use lovia_host::Host;
use lovia_serve::{ServeConfig, Service, hash_key};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The service config (TOML: listen, tenants with hashed API keys,
    /// plugins, grants, limits, quotas); see examples/serve.toml.
    #[arg(long, value_name = "FILE", default_value = "examples/serve.toml")]
    config: PathBuf,
    /// Listen here instead of the config's `listen` (e.g. 127.0.0.1:0 for any free port).
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// Where sessions, checkpoints and uploaded plugins go, instead of the
    /// config's `store`: a SQLite file (default: lovia.db in the current
    /// directory; one process only) or a postgres:// URL, which several
    /// replicas share.
    #[arg(long, value_name = "FILE|URL")]
    store: Option<lovia_runner::StoreUrl>,
    /// Milliseconds between two reads of a PostgreSQL store for what other
    /// replicas changed, instead of the config's `poll_interval_ms`
    /// (default 2000; a NOTIFY brings a change sooner).
    #[arg(long, value_name = "MS")]
    poll_interval_ms: Option<u64>,
    /// Milliseconds a replica's hold on a run (its lease in PostgreSQL)
    /// lasts unrenewed, instead of the config's `run_lease_ms` (default
    /// 10000): a dead replica's runs are taken over after this plus one poll.
    #[arg(long, value_name = "MS")]
    run_lease_ms: Option<u64>,
    /// Milliseconds between two renewals of this replica's run leases,
    /// instead of the config's `lease_renew_ms` (default 3000).
    #[arg(long, value_name = "MS")]
    lease_renew_ms: Option<u64>,
    /// On SIGTERM or Ctrl-C, seconds to let requests in flight finish
    /// before exiting; /readyz answers 503 from the signal on. With a
    /// PostgreSQL store, runs in progress are handed back at once (another
    /// replica resumes them from their checkpoints); with SQLite they resume
    /// at the next start.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    drain_secs: u64,
    /// Read an API key from stdin, print the SHA-256 that goes into
    /// `api_keys`, and exit.
    #[arg(long)]
    hash_key: bool,
}

pub(crate) async fn run(
    args: Args,
    supply: &crate::supply::SupplyOptions,
    host: impl FnOnce(bool, std::time::Duration) -> Result<Host, CliError>,
) -> Result<ExitCode, CliError> {
    if args.hash_key {
        let mut key = String::new();
        std::io::stdin().lock().read_line(&mut key).map_err(|e| CliError::new(format!("reading stdin: {e}")))?;
        let key = key.trim_end_matches(['\n', '\r']);
        if key.is_empty() {
            return Err(CliError::new("no key on stdin").hint("echo -n 'my-secret-key' | lovia serve --hash-key"));
        }
        println!("{}", hash_key(key));
        return Ok(ExitCode::SUCCESS);
    }
    let mut config = ServeConfig::load(&args.config)
        .map_err(|e| CliError::new(e.to_string()).hint("see examples/serve.toml for a working config"))?;
    if let Some(store) = args.store {
        config.store = Some(store);
    }
    let mut overridden = Vec::new();
    for (flag, value, field) in [
        ("--poll-interval-ms", args.poll_interval_ms, &mut config.poll_interval_ms),
        ("--run-lease-ms", args.run_lease_ms, &mut config.run_lease_ms),
        ("--lease-renew-ms", args.lease_renew_ms, &mut config.lease_renew_ms),
    ] {
        if let Some(ms) = value {
            *field = ms;
            overridden.push(flag);
        }
    }
    // The global supply flags (`--signatures`, `--trusted-key`,
    // `--insecure-registry`) are spellings of the config's `[signatures]` and
    // `[oci]`: a flag that is given wins over the file, and is never ignored.
    overridden.extend(supply.apply_to(&mut config));
    if !overridden.is_empty() {
        config
            .resolve(std::path::Path::new("."))
            .map_err(|e| CliError::new(format!("{}: {e}", overridden.join(", "))))?;
    }
    // Fuel quotas need the engine to count fuel, which costs some speed: only then.
    let host = host(config.needs_fuel_metering(), std::time::Duration::from_secs(config.compile_timeout_secs))?;
    let export = crate::telemetry::start(&config.telemetry)?;
    let telemetry = export.as_ref().map(lovia_telemetry::export::Export::telemetry).unwrap_or_default();
    let service = Service::new_traced(&host, &config, telemetry).await.map_err(|e| CliError::new(e.to_string()))?;
    if let Some(export) = &export {
        service.count_spans(export.clone());
    }
    let unconfigured = service.unconfigured_models();
    for (tenant, reason) in &unconfigured {
        eprintln!("note: tenant {tenant} has no model, so /api/chat answers 503: {reason}");
    }
    if !unconfigured.is_empty() {
        eprintln!("  hint: LOVIA_PROVIDER=scripted LOVIA_SCRIPT=examples/chat-refund.json plays a scripted model");
    }
    let addr = args.listen.unwrap_or(config.listen);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| CliError::new(format!("cannot listen on {addr}: {e}")).hint("pick another port with --listen"))?;
    let local = listener.local_addr().map_err(|e| CliError::new(e.to_string()))?;
    let tenants: Vec<&str> = config.tenants.iter().map(|t| t.name.as_str()).collect();
    let store = config.store.clone().unwrap_or_else(|| "lovia.db".into());
    println!("lovia serve listening on http://{local} (tenants: {}; sessions in {})", tenants.join(", "), store);
    // Said at start because a second replica on a SQLite file would silently
    // split the sessions and uploads (docs/replicas.md).
    match &store {
        lovia_runner::StoreUrl::Sqlite(_) => {
            eprintln!("note: a SQLite store serves one process; several replicas need store = \"postgres://…\"")
        }
        _ => eprintln!(
            "note: sessions, uploads, runs in progress, and calls and fuel per minute are shared through PostgreSQL with every replica on this store"
        ),
    }
    // Example requests for what this config serves: its first tenant's
    // first tool, and its chats only when they have a model.
    println!("  curl http://{local}/healthz");
    if let Some(lovia_serve::FirstSteps { tenant, tool, chats, .. }) = service.first_steps() {
        let auth = format!("-H 'Authorization: Bearer <api key of {tenant}>'");
        println!("  curl {auth} http://{local}/api/tools");
        if let Some((name, parameters)) = tool {
            let example = example_arguments(&parameters).to_string().replace('\'', "'\\''");
            println!("  curl {auth} -d '{example}' http://{local}/api/tools/{name}/call");
        }
        if chats {
            println!("  curl -N {auth} -d '{{\"session_id\": \"s1\", \"input\": \"Hello\"}}' http://{local}/api/chat");
            println!(
                "  curl {auth} -d '{{\"session_id\": \"s1\", \"call_id\": \"<id>\", \"decision\": \"approve\"}}' http://{local}/api/chat/approve"
            );
        }
    }
    // Ctrl-C or SIGTERM stops accepting connections and lets requests finish, but a chat
    // can wait on an approval for minutes: after --drain-secs the process
    // exits, and its unfinished runs resume from their checkpoints at the next start.
    let grace = std::time::Duration::from_secs(args.drain_secs);
    let stop = std::sync::Arc::new(tokio::sync::Notify::new());
    let signalled = stop.clone();
    let draining = service.clone();
    let shutdown = async move {
        terminate().await;
        draining.drain();
        // With PostgreSQL the runs go to the other replicas now, rather
        // than wait here for approvals that may take minutes.
        let handed = draining.hand_back().await;
        if handed > 0 {
            eprintln!("shutting down: handed {handed} runs in progress back to the other replicas");
        }
        eprintln!("shutting down: finishing requests in flight (at most {} s)", grace.as_secs());
        signalled.notify_one();
    };
    let server = axum::serve(service.listener(listener), service.app()).with_graceful_shutdown(shutdown);
    tokio::select! {
        served = server => served.map_err(|e| CliError::new(format!("server error: {e}")))?,
        () = async { stop.notified().await; tokio::time::sleep(grace).await } => {
            eprintln!("stopped with runs in progress; they resume when lovia serve starts again");
        }
    }
    if let Some(export) = export {
        // The spans still queued go before the process ends (off the runtime: it blocks).
        let _ = tokio::task::spawn_blocking(move || export.shutdown()).await;
    }
    Ok(ExitCode::SUCCESS)
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM, what `docker stop` and Kubernetes send.
async fn terminate() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                eprintln!("cannot listen for SIGTERM ({e}); only Ctrl-C stops the service gracefully");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Arguments that show the shape of a call of a tool with `parameters`:
/// each required property with an example of its type (its first `examples`
/// or `enum` value, its `default`, else a placeholder).
fn example_arguments(parameters: &serde_json::Value) -> serde_json::Value {
    use serde_json::{Value, json};
    let mut out = serde_json::Map::new();
    let required = parameters.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
    for name in required.iter().filter_map(Value::as_str) {
        let schema = &parameters["properties"][name];
        let given = schema["examples"].get(0).or_else(|| schema["enum"].get(0)).or_else(|| schema.get("default"));
        let value = match (given, schema["type"].as_str()) {
            (Some(v), _) => v.clone(),
            (None, Some("integer")) => json!(schema["minimum"].as_i64().unwrap_or(1)),
            (None, Some("number")) => json!(schema["minimum"].as_f64().unwrap_or(1.0)),
            (None, Some("boolean")) => json!(true),
            (None, Some("array")) => json!([]),
            (None, Some("object")) => json!({}),
            (None, _) => json!("..."),
        };
        out.insert(name.to_owned(), value);
    }
    Value::Object(out)
}
