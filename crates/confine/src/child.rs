//! What runs in the child between `fork` and `exec`.
//!
//! The parent may have other threads, so the child may only make
//! async-signal-safe calls: no allocation, no lock. Everything that needs
//! either (opening paths, building the ruleset, compiling the filters,
//! making the cgroup) is done in the parent, and the child only makes
//! system calls on what was prepared.

use crate::Limits;
use crate::view::MountView;
use crate::{privileges, supervisor};
use rustix::process::{Resource, Rlimit};
use seccompiler::BpfProgram;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// Everything the child needs, owned by the `pre_exec` closure so that the
/// descriptors live exactly as long as the command (they are close-on-exec:
/// the confined program never sees them).
pub(crate) struct ChildSetup {
    pub(crate) ruleset: OwnedFd,
    pub(crate) filters: Vec<BpfProgram>,
    pub(crate) cgroup_procs: Option<File>,
    pub(crate) limits: Limits,
    /// Whether `RLIMIT_NPROC` carries the process limit (no pids cgroup).
    pub(crate) nproc_rlimit: bool,
    /// The namespaces and the mount view.
    pub(crate) view: MountView,
    /// `/proc/sys/kernel/cap_last_cap`, read in the parent.
    pub(crate) last_capability: u32,
    /// The watch pipe's read end (see `supervisor`).
    pub(crate) watch_read: libc::c_int,
}

impl ChildSetup {
    /// Confines the calling (child) process, in an order where each step
    /// still has the rights it needs: join the cgroup, leave the parent's
    /// session, make the namespaces and the mount view (which needs
    /// `CAP_SYS_ADMIN`), set the limits, drop every capability, then
    /// `no_new_privs`, Landlock and seccomp (the filter refuses `setrlimit`
    /// and namespaces, so it comes last), and split into the supervisor and
    /// the command.
    pub(crate) fn run(&mut self) -> io::Result<()> {
        if let Some(procs) = &self.cgroup_procs {
            // "0" moves the writer itself, in cgroup v1 and v2 alike.
            rustix::io::write(procs, b"0")?;
        }
        rustix::process::setsid()?;
        self.view.enter()?;
        let limits = &self.limits;
        set_limit(Resource::Cpu, limits.cpu_seconds)?;
        set_limit(Resource::As, limits.memory_bytes)?;
        set_limit(Resource::Fsize, limits.file_size_bytes)?;
        set_limit(Resource::Nofile, limits.open_files)?;
        set_limit(Resource::Core, 0)?;
        // No real-time scheduling and no nice value below the current one,
        // even with a capability left by mistake.
        set_limit(Resource::Rtprio, 0)?;
        set_limit(Resource::Nice, 0)?;
        if self.nproc_rlimit {
            set_limit(Resource::Nproc, limits.processes)?;
        }
        privileges::drop_all(self.last_capability)?;
        rustix::thread::set_no_new_privs(true)?;
        landlock_restrict_self(&self.ruleset)?;
        for filter in &self.filters {
            seccompiler::apply_filter(filter).map_err(|e| match e {
                seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => e,
                _ => io::Error::from_raw_os_error(libc::EINVAL),
            })?;
        }
        // No descriptor but 0, 1 and 2 reaches the command: whatever the
        // host inherited from its own parent, or opened without
        // close-on-exec, is closed at `exec`.
        close_all_from_3_on_exec()?;
        supervisor::split(self.watch_read)
    }
}

/// `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`.
#[expect(unsafe_code, reason = "a raw system call with integer arguments")]
fn close_all_from_3_on_exec() -> io::Result<()> {
    // SAFETY: integer arguments only; nothing is closed before exec.
    let result = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
    if result < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Sets the soft and hard limit: a confined process cannot raise either.
fn set_limit(resource: Resource, value: u64) -> io::Result<()> {
    rustix::process::setrlimit(resource, Rlimit { current: Some(value), maximum: Some(value) })?;
    Ok(())
}

/// `landlock_restrict_self(ruleset, 0)`: the landlock crate's own
/// `restrict_self` builds its status and errors on the heap, so the child
/// makes the system call itself on the ruleset the crate built.
#[expect(unsafe_code, reason = "a raw system call with an owned descriptor and no pointers")]
fn landlock_restrict_self(ruleset: &OwnedFd) -> io::Result<()> {
    // SAFETY: the call takes a descriptor (valid: owned here) and flags; it
    // reads and writes no memory of ours.
    let result = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) };
    if result < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Installs `setup` on `cmd`, to run in the child before exec.
#[expect(unsafe_code, reason = "pre_exec: the closure runs between fork and exec")]
pub(crate) fn install(cmd: &mut std::process::Command, setup: ChildSetup) {
    use std::os::unix::process::CommandExt;
    // SAFETY: `ChildSetup::run` makes only async-signal-safe system calls
    // (write, setsid, unshare, mount and friends, setrlimit, prctl, capset,
    // landlock_restrict_self, seccomp, close_range, clone) on memory and
    // descriptors prepared before the fork, and neither allocates nor takes
    // a lock; its errors are raw OS errors.
    let mut setup = setup;
    unsafe {
        cmd.pre_exec(move || setup.run());
    }
}
