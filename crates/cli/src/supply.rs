//! What every command that loads plugins obeys: the signature policy
//! (`--signatures`, `--trusted-key`) and plugins given as `oci://`
//! references (`--insecure-registry`); and `lovia push`
//! (docs/supply-chain.md).

use crate::CliError;
use lovia_host::plugin::config::PluginConfig;
use lovia_host::{Host, LoadError, Plugin};
use lovia_supply::oci::{self, OciOptions};
use lovia_supply::signature::{self, SignatureMode, SignaturePolicy, SignaturesSection};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The options of the commands that load plugins.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct SupplyOptions {
    /// What to do with a plugin's signature: `require` refuses a plugin no
    /// --trusted-key signed, `warn` loads it with a warning, `off` does not
    /// look [default: off, for local development].
    #[arg(long, global = true, value_name = "MODE", help_heading = crate::GLOBAL)]
    signatures: Option<SignatureMode>,
    /// A publisher's public key (from `lovia keygen`, or an OpenSSH
    /// ed25519 key) whose signatures count (repeatable) [default: none].
    #[arg(long = "trusted-key", global = true, value_name = "FILE", help_heading = crate::GLOBAL)]
    trusted_keys: Vec<PathBuf>,
    /// A registry (HOST:PORT) reached over plain HTTP instead of HTTPS,
    /// such as one on loopback (repeatable) [default: none].
    #[arg(long = "insecure-registry", global = true, value_name = "HOST:PORT", help_heading = crate::GLOBAL)]
    insecure_registries: Vec<String>,
}

/// The policy and the registries every load goes through.
#[derive(Debug, Clone)]
pub(crate) struct Supply {
    pub(crate) policy: SignaturePolicy,
    oci: OciOptions,
}

impl SupplyOptions {
    /// `oci_cache`: where pulled components are kept.
    pub(crate) fn supply(&self, oci_cache: Option<PathBuf>) -> Result<Supply, CliError> {
        let mut oci = OciOptions::default();
        oci.cache_dir = oci_cache;
        oci.insecure_registries = self.insecure_registries.clone();
        // The flags spell lovia-supply's section, as `lovia serve`'s
        // `[signatures]` table does.
        let mut section = SignaturesSection::default();
        section.mode = self.signatures.unwrap_or(SignatureMode::Off);
        section.trusted_keys = self.trusted_keys.clone();
        Ok(Supply { policy: section.policy()?, oci })
    }

    /// Applies the flags to `lovia serve`'s config, which has its own
    /// `[signatures]` and `[oci]` sections: `--signatures` replaces the
    /// config's mode, each `--trusted-key` and `--insecure-registry` is added
    /// to the config's lists. Returns the flags that changed something, for
    /// the start-up log. Flags that are not given change nothing, so a
    /// config's `require` is never weakened by the flags' default.
    pub(crate) fn apply_to(&self, config: &mut lovia_serve::ServeConfig) -> Vec<&'static str> {
        let mut applied = Vec::new();
        if let Some(mode) = self.signatures {
            config.signatures.mode = mode;
            applied.push("--signatures");
        }
        if !self.trusted_keys.is_empty() {
            // Resolved against the current directory, as every path flag is:
            // `resolve` joins only relative paths to the config's directory.
            let cwd = std::env::current_dir().unwrap_or_default();
            config.signatures.trusted_keys.extend(self.trusted_keys.iter().map(|k| cwd.join(k)));
            applied.push("--trusted-key");
        }
        if !self.insecure_registries.is_empty() {
            config.oci.insecure_registries.extend(self.insecure_registries.iter().cloned());
            applied.push("--insecure-registry");
        }
        applied
    }
}

impl Supply {
    /// Loads the plugin at `path` (a file, or `oci://…`) with `config`,
    /// after its signature (embedded, or detached in `path.sig` for a file)
    /// passed the policy; a file with signatures off loads as the host
    /// loads any file.
    pub(crate) async fn load(&self, host: &Host, path: &Path, config: PluginConfig) -> Result<Plugin, CliError> {
        let origin = path.display().to_string();
        if self.policy.mode == SignatureMode::Off && !oci::is_reference(&origin) {
            return Ok(host.load_file_with(path, config).await?);
        }
        // A fall-back to the cache is logged (once) where it happens.
        let checked = lovia_supply::checked(path, &self.policy, &self.oci).await?;
        Ok(host.load_bytes_with(&checked.bytes, &origin, config).await?)
    }

    /// The config beside a plugin file; none for a reference.
    pub(crate) fn config_beside(path: &Path) -> Result<PluginConfig, CliError> {
        if oci::is_reference(&path.display().to_string()) {
            return Ok(PluginConfig::default());
        }
        Ok(PluginConfig::load_beside(path)?.unwrap_or_default())
    }
}

#[derive(clap::Args)]
pub(crate) struct PushArgs {
    /// Where to publish: oci://registry/repository:tag.
    reference: String,
    /// The plugin (.wasm component), packed and signed first.
    plugin: PathBuf,
}

/// `lovia push`: publishes a packed (and, unless --signatures off, signed)
/// component in the Wasm OCI artifact layout.
pub(crate) async fn push(args: PushArgs, supply: &Supply) -> Result<ExitCode, CliError> {
    if !oci::is_reference(&args.reference) {
        return Err(CliError::new(format!("{} is not an oci:// reference", args.reference))
            .hint("write it as oci://registry/repository:tag"));
    }
    let origin = args.plugin.display().to_string();
    let bytes = std::fs::read(&args.plugin).map_err(|source| LoadError::Read { path: args.plugin.clone(), source })?;
    lovia_host::plugin::check_header(&bytes, &origin)?;
    if lovia_host::plugin::manifest::read_static(&bytes).ok().and_then(|v| v.manifest).is_none() {
        return Err(CliError::new(format!("{origin} is not packed")).hint(format!(
            "run `lovia pack {origin}` (and `lovia sign`) first, so that those who pull it can inspect it without running it"
        )));
    }
    // What would be refused when pulled is refused before it is published.
    supply.policy.check(&bytes, None, &origin)?;
    if !signature::is_signed(&bytes) {
        eprintln!("lovia push: {origin} is not signed; hosts that require signatures will refuse it");
    }
    let manifest = oci::push(&args.reference, &bytes, &supply.oci).await?;
    // The reference by digest pins exactly what was pushed.
    let at = args
        .reference
        .rsplit_once(':')
        .filter(|(head, tag)| head.contains('/') && !tag.contains('/'))
        .map_or(args.reference.as_str(), |(head, _)| head);
    println!(
        "pushed {} (component sha256:{}); pin it as {at}@{manifest}",
        args.reference,
        lovia_host::plugin::sha256_hex(&bytes)
    );
    Ok(ExitCode::SUCCESS)
}
