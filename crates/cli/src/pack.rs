//! `lovia pack`.

use crate::CliError;
use lovia_host::plugin::manifest::{self, Manifest};
use lovia_host::{Host, LoadError};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The plugin (.wasm component).
    plugin: PathBuf,
    /// Where to write the packed plugin [default: in place].
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
}

pub(crate) async fn run(args: Args, host: Host) -> Result<ExitCode, CliError> {
    let origin = args.plugin.display().to_string();
    let bytes = std::fs::read(&args.plugin).map_err(|source| LoadError::Read { path: args.plugin.clone(), source })?;
    // The signature covers every section; the manifest is one more.
    if lovia_supply::signature::is_signed(&bytes) {
        return Err(CliError::new(format!("{origin} is signed; packing it would break the signature")).hint(
            "pack the unsigned build, then sign it: lovia pack PLUGIN.wasm && lovia sign --key KEY PLUGIN.wasm",
        ));
    }
    // Packed in place, the unpacked component is gone: its artifact too.
    let (packed, manifest) = pack_bytes(&host, &bytes, &origin, args.output.is_some()).await?;
    let out = args.output.unwrap_or(args.plugin);
    std::fs::write(&out, packed).map_err(|e| CliError::new(format!("cannot write {}: {e}", out.display())))?;
    eprintln!(
        "packed {} {} ({} tools) into {}",
        manifest.info.name,
        manifest.info.version,
        manifest.tools.len(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The component `bytes` with its manifest embedded, and that manifest: what
/// the plugin reports from `info` and `tools`, run once in a sandbox with
/// nothing granted. `lovia pack` and `lovia build` both pack with this.
/// `keep_unpacked`: whether the unpacked component stays (its compiled
/// artifact is kept for it); the packed one's is kept in any case.
pub(crate) async fn pack_bytes(
    host: &Host,
    bytes: &[u8],
    origin: &str,
    keep_unpacked: bool,
) -> Result<(Vec<u8>, Manifest), CliError> {
    let plugin = host.load_bytes(bytes, origin).await?;
    let manifest = plugin.manifest();
    let packed =
        manifest::embed(bytes, &manifest).map_err(|source| LoadError::Manifest { origin: origin.into(), source })?;
    // The packed component compiles to the same code: its first load (the
    // user's first `lovia call`) finds it compiled already.
    if host.keep_compiled_for_packed(&plugin, &packed)? && !keep_unpacked {
        host.forget_compiled(plugin.digest());
    }
    Ok((packed, manifest))
}
