//! The Landlock ruleset: which paths a confined process may read, write or
//! execute, whether it may bind or connect TCP, and the scoping of signals
//! and abstract unix sockets to its own domain.
//!
//! Built in the parent (opening paths allocates); the child only passes the
//! ruleset's descriptor to `landlock_restrict_self`.

use crate::{ConfineError, Confinement};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetError, Scope,
};
use std::fs::{File, OpenOptions};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The Landlock ABI whose every right is handled: 6 (Linux 6.12) brings
/// signal and abstract-unix-socket scoping on top of TCP rules (4) and
/// device ioctls (5). A kernel below it is refused, not half-confined.
pub(crate) const LANDLOCK_ABI: ABI = ABI::V6;

/// System directories readable and executable by every confined process:
/// what `sh`, coreutils, `grep`, `python3` and their shared libraries need.
/// Missing ones (no `/lib32` here, no `/sbin` there) are left out.
///
/// `/proc` is not among them: Landlock does not stop a confined process
/// from reading `/proc/<pid>/environ`, `maps` or `fd/` of an unconfined
/// process of the same user, such as the host with its API keys.
pub(crate) const SYSTEM_READ: &[&str] = &["/bin", "/sbin", "/usr", "/lib", "/lib32", "/lib64", "/libx32"];

/// The machine-wide files of `/proc` that runtimes read for CPU and memory
/// figures (node's `os.cpus()`, `nproc`, `free`); nothing per process.
pub(crate) const PROC_READ: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/loadavg",
    "/proc/uptime",
    "/proc/version",
    "/proc/filesystems",
];

/// Device files a confined process may read.
pub(crate) const DEVICES_READ: &[&str] = &["/dev/zero", "/dev/urandom", "/dev/random"];

/// Device files a confined process may read and write (and truncate, as
/// `> /dev/null` does).
pub(crate) const DEVICES_READ_WRITE: &[&str] = &["/dev/null"];

/// `/etc` is readable only in the parts every user may read: a root process
/// would otherwise read `/etc/shadow`, private TLS keys or SSH host keys.
pub(crate) const ETC: &str = "/etc";

/// Where name resolution reads its configuration on systemd hosts
/// (`/etc/resolv.conf` links there); granted with the network only.
pub(crate) const RESOLVER: &str = "/run/systemd/resolve";

/// The ruleset of `confinement`, as the descriptor `landlock_restrict_self`
/// takes (close-on-exec, so the confined program does not inherit it).
pub(crate) fn build(confinement: &Confinement) -> Result<OwnedFd, ConfineError> {
    let mut ruleset = handled(confinement.network).map_err(unsupported)?.create().map_err(unsupported)?;
    for rule in system_rules(confinement.network)? {
        ruleset = rule.add_to(ruleset)?;
    }
    let read = AccessFs::from_read(LANDLOCK_ABI);
    let read_write = AccessFs::from_all(LANDLOCK_ABI);
    for path in &confinement.read_only {
        ruleset = grant(ruleset, path, read)?;
    }
    for path in &confinement.read_write {
        ruleset = grant(ruleset, path, read_write)?;
    }
    let fd: Option<OwnedFd> = ruleset.into();
    // HardRequirement makes an unsupported kernel an error before this point;
    // no descriptor here would mean no confinement, so it is refused too.
    fd.ok_or(ConfineError::LandlockMissing { needed: LANDLOCK_ABI as u32 })
}

/// A rule on a system path, its `O_PATH` descriptor opened once.
#[derive(Debug)]
struct SystemRule {
    file: File,
    access: BitFlags<AccessFs>,
}

impl SystemRule {
    fn add_to(&self, ruleset: RulesetCreated) -> Result<RulesetCreated, ConfineError> {
        ruleset.add_rule(PathBeneath::new(&self.file, self.access)).map_err(|source| ConfineError::Landlock { source })
    }
}

/// The rules every confined process gets (the system directories, the
/// world-readable parts of `/etc`, a few `/proc` files and devices; the
/// resolver's directory with the network), opened once per process.
///
/// Why cached: `/etc` alone is some 150 subtrees here, and opening each
/// path for every command was the confinement's dearest step after the
/// fork (1.2 ms of it, then 0.5 ms, in release:
/// `confinement::tests::where_a_confined_spawn_spends_its_time`;
/// docs/performance.md, "The workspace tools"). A descriptor names
/// the inode it was opened on: should a system directory be replaced while
/// the host runs, commands lose access to the new one (they fail closed) until
/// the host restarts, exactly as the `/etc` list is computed once already.
/// A failure is not cached: the next command tries again.
fn system_rules(network: bool) -> Result<&'static [SystemRule], ConfineError> {
    static WITHOUT_NETWORK: OnceLock<Vec<SystemRule>> = OnceLock::new();
    static WITH_NETWORK: OnceLock<Vec<SystemRule>> = OnceLock::new();
    let cache = if network { &WITH_NETWORK } else { &WITHOUT_NETWORK };
    if let Some(rules) = cache.get() {
        return Ok(rules);
    }
    let rules = open_system_rules(network)?;
    Ok(cache.get_or_init(|| rules))
}

