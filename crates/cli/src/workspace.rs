//! The workspace of `lovia mcp` and `lovia run`: `--workspace DIR` with the
//! options both commands share.

use crate::CliError;
use std::path::{Path, PathBuf};

/// The workspace options of `lovia run` and `lovia mcp`; each needs `--workspace`.
#[derive(clap::Args, Debug)]
pub(crate) struct WorkspaceOptions {
    /// The workspace's mode: readonly (reads inside DIR), coding (writes
    /// inside DIR; reads outside and commands ask), trusted (reads outside
    /// and commands allowed; writes outside ask).
    #[arg(long, value_name = "MODE", value_parser = ["readonly", "coding", "trusted"], default_value = "coding", requires = "workspace")]
    mode: String,
    /// Whether the workspace shell must run under kernel confinement:
    /// `required` confines every command (Landlock, seccomp, rlimits, a pids
    /// cgroup; docs/confinement.md) and leaves the shell tools out where the
    /// kernel cannot (the reason goes to stderr); `off` runs commands
    /// unconfined (the policy still applies).
    #[arg(long, value_name = "SANDBOX", value_parser = ["required", "off"], default_value = "required", requires = "workspace")]
    shell_sandbox: String,
    /// Let confined commands open TCP and UDP sockets (IPv4 and IPv6, any
    /// address) and read the resolver's configuration [default: no network].
    #[arg(long, requires = "workspace")]
    shell_network: bool,
    /// A path confined commands may also read and execute, such as a
    /// toolchain outside the system directories (repeatable) [default: none].
    #[arg(long, value_name = "PATH", requires = "workspace")]
    shell_read: Vec<PathBuf>,
    /// A path confined commands may also write, such as a package cache
    /// (repeatable) [default: none].
    #[arg(long, value_name = "PATH", requires = "workspace")]
    shell_write: Vec<PathBuf>,
}

/// The workspace over `dir` the options describe. `mode` and `sandbox` are
/// values clap has already checked against its lists.
pub(crate) fn open(dir: &Path, options: &WorkspaceOptions) -> Result<lovia_workspace::Workspace, CliError> {
    let mode = lovia_workspace::Mode::parse(&options.mode).unwrap_or_default();
    let sandbox = match options.shell_sandbox.as_str() {
        "off" => lovia_workspace::ShellSandbox::Off,
        _ => lovia_workspace::ShellSandbox::Required,
    };
    if sandbox == lovia_workspace::ShellSandbox::Off
        && (options.shell_network || !options.shell_read.is_empty() || !options.shell_write.is_empty())
    {
        return Err(CliError::new("--shell-network, --shell-read and --shell-write grant a confined shell more")
            .hint("with --shell-sandbox off nothing is confined, so drop them or confine the shell"));
    }
    let mut grants = lovia_workspace::ShellGrants::default().network(options.shell_network);
    for (path, write) in
        options.shell_read.iter().map(|p| (p, false)).chain(options.shell_write.iter().map(|p| (p, true)))
    {
        // A grant of a missing path would fail at the first command; say it now.
        let path = path.canonicalize().map_err(|e| {
            let flag = if write { "--shell-write" } else { "--shell-read" };
            CliError::new(format!("{flag} {}: {e}", path.display()))
                .hint("a grant names an existing file or directory of this machine")
        })?;
        grants = if write { grants.read_write(path) } else { grants.read_only(path) };
    }
    lovia_workspace::Workspace::builder(dir)
        .mode(mode)
        .shell_sandbox(sandbox)
        .shell_grants(grants)
        .build()
        .map_err(|e| CliError::new(format!("--workspace: {e}")))
}
