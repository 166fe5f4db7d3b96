//! Killing a confined child's process group.

use crate::ConfineError;
use rustix::io::Errno;
use rustix::process::{Pid, Signal};

/// Sends `SIGKILL` to the whole process group of a child started under
/// [`crate::Confinement::apply`] (its pid is its group id: the child called
/// `setsid`), e.g. on a timeout or a cancel. `SIGKILL` cannot be trapped, so
/// a grandchild that ignores `SIGTERM` goes too.
///
/// A group that is gone already is not an error. The caller still waits for
/// (reaps) its own child. A process that left the group (with `setsid` of
/// its own) dies too: the command's first process, which the signal
/// reaches, is the init of its PID namespace, and the kernel kills the rest
/// of the namespace with it. [`crate::Prepared::kill_all`] also kills
/// everything in the child's pids cgroup.
///
/// Refuses pids that cannot be a confined child's group: 0 and this
/// process's own group (which would kill the caller), 1 (`kill(-1)` signals
/// every process), and values above `i32::MAX`.
pub fn kill_group(pid: u32) -> Result<(), ConfineError> {
    let not_a_group = ConfineError::NotAGroup { pid };
    let Some(pgid) = i32::try_from(pid).ok().filter(|&raw| raw > 1).and_then(Pid::from_raw) else {
        return Err(not_a_group);
    };
    if pgid == rustix::process::getpgrp() {
        return Err(not_a_group);
    }
    match rustix::process::kill_process_group(pgid, Signal::KILL) {
        Ok(()) | Err(Errno::SRCH) => Ok(()),
        Err(e) => Err(ConfineError::Kill { pid, source: e.into() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_that_would_hit_the_caller_or_everyone_are_refused() {
        let own = rustix::process::getpgrp().as_raw_nonzero().get() as u32;
        for pid in [0, 1, own, u32::MAX, i32::MAX as u32 + 1] {
            assert!(matches!(kill_group(pid), Err(ConfineError::NotAGroup { .. })), "{pid}");
        }
    }
}