fn open_system_rules(network: bool) -> Result<Vec<SystemRule>, ConfineError> {
    let abi = LANDLOCK_ABI;
    let read = AccessFs::from_read(abi);
    let mut wanted: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    wanted.extend(SYSTEM_READ.iter().map(|p| (PathBuf::from(p), read)));
    wanted.extend(world_readable(Path::new(ETC)).iter().map(|p| (p.clone(), read)));
    wanted.extend(PROC_READ.iter().chain(DEVICES_READ).map(|p| (PathBuf::from(p), AccessFs::ReadFile.into())));
    wanted.extend(
        DEVICES_READ_WRITE
            .iter()
            .map(|p| (PathBuf::from(p), AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate)),
    );
    if network {
        wanted.push((PathBuf::from(RESOLVER), read));
    }
    let mut rules = Vec::with_capacity(wanted.len());
    for (path, access) in wanted {
        // A system path this machine lacks is left out.
        let file = match open_path(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(ConfineError::GrantedPath { path, source }),
        };
        let access = for_file_type(&path, &file, access)?;
        rules.push(SystemRule { file, access });
    }
    Ok(rules)
}

/// Whether this kernel enforces every right [`build`] asks for.
pub(crate) fn check_supported() -> Result<(), ConfineError> {
    let ruleset = handled(false).map_err(unsupported)?.create().map_err(unsupported)?;
    let fd: Option<OwnedFd> = ruleset.into();
    fd.map(drop).ok_or(ConfineError::LandlockMissing { needed: LANDLOCK_ABI as u32 })
}

/// The rights the ruleset handles (everything not granted by a rule is
/// denied): all file system rights of [`LANDLOCK_ABI`], TCP bind and connect
/// unless the network is allowed, and both scopes.
fn handled(network: bool) -> Result<Ruleset, RulesetError> {
    let abi = LANDLOCK_ABI;
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    if network { Ok(ruleset) } else { ruleset.handle_access(AccessNet::from_all(abi)) }
}

fn unsupported(source: RulesetError) -> ConfineError {
    match source {
        RulesetError::AddRules(_) => ConfineError::Landlock { source },
        _ => ConfineError::LandlockUnsupported { needed: LANDLOCK_ABI as u32, source },
    }
}

/// Adds a rule for a path the caller granted: it must exist.
fn grant(ruleset: RulesetCreated, path: &Path, access: BitFlags<AccessFs>) -> Result<RulesetCreated, ConfineError> {
    if !path.is_absolute() {
        return Err(ConfineError::RelativePath { path: path.to_path_buf() });
    }
    let file = open_path(path).map_err(|source| ConfineError::GrantedPath { path: path.to_path_buf(), source })?;
    add(ruleset, path, file, access)
}

/// Opens `path` with `O_PATH` (no read right needed, nothing happens to a
/// device): the rule is on what the path names now, symlinks resolved.
fn open_path(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_PATH | libc::O_CLOEXEC).open(path)
}

fn add(
    ruleset: RulesetCreated,
    path: &Path,
    file: File,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, ConfineError> {
    let access = for_file_type(path, &file, access)?;
    ruleset.add_rule(PathBeneath::new(file, access)).map_err(|source| ConfineError::Landlock { source })
}

/// `access` as a rule on `file` may carry it: a rule on a file may only
/// carry the rights that apply to a file; the type is read from the
/// descriptor the rule is made of.
fn for_file_type(path: &Path, file: &File, access: BitFlags<AccessFs>) -> Result<BitFlags<AccessFs>, ConfineError> {
    let meta = file.metadata().map_err(|source| ConfineError::GrantedPath { path: path.to_path_buf(), source })?;
    Ok(if meta.is_dir() { access } else { access & AccessFs::from_file(LANDLOCK_ABI) })
}

/// The largest subtrees of `root` in which every file and directory is
/// readable by every user (mode `o+r`, and `o+x` for directories), found
/// once per process: `/etc` minus `shadow`, `ssl/private` and the like.
/// Symbolic links are not followed (what they point to is granted, or not,
/// where it lives).
fn world_readable(root: &Path) -> &'static [PathBuf] {
    static ETC_GRANTS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    ETC_GRANTS.get_or_init(|| {
        let mut grants = Vec::new();
        if wholly_world_readable(root) {
            grants.push(root.to_path_buf());
        } else {
            collect_world_readable(root, &mut grants, 0);
        }
        grants
    })
}

/// How deep the search for readable subtrees goes; below it, a directory
/// with anything private in it is left out whole.
const MAX_DEPTH: usize = 8;

fn collect_world_readable(dir: &Path, grants: &mut Vec<PathBuf>, depth: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.file_type().is_symlink() || !readable_by_all(&meta) {
            continue;
        }
        if wholly_world_readable(&path) {
            grants.push(path);
        } else if meta.is_dir() && depth < MAX_DEPTH {
            collect_world_readable(&path, grants, depth + 1);
        }
    }
}

fn wholly_world_readable(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return false };
    if meta.file_type().is_symlink() {
        return true;
    }
    if !readable_by_all(&meta) {
        return false;
    }
    if !meta.is_dir() {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(path) else { return false };
    entries.into_iter().all(|entry| entry.is_ok_and(|entry| wholly_world_readable(&entry.path())))
}

fn readable_by_all(meta: &std::fs::Metadata) -> bool {
    let mode = meta.mode();
    let readable = mode & 0o004 != 0;
    if meta.is_dir() { readable && mode & 0o001 != 0 } else { readable }
}
