//! The one error type of the crate.

use std::path::PathBuf;

/// Why a process could not be confined, or its group not killed.
///
/// Every variant is a refusal: when confinement cannot be installed in full,
/// the command is not started (the crate never falls back to running a
/// command with less confinement than asked).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfineError {
    /// The kernel cannot enforce the Landlock rules this crate needs (ABI 6:
    /// file system rights, TCP bind/connect, abstract unix socket and signal
    /// scoping).
    #[error("the kernel cannot enforce Landlock ABI {needed} in full: {source}")]
    LandlockUnsupported {
        /// The Landlock ABI version this crate asks for.
        needed: u32,
        /// What the landlock crate reported.
        #[source]
        source: landlock::RulesetError,
    },
    /// The landlock crate built no ruleset although none of its calls failed
    /// (it would have confined nothing).
    #[error("the kernel gave no Landlock ruleset (ABI {needed} needed)")]
    LandlockMissing {
        /// The Landlock ABI version this crate asks for.
        needed: u32,
    },
    /// Building the Landlock ruleset failed for another reason than support.
    #[error("building the Landlock ruleset failed: {source}")]
    Landlock {
        /// What the landlock crate reported.
        #[source]
        source: landlock::RulesetError,
    },
    /// A granted path could not be opened to build its rule (it does not
    /// exist, or is not readable by this process).
    #[error("cannot grant {path}: {source}")]
    GrantedPath {
        /// The path as the caller gave it.
        path: PathBuf,
        /// Why it could not be opened.
        #[source]
        source: std::io::Error,
    },
    /// A granted path is not absolute: a relative grant would depend on the
    /// current directory of whoever builds the ruleset.
    #[error("cannot grant {path}: the path is not absolute")]
    RelativePath {
        /// The path as the caller gave it.
        path: PathBuf,
    },
    /// Compiling the seccomp filter failed.
    #[error("compiling the seccomp filter failed: {source}")]
    Seccomp {
        /// What seccompiler reported.
        #[source]
        source: seccompiler::BackendError,
    },
    /// The kernel cannot install seccomp filters.
    #[error("seccomp filters are not available: {reason}")]
    SeccompUnsupported {
        /// What is missing.
        reason: String,
    },
    /// This CPU architecture has no seccomp filter here.
    #[error("no seccomp filter for the architecture {arch}")]
    UnsupportedArch {
        /// `std::env::consts::ARCH`.
        arch: &'static str,
    },
    /// The command's working directory is not in its view of the file
    /// system: it must be at or beneath a grant (or `/`).
    #[error("cannot start in {path}: the working directory is outside every grant")]
    WorkingDirectory {
        /// The working directory, made absolute.
        path: PathBuf,
    },
    /// A device was granted: the only devices in a confined process's view
    /// are `/dev/null`, `zero`, `random` and `urandom`.
    #[error("cannot grant {path}: it is a device")]
    DeviceGrant {
        /// The path as the caller gave it.
        path: PathBuf,
    },
    /// The kernel would not give a confined process its own namespaces and
    /// view of the file system (the probe of [`crate::Confinement::check_supported`]
    /// failed): without them a root process would keep power outside.
    #[error("the kernel cannot give a confined process its own mount, IPC and PID namespaces: {reason}")]
    NamespacesUnavailable {
        /// What the probe reported.
        reason: String,
    },
    /// This process is root and no pids cgroup is usable: `RLIMIT_NPROC`
    /// does not bind root, so nothing would bound a fork bomb.
    #[error("no bound on the number of processes for a root host: {reason}")]
    NoProcessBound {
        /// Why no pids cgroup is usable.
        reason: String,
    },
    /// The pipe through which supervisors learn that this process died
    /// could not be made.
    #[error("cannot make the supervisors' watch pipe: {source}")]
    Supervisor {
        /// The error from pipe2(2).
        #[source]
        source: std::io::Error,
    },
    /// Creating, configuring or removing the process's pids cgroup failed.
    #[error("pids cgroup {path}: {source}")]
    Cgroup {
        /// The cgroup directory or control file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `kill_group` was given a pid that cannot name a confined child's
    /// process group (0, 1, above `i32::MAX`, or this process's own group).
    #[error("{pid} is not the process group of a confined child")]
    NotAGroup {
        /// The pid as given.
        pid: u32,
    },
    /// `kill(-pgid, SIGKILL)` failed for another reason than the group being
    /// gone already.
    #[error("killing process group {pid}: {source}")]
    Kill {
        /// The process group id.
        pid: u32,
        /// The error from kill(2).
        #[source]
        source: std::io::Error,
    },
}
