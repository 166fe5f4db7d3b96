//! `lovia call`.

use crate::CliError;
use lovia_host::{CallContext, CallLimits, CallRequest, DEFAULT_MAX_OUTPUT_CHARS, Host};
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
    /// Linear-memory limit of the instance in MiB [default: 64].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    memory_mib: Option<u32>,
}

pub(crate) async fn run(args: Args, host: Host) -> Result<ExitCode, CliError> {
    let arguments = args.arguments.unwrap_or_default();
    if !arguments.is_empty()
        && let Err(e) = serde_json::from_str::<serde_json::Value>(&arguments)
    {
        return Err(CliError::new(format!("ARGS_JSON is not valid JSON: {e}"))
            .hint("pass one JSON object in single quotes, e.g. '{\"query\": \"limits\"}'"));
    }
    let plugin = host.load_file(&args.plugin).await?;
    let Some(spec) = plugin.tool(&args.tool) else {
        let names: Vec<&str> = plugin.tools().map(|t| t.name.as_str()).collect();
        return Err(CliError::new(format!("{} has no tool named `{}`", args.plugin.display(), args.tool))
            .hint(format!("available tools: {}", names.join(", "))));
    };
    let limit = spec.max_output_chars.unwrap_or(DEFAULT_MAX_OUTPUT_CHARS);
    let mut limits = host.config().limits.clone();
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
        ..CallRequest::new(args.tool, arguments)
    };
    let outcome = plugin.invoke(&request).await;
    println!("{}", outcome.final_output(Some(limit)));
    Ok(if outcome.is_error() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
