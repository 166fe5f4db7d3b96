//! The confined process's own namespaces and its view of the file system.
//!
//! Landlock decides what a path may be used for, but it has no hook for
//! `chmod`, `chown`, `utime`, `setxattr`, inode flags, connecting to a
//! pathname unix socket, `stat` or inotify. So the child also gets a mount
//! namespace whose root is a small read-only tmpfs holding only what it may
//! use, each bound from the host with the least it needs:
//!
//! - the system directories and `/etc`: read-only, `nosuid`, `nodev`
//!   (a symbolic link such as merged-usr's `/bin -> usr/bin` is made again
//!   as the same link);
//! - the machine-wide files of `/proc` that runtimes read, one by one;
//! - `/dev` holding `null`, `zero`, `random` and `urandom` bound from the
//!   host, and the private temporary directory, if there is one, also at
//!   `/dev/shm` (POSIX shared memory and semaphores live there);
//! - the read-only grants read-only, the read-write grants as they are on
//!   the host, both `nosuid` and `nodev`.
//!
//! Anything else (another tenant's files, `/run`'s sockets, `/root`,
//! `/sys`, every other device) is not there to name. It also gets IPC and
//! PID namespaces of its own: the host's SysV and POSIX IPC objects are out
//! of sight, what it makes dies with it, and its first process is the init
//! of its PID namespace, so every process it starts dies with it.
//!
//! Built like bubblewrap's (Flatpak's, and Anthropic's sandbox-runtime's on
//! Linux) setup: `unshare`, private propagation, the new root as a tmpfs,
//! `pivot_root`, the old root detached. Written here rather than by running
//! `bwrap` because the confinement is installed between `fork` and `exec`
//! of a command the caller builds: a second program in between would change
//! the command's pid, its exit status and its process group, and bwrap is
//! not on every host. The sources are cloned with `open_tree` before the new
//! root hides them, so a grant under `/tmp` (the staging point) still works.
//!
//! As root the child has `CAP_SYS_ADMIN` and makes the namespaces itself; a
//! host that is not root (or is root without `CAP_SYS_ADMIN`, as in a
//! container) makes a user namespace first, mapping only its own uid and
//! gid (as 0 inside), so that the files the command makes belong to the
//! host's user.

use crate::ConfineError;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

/// Where the new root is assembled before `pivot_root`: a directory every
/// host has. Mounted over only in the child's own mount namespace.
const STAGE: &str = "/tmp";

/// How a source is bound into the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read-only, no set-user-ID, no devices.
    ReadOnly,
    /// As the host has it (writable where the host's mount is), no
    /// set-user-ID, no devices.
    ReadWrite,
    /// A device node: read-only mount (the device itself still takes
    /// writes, as `/dev/null` must), no set-user-ID, no execution.
    Device,
}

impl Access {
    fn attributes(self) -> u64 {
        match self {
            Access::ReadOnly => libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
            Access::ReadWrite => libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
            Access::Device => libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NOEXEC,
        }
    }
}

/// One entry of the view, in the order it is made (parents first).
#[derive(Debug)]
enum Entry {
    /// `source` bound at `target`; `directory` says what to make as its
    /// mount point.
    Bind { source: CString, target: Vec<u8>, directory: bool, access: Access },
    /// A symbolic link at `target` pointing at `points_to`.
    Link { target: Vec<u8>, points_to: CString },
}

/// The prepared view of one child: every path and option as bytes made in
/// the parent, so that the child only makes system calls.
#[derive(Debug)]
pub(crate) struct MountView {
    entries: Vec<Entry>,
    /// One slot per entry for the cloned tree's descriptor (the child
    /// writes into it; no allocation after the fork).
    trees: Vec<libc::c_int>,
    /// Where the command starts, inside the view: `/` until
    /// [`MountView::start_in`] says otherwise.
    cwd: CString,
    /// SysV shared memory bound of the IPC namespace, in pages and bytes.
    shm_pages: CString,
    shm_bytes: CString,
    /// `Some` when the child must make a user namespace first: the
    /// `uid_map` and `gid_map` lines mapping the host's own ids.
    user: Option<(CString, CString)>,
}

/// What the view is made of.
pub(crate) struct ViewSpec<'a> {
    pub(crate) system: &'a [(PathBuf, Access)],
    pub(crate) read_only: &'a [PathBuf],
    pub(crate) read_write: &'a [PathBuf],
    /// Bound read-write at `/dev/shm` too.
    pub(crate) shm_dir: Option<&'a Path>,
    pub(crate) shared_memory_bytes: u64,
    pub(crate) user_namespace: bool,
}

