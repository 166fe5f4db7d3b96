//! `Confinement`: what a confined process may touch, and `apply`, which
//! installs it on a command.

use crate::cgroup::{self, ProcessLimit};
use crate::child::{self, ChildSetup};
use crate::{ConfineError, Limits, Prepared, ruleset, seccomp};
use std::path::PathBuf;

/// What a confined process may touch. The defaults deny: it may read and
/// execute the system directories (`/bin`, `/sbin`, `/usr`, `/lib*`, the
/// world-readable part of `/etc`, the machine-wide figures of `/proc` but
/// nothing per process, and `/dev/null`, `/dev/zero`, `/dev/urandom`), write
/// nothing (`/dev/null` aside), open no network socket, and it runs under
/// [`Limits::default`].
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use lovia_confine::{Confinement, kill_group};
/// let mut cmd = tokio::process::Command::new("sh");
/// cmd.arg("-c").arg("make test").current_dir("/srv/work");
/// let prepared = Confinement::new().read_write("/srv/work").private_tmp("/srv/tmp/call-7").apply(&mut cmd)?;
/// let mut child = cmd.spawn()?;
/// if tokio::time::timeout(std::time::Duration::from_secs(30), child.wait()).await.is_err() {
///     kill_group(child.id().unwrap_or(0))?;
///     prepared.kill_all()?;
/// }
/// # Ok(()) }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    pub(crate) read_write: Vec<PathBuf>,
    pub(crate) read_only: Vec<PathBuf>,
    pub(crate) network: bool,
    pub(crate) limits: Limits,
    pub(crate) private_tmp: Option<PathBuf>,
}

impl Confinement {
    /// The default confinement: system paths read-only, nothing writable, no
    /// network, the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Grants reading, writing, creating, removing and executing everything
    /// beneath `path` (an absolute path that exists when `apply` runs).
    pub fn read_write(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_write.push(path.into());
        self
    }

    /// Grants reading and executing everything beneath `path` (an absolute
    /// path that exists when `apply` runs).
    pub fn read_only(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_only.push(path.into());
        self
    }

    /// Whether the process may use the network: TCP and UDP over IPv4 and
    /// IPv6 (and netlink, for name resolution). Default `false`: only unix
    /// sockets, and no abstract ones outside the process's own tree.
    pub fn network(mut self, allowed: bool) -> Self {
        self.network = allowed;
        self
    }

    /// Replaces the resource limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Makes `dir` the process's temporary directory: granted read-write,
    /// and named by `TMPDIR`, `TMP` and `TEMP`. The caller makes it (empty,
    /// one per process or call) and removes it; `/tmp` itself stays closed.
    pub fn private_tmp(mut self, dir: impl Into<PathBuf>) -> Self {
        self.private_tmp = Some(dir.into());
        self
    }

    /// Whether this kernel can enforce a confinement in full: Landlock ABI 6
    /// (file system, TCP, signal and abstract socket scoping), and seccomp
    /// filters (`CONFIG_SECCOMP_FILTER`) for this architecture. The error says what is missing. The
    /// process limit is reported apart, by [`Confinement::process_limit`]:
    /// a machine without a usable pids cgroup still confines.
    pub fn check_supported() -> Result<(), ConfineError> {
        ruleset::check_supported()?;
        seccomp::check_supported()?;
        seccomp::compile(false)?;
        Ok(())
    }

    /// How [`Limits::processes`] is enforced on this machine: a pids cgroup
    /// per child, or only `RLIMIT_NPROC` (and why), which does not bound a
    /// root process. Detected once per process.
    pub fn process_limit() -> ProcessLimit {
        cgroup::process_limit().clone()
    }

    /// Installs the confinement on `cmd`: built here (the Landlock ruleset,
    /// the seccomp filters, the child's pids cgroup), applied in the child
    /// before exec (it joins the cgroup, starts a new session and process
    /// group, sets its rlimits and `no_new_privs`, restricts itself with
    /// Landlock, installs the filters). A command the kernel cannot confine
    /// in full fails here and is not started. Call it once per command, and
    /// do not also set `process_group` on it (the child makes its own
    /// session). The command keeps the environment it was given: clear it
    /// (`env_clear`) unless the host's own variables may be read.
    pub fn apply(&self, cmd: &mut tokio::process::Command) -> Result<Prepared, ConfineError> {
        self.apply_std(cmd.as_std_mut())
    }

    /// [`Confinement::apply`] for a `std::process::Command`.
    pub fn apply_std(&self, cmd: &mut std::process::Command) -> Result<Prepared, ConfineError> {
        let mut confinement = self.clone();
        if let Some(tmp) = &self.private_tmp {
            confinement.read_write.push(tmp.clone());
        }
        let ruleset = ruleset::build(&confinement)?;
        let filters = seccomp::compile(self.network)?;
        let process_limit = cgroup::process_limit().clone();
        let (cgroup, cgroup_procs) = match &process_limit {
            ProcessLimit::Cgroup { parent } => {
                let (cgroup, procs) = cgroup::create(parent, self.limits.processes)?;
                (Some(cgroup), Some(procs))
            }
            ProcessLimit::Rlimit { .. } => (None, None),
        };
        if let Some(tmp) = &self.private_tmp {
            for name in ["TMPDIR", "TMP", "TEMP"] {
                cmd.env(name, tmp);
            }
        }
        let setup =
            ChildSetup { ruleset, filters, nproc_rlimit: cgroup_procs.is_none(), cgroup_procs, limits: self.limits };
        child::install(cmd, setup);
        Ok(Prepared { cgroup, process_limit })
    }
}

#[cfg(test)]
mod tests {
    use crate::cgroup::{self, ProcessLimit};
    use std::time::{Duration, Instant};

    /// Where a confined command's time goes, step by step, beside a plain
    /// spawn of the same program (docs/performance.md, "The workspace
    /// tools"): `cargo test -p lovia-confine --release --lib --
    /// --ignored where_a_confined_spawn_spends_its_time --nocapture`.
    #[test]
    #[ignore = "a measurement: prints microseconds per step over 200 commands"]
    fn where_a_confined_spawn_spends_its_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let confinement = super::Confinement::new().read_write(dir.path());
        let rounds: u32 = 200;
        let mut steps = [Duration::ZERO; 5];
        let mut time = |step: usize, f: &mut dyn FnMut()| {
            let start = Instant::now();
            f();
            steps[step] += start.elapsed();
        };
        for _ in 0..rounds {
            time(0, &mut || drop(crate::ruleset::build(&confinement).expect("ruleset")));
            time(1, &mut || drop(crate::seccomp::compile(false).expect("filters")));
            time(2, &mut || {
                if let ProcessLimit::Cgroup { parent } = cgroup::process_limit() {
                    drop(cgroup::create(parent, 64).expect("cgroup"));
                }
            });
            time(3, &mut || {
                let mut cmd = std::process::Command::new("true");
                let prepared = confinement.apply_std(&mut cmd).expect("confined");
                assert!(cmd.status().expect("spawn").success());
                drop(prepared);
            });
            time(4, &mut || assert!(std::process::Command::new("true").status().expect("spawn").success()));
        }
        let names = [
            "Landlock ruleset",
            "seccomp filters",
            "pids cgroup (create, remove)",
            "confined spawn and wait (all steps)",
            "plain spawn and wait",
        ];
        for (name, total) in names.iter().zip(steps) {
            println!("{name:40} {:8.0} µs", total.as_secs_f64() * 1e6 / f64::from(rounds));
        }
    }
}
