//! The directory of compiled artifacts, trusted only as far as it is proven
//! to be the host's own (issue 12, item 11). A cached artifact is native
//! code that wasmtime maps and runs, so: the directory is created 0700 and
//! refused when group or others may write to it or another user owns it,
//! and every file in it carries an HMAC-SHA256 tag under a random per-host
//! key (the file `artifact.key`, 0600, in the directory). What goes in the
//! files is `plugin/cache.rs`'s business.

use crate::error::{CacheProblem, HostError};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::path::{Path, PathBuf};

/// The name of the key file inside the cache directory.
const KEY_FILE: &str = "artifact.key";
/// Bytes of the key and of each tag (HMAC-SHA256).
const KEY_BYTES: usize = 32;
const TAG_BYTES: usize = 32;

/// An opened cache directory: checked, with its key.
pub(crate) struct ArtifactCache {
    dir: PathBuf,
    key: [u8; KEY_BYTES],
}

impl std::fmt::Debug for ArtifactCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("ArtifactCache").field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl ArtifactCache {
    /// Creates `dir` (0700) if needed, checks that only this user can write
    /// it, and reads its key, creating one on first use.
    pub(crate) fn open(dir: &Path) -> Result<Self, HostError> {
        let io = |source| HostError::CacheDir { path: dir.to_owned(), source };
        create_private_dir(dir).map_err(io)?;
        check_private(dir, false)?;
        let key = read_or_create_key(&dir.join(KEY_FILE))?;
        Ok(Self { dir: dir.to_owned(), key })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn mac(&self, path: &Path) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        // The tag covers the file's name too: an artifact moved to another
        // name (another component's digest) does not verify.
        let name = path.file_name().map(|n| n.as_encoded_bytes()).unwrap_or_default();
        mac.update(name);
        mac.update(&[0]);
        mac
    }

    /// `tag || body`, as written to `path`.
    fn seal(&self, path: &Path, body: &[u8]) -> Vec<u8> {
        let mut mac = self.mac(path);
        mac.update(body);
        let tag = mac.finalize().into_bytes();
        let mut out = Vec::with_capacity(TAG_BYTES + body.len());
        out.extend_from_slice(&tag);
        out.extend_from_slice(body);
        out
    }

    /// The body of `sealed` read from `path`, if its tag verifies.
    pub(crate) fn open_sealed<'a>(&self, path: &Path, sealed: &'a [u8]) -> Option<&'a [u8]> {
        if sealed.len() < TAG_BYTES {
            return None;
        }
        let (tag, body) = sealed.split_at(TAG_BYTES);
        let mut mac = self.mac(path);
        mac.update(body);
        // Constant-time comparison.
        mac.verify_slice(tag).ok().map(|()| body)
    }

    pub(crate) fn write_sealed(&self, path: &Path, body: &[u8]) -> std::io::Result<()> {
        write_atomically(path, &self.seal(path, body))
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Refuses `path` when group or others may write to it (for the key: read
/// or write), or when another user owns it.
#[cfg(unix)]
fn check_private(path: &Path, is_key: bool) -> Result<(), HostError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|source| HostError::CacheDir { path: path.to_owned(), source })?;
    let refuse = |problem| Err(HostError::CacheInsecure { path: path.to_owned(), problem });
    let uid = rustix::process::geteuid().as_raw();
    if meta.uid() != uid {
        return refuse(CacheProblem::Owner { owner: meta.uid(), uid });
    }
    let mode = meta.mode() & 0o7777;
    if is_key && mode & 0o077 != 0 {
        return refuse(CacheProblem::KeyExposed { mode });
    }
    if mode & 0o022 != 0 {
        return refuse(CacheProblem::Writable { mode });
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_path: &Path, _is_key: bool) -> Result<(), HostError> {
    Ok(())
}

/// The per-host key at `path`, created (random, 0600) on first use. Two
/// hosts starting together agree on one key: each writes its own candidate
/// and links it into place, which fails for all but the first.
fn read_or_create_key(path: &Path) -> Result<[u8; KEY_BYTES], HostError> {
    let io = |source| HostError::CacheDir { path: path.to_owned(), source };
    if !path.exists() {
        let mut key = [0u8; KEY_BYTES];
        getrandom::fill(&mut key).map_err(|e| io(std::io::Error::other(e)))?;
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        write_private(&tmp, &key).map_err(io)?;
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
    }
    check_private(path, true)?;
    let bytes = std::fs::read(path).map_err(io)?;
    bytes.as_slice().try_into().map_err(|_| HostError::CacheInsecure {
        path: path.to_owned(),
        problem: CacheProblem::KeyInvalid { len: bytes.len() as u64 },
    })
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // Unique per write, not only per process: two loads of one component at
    // once (two tenants uploading the same bytes) must not share a file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    write_private(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Writes a new file only this user may read (0600 on unix).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}
