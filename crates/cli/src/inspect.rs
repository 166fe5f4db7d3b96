//! `lovia inspect`.

use crate::CliError;
use lovia_host::plugin::{check_header, manifest};
use lovia_host::{Host, InvalidComponent, LoadError, Manifest, ToolSpec};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The plugin (.wasm component). Packed with `lovia pack`, it is read
    /// without running any of its code; unpacked, it is loaded in a sandbox
    /// with nothing granted to ask it for its tools.
    plugin: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Also instantiate the plugin (in a sandbox with nothing granted) and
    /// check that its tools match the embedded manifest (an unpacked plugin
    /// has none to check, which is an error).
    #[arg(long)]
    verify: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    /// A summary for people.
    Table,
    /// The list of tool specs.
    Json,
    /// OpenAI function tools: `[{"type":"function","function":{...}}]`.
    Openai,
    /// Anthropic tools: `[{name, description, input_schema}]`.
    Anthropic,
    /// The TypeScript declarations a model reads in code mode's `run_code`
    /// (docs/code-mode.md).
    Typescript,
}

pub(crate) async fn run(args: Args, host: impl Fn() -> Result<Host, CliError>) -> Result<ExitCode, CliError> {
    let origin = args.plugin.display().to_string();
    let bytes = std::fs::read(&args.plugin).map_err(|source| LoadError::Read { path: args.plugin.clone(), source })?;
    check_header(&bytes, &origin)?;
    let view = manifest::read_static(&bytes)
        .map_err(|e| LoadError::Invalid { origin: origin.clone(), source: InvalidComponent::Sections(e) })?;
    let manifest = match view.manifest {
        Some(Ok(m)) => m,
        Some(Err(source)) => return Err(LoadError::Manifest { origin, source }.into()),
        None if args.verify => {
            return Err(CliError::new(format!(
                "{origin} has no embedded manifest (section `{}`) for --verify to check",
                manifest::SECTION
            ))
            .hint(format!("run `lovia pack {origin}` once after building it")));
        }
        None => {
            // Unpacked: ask the plugin itself, as loading does (info and tools, nothing granted).
            let manifest = host()?.load_bytes(&bytes, &origin).await?.manifest();
            eprintln!(
                "note: {origin} has no embedded manifest, so its tools were read by loading it in a sandbox; \
                 `lovia pack {origin}` embeds the manifest so that inspect can read it without running the plugin"
            );
            manifest
        }
    };
    if args.verify {
        let plugin = host()?.load_bytes(&bytes, &origin).await?;
        if plugin.manifest() != manifest {
            return Err(CliError::new(format!("{origin}: the embedded manifest does not match the plugin's tools"))
                .hint(format!("the manifest is stale or forged: run `lovia pack {origin}` again")));
        }
        eprintln!("verified: the manifest matches what the plugin declares");
    }
    let grants = lovia_host::plugin::config::PluginConfig::load_beside(&args.plugin)?.unwrap_or_default().grants;
    let out = match args.format {
        Format::Table => {
            let signed = if lovia_supply::signature::is_signed(&bytes) {
                "embedded (check it with `lovia verify`)"
            } else if lovia_supply::signature::read_detached(&args.plugin)?.is_some() {
                "detached, beside it (check it with `lovia verify`)"
            } else {
                "no"
            };
            table(&manifest, &lovia_host::plugin::sha256_hex(&bytes), signed, &view.imports, &grants)
        }
        Format::Json => pretty(&json!(manifest.tools)),
        Format::Openai => pretty(&Value::Array(manifest.tools.iter().map(ToolSpec::openai_function).collect())),
        Format::Anthropic => pretty(&Value::Array(manifest.tools.iter().map(ToolSpec::anthropic_tool).collect())),
        Format::Typescript => lovia_code::declarations(&manifest.tools),
    };
    println!("{out}");
    Ok(ExitCode::SUCCESS)
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn table(m: &Manifest, digest: &str, signed: &str, imports: &[String], grants: &lovia_host::sandbox::Grants) -> String {
    let mut out = format!("{} {}\n", m.info.name, m.info.version);
    out += &format!("digest: sha256:{digest}\nsigned: {signed}\n");
    if let Some(i) = &m.info.instructions {
        out += &format!("instructions: {i}\n");
    }
    out += &format!("imports: {}\n", if imports.is_empty() { "none".into() } else { imports.join(", ") });
    let granted = grants.describe();
    out += &format!("granted: {}\n", if granted.is_empty() { "nothing".into() } else { granted.join("; ") });
    for t in &m.tools {
        let mut flags = Vec::new();
        if t.strict {
            flags.push("strict".to_owned());
        }
        if !t.parallel {
            flags.push("barrier".to_owned());
        }
        if let Some(r) = t.retries {
            flags.push(format!("retries={r}"));
        }
        if let Some(ms) = t.timeout_ms {
            flags.push(format!("timeout={ms}ms"));
        }
        if let Some(c) = t.max_output_chars {
            flags.push(format!("max_output_chars={c}"));
        }
        match t.approval {
            lovia_host::ApprovalMode::Never => {}
            lovia_host::ApprovalMode::Always => flags.push("needs approval".into()),
            lovia_host::ApprovalMode::AskPlugin => flags.push("approval decided by plugin".into()),
            other => flags.push(format!("approval: {other:?}")),
        }
        out += &format!(
            "\n{}{}\n",
            t.name,
            if flags.is_empty() { String::new() } else { format!("  [{}]", flags.join(", ")) }
        );
        if let Some(title) = &t.title {
            out += &format!("  title: {title}\n");
        }
        if !t.description.is_empty() {
            for line in t.description.lines() {
                out += &format!("  {line}\n");
            }
        }
        let required: Vec<&str> = t.parameters["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = t.parameters["properties"].as_object() {
            for (name, schema) in props {
                let kind = type_name(schema);
                let req = if required.contains(&name.as_str()) { "required" } else { "optional" };
                let desc = schema["description"].as_str().map(|d| format!(" — {d}")).unwrap_or_default();
                out += &format!("    {name}: {kind} ({req}){desc}\n");
            }
        }
    }
    out.trim_end().to_owned()
}

fn type_name(schema: &Value) -> String {
    if let Some(t) = schema["type"].as_str() {
        return t.to_owned();
    }
    if let Some(r) = schema["$ref"].as_str() {
        return r.rsplit('/').next().unwrap_or(r).to_owned();
    }
    if let Some(branches) = schema["anyOf"].as_array() {
        return branches.iter().map(type_name).collect::<Vec<_>>().join(" | ");
    }
    "any".into()
}
