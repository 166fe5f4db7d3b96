//! The private temporary directories of confined commands, and removing
//! the ones a dead host left behind.
//!
//! A host killed by `SIGKILL` runs no destructor, so the directories its
//! commands wrote (their `TMPDIR`, an MCP server's working directory) stay.
//! Each is named `lovia-<host pid>-<purpose>-XXXXXX`, and the first
//! directory a process makes sweeps those whose host is gone.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Makes a private temporary directory for a confined command, under the
/// system's temporary directory, removed when the returned value is
/// dropped. `purpose` names it (`shell`, `mcp-<server>`). The first call in
/// a process also removes the directories that processes no longer running
/// left.
pub fn temp_dir(purpose: &str) -> std::io::Result<tempfile::TempDir> {
    temp_dir_in(&std::env::temp_dir(), purpose)
}

/// [`temp_dir`] under `parent` instead of the system's temporary
/// directory (a tenant's own, so that what a command writes there counts
/// against the tenant's storage). Each `parent` is swept once per process.
pub fn temp_dir_in(parent: &Path, purpose: &str) -> std::io::Result<tempfile::TempDir> {
    static SWEPT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !swept.iter().any(|p| p == parent) {
            sweep(parent);
            swept.push(parent.to_path_buf());
        }
    }
    tempfile::Builder::new().prefix(&format!("lovia-{}-{purpose}-", std::process::id())).tempdir_in(parent)
}

/// Removes `lovia-<pid>-…` directories under `parent` whose process is not
/// running. One whose pid runs now (perhaps another program that reused
/// it) is kept.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("lovia-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !crate::cgroup::owner_is_gone(pid) {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_a_dead_host_left_is_removed_and_nothing_else() {
        let parent = tempfile::tempdir().expect("tempdir");
        // pid_max is at most 4,194,304: this pid runs nowhere.
        let dead = parent.path().join("lovia-4194305-shell-abc");
        let live = parent.path().join(format!("lovia-{}-shell-abc", std::os::unix::process::parent_id()));
        let other = parent.path().join("lovia-shell-old");
        for dir in [&dead, &live, &other] {
            std::fs::create_dir(dir).expect("dir");
            std::fs::write(dir.join("f"), "x").expect("file");
        }
        super::sweep(parent.path());
        assert!(!dead.exists(), "a dead host's directory is removed");
        assert!(live.exists() && other.exists(), "a live host's, and one not named by a pid, stay");
    }
}
