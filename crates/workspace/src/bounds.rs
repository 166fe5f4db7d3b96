//! Bounds that many workspaces share: the bytes and files under one
//! directory, and the shell commands running at once. `lovia serve` gives
//! each tenant one, over the directory that holds all its sessions'
//! workspaces, so that no session (and no number of sessions) of a tenant
//! can fill the disk or the process table for the others.
//!
//! The usage is measured by walking the directory before every write
//! (`write_file`, `edit_file`) and every command. A walk, not a running
//! counter, because commands write files the tools never see; it stops
//! one entry past the file bound, so its cost is bounded too. A confined
//! command's temporary directory lives under the same directory, and while
//! the command runs the walk is repeated every 250 ms (or nine times the
//! walk's own time, if that is longer): past a bound the command is killed (and one file is bounded by its file-size rlimit, set
//! to the byte bound, in between).

use crate::text;
use lovia_host::Failure;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Shared bounds over the directory `dir`. Cheap to clone; the clones
/// share the running-commands count.
///
/// ```
/// let bounds = lovia_workspace::SharedBounds::new("/srv/tenants/acme", 256 << 20, 10_000, 2);
/// assert_eq!(bounds.max_commands(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct SharedBounds {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    max_bytes: u64,
    max_files: u64,
    max_commands: u32,
    commands: Arc<Semaphore>,
}

/// What the directory holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Usage {
    /// Bytes of disk its files use (allocated blocks, so a sparse file
    /// counts what it really takes).
    pub bytes: u64,
    /// Files, directories and links under it.
    pub files: u64,
}

impl SharedBounds {
    /// At most `max_bytes` of disk and `max_files` entries under `dir`,
    /// and `max_commands` shell commands (background ones included)
    /// running at once in all the workspaces that share these bounds.
    pub fn new(dir: impl Into<PathBuf>, max_bytes: u64, max_files: u64, max_commands: u32) -> Self {
        let commands = Arc::new(Semaphore::new(max_commands as usize));
        Self { inner: Arc::new(Inner { dir: dir.into(), max_bytes, max_files, max_commands, commands }) }
    }

    /// The directory whose usage is bounded.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The byte bound.
    pub fn max_bytes(&self) -> u64 {
        self.inner.max_bytes
    }

    /// The command bound.
    pub fn max_commands(&self) -> u32 {
        self.inner.max_commands
    }

    /// Walks the directory (without following links), stopping one entry
    /// past the file bound.
    pub fn usage(&self) -> Usage {
        let mut usage = Usage { bytes: 0, files: 0 };
        let mut todo = vec![self.inner.dir.clone()];
        while let Some(dir) = todo.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let Ok(meta) = entry.metadata() else { continue };
                usage.files += 1;
                usage.bytes += std::os::unix::fs::MetadataExt::blocks(&meta) * 512;
                if meta.is_dir() {
                    todo.push(entry.path());
                }
                if usage.files > self.inner.max_files {
                    return usage;
                }
            }
        }
        usage
    }

    /// Whether the directory is over a bound now (a blocking walk).
    pub(crate) fn is_over(&self) -> bool {
        let usage = self.usage();
        usage.bytes > self.inner.max_bytes || usage.files > self.inner.max_files
    }

    /// Fails when the directory, with `adding` more bytes, would be over a
    /// bound. Runs the walk on the blocking pool.
    pub(crate) async fn check_room(&self, adding: u64) -> Result<(), Failure> {
        let bounds = self.clone();
        let usage = tokio::task::spawn_blocking(move || bounds.usage())
            .await
            .map_err(|_| text::failure("The workspace's storage could not be measured.", None))?;
        let (max_bytes, max_files) = (self.inner.max_bytes, self.inner.max_files);
        if usage.bytes.saturating_add(adding) > max_bytes || usage.files >= max_files {
            return Err(text::failure(
                format!(
                    "Workspace storage is full: {} of {} bytes and {} of {} files are in use across this account's workspaces.",
                    text::thousands(usage.bytes),
                    text::thousands(max_bytes),
                    text::thousands(usage.files.min(max_files)),
                    text::thousands(max_files),
                ),
                Some(text::STORAGE_FULL_HINT),
            ));
        }
        Ok(())
    }

    /// A place for one running command, or a failure when all are taken.
    pub(crate) fn command(&self) -> Result<OwnedSemaphorePermit, Failure> {
        self.inner.commands.clone().try_acquire_owned().map_err(|_| {
            text::failure(
                format!(
                    "Too many commands are running in this account's workspaces ({} at once).",
                    self.inner.max_commands
                ),
                Some(text::COMMANDS_BUSY_HINT),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::SharedBounds;
    use std::time::Instant;

    /// What one walk of the bounded directory costs: a running command's
    /// watcher makes one every 250 ms, or nine walks' time if longer:
    /// `cargo test -p lovia-workspace --release --lib -- --ignored
    /// a_usage_walk_over_ten_thousand_files --nocapture`.
    #[test]
    #[ignore = "a measurement: prints microseconds per walk"]
    fn a_usage_walk_over_ten_thousand_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        for d in 0..100 {
            let sub = dir.path().join(format!("d{d}"));
            std::fs::create_dir(&sub).expect("dir");
            for f in 0..99 {
                std::fs::write(sub.join(format!("f{f}")), b"x").expect("file");
            }
        }
        let bounds = SharedBounds::new(dir.path(), u64::MAX, 1_000_000, 1);
        let rounds: u32 = 50;
        let start = Instant::now();
        for _ in 0..rounds {
            assert_eq!(bounds.usage().files, 10_000);
        }
        let per_walk = start.elapsed() / rounds;
        println!("usage walk over 10,000 entries: {} µs", per_walk.as_micros());
    }
}
