//! Nothing outlives its owner: a small supervisor between the host and the
//! confined command.
//!
//! The child forks once more at the end of its setup. The command goes on
//! to `exec` as the first process (the init) of its own PID namespace, so
//! when it dies, the kernel kills every process it started, wherever they
//! moved. The supervisor, the process the caller spawned (its pid is the
//! one `Child::id` gives, and the process group's), only waits. It exits
//! with the command's status, or dies of the same signal. It also watches a
//! pipe whose write end only the host holds. When the host dies, however it
//! dies (a `SIGKILL`, a panic, an abort), the pipe closes and the
//! supervisor kills the command, and with it the namespace. The command
//! gets `PR_SET_PDEATHSIG` against the supervisor, so killing the
//! supervisor alone ends it too.
//!
//! Why not `PR_SET_PDEATHSIG` against the host alone: it fires when the
//! *thread* that forked exits, and a tokio blocking thread that spawned a
//! command exits after ten idle seconds, which would kill a healthy
//! command. The supervisor is single-threaded, so there the signal means
//! what it says.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

/// The read end of the watch pipe, made once per process; both ends are
/// close-on-exec. The write end stays in the static for the host's whole
/// life and is held by nothing else after an `exec`; a supervisor closes
/// its copy at once.
pub(crate) fn watch_pipe() -> io::Result<libc::c_int> {
    static PIPE: OnceLock<(OwnedFd, OwnedFd)> = OnceLock::new();
    if let Some((read, _)) = PIPE.get() {
        return Ok(read.as_raw_fd());
    }
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let (read, _) = PIPE.get_or_init(|| (read, write));
    Ok(read.as_raw_fd())
}

/// In the child, last of all: splits into the supervisor, which never
/// returns, and the command, which returns `Ok` and goes on to `exec`.
/// The command's copy of the watch pipe closes at its `exec` (both ends are
/// close-on-exec); the supervisor closes all but the read end itself.
pub(crate) fn split(watch_read: libc::c_int) -> io::Result<()> {
    let command = raw::fork()?;
    if command == 0 {
        // The command: dies with its supervisor.
        raw::prctl_pdeathsig()?;
        return Ok(());
    }
    supervise(command, watch_read)
}

/// The supervisor's loop; exits as the command did.
fn supervise(command: libc::pid_t, watch_read: libc::c_int) -> ! {
    // A signal sent to the process group reaches the command itself; the
    // supervisor, which leads the group, must not die of it and take the
    // command along (only SIGKILL, which cannot be caught, ends it).
    raw::ignore_signals();
    let pidfd = raw::pidfd_open(command).ok();
    // Nothing of the host's but the watch pipe's read end: not its other
    // descriptors, not the command's stdio (so the caller's pipes end
    // when the command ends), not the write end of the watch pipe.
    raw::close_all_but(&[watch_read, pidfd.unwrap_or(-1)]);
    if let Some(pidfd) = pidfd {
        loop {
            match raw::poll2(watch_read, pidfd) {
                Ok((host_gone, command_done)) => {
                    if command_done {
                        break;
                    }
                    if host_gone {
                        raw::kill(command, libc::SIGKILL);
                        break;
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(_) => break,
            }
        }
    }
    let status = raw::wait(command);
    raw::exit_as(status)
}

#[expect(unsafe_code, reason = "fork, poll, waitpid and _exit between fork and exec")]
mod raw {
    use std::io;

    fn check(result: libc::c_long) -> io::Result<libc::c_long> {
        if result < 0 { Err(io::Error::last_os_error()) } else { Ok(result) }
    }

    /// A raw `clone` with `SIGCHLD` (a plain fork): glibc's `fork` runs the
    /// `atfork` handlers, which take locks a forked child of a threaded
    /// process may find held forever.
    pub(super) fn fork() -> io::Result<libc::pid_t> {
        // SAFETY: no stack and no pointers: the child continues on a copy
        // of this one, as after fork(2).
        check(unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0usize, 0usize, 0usize, 0usize) })
            .map(|pid| pid as libc::pid_t)
    }

    pub(super) fn prctl_pdeathsig() -> io::Result<()> {
        // SAFETY: integer arguments only.
        check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) } as libc::c_long)
            .map(drop)
    }

    /// Every signal ignored but `SIGKILL` and `SIGSTOP` (which cannot be)
    /// and `SIGCHLD` (left at its default, so that `waitpid` works).
    pub(super) fn ignore_signals() {
        for signal in 1..=64 {
            let disposition = if signal == libc::SIGCHLD { libc::SIG_DFL } else { libc::SIG_IGN };
            if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                // SAFETY: setting a disposition; signal(2) is
                // async-signal-safe. Numbers glibc keeps for itself fail
                // with EINVAL, which changes nothing.
                unsafe { libc::signal(signal, disposition) };
            }
        }
    }

    pub(super) fn pidfd_open(pid: libc::pid_t) -> io::Result<libc::c_int> {
        // SAFETY: integer arguments only.
        check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) }).map(|fd| fd as libc::c_int)
    }

    /// Closes every descriptor but those in `keep` (negative ones ignored).
    pub(super) fn close_all_but(keep: &[libc::c_int]) {
        let mut from: libc::c_uint = 0;
        let mut sorted = [-1; 2];
        for (slot, fd) in sorted.iter_mut().zip(keep) {
            *slot = *fd;
        }
        if sorted[0] > sorted[1] {
            sorted.swap(0, 1);
        }
        for fd in sorted {
            if fd < 0 {
                continue;
            }
            let fd = fd as libc::c_uint;
            if fd > from {
                // SAFETY: integer arguments only.
                unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0) };
            }
            from = fd + 1;
        }
        // SAFETY: integer arguments only.
        unsafe { libc::syscall(libc::SYS_close_range, from, libc::c_uint::MAX, 0) };
    }

    /// Waits until the host's end closes or the command exits: `(host
    /// gone, command done)`.
    pub(super) fn poll2(watch: libc::c_int, pidfd: libc::c_int) -> io::Result<(bool, bool)> {
        let mut fds = [
            libc::pollfd { fd: watch, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: a local array of two pollfd, its length given.
        check(unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } as libc::c_long)?;
        Ok((fds[0].revents != 0, fds[1].revents != 0))
    }

    pub(super) fn kill(pid: libc::pid_t, signal: libc::c_int) {
        // SAFETY: integer arguments only.
        unsafe { libc::kill(pid, signal) };
    }

    /// Reaps the command: its wait status, or `None` if it cannot be had.
    pub(super) fn wait(pid: libc::pid_t) -> Option<libc::c_int> {
        let mut status = 0;
        loop {
            // SAFETY: a pointer to a local int.
            let result = unsafe { libc::waitpid(pid, &mut status, 0) };
            if result == pid {
                return Some(status);
            }
            if result < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return None;
        }
    }

    /// Ends as `status` says: the same exit code, or the same signal.
    pub(super) fn exit_as(status: Option<libc::c_int>) -> ! {
        let Some(status) = status else {
            // SAFETY: _exit ends the process at once.
            unsafe { libc::_exit(127) }
        };
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            // SAFETY: resetting a disposition, then signalling ourselves;
            // async-signal-safe calls.
            unsafe {
                libc::signal(signal, libc::SIG_DFL);
                libc::kill(libc::getpid(), signal);
            }
            // SAFETY: as above.
            unsafe { libc::_exit(128 + signal) }
        }
        // SAFETY: as above.
        unsafe { libc::_exit(libc::WEXITSTATUS(status)) }
    }
}
