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
    /// Background processes the workspace may hold at once (running, or
    /// ended and not yet read), as `max_background_processes` of a
    /// tenant's `[tenants.workspace]` in `lovia serve`.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64), requires = "workspace")]
    max_background_processes: u32,
}

impl WorkspaceOptions {
    /// The workspace section the flags spell (lovia-workspace's own, which a
    /// tenant's `[tenants.workspace]` spells in `lovia serve`); `mode` and
    /// `shell_sandbox` are values clap has already checked against its lists.
    fn section(&self, cwd: &Path) -> lovia_workspace::WorkspaceSection {
        let mut section = lovia_workspace::WorkspaceSection::default();
        section.mode = lovia_workspace::Mode::parse(&self.mode).unwrap_or_default();
        section.shell_sandbox = match self.shell_sandbox.as_str() {
            "off" => lovia_workspace::ShellSandbox::Off,
            _ => lovia_workspace::ShellSandbox::Required,
        };
        section.shell_network = self.shell_network;
        section.shell_read_only = self.shell_read.clone();
        section.shell_read_write = self.shell_write.clone();
        section.max_background_processes = self.max_background_processes as usize;
        section.resolve_paths(cwd);
        section
    }
}

/// The flag that spells a workspace section's key, for its errors.
fn flag(key: &str) -> &'static str {
    match key {
        "shell_read_only" => "--shell-read",
        "shell_read_write" => "--shell-write",
        "shell_network" => "--shell-network",
        "mode" => "--mode",
        "shell_sandbox" => "--shell-sandbox",
        "max_background_processes" => "--max-background-processes",
        _ => "--workspace",
    }
}

/// The workspace over `dir` the options describe.
pub(crate) fn open(dir: &Path, options: &WorkspaceOptions) -> Result<lovia_workspace::Workspace, CliError> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let section = options.section(&cwd);
    let refusal = |e: lovia_workspace::WorkspaceSectionError| match e {
        lovia_workspace::WorkspaceSectionError::GrantsUnconfined => {
            CliError::new("--shell-network, --shell-read and --shell-write grant a confined shell more")
                .hint("with --shell-sandbox off nothing is confined, so drop them or confine the shell")
        }
        e @ lovia_workspace::WorkspaceSectionError::Grant { .. } => CliError::new(format!("{} {e}", flag(e.key())))
            .hint("a grant names an existing file or directory of this machine"),
        e => CliError::new(format!("{}: {e}", flag(e.key()))),
    };
    section.check().map_err(refusal)?;
    let grants = section.grants().map_err(refusal)?;
    section.builder(dir, grants).build().map_err(|e| CliError::new(format!("--workspace: {e}")))
}
