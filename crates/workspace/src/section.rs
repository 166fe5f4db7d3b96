//! [`WorkspaceSection`]: the workspace's configuration, owned here and
//! spelled two ways: `lovia serve`'s `[tenants.workspace]` table is this
//! struct as TOML, and the `--mode`, `--shell-sandbox`, `--shell-network`,
//! `--shell-read` and `--shell-write` flags of `lovia run` and `lovia mcp`
//! fill the same struct. Both check it with [`WorkspaceSection::check`] and
//! build from it with [`WorkspaceSection::builder`], so the defaults, the
//! bounds and the messages are the same at every door
//! (docs/architecture.md).

use crate::{Limits, Mode, SharedBounds, ShellGrants, ShellSandbox, WorkspaceBuilder};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// How a door's workspaces are made: the mode, the shell's confinement and
/// grants, and the bounds every workspace made from the section shares.
///
/// ```
/// let section = lovia_workspace::WorkspaceSection::default();
/// section.check().expect("the defaults are valid");
/// let dir = tempfile::tempdir().unwrap();
/// let workspace = section.builder(dir.path(), section.grants().unwrap()).build().unwrap();
/// assert_eq!(workspace.mode(), lovia_workspace::Mode::Coding);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WorkspaceSection {
    /// `readonly`, `coding` or `trusted` (docs/workspace.md, "Modes").
    /// Default: `coding`, whose commands and reads outside ask.
    #[serde(default)]
    pub mode: Mode,
    /// `required`: every command runs under kernel confinement, and where
    /// the kernel cannot confine, the shell tools are not offered; `off`:
    /// commands run unconfined. Default: `required`.
    #[serde(default)]
    pub shell_sandbox: ShellSandbox,
    /// Whether a confined command may open TCP and UDP sockets (any
    /// address) and read the resolver's configuration. Default: false.
    #[serde(default)]
    pub shell_network: bool,
    /// Paths of this machine a confined command may read and execute, such
    /// as a toolchain outside the system directories; each must exist when
    /// the door starts. Default: none.
    #[serde(default)]
    pub shell_read_only: Vec<PathBuf>,
    /// Paths of this machine a confined command may also write, such as a
    /// package cache; each must exist when the door starts. Default: none.
    #[serde(default)]
    pub shell_read_write: Vec<PathBuf>,
    /// Background processes one workspace may hold. Default: 2; at least 1.
    #[serde(default = "default_background")]
    pub max_background_processes: usize,
    /// Bytes of disk all the workspaces made from the section may use
    /// together (a tenant's sessions); a write or command past it fails with
    /// a tool error, and a confined command's largest file is bounded by it
    /// too. A door over one directory of the user's own (`lovia run`,
    /// `lovia mcp`) does not bound it. Default: 268,435,456 (256 MiB).
    #[serde(default = "default_bytes")]
    pub max_bytes: u64,
    /// Files and directories in all of them, as `max_bytes`. Default: 10,000.
    #[serde(default = "default_files")]
    pub max_files: u64,
    /// Shell commands (background ones included) running at once in all of
    /// them, as `max_bytes`. Default: 2.
    #[serde(default = "default_commands")]
    pub max_running_commands: u32,
    /// Seconds a door that keeps a workspace per session (`lovia serve`'s
    /// chats) keeps one after its last run ended; then it is removed.
    /// Default: 86,400 (a day).
    #[serde(default = "default_retention")]
    pub retention_secs: u64,
}

fn default_background() -> usize {
    2
}

fn default_bytes() -> u64 {
    256 << 20
}

fn default_files() -> u64 {
    10_000
}

fn default_commands() -> u32 {
    2
}

fn default_retention() -> u64 {
    86_400
}

/// The same defaults as an empty table.
impl Default for WorkspaceSection {
    fn default() -> Self {
        Self {
            mode: Mode::default(),
            shell_sandbox: ShellSandbox::default(),
            shell_network: false,
            shell_read_only: Vec::new(),
            shell_read_write: Vec::new(),
            max_background_processes: default_background(),
            max_bytes: default_bytes(),
            max_files: default_files(),
            max_running_commands: default_commands(),
            retention_secs: default_retention(),
        }
    }
}

