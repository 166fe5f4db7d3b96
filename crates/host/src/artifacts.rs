//! The directory of compiled artifacts, trusted only as far as it is proven
//! to be the host's own (issue 12, item 11). A cached artifact is native
//! code that wasmtime maps and runs, so: the directory is created 0700 and
//! refused when group or others may write to it or another user owns it,
//! and every file in it carries an HMAC-SHA256 tag under a random per-host
//! key (the file `artifact.key`, 0600, in the directory). What goes in the
//! files is `plugin/cache.rs`'s business.
//!
//! A compiled artifact is stored as wasmtime wrote it, so that wasmtime can
//! map it instead of copying it, with its tag in a sealed sidecar file
//! (`<artifact>.seal`). Checking a tag means reading the whole artifact
//! (tens of MB for a Python plugin), so once an artifact has verified, the
//! sidecar also records the file's [`FileStamp`]: a later load whose file
//! still has that stamp skips the read. A change through the normal file
//! calls changes the file's ctime, which no unprivileged process can set
//! back, and a stamp is recorded only once the ctime is [`SETTLED`] old, so
//! such a change within the same clock tick as the verified state cannot
//! keep its stamp. What a stamp cannot see (corruption below the file
//! system, writes through a dirty shared mapping, file systems that report
//! made-up times) is listed in docs/security.md.

use crate::error::{CacheProblem, HostError};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::path::{Path, PathBuf};

/// The name of the key file inside the cache directory.
const KEY_FILE: &str = "artifact.key";
/// Bytes of the key and of each tag (HMAC-SHA256).
const KEY_BYTES: usize = 32;
const TAG_BYTES: usize = 32;

/// How old a file's ctime must be before its stamp is trusted to stand
/// for its bytes. Timestamps come from a coarse kernel clock (one tick is
/// 1–10 ms), so two writes within a tick can leave the same stamp; two
/// seconds is far beyond any tick.
pub(crate) const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

/// What the kernel says identifies a file's contents: device, inode, size,
/// and modification and change times to the nanosecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    /// The stamp of `meta`; `None` off Unix, where every load checks in full.
    #[cfg(unix)]
    pub(crate) fn of(meta: &std::fs::Metadata) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        Some(FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        })
    }

    #[cfg(not(unix))]
    pub(crate) fn of(_meta: &std::fs::Metadata) -> Option<FileStamp> {
        None
    }

    /// Whether the file last changed at least [`SETTLED`] ago.
    pub(crate) fn is_settled(&self) -> bool {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let changed = std::time::Duration::new(
            u64::try_from(self.ctime.0).unwrap_or(0),
            u32::try_from(self.ctime.1).unwrap_or(0).min(999_999_999),
        );
        now.checked_sub(changed).is_some_and(|age| age >= SETTLED)
    }
}

/// The sidecar of an artifact: its tag, and the stamp it had when the tag
/// last verified (once settled).
#[derive(serde::Serialize, serde::Deserialize)]
struct Seal {
    tag: String,
    verified: Option<FileStamp>,
}

/// Why a cached artifact is not used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArtifactError {
    #[error("cannot read it: {0}")]
    Read(#[from] std::io::Error),
    #[error("its tag does not verify under this host's key (damaged, or not written by this host)")]
    Unauthenticated,
    #[error("it changed while it was loaded")]
    Changed,
}

/// A component file's digest, with the stamp the file had when it was hashed.
#[derive(serde::Serialize, serde::Deserialize)]
struct KnownSource {
    stamp: FileStamp,
    digest: String,
}

/// An opened cache directory: checked, with its key.
pub(crate) struct ArtifactCache {
    dir: PathBuf,
    key: [u8; KEY_BYTES],
    /// The most bytes of artifacts kept (`HostConfig::cache_max_bytes`).
    max_bytes: u64,
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
    pub(crate) fn open(dir: &Path, max_bytes: u64) -> Result<Self, HostError> {
        let io = |source| HostError::CacheDir { path: dir.to_owned(), source };
        create_private_dir(dir).map_err(io)?;
        check_private(dir, false)?;
        let key = read_or_create_key(&dir.join(KEY_FILE))?;
        Ok(Self { dir: dir.to_owned(), key, max_bytes })
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

    /// The sidecar file that holds the tag of the artifact at `path`.
    fn seal_path(path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(".seal");
        PathBuf::from(name)
    }

    /// Writes a compiled artifact as is, and its tag beside it.
    pub(crate) fn write_artifact(&self, path: &Path, body: &[u8]) -> std::io::Result<()> {
        let mut mac = self.mac(path);
        mac.update(body);
        let seal = Seal { tag: hex::encode(mac.finalize().into_bytes()), verified: None };
        let seal_path = Self::seal_path(path);
        // The artifact first: a crash in between leaves an old seal that
        // does not verify the new bytes, so the artifact is rebuilt.
        write_atomically(path, body)?;
        let seal = serde_json::to_vec(&seal).map_err(std::io::Error::other)?;
        self.write_sealed(&seal_path, &seal)?;
        self.evict(path);
        Ok(())
    }

    /// Marks the artifact at `path` as loaded now: the seal's modification
    /// time is its last use (the artifact's own times are part of its
    /// stamp, so touching it would cost the next load a full check).
    pub(crate) fn mark_used(&self, path: &Path) {
        if let Ok(seal) = std::fs::OpenOptions::new().write(true).open(Self::seal_path(path)) {
            let _ = seal.set_modified(std::time::SystemTime::now());
        }
    }

    /// Removes the least recently used artifacts (each with its seal and
    /// the files that share its name) until the artifacts fit in
    /// `max_bytes`, never `keep`. Own LRU rather than a cache crate: the
    /// entries are files that other processes of this host share, so the
    /// order must live on disk, in the seals' times.
    fn evict(&self, keep: &Path) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let mut artifacts: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
            .filter_map(|e| {
                let size = e.metadata().ok()?.len();
                let used = std::fs::metadata(Self::seal_path(&e.path())).and_then(|m| m.modified()).ok()?;
                Some((used, size, e.path()))
            })
            .collect();
        let mut total: u64 = artifacts.iter().map(|(_, size, _)| size).sum();
        artifacts.sort();
        for (_, size, path) in artifacts {
            if total <= self.max_bytes {
                break;
            }
            if path == keep {
                continue;
            }
            let stem = path.file_stem().map(|s| s.to_os_string()).unwrap_or_default();
            // The artifact, its seal, and the description cached beside it.
            if let Ok(siblings) = std::fs::read_dir(&self.dir) {
                for sibling in siblings.flatten() {
                    if sibling.file_name().as_encoded_bytes().starts_with(stem.as_encoded_bytes()) {
                        let _ = std::fs::remove_file(sibling.path());
                    }
                }
            }
            tracing::info!(path = %path.display(), bytes = size, "removed the least recently used artifact (cache over cache_max_bytes)");
            total = total.saturating_sub(size);
        }
    }

