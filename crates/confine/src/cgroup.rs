//! The pids cgroup of a confined child: the one process limit that holds
//! for root (`RLIMIT_NPROC` does not: the kernel exempts uid 0).
//!
//! Each confined child gets a cgroup of its own, `lovia-confine-<pid>-<n>`,
//! under this process's cgroup in the pids hierarchy (cgroup v1's `pids`
//! controller, or cgroup v2 with `pids` enabled for children). The child
//! joins it between fork and exec by writing `0` ("myself") into its
//! `cgroup.procs`, through a descriptor opened here: from then on, it and
//! every process it starts count against `pids.max`, and none can leave (the
//! cgroup file system is outside its Landlock grants).

use crate::ConfineError;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// How the process limit ([`crate::Limits::processes`]) of a confined child
/// is enforced on this machine.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessLimit {
    /// Each child gets its own pids cgroup under `parent`, with `pids.max`
    /// set to the limit. Holds for root, and counts every process the child
    /// starts, also one that leaves its process group.
    Cgroup {
        /// The directory under which the children's cgroups are made.
        parent: PathBuf,
    },
    /// No pids cgroup could be used (`reason` says why): the limit is
    /// `RLIMIT_NPROC`, which the kernel counts per user, and does not
    /// enforce at all for root. A fork bomb run as root is then bounded only
    /// by the machine.
    Rlimit {
        /// Why no pids cgroup is usable.
        reason: String,
    },
}

/// The process limit in force on this machine, found once per process.
pub(crate) fn process_limit() -> &'static ProcessLimit {
    static DETECTED: OnceLock<ProcessLimit> = OnceLock::new();
    DETECTED.get_or_init(|| match detect() {
        Ok(parent) => ProcessLimit::Cgroup { parent },
        Err(reason) => ProcessLimit::Rlimit { reason },
    })
}

/// Finds where this process may make pids cgroups, and proves it by making
/// and removing one.
fn detect() -> Result<PathBuf, String> {
    let mountinfo =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let membership = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
    let parent =
        v1_parent(&mountinfo, &membership).or_else(|| v2_parent(&mountinfo, &membership)).ok_or_else(|| {
            "no cgroup v1 pids hierarchy and no cgroup v2 with the pids controller is mounted".to_string()
        })?;
    if let Some(subtree) = cgroup2_subtree_control(&parent) {
        enable_pids(&subtree)?;
    }
    let probe = parent.join(format!("lovia-confine-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).map_err(|e| format!("cannot make a cgroup in {}: {e}", parent.display()))?;
    let has_max = probe.join("pids.max").exists();
    let _ = std::fs::remove_dir(&probe);
    if !has_max {
        return Err(format!("cgroups made in {} have no pids.max", parent.display()));
    }
    Ok(parent)
}

/// Mount points of the file systems `fstype` in `/proc/self/mountinfo`,
/// each with its super-block options.
fn mounts<'a>(mountinfo: &'a str, fstype: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
    mountinfo.lines().filter_map(move |line| {
        let (left, right) = line.split_once(" - ")?;
        let mount_point = left.split(' ').nth(4)?;
        let mut right = right.split(' ');
        (right.next()? == fstype).then_some(())?;
        let _source = right.next()?;
        Some((mount_point, right.next().unwrap_or("")))
    })
}

/// cgroup v1: the `pids` hierarchy's mount point joined with this
/// process's path in it (`N:pids:/path` in `/proc/self/cgroup`).
fn v1_parent(mountinfo: &str, membership: &str) -> Option<PathBuf> {
    let (mount_point, _) = mounts(mountinfo, "cgroup").find(|(_, options)| options.split(',').any(|o| o == "pids"))?;
    let path = membership.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let _id = fields.next()?;
        let controllers = fields.next()?;
        let path = fields.next()?;
        controllers.split(',').any(|c| c == "pids").then_some(path)
    })?;
    Some(Path::new(mount_point).join(path.trim_start_matches('/')))
}

/// cgroup v2: the unified mount point joined with this process's path
/// (`0::/path`), if `pids` is among the controllers available there.
fn v2_parent(mountinfo: &str, membership: &str) -> Option<PathBuf> {
    let (mount_point, _) = mounts(mountinfo, "cgroup2").next()?;
    let path = membership.lines().find_map(|line| line.strip_prefix("0::"))?;
    let parent = Path::new(mount_point).join(path.trim_start_matches('/'));
    let controllers = std::fs::read_to_string(parent.join("cgroup.controllers")).ok()?;
    controllers.split_whitespace().any(|c| c == "pids").then_some(parent)
}