fn bytes_of(path: &Path) -> Vec<u8> {
    let mut staged = Vec::with_capacity(STAGE.len() + path.as_os_str().len() + 1);
    staged.extend_from_slice(STAGE.as_bytes());
    staged.extend_from_slice(path.as_os_str().as_bytes());
    staged.push(0);
    staged
}

fn c_string(path: &Path) -> Result<CString, ConfineError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| ConfineError::GrantedPath {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "the path holds a NUL byte"),
    })
}

/// The depth of a path, for ordering: a mount point must exist before a
/// grant beneath it is bound.
fn depth(path: &Path) -> usize {
    path.components().filter(|c| matches!(c, Component::Normal(_))).count()
}

impl MountView {
    /// Prepares the view: which host paths go where. A system path this
    /// host lacks is left out; a grant must exist (as for its Landlock rule).
    pub(crate) fn new(spec: ViewSpec<'_>) -> Result<Self, ConfineError> {
        // (source, where in the view, access, whether a system path)
        let mut wanted: Vec<(PathBuf, PathBuf, Access, bool)> = Vec::new();
        for (path, access) in spec.system {
            wanted.push((path.clone(), path.clone(), *access, true));
        }
        // A grant beneath a system path that is a symbolic link (`/bin/…`
        // where `/bin -> usr/bin`) is bound at its real path only: the link
        // leads there, and a mount on a link cannot be made.
        let system_links: Vec<&PathBuf> = spec
            .system
            .iter()
            .map(|(path, _)| path)
            .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()))
            .collect();
        let under_link = |path: &Path| system_links.iter().any(|link| path.starts_with(link));
        for path in spec.read_only {
            if !under_link(path) {
                wanted.push((path.clone(), path.clone(), Access::ReadOnly, false));
            }
        }
        for path in spec.read_write {
            if !under_link(path) {
                wanted.push((path.clone(), path.clone(), Access::ReadWrite, false));
            }
        }
        // Also bound at its real path, so that a program that resolves its
        // own path (`realpath`, `/proc/self/exe` users) finds it there.
        let mut canonical = Vec::new();
        let grants = spec.read_only.iter().map(|p| (p, Access::ReadOnly));
        for (path, access) in grants.chain(spec.read_write.iter().map(|p| (p, Access::ReadWrite))) {
            if let Ok(real) = path.canonicalize()
                && &real != path
                && !under_link(&real)
            {
                canonical.push((real.clone(), real, access, false));
            }
        }
        wanted.extend(canonical);
        if let Some(dir) = spec.shm_dir {
            wanted.push((dir.to_path_buf(), PathBuf::from("/dev/shm"), Access::ReadWrite, false));
        }
        // Stable: at one depth, read-only before read-write, so that a path
        // granted both ways ends up writable, as its Landlock rules say.
        wanted.sort_by_key(|(_, target, _, _)| depth(target));
        let mut entries = Vec::with_capacity(wanted.len());
        for (path, target, access, system) in wanted {
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(e) if system && e.kind() == io::ErrorKind::NotFound => continue,
                Err(source) => return Err(ConfineError::GrantedPath { path, source }),
            };
            let target = bytes_of(&target);
            if system && meta.file_type().is_symlink() {
                let points_to = std::fs::read_link(&path)
                    .map_err(|source| ConfineError::GrantedPath { path: path.clone(), source })?;
                entries.push(Entry::Link { target, points_to: c_string(&points_to)? });
                continue;
            }
            // Grants follow symbolic links, as their Landlock rules do.
            let meta =
                std::fs::metadata(&path).map_err(|source| ConfineError::GrantedPath { path: path.clone(), source })?;
            let directory = meta.is_dir();
            if !system && (meta.file_type().is_char_device() || meta.file_type().is_block_device()) {
                // A device is never granted into the view: only the ones
                // listed for every process are there.
                return Err(ConfineError::DeviceGrant { path });
            }
            let source = c_string(&path)?;
            entries.push(Entry::Bind { source, target, directory, access });
        }
        let shm = spec.shared_memory_bytes.max(4096);
        let page = 4096;
        // The host's own uid and gid become 0 inside: what the command
        // makes belongs to the host's user outside, and the namespace's
        // root (who owns its IPC limits) is the command, so it can bound
        // them. It holds no capability after the setup.
        let user = if spec.user_namespace {
            let uid = rustix::process::geteuid().as_raw();
            let gid = rustix::process::getegid().as_raw();
            Some((
                CString::new(format!("0 {uid} 1\n")).unwrap_or_default(),
                CString::new(format!("0 {gid} 1\n")).unwrap_or_default(),
            ))
        } else {
            None
        };
        Ok(Self {
            trees: vec![-1; entries.len()],
            entries,
            cwd: CString::from(c"/"),
            shm_pages: CString::new(format!("{}", shm.div_ceil(page))).unwrap_or_default(),
            shm_bytes: CString::new(format!("{shm}")).unwrap_or_default(),
            user,
        })
    }

    /// Makes the command start in `cwd` (absolute) when it is inside the
    /// view (the root itself, at or beneath a bound directory, or a bound
    /// file); `Ok(false)`, and nothing changed, when it is not.
    pub(crate) fn start_in(&mut self, cwd: &Path) -> Result<bool, ConfineError> {
        let inside = cwd == Path::new("/")
            || self.entries.iter().any(|entry| match entry {
                Entry::Bind { target, directory, .. } => {
                    // The path in the view: the target without the stage and the NUL.
                    let bound = Path::new(OsStr::from_bytes(&target[STAGE.len()..target.len() - 1]));
                    if *directory { cwd.starts_with(bound) } else { cwd == bound }
                }
                Entry::Link { .. } => false,
            });
        if inside {
            self.cwd = c_string(cwd)?;
        }
        Ok(inside)
    }

    /// In the child: makes the namespaces and enters the view. Only system
    /// calls on what [`MountView::new`] prepared.
    pub(crate) fn enter(&mut self) -> io::Result<()> {
        let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWPID;
        if self.user.is_some() {
            flags |= libc::CLONE_NEWUSER;
        }
        check(unsafe_call::unshare(flags))?;
        if let Some((uid_map, gid_map)) = &self.user {
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", uid_map.as_bytes())?;
            write_file(c"/proc/self/gid_map", gid_map.as_bytes())?;
        }
        // Nothing done below propagates back to the host's mounts.
        check(unsafe_call::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None))?;
        // The IPC namespace's SysV shared memory, bounded.
        write_file(c"/proc/sys/kernel/shmmax", self.shm_bytes.as_bytes())?;
        write_file(c"/proc/sys/kernel/shmall", self.shm_pages.as_bytes())?;
        for (entry, tree) in self.entries.iter().zip(self.trees.iter_mut()) {
            if let Entry::Bind { source, access, .. } = entry {
                *tree = check(unsafe_call::open_tree(source))?;
                check(unsafe_call::mount_setattr_fd(*tree, access.attributes()))?;
            }
        }
        check(unsafe_call::mount(
            Some(c"tmpfs"),
            c"/tmp",
            Some(c"tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            Some(c"mode=0755,size=1m"),
        ))?;
        for (entry, tree) in self.entries.iter_mut().zip(self.trees.iter()) {
            match entry {
                Entry::Bind { target, directory, .. } => {
                    make_parents(target)?;
                    let path = as_c_str(target)?;
                    if *directory {
                        exists_ok(unsafe_call::mkdir(path, 0o755))?;
                    } else {
                        let fd = exists_ok(unsafe_call::create(path))?;
                        if fd >= 0 {
                            let _ = unsafe_call::close(fd);
                        }
                    }
                    check(unsafe_call::move_mount(*tree, path))?;
                    let _ = unsafe_call::close(*tree);
                }
                Entry::Link { target, points_to } => {
                    make_parents(target)?;
                    exists_ok(unsafe_call::symlink(points_to, as_c_str(target)?))?;
                }
            }
        }
        // The runc way to pivot without a directory for the old root: both
        // are ".", and the old one is then detached from on top.
        check(unsafe_call::chdir(c"/tmp"))?;
        check(unsafe_call::pivot_root(c".", c"."))?;
        check(unsafe_call::umount_detach(c"."))?;
        check(unsafe_call::mount_setattr_path(
            c"/",
            libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV,
        ))?;
        // Also after `pivot_root`: the working directory the parent set
        // still named the old tree.
        check(unsafe_call::chdir(&self.cwd))?;
        Ok(())
    }
}

