//! What runs in the child between `fork` and `exec`.
//!
//! The parent may have other threads, so the child may only make
//! async-signal-safe calls: no allocation, no lock. Everything that needs
//! either (opening paths, building the ruleset, compiling the filters,
//! making the cgroup) is done in the parent, and the child only makes
//! system calls on what was prepared.

use crate::Limits;
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
}

impl ChildSetup {
    /// Confines the calling (child) process, in an order where each step
    /// still has the rights it needs: join the cgroup, leave the parent's
    /// session, set the limits, then `no_new_privs`, Landlock and seccomp
    /// (the filter refuses `setrlimit`, so it comes last).
    pub(crate) fn run(&self) -> io::Result<()> {
        if let Some(procs) = &self.cgroup_procs {
            // "0" moves the writer itself, in cgroup v1 and v2 alike.
            rustix::io::write(procs, b"0")?;
        }
        rustix::process::setsid()?;
        let limits = &self.limits;
        set_limit(Resource::Cpu, limits.cpu_seconds)?;
        set_limit(Resource::As, limits.memory_bytes)?;
        set_limit(Resource::Fsize, limits.file_size_bytes)?;
        set_limit(Resource::Nofile, limits.open_files)?;
        set_limit(Resource::Core, 0)?;
        if self.nproc_rlimit {
            set_limit(Resource::Nproc, limits.processes)?;
        }
        rustix::thread::set_no_new_privs(true)?;
        landlock_restrict_self(&self.ruleset)?;
        for filter in &self.filters {
            seccompiler::apply_filter(filter).map_err(|e| match e {
                seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e) => e,
                _ => io::Error::from_raw_os_error(libc::EINVAL),
            })?;
        }
        Ok(())
    }
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
    // (write, setsid, setrlimit, prctl, landlock_restrict_self, seccomp) on
    // memory and descriptors prepared before the fork, and neither
    // allocates nor takes a lock; its errors are raw OS errors.
    unsafe {
        cmd.pre_exec(move || setup.run());
    }
}
