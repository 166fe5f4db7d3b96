//! The workspace of `lovia mcp` and `lovia run`: `--workspace DIR --mode
//! MODE --shell-sandbox S`.

use crate::CliError;
use std::path::Path;

/// The workspace the flags describe. `mode` and `sandbox` are values clap
/// has already checked against its lists.
pub(crate) fn open(dir: &Path, mode: &str, sandbox: &str) -> Result<lovia_workspace::Workspace, CliError> {
    let mode = lovia_workspace::Mode::parse(mode).unwrap_or_default();
    let sandbox = match sandbox {
        "off" => lovia_workspace::ShellSandbox::Off,
        _ => lovia_workspace::ShellSandbox::Required,
    };
    lovia_workspace::Workspace::builder(dir)
        .mode(mode)
        .shell_sandbox(sandbox)
        .build()
        .map_err(|e| CliError::new(format!("--workspace: {e}")))
}