/// `path` (NUL-terminated bytes) as a C string, without allocating.
fn as_c_str(path: &[u8]) -> io::Result<&std::ffi::CStr> {
    std::ffi::CStr::from_bytes_with_nul(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `mkdir -p` of the parents of `path` (under the stage), in place: each
/// `/` in turn is made a NUL, the prefix made, the `/` put back.
fn make_parents(path: &mut [u8]) -> io::Result<()> {
    let end = path.len().saturating_sub(1);
    for i in STAGE.len() + 1..end {
        if path[i] == b'/' {
            path[i] = 0;
            let made = as_c_str(&path[..=i]).and_then(|p| exists_ok(unsafe_call::mkdir(p, 0o755)));
            path[i] = b'/';
            made?;
        }
    }
    Ok(())
}

fn write_file(path: &std::ffi::CStr, contents: &[u8]) -> io::Result<()> {
    let fd = check(unsafe_call::open_write(path))?;
    let written = check(unsafe_call::write(fd, contents));
    let _ = unsafe_call::close(fd);
    match written? {
        n if n as usize == contents.len() => Ok(()),
        _ => Err(io::Error::from_raw_os_error(libc::EIO)),
    }
}

/// A raw call's result: the value, or the error in `errno`.
fn check(result: libc::c_long) -> io::Result<libc::c_int> {
    if result < 0 { Err(io::Error::last_os_error()) } else { Ok(result as libc::c_int) }
}

/// Like [`check`], with "it exists already" as success (returning -1).
fn exists_ok(result: libc::c_long) -> io::Result<libc::c_int> {
    match check(result) {
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(-1),
        other => other,
    }
}

/// The raw system calls of the view, each a thin wrapper: between fork and
/// exec nothing may allocate or lock, and rustix has no `mount_setattr`.
#[expect(unsafe_code, reason = "raw system calls on prepared, NUL-terminated paths")]
mod unsafe_call {
    use std::ffi::CStr;
    use std::ptr::null;

    // SAFETY (every function below): the pointers are to NUL-terminated
    // strings or to a `mount_attr` that live across the call; the kernel
    // reads them and writes none of our memory.

    pub(super) fn unshare(flags: libc::c_int) -> libc::c_long {
        unsafe { libc::unshare(flags) as libc::c_long }
    }

    pub(super) fn mount(
        source: Option<&CStr>,
        target: &CStr,
        fstype: Option<&CStr>,
        flags: libc::c_ulong,
        data: Option<&CStr>,
    ) -> libc::c_long {
        let ptr = |s: Option<&CStr>| s.map_or(null(), CStr::as_ptr);
        unsafe { libc::mount(ptr(source), target.as_ptr(), ptr(fstype), flags, ptr(data).cast()) as libc::c_long }
    }

    pub(super) fn open_tree(source: &CStr) -> libc::c_long {
        let flags = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_RECURSIVE as libc::c_uint;
        unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, source.as_ptr(), flags) }
    }

    fn attr(set: u64) -> libc::mount_attr {
        libc::mount_attr { attr_set: set, attr_clr: 0, propagation: 0, userns_fd: 0 }
    }

    pub(super) fn mount_setattr_fd(tree: libc::c_int, set: u64) -> libc::c_long {
        let attr = attr(set);
        let flags = libc::AT_EMPTY_PATH | libc::AT_RECURSIVE;
        unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                tree,
                c"".as_ptr(),
                flags,
                &attr as *const libc::mount_attr,
                size_of::<libc::mount_attr>(),
            )
        }
    }

    pub(super) fn mount_setattr_path(path: &CStr, set: u64) -> libc::c_long {
        let attr = attr(set);
        unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                path.as_ptr(),
                0,
                &attr as *const libc::mount_attr,
                size_of::<libc::mount_attr>(),
            )
        }
    }

    pub(super) fn move_mount(tree: libc::c_int, target: &CStr) -> libc::c_long {
        unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                tree,
                c"".as_ptr(),
                libc::AT_FDCWD,
                target.as_ptr(),
                libc::MOVE_MOUNT_F_EMPTY_PATH,
            )
        }
    }

    pub(super) fn mkdir(path: &CStr, mode: libc::mode_t) -> libc::c_long {
        unsafe { libc::mkdir(path.as_ptr(), mode) as libc::c_long }
    }

    pub(super) fn create(path: &CStr) -> libc::c_long {
        let flags = libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC;
        unsafe { libc::open(path.as_ptr(), flags, 0o644 as libc::c_uint) as libc::c_long }
    }

    pub(super) fn open_write(path: &CStr) -> libc::c_long {
        unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) as libc::c_long }
    }

    pub(super) fn write(fd: libc::c_int, contents: &[u8]) -> libc::c_long {
        unsafe { libc::write(fd, contents.as_ptr().cast(), contents.len()) as libc::c_long }
    }

    pub(super) fn symlink(points_to: &CStr, path: &CStr) -> libc::c_long {
        unsafe { libc::symlink(points_to.as_ptr(), path.as_ptr()) as libc::c_long }
    }

    pub(super) fn close(fd: libc::c_int) -> libc::c_long {
        unsafe { libc::close(fd) as libc::c_long }
    }

    pub(super) fn chdir(path: &CStr) -> libc::c_long {
        unsafe { libc::chdir(path.as_ptr()) as libc::c_long }
    }

    pub(super) fn pivot_root(new_root: &CStr, put_old: &CStr) -> libc::c_long {
        unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) }
    }

    pub(super) fn umount_detach(path: &CStr) -> libc::c_long {
        unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) as libc::c_long }
    }
}
