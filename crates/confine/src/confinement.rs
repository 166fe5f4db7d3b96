//! `Confinement`: what a confined process may touch, and `apply`, which
//! installs it on a command.

use crate::cgroup::{self, ProcessLimit};
use crate::child::{self, ChildSetup};
use crate::view::{Access, MountView, ViewSpec};
use crate::{ConfineError, Limits, Prepared, privileges, ruleset, seccomp, supervisor};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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
    ///
    /// It also starts one confined `/bin/sh -c :` (until one succeeds, once
    /// per process): the namespaces and the mount view need the kernel's and
    /// the container's consent, which only trying shows. And a root process
    /// needs a pids cgroup: `RLIMIT_NPROC` does not bind root.
    pub fn check_supported() -> Result<(), ConfineError> {
        ruleset::check_supported()?;
        seccomp::check_supported()?;
        seccomp::compile(false)?;
        if rustix::process::geteuid().is_root()
            && let ProcessLimit::Rlimit { reason } = cgroup::process_limit()
        {
            return Err(ConfineError::NoProcessBound { reason: reason.clone() });
        }
        // Only a success is kept: a probe that failed for a passing reason
        // (a full process table) must not leave the shell off for good.
        static PROBED: OnceLock<()> = OnceLock::new();
        if PROBED.get().is_none() {
            probe().map_err(|reason| ConfineError::NamespacesUnavailable { reason })?;
            let _ = PROBED.set(());
        }
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
        let view = confinement.view(cmd.get_current_dir())?;
        let watch_read = supervisor::watch_pipe().map_err(|source| ConfineError::Supervisor { source })?;
        let process_limit = cgroup::process_limit().clone();
        let (cgroup, cgroup_procs) = match &process_limit {
            ProcessLimit::Cgroup { parent } => {
                // One more for the supervisor, which only waits.
                let (cgroup, procs) = cgroup::create(parent, self.limits.processes.saturating_add(1))?;
                (Some(cgroup), Some(procs))
            }
            ProcessLimit::Rlimit { .. } => (None, None),
        };
        if let Some(tmp) = &self.private_tmp {
            for name in ["TMPDIR", "TMP", "TEMP"] {
                cmd.env(name, tmp);
            }
        }
        let setup = ChildSetup {
            ruleset,
            filters,
            nproc_rlimit: cgroup_procs.is_none(),
            cgroup_procs,
            limits: self.limits,
            view,
            last_capability: privileges::last_capability(),
            watch_read,
        };
        child::install(cmd, setup);
        Ok(Prepared { cgroup, process_limit })
    }

    /// The view of the file system this confinement gives, with the
    /// command starting in `cwd` (relative to this process's own). A
    /// working directory the caller set must be in the view; without one,
    /// the command starts in this process's own if that is in the view,
    /// else in `/`.
    fn view(&self, cwd: Option<&Path>) -> Result<MountView, ConfineError> {
        let here = || std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let (cwd, chosen) = match cwd {
            Some(dir) if dir.is_absolute() => (dir.to_path_buf(), true),
            Some(dir) => (here().join(dir), true),
            None => (here(), false),
        };
        let mut view = MountView::new(ViewSpec {
            system: system_view(self.network),
            read_only: &self.read_only,
            read_write: &self.read_write,
            shm_dir: self.private_tmp.as_deref(),
            shared_memory_bytes: self.limits.shared_memory_bytes,
            user_namespace: needs_user_namespace(),
        })?;
        if !view.start_in(&cwd)? && chosen {
            return Err(ConfineError::WorkingDirectory { path: cwd });
        }
        Ok(view)
    }
}

/// What of the host every confined process sees: the system directories
/// and `/etc` read-only, the machine-wide `/proc` files, the four devices
/// (and the resolver's directory with the network). Landlock still decides
/// what of it may be read: `/etc`'s private files stay closed.
fn system_view(network: bool) -> &'static [(PathBuf, Access)] {
    static WITHOUT_NETWORK: OnceLock<Vec<(PathBuf, Access)>> = OnceLock::new();
    static WITH_NETWORK: OnceLock<Vec<(PathBuf, Access)>> = OnceLock::new();
    let cache = if network { &WITH_NETWORK } else { &WITHOUT_NETWORK };
    cache.get_or_init(|| {
        let read_only = |p: &&str| (PathBuf::from(p), Access::ReadOnly);
        let mut view: Vec<(PathBuf, Access)> = ruleset::SYSTEM_READ.iter().map(read_only).collect();
        view.push((PathBuf::from(ruleset::ETC), Access::ReadOnly));
        view.extend(ruleset::PROC_READ.iter().map(read_only));
        view.extend(
            ruleset::DEVICES_READ.iter().chain(ruleset::DEVICES_READ_WRITE).map(|p| (PathBuf::from(p), Access::Device)),
        );
        if network {
            view.push((PathBuf::from(ruleset::RESOLVER), Access::ReadOnly));
        }
        view
    })
}

/// Whether the child must make a user namespace to make the others: when
/// this process is not root, or is root without `CAP_SYS_ADMIN` (a
/// container's root). Read once.
fn needs_user_namespace() -> bool {
    static NEEDS: OnceLock<bool> = OnceLock::new();
    *NEEDS.get_or_init(|| {
        const CAP_SYS_ADMIN: u32 = 21;
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let effective = status
            .lines()
            .find_map(|line| line.strip_prefix("CapEff:"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .unwrap_or(0);
        !rustix::process::geteuid().is_root() || effective & (1 << CAP_SYS_ADMIN) == 0
    })
}

/// Starts `/bin/sh -c :` under the default confinement: `Ok` when it ran
/// and exited 0, else what went wrong.
fn probe() -> Result<(), String> {
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args(["-c", ":"])
        .env_clear()
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let prepared = Confinement::new().apply_std(&mut cmd).map_err(|e| e.to_string())?;
    let output = cmd.output().map_err(|e| format!("a confined /bin/sh did not start: {e}"))?;
    drop(prepared);
    if output.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(format!("a confined /bin/sh -c : ended with {}: {}", output.status, stderr.trim()))
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
        let mut steps = [Duration::ZERO; 6];
        let mut split_totals = [Duration::ZERO; 2];
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
            let mut split = [Duration::ZERO; 2];
            time(3, &mut || {
                let mut cmd = std::process::Command::new("true");
                let prepared = confinement.apply_std(&mut cmd).expect("confined");
                let start = Instant::now();
                let mut child = cmd.spawn().expect("spawn");
                split[0] = start.elapsed();
                assert!(child.wait().expect("wait").success());
                split[1] = start.elapsed() - split[0];
                drop(prepared);
            });
            split_totals[0] += split[0];
            split_totals[1] += split[1];
            time(4, &mut || assert!(std::process::Command::new("true").status().expect("spawn").success()));
            time(5, &mut || drop(confinement.view(Some(dir.path())).expect("view")));
        }
        let names = [
            "Landlock ruleset",
            "seccomp filters",
            "pids cgroup (create, remove)",
            "confined spawn and wait (all steps)",
            "plain spawn and wait",
            "mount view (prepared in the parent)",
            "  of the confined: spawn (fork to exec)",
            "  of the confined: wait (run, exit)",
        ];
        let all = steps.into_iter().chain(split_totals);
        for (name, total) in names.iter().zip(all) {
            println!("{name:40} {:8.0} µs", total.as_secs_f64() * 1e6 / f64::from(rounds));
        }
    }
}
