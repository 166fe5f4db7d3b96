//! The directory capability every file operation goes through (B1). The
//! root is opened once; an operation inside it names a path relative to that
//! handle, and cap-std refuses any step out of it (`..` past the top, an
//! absolute or escaping symlink, `/proc/self/root`), whatever happened to the
//! tree between the policy's judgement and the operation. A path outside the
//! root that the policy allowed is opened through a handle on the directory
//! the policy judged (the deepest existing ancestor of the resolved path),
//! never by handing the model's string to the ambient file system.

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A resolved path as the capability reaches it: a directory handle and a
/// path relative to it (`.` for the directory itself).
pub(crate) struct Place {
    pub(crate) dir: Arc<Dir>,
    pub(crate) rel: PathBuf,
}

/// The workspace's file access: the root handle and the per-path write locks.
pub(crate) struct Files {
    root: PathBuf,
    dir: Arc<Dir>,
    locks: Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>,
}

impl Files {
    /// Opens the canonical `root`.
    pub(crate) fn open(root: &Path) -> std::io::Result<Files> {
        let dir = Dir::open_ambient_dir(root, ambient_authority())?;
        Ok(Files { root: root.to_path_buf(), dir: Arc::new(dir), locks: Mutex::new(HashMap::new()) })
    }

    /// Where the resolved `abs` is reached: relative to the root handle when
    /// inside it, else relative to a handle on its deepest existing ancestor.
    pub(crate) fn place(&self, abs: &Path) -> std::io::Result<Place> {
        if let Ok(rel) = abs.strip_prefix(&self.root) {
            let rel = if rel.as_os_str().is_empty() { PathBuf::from(".") } else { rel.to_path_buf() };
            return Ok(Place { dir: self.dir.clone(), rel });
        }
        // The resolved path's existing prefix has no symlinks left (resolution
        // followed them), so this opens the directory the policy judged.
        let anchor = abs.ancestors().skip(1).find(|a| a.is_dir()).unwrap_or(Path::new("/"));
        let dir = Dir::open_ambient_dir(anchor, ambient_authority())?;
        let rel = abs.strip_prefix(anchor).map(Path::to_path_buf).unwrap_or_default();
        let rel = if rel.as_os_str().is_empty() { PathBuf::from(".") } else { rel };
        Ok(Place { dir: Arc::new(dir), rel })
    }

    /// Runs `f` holding the write lock of `abs`: one writer per path in this
    /// process, so two writes never interleave their temp files and renames.
    pub(crate) fn locked<T>(&self, abs: &Path, f: impl FnOnce() -> T) -> T {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            locks.entry(abs.to_path_buf()).or_default().clone()
        };
        let result = {
            let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
            f()
        };
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        // The map keeps only paths someone is writing.
        if Arc::strong_count(&lock) == 2 {
            locks.remove(abs);
        }
        result
    }
}

/// Writes `content` to `place` atomically: a new temp file beside the
/// target (created through the handle, never following a link), synced,
/// then renamed over the target. A rename replaces a directory entry, so a
/// hard link or symlink at the target is replaced, not written through.
/// Missing parent directories are created. A regular file keeps its permissions.
pub(crate) fn write_atomic(place: &Place, content: &[u8]) -> std::io::Result<()> {
    let name = place.rel.file_name().ok_or_else(|| std::io::Error::other("no file name"))?;
    let parent = match place.rel.parent() {
        Some(p) if !p.as_os_str().is_empty() => {
            place.dir.create_dir_all(p)?;
            place.dir.open_dir(p)?
        }
        _ => place.dir.try_clone()?,
    };
    let mut suffix = [0u8; 6];
    getrandom::fill(&mut suffix).map_err(|e| std::io::Error::other(e.to_string()))?;
    let tmp = PathBuf::from(format!(".{}.lovia-{}.tmp", name.to_string_lossy(), hex::encode(suffix)));
    let mut file = parent.open_with(&tmp, OpenOptions::new().write(true).create_new(true))?;
    let written = (|| {
        file.write_all(content)?;
        if let Ok(old) = parent.symlink_metadata(name)
            && old.is_file()
        {
            file.set_permissions(old.permissions())?;
        }
        file.sync_all()?;
        drop(file);
        parent.rename(&tmp, &parent, name)
    })();
    if written.is_err() {
        let _ = parent.remove_file(&tmp);
    }
    written
}
