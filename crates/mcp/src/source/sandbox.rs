//! The `sandbox` table of a command-started MCP server: whether lovia
//! confines its process (docs/confinement.md) and what the confinement
//! grants beyond the defaults, which deny.

use lovia_confine::Limits;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Whether a command-started server runs confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SandboxMode {
    /// Confined, or not started: where the kernel cannot confine (no
    /// Landlock ABI 6, no seccomp) the server does not start and its start
    /// error says why. The default.
    #[default]
    Required,
    /// Unconfined: the server runs with lovia's own privileges, as any
    /// process the operator starts. Written out explicitly, and logged as a
    /// warning naming the server at each start.
    Off,
}

/// `sandbox = { ... }` of one `[[mcp_servers]]` entry (a `command` server
/// only). Unknown keys are an error naming the key and the allowed ones.
///
/// The defaults deny: confinement required, no network, no path but the
/// system's read-only ones (docs/confinement.md), the server's own working
/// directory (fresh, read-write, its `TMPDIR` too, removed when it stops)
/// and the directory its command is installed in (read-only), and the
/// limits of [`Limits::default`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SandboxConfig {
    /// `"required"` (default) or `"off"`.
    #[serde(default)]
    pub mode: SandboxMode,
    /// Absolute paths the server may read and execute beneath. Default:
    /// none.
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
    /// Absolute paths the server may read, write, create and remove
    /// beneath. Default: none.
    #[serde(default)]
    pub read_write: Vec<PathBuf>,
    /// TCP and UDP (and name resolution). Default: false, only unix sockets.
    #[serde(default)]
    pub network: bool,
    /// CPU seconds per process over its whole life; the server is killed
    /// when it has used them (and restarted for the next call). Default: 60.
    #[serde(default)]
    pub cpu_seconds: Option<u64>,
    /// Address space per process, in bytes. Default: 1 GiB.
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// Processes and threads at once, the server and its children
    /// together. Default: 64.
    #[serde(default)]
    pub processes: Option<u64>,
    /// Largest file it may write, in bytes. Default: 100 MiB.
    #[serde(default)]
    pub file_size_bytes: Option<u64>,
    /// Open file descriptors per process. Default: 256.
    #[serde(default)]
    pub open_files: Option<u64>,
}

impl SandboxConfig {
    /// No confinement (`mode = "off"`).
    pub fn off() -> Self {
        Self { mode: SandboxMode::Off, ..Self::default() }
    }

    /// This sandbox with `path` granted read-only too.
    pub fn grant_read_only(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_only.push(path.into());
        self
    }

    /// This sandbox with `path` granted read-write too.
    pub fn grant_read_write(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_write.push(path.into());
        self
    }

    /// This sandbox with the network granted or not.
    pub fn with_network(mut self, allowed: bool) -> Self {
        self.network = allowed;
        self
    }

    /// Whether the server runs confined.
    pub fn confined(&self) -> bool {
        self.mode == SandboxMode::Required
    }

    /// The limits: [`Limits::default`] with the table's values over it.
    pub fn limits(&self) -> Limits {
        let d = Limits::default();
        Limits::default()
            .cpu_seconds(self.cpu_seconds.unwrap_or(d.cpu_seconds))
            .memory_bytes(self.memory_bytes.unwrap_or(d.memory_bytes))
            .processes(self.processes.unwrap_or(d.processes))
            .file_size_bytes(self.file_size_bytes.unwrap_or(d.file_size_bytes))
            .open_files(self.open_files.unwrap_or(d.open_files))
    }

    /// The first value that cannot be used, as (key, problem): a relative
    /// grant (it would depend on lovia's working directory) or a limit of 0.
    pub(crate) fn problem(&self) -> Option<(String, String)> {
        for (key, paths) in [("sandbox.read_only", &self.read_only), ("sandbox.read_write", &self.read_write)] {
            if let Some(path) = paths.iter().find(|p| !p.is_absolute()) {
                return Some((key.into(), format!("names the relative path {:?}; grant absolute paths", path)));
            }
            if let Some(path) = paths.iter().find(|p| p.as_path() == Path::new("/")) {
                return Some((
                    key.into(),
                    format!("names {path:?}, the whole file system; grant the directories the server needs"),
                ));
            }
        }
        for (key, value) in [
            ("sandbox.cpu_seconds", self.cpu_seconds),
            ("sandbox.memory_bytes", self.memory_bytes),
            ("sandbox.processes", self.processes),
            ("sandbox.file_size_bytes", self.file_size_bytes),
            ("sandbox.open_files", self.open_files),
        ] {
            if value == Some(0) {
                return Some((key.into(), "is 0; a limit is at least 1 (leave it out for the default)".into()));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_deny_and_the_table_overrides_the_limits() {
        let s = SandboxConfig::default();
        assert!(s.confined());
        assert!(!s.network);
        assert!(s.read_only.is_empty() && s.read_write.is_empty());
        assert_eq!(s.limits(), Limits::default());
        let s: SandboxConfig = toml::from_str("cpu_seconds = 5\nopen_files = 64").expect("parses");
        assert_eq!(s.limits(), Limits::default().cpu_seconds(5).open_files(64));
        let off: SandboxConfig = toml::from_str("mode = \"off\"").expect("parses");
        assert_eq!(off, SandboxConfig::off());
        assert!(!off.confined());
    }

    #[test]
    fn unusable_values_are_named() {
        let relative = SandboxConfig::default().grant_read_only("data");
        assert_eq!(relative.problem().map(|p| p.0), Some("sandbox.read_only".into()));
        let root = SandboxConfig::default().grant_read_write("/");
        assert_eq!(root.problem().map(|p| p.0), Some("sandbox.read_write".into()));
        let zero: SandboxConfig = toml::from_str("processes = 0").expect("parses");
        assert_eq!(zero.problem().map(|p| p.0), Some("sandbox.processes".into()));
        assert_eq!(SandboxConfig::default().grant_read_only("/srv/data").problem(), None);
    }
}
