//! Resource limits of a confined process.

/// Resource limits of a confined process and everything it starts.
///
/// Each limit is set as both the soft and the hard rlimit, and a confined
/// process cannot raise them (the seccomp filter refuses `setrlimit` and a
/// `prlimit64` that sets a value, also to root). The defaults are tight:
/// enough for a shell, a compiler or an interpreter, not for a machine-wide
/// job.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// CPU seconds (`RLIMIT_CPU`), counted per process, not wall-clock: the
    /// process gets `SIGKILL` when it has used them. Default 60.
    pub cpu_seconds: u64,
    /// Address space in bytes (`RLIMIT_AS`), per process. Default 1 GiB.
    pub memory_bytes: u64,
    /// Processes (and threads) at once: the `pids.max` of the child's own
    /// pids cgroup when one is usable (plus one for the supervisor, which
    /// only waits), else `RLIMIT_NPROC` (which the kernel does not enforce
    /// for uid 0, so a root host without a pids cgroup does not confine;
    /// see [`crate::ProcessLimit`]). Default 64.
    pub processes: u64,
    /// Largest file the process may write, in bytes (`RLIMIT_FSIZE`): a
    /// larger write fails with `EFBIG` after `SIGXFSZ`. Default 100 MiB.
    pub file_size_bytes: u64,
    /// Open file descriptors (`RLIMIT_NOFILE`). Default 256.
    pub open_files: u64,
    /// SysV shared memory of the process and everything it starts,
    /// together: the `shmmax` and `shmall` of its own IPC namespace, whose
    /// segments go when it ends. (POSIX shared memory lives in the private
    /// temporary directory, which is also its `/dev/shm`.) Default 64 MiB.
    pub shared_memory_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu_seconds: 60,
            memory_bytes: 1 << 30,
            processes: 64,
            file_size_bytes: 100 << 20,
            open_files: 256,
            shared_memory_bytes: 64 << 20,
        }
    }
}

impl Limits {
    /// These limits with `cpu_seconds` replaced.
    pub fn cpu_seconds(mut self, seconds: u64) -> Self {
        self.cpu_seconds = seconds;
        self
    }

    /// These limits with `memory_bytes` replaced.
    pub fn memory_bytes(mut self, bytes: u64) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// These limits with `processes` replaced.
    pub fn processes(mut self, processes: u64) -> Self {
        self.processes = processes;
        self
    }

    /// These limits with `file_size_bytes` replaced.
    pub fn file_size_bytes(mut self, bytes: u64) -> Self {
        self.file_size_bytes = bytes;
        self
    }

    /// These limits with `shared_memory_bytes` replaced.
    pub fn shared_memory_bytes(mut self, bytes: u64) -> Self {
        self.shared_memory_bytes = bytes;
        self
    }

    /// These limits with `open_files` replaced.
    pub fn open_files(mut self, files: u64) -> Self {
        self.open_files = files;
        self
    }
}