    /// Proves that the artifact at `path` is one this host wrote: by its
    /// recorded stamp when that still matches, else by reading it and
    /// checking its tag (then recording the stamp, once settled). Returns
    /// the stamp that was proven, which the caller checks again after
    /// wasmtime has mapped the file.
    pub(crate) fn verify_artifact(&self, path: &Path) -> Result<Option<FileStamp>, ArtifactError> {
        use std::io::Read;
        let seal_path = Self::seal_path(path);
        let sealed = std::fs::read(&seal_path)?;
        let seal: Seal = self
            .open_sealed(&seal_path, &sealed)
            .and_then(|body| serde_json::from_slice(body).ok())
            .ok_or(ArtifactError::Unauthenticated)?;
        let mut file = std::fs::File::open(path)?;
        let stamp = FileStamp::of(&file.metadata()?);
        if stamp.is_some() && seal.verified == stamp {
            return Ok(stamp);
        }
        let tag = hex::decode(&seal.tag).map_err(|_| ArtifactError::Unauthenticated)?;
        let mut body = Vec::new();
        file.read_to_end(&mut body)?;
        let mut mac = self.mac(path);
        mac.update(&body);
        mac.verify_slice(&tag).map_err(|_| ArtifactError::Unauthenticated)?;
        // The bytes read are the bytes stamped only if the file did not
        // change while it was read.
        let after = FileStamp::of(&file.metadata()?);
        if after != stamp {
            return Err(ArtifactError::Changed);
        }
        if let Some(settled) = stamp.filter(FileStamp::is_settled) {
            let seal = Seal { tag: seal.tag, verified: Some(settled) };
            let written = serde_json::to_vec(&seal)
                .map_err(std::io::Error::other)
                .and_then(|b| self.write_sealed(&seal_path, &b));
            if let Err(err) = written {
                tracing::warn!(path = %seal_path.display(), %err, "cannot record a verified artifact's stamp");
            }
        }
        Ok(stamp)
    }

    /// Where the digest of the component at `source` is remembered.
    fn source_path(&self, source: &Path) -> PathBuf {
        let absolute = std::path::absolute(source).unwrap_or_else(|_| source.to_owned());
        let key = hex::encode(<Sha256 as sha2::Digest>::digest(absolute.as_os_str().as_encoded_bytes()));
        self.dir.join(format!("source-{}.json", &key[..32]))
    }

    /// The SHA-256 of the component file at `source`, remembered from an
    /// earlier load, if the file still has the stamp it had then.
    pub(crate) fn known_digest(&self, source: &Path, stamp: &FileStamp) -> Option<String> {
        let path = self.source_path(source);
        let sealed = std::fs::read(&path).ok()?;
        let known: KnownSource = serde_json::from_slice(self.open_sealed(&path, &sealed)?).ok()?;
        (known.stamp == *stamp).then_some(known.digest)
    }

    /// Remembers the digest of the component file at `source` with the
    /// stamp it was read under, once that stamp has settled. Failing costs
    /// the next load a hash.
    pub(crate) fn remember_digest(&self, source: &Path, stamp: &FileStamp, digest: &str) {
        if !stamp.is_settled() {
            return;
        }
        let path = self.source_path(source);
        let written = serde_json::to_vec(&KnownSource { stamp: *stamp, digest: digest.to_owned() })
            .map_err(std::io::Error::other)
            .and_then(|b| self.write_sealed(&path, &b));
        if let Err(err) = written {
            tracing::warn!(path = %path.display(), %err, "cannot remember a component's digest");
        }
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