/// Why a [`WorkspaceSection`] is refused. Each names its key
/// ([`Self::key`]), so that a door can say it in its own spelling
/// (`workspace.shell_read_write` in a config file, `--shell-write` on a
/// command line).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceSectionError {
    /// A bound is 0, which would refuse everything.
    #[error("{key} must be at least 1")]
    Zero {
        /// The bound.
        key: &'static str,
    },
    /// Grants of a confined shell beside `shell_sandbox = off`.
    #[error(
        "shell_network, shell_read_only and shell_read_write grant a confined shell more, and shell_sandbox = \"off\" confines nothing; drop them or confine the shell"
    )]
    GrantsUnconfined,
    /// A granted path cannot be resolved (it must exist).
    #[error("{}: {source}", path.display())]
    Grant {
        /// `shell_read_only` or `shell_read_write`.
        key: &'static str,
        /// The path as configured.
        path: PathBuf,
        /// Why it cannot be resolved.
        #[source]
        source: std::io::Error,
    },
}

impl WorkspaceSectionError {
    /// The section's key at fault: `max_bytes`, `shell_sandbox`,
    /// `shell_read_write` and so on.
    pub fn key(&self) -> &'static str {
        match self {
            Self::Zero { key } | Self::Grant { key, .. } => key,
            Self::GrantsUnconfined => "shell_sandbox",
        }
    }
}

impl WorkspaceSection {
    /// Checks what can be checked without touching the disk: every bound at
    /// least 1, and no shell grants beside an unconfined shell.
    pub fn check(&self) -> Result<(), WorkspaceSectionError> {
        let zero = [
            ("max_background_processes", self.max_background_processes == 0),
            ("max_bytes", self.max_bytes == 0),
            ("max_files", self.max_files == 0),
            ("max_running_commands", self.max_running_commands == 0),
            ("retention_secs", self.retention_secs == 0),
        ];
        if let Some((key, _)) = zero.into_iter().find(|(_, zero)| *zero) {
            return Err(WorkspaceSectionError::Zero { key });
        }
        if self.shell_sandbox == ShellSandbox::Off
            && (self.shell_network || !self.shell_read_only.is_empty() || !self.shell_read_write.is_empty())
        {
            return Err(WorkspaceSectionError::GrantsUnconfined);
        }
        Ok(())
    }

    /// Makes the relative grant paths relative to `base` (the directory of
    /// the file that configured them, or the working directory).
    pub fn resolve_paths(&mut self, base: &Path) {
        for path in self.shell_read_only.iter_mut().chain(self.shell_read_write.iter_mut()) {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        }
    }

    /// The shell's grants, each path resolved now: a grant of a missing path
    /// would fail at the first command, so a door says it when it starts.
    pub fn grants(&self) -> Result<ShellGrants, WorkspaceSectionError> {
        let mut grants = ShellGrants::default().network(self.shell_network);
        let paths = self.shell_read_only.iter().map(|p| ("shell_read_only", p));
        for (key, path) in paths.chain(self.shell_read_write.iter().map(|p| ("shell_read_write", p))) {
            let resolved = path.canonicalize().map_err(|source| WorkspaceSectionError::Grant {
                key,
                path: path.clone(),
                source,
            })?;
            grants = if key == "shell_read_write" { grants.read_write(resolved) } else { grants.read_only(resolved) };
        }
        Ok(grants)
    }

    /// The bounds shared by every workspace made from the section under
    /// `dir` (a tenant's sessions).
    pub fn shared_bounds(&self, dir: impl Into<PathBuf>) -> SharedBounds {
        SharedBounds::new(dir, self.max_bytes, self.max_files, self.max_running_commands)
    }

    /// A builder of a workspace over `root` with the section's mode, shell
    /// and per-workspace limits; `grants` from [`Self::grants`], resolved
    /// once per door. A door adds its name, shared bounds or policy.
    pub fn builder(&self, root: impl Into<PathBuf>, grants: ShellGrants) -> WorkspaceBuilder {
        let limits = Limits { background_processes: self.max_background_processes, ..Limits::default() };
        crate::Workspace::builder(root)
            .mode(self.mode)
            .shell_sandbox(self.shell_sandbox)
            .shell_grants(grants)
            .limits(limits)
    }
}