/// On cgroup v2 the parent's `cgroup.subtree_control` decides whether its
/// children have `pids.max`.
fn cgroup2_subtree_control(parent: &Path) -> Option<PathBuf> {
    let file = parent.join("cgroup.subtree_control");
    file.exists().then_some(file)
}

/// Enables `pids` for the children of a cgroup v2 parent. The kernel refuses
/// (EBUSY) when the parent holds processes and is not the root: then no
/// cgroup of ours can limit processes.
fn enable_pids(subtree_control: &Path) -> Result<(), String> {
    let enabled =
        std::fs::read_to_string(subtree_control).map_err(|e| format!("{}: {e}", subtree_control.display()))?;
    if enabled.split_whitespace().any(|c| c == "pids") {
        return Ok(());
    }
    std::fs::write(subtree_control, "+pids").map_err(|e| {
        format!(
            "cannot enable the pids controller in {} (a cgroup v2 parent that holds processes cannot): {e}",
            subtree_control.display()
        )
    })
}

/// The cgroup of one confined child.
#[derive(Debug)]
pub(crate) struct ChildCgroup {
    /// Its directory.
    pub(crate) dir: PathBuf,
}

/// Makes a child's cgroup with `pids.max = processes`, and opens its
/// `cgroup.procs` for the child to write itself into.
pub(crate) fn create(parent: &Path, processes: u64) -> Result<(ChildCgroup, File), ConfineError> {
    static SWEPT: OnceLock<()> = OnceLock::new();
    SWEPT.get_or_init(|| sweep(parent));
    retry_pending();
    let error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ConfineError::Cgroup { path, source }
    };
    // A name may be taken by a cgroup an earlier process with this pid
    // left behind (it was killed, or exited with a child still in it):
    // the next number is free.
    let mut taken = 0;
    let dir = loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("lovia-confine-{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => break dir,
            Err(e) if e.kind() == ErrorKind::AlreadyExists && taken < MAX_TAKEN_NAMES => taken += 1,
            Err(e) => return Err(error(&dir)(e)),
        }
    };
    let cgroup = ChildCgroup { dir };
    let max = cgroup.dir.join("pids.max");
    std::fs::write(&max, processes.to_string()).map_err(error(&max))?;
    let procs_path = cgroup.dir.join("cgroup.procs");
    let procs =
        OpenOptions::new().write(true).custom_flags(libc::O_CLOEXEC).open(&procs_path).map_err(error(&procs_path))?;
    Ok((cgroup, procs))
}

impl ChildCgroup {
    /// The pids of the processes in the cgroup now.
    pub(crate) fn processes(&self) -> Result<Vec<u32>, ConfineError> {
        let path = self.dir.join("cgroup.procs");
        let text = std::fs::read_to_string(&path).map_err(|source| ConfineError::Cgroup { path, source })?;
        Ok(text.lines().filter_map(|line| line.trim().parse().ok()).collect())
    }

    /// How many times a fork or clone in the cgroup failed because of
    /// `pids.max` (the `max` line of `pids.events`).
    pub(crate) fn limit_hits(&self) -> Result<u64, ConfineError> {
        let path = self.dir.join("pids.events");
        let text = std::fs::read_to_string(&path).map_err(|source| ConfineError::Cgroup { path, source })?;
        Ok(text.lines().find_map(|line| line.strip_prefix("max ")?.trim().parse().ok()).unwrap_or(0))
    }

    /// Sends `SIGKILL` to every process in the cgroup, until it is empty or
    /// a bounded number of rounds has passed (a process being killed cannot
    /// fork, so each round leaves fewer).
    pub(crate) fn kill_all(&self) -> Result<(), ConfineError> {
        let kill_file = self.dir.join("cgroup.kill");
        if kill_file.exists() {
            return std::fs::write(&kill_file, "1").map_err(|source| ConfineError::Cgroup { path: kill_file, source });
        }
        for _ in 0..100 {
            let pids = self.processes()?;
            if pids.is_empty() {
                return Ok(());
            }
            for pid in pids {
                let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else { continue };
                // ESRCH: it is gone already, which is the point.
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            std::thread::yield_now();
        }
        Ok(())
    }
}

impl Drop for ChildCgroup {
    /// Removes the cgroup if it is empty; if processes are still in it, the
    /// removal is retried by each later `apply` in this process.
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir(&self.dir)
            && e.kind() != ErrorKind::NotFound
        {
            pending().lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(self.dir.clone());
        }
    }
}

