//! Signatures: `lovia keygen`, `lovia sign` and `lovia verify`
//! (docs/supply-chain.md).

use crate::CliError;
use lovia_host::LoadError;
use lovia_supply::signature::{self, SignatureMode, SignaturePolicy};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

impl From<lovia_supply::SupplyError> for CliError {
    fn from(e: lovia_supply::SupplyError) -> Self {
        let hint = e.hint();
        let error = CliError::new(e.to_string());
        match hint {
            Some(h) => error.hint(h),
            None => error,
        }
    }
}

#[derive(clap::Args)]
pub(crate) struct KeygenArgs {
    /// Writes NAME.key (the secret key, mode 0600) and NAME.pub (the
    /// public key to give to those who run your plugins).
    name: PathBuf,
}

pub(crate) fn keygen(args: KeygenArgs) -> Result<ExitCode, CliError> {
    let with = |ext: &str| {
        let mut path = args.name.clone().into_os_string();
        path.push(ext);
        PathBuf::from(path)
    };
    let (secret_path, public_path) = (with(".key"), with(".pub"));
    for path in [&secret_path, &public_path] {
        if path.exists() {
            return Err(CliError::new(format!("{} exists; lovia keygen never overwrites a key", path.display()))
                .hint("pick another NAME, or remove the old pair first"));
        }
    }
    let (secret, public) = signature::generate_key_pair();
    write_private(&secret_path, secret.as_bytes())?;
    std::fs::write(&public_path, public)
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", public_path.display())))?;
    eprintln!(
        "wrote {} (secret; keep it) and {} (public; give it to those who run your plugins)",
        secret_path.display(),
        public_path.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))?;
    file.write_all(bytes).map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    std::fs::write(path, bytes).map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))
}

#[derive(clap::Args)]
pub(crate) struct SignArgs {
    /// The plugin (.wasm component), packed first: `lovia pack` changes the
    /// component, and so would break a signature made before it.
    plugin: PathBuf,
    /// The secret key (from `lovia keygen`, or an OpenSSH ed25519 key
    /// without a passphrase).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// Where to write the signed plugin [default: in place].
    #[arg(short, long, value_name = "OUT", conflicts_with = "detached")]
    output: Option<PathBuf>,
    /// Write the signature beside the plugin (PLUGIN.wasm.sig) and leave
    /// the plugin as it is.
    #[arg(long)]
    detached: bool,
}

pub(crate) fn sign(args: SignArgs) -> Result<ExitCode, CliError> {
    let bytes = std::fs::read(&args.plugin).map_err(|source| LoadError::Read { path: args.plugin.clone(), source })?;
    lovia_host::plugin::check_header(&bytes, &args.plugin.display().to_string())?;
    let key =
        std::fs::read(&args.key).map_err(|e| CliError::new(format!("cannot read {}: {e}", args.key.display())))?;
    let signed = signature::sign(&bytes, &key, args.detached)?;
    let (out, body) = match signed.detached {
        Some(sig) => {
            let mut path = args.plugin.clone().into_os_string();
            path.push(signature::DETACHED_SUFFIX);
            (PathBuf::from(path), sig)
        }
        None => (args.output.unwrap_or(args.plugin), signed.component),
    };
    std::fs::write(&out, body).map_err(|e| CliError::new(format!("cannot write {}: {e}", out.display())))?;
    eprintln!("signed: wrote {}", out.display());
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub(crate) struct VerifyArgs {
    /// The plugin (.wasm component); a detached signature is read from
    /// PLUGIN.wasm.sig when there is one.
    plugin: PathBuf,
    /// A public key whose signature counts (repeatable).
    #[arg(long = "key", value_name = "FILE", required = true)]
    keys: Vec<PathBuf>,
}

/// Exit status 0 and the signer when a trusted key signed it; otherwise the
/// reason and status 1.
pub(crate) fn verify(args: VerifyArgs) -> Result<ExitCode, CliError> {
    let origin = args.plugin.display().to_string();
    let bytes = std::fs::read(&args.plugin).map_err(|source| LoadError::Read { path: args.plugin.clone(), source })?;
    let detached = signature::read_detached(&args.plugin)?;
    let policy = SignaturePolicy::new(SignatureMode::Require, &args.keys)?;
    match policy.check(&bytes, detached.as_deref(), &origin) {
        Ok(verdict) => {
            let how = if detached.is_some() { "detached" } else { "embedded" };
            println!("{origin}: signed by {} ({how})", verdict.signer().unwrap_or("?"));
            Ok(ExitCode::SUCCESS)
        }
        Err(lovia_supply::SupplyError::Signature { reason, .. }) => {
            println!("{origin}: not verified: {reason}");
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e.into()),
    }
}