/// The number of the next child cgroup of this process.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Names skipped because a leftover cgroup holds them, before giving up.
const MAX_TAKEN_NAMES: u32 = 1024;

/// Removes the empty cgroups that processes no longer running left under
/// `parent` (one killed before it could remove them). The cgroup of a live
/// process is never touched (it may be empty only because its child has
/// not joined yet), and one with a process still in it cannot be removed.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name.to_str().and_then(|n| n.strip_prefix("lovia-confine-")) else { continue };
        // `<pid>-<n>`, or `probe-<pid>`.
        let pid = owner.strip_prefix("probe-").unwrap_or(owner).split('-').next().and_then(|p| p.parse::<u32>().ok());
        let Some(pid) = pid else { continue };
        if !owner_is_gone(pid) {
            continue;
        }
        // EBUSY while processes are in it: kept, as said above.
        let _ = std::fs::remove_dir(entry.path());
    }
}

/// Whether what `pid` left behind may be removed: it is not this process,
/// and no process with that pid runs (one that reused the pid keeps it).
pub(crate) fn owner_is_gone(pid: u32) -> bool {
    pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
}

/// Cgroups whose removal failed because processes were still in them.
fn pending() -> &'static Mutex<Vec<PathBuf>> {
    static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    &PENDING
}

/// Removes the pending cgroups that are empty now.
fn retry_pending() {
    let mut pending = pending().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    pending.retain(|dir| match std::fs::remove_dir(dir) {
        Ok(()) => false,
        Err(e) => e.kind() != ErrorKind::NotFound,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// The parent of this machine's child cgroups; the machines lovia is
    /// tested on have one (CI runs as root with a pids hierarchy).
    fn parent() -> PathBuf {
        match process_limit() {
            ProcessLimit::Cgroup { parent } => parent.clone(),
            other => panic!("no pids cgroup to test with: {other:?}"),
        }
    }

    #[test]
    fn a_name_a_leftover_cgroup_holds_is_skipped() {
        let parent = parent();
        let next = NEXT.load(Ordering::SeqCst);
        // Leftovers of an earlier process with this pid, on the next names.
        let leftovers: Vec<PathBuf> = (next..next + 8)
            .map(|n| parent.join(format!("lovia-confine-{}-{n}", std::process::id())))
            .filter(|d| std::fs::create_dir(d).is_ok())
            .collect();
        assert!(!leftovers.is_empty());
        let (cgroup, _procs) = create(&parent, 8).expect("a free name");
        assert!(!leftovers.contains(&cgroup.dir), "{}", cgroup.dir.display());
        drop(cgroup);
        for dir in leftovers {
            let _ = std::fs::remove_dir(dir);
        }
    }

    #[test]
    fn the_sweep_removes_what_a_dead_process_left_and_nothing_of_a_live_one() {
        let parent = parent();
        // pid_max is at most 4,194,304: this pid runs nowhere.
        let dead = parent.join("lovia-confine-4194305-0");
        let dead_probe = parent.join("lovia-confine-probe-4194305");
        let live = parent.join(format!("lovia-confine-{}-0", std::os::unix::process::parent_id()));
        for dir in [&dead, &dead_probe, &live] {
            let _ = std::fs::create_dir(dir);
        }
        sweep(&parent);
        assert!(!dead.exists() && !dead_probe.exists());
        assert!(live.exists(), "the cgroup of a running process stays");
        let _ = std::fs::remove_dir(live);
    }

    #[test]
    fn the_v1_pids_hierarchy_and_this_process_path_make_the_parent() {
        let membership = "8:pids:/service.slice\n4:memory:/x\n0::/\n";
        assert_eq!(v1_parent(MOUNTINFO, membership), Some(PathBuf::from("/sys/fs/cgroup/pids/service.slice")));
        assert_eq!(v1_parent("41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", membership), None);
    }
}
