//! Starting a command: `sh -c` in its own process group, a cleared
//! environment with an allowlist, the confinement hook, and a foreground run
//! bounded by a timeout that kills the whole group.

use crate::config::ShellSandbox;
use crate::output::HeadTail;
use crate::{Session, SharedBounds};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

/// Environment variables a command inherits; everything else is cleared,
/// so the host's secrets (API keys, tokens) never reach it. `LC_*` too.
const ENV_ALLOWLIST: [&str; 9] = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TZ", "TMPDIR"];

/// Why a command cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShellError {
    /// Kernel confinement is required and not available.
    #[error("{0}")]
    Unconfined(String),
    /// The process could not be started.
    #[error("cannot start the command: {0}")]
    Spawn(#[from] std::io::Error),
}

/// Why the shell is not offered under [`ShellSandbox::Required`], or `None`
/// when it may run: the kernel must enforce the whole confinement
/// (`lovia_confine::Confinement::check_supported`).
pub(crate) fn unavailable(sandbox: ShellSandbox) -> Option<String> {
    match sandbox {
        ShellSandbox::Off => None,
        ShellSandbox::Required => lovia_confine::Confinement::check_supported().err().map(|e| {
            format!(
                "the shell tools need kernel confinement (shell_sandbox = \"required\"), which this machine \
                 cannot give: {e}; set ShellSandbox::Off (shell_sandbox = \"off\") to run commands unconfined"
            )
        }),
    }
}

/// What keeps a confined command's confinement in place while it runs: its
/// pids cgroup and its private temporary directory, both removed when this
/// is dropped (after the command and its group are gone).
#[derive(Debug)]
pub(crate) struct Confined {
    prepared: lovia_confine::Prepared,
    _tmp: tempfile::TempDir,
    /// With shared bounds: stops the command once they are passed.
    watch: Option<StorageWatch>,
}

impl Confined {
    /// Kills every process of the command, also one that left its group.
    pub(crate) fn kill_all(&self) {
        let _ = self.prepared.kill_all();
    }

    /// Starts watching the shared bounds for the command `pid` leads.
    fn watch(&mut self, pid: Option<u32>, bounds: Option<&SharedBounds>) {
        if let (Some(pid), Some(bounds)) = (pid, bounds) {
            self.watch = Some(StorageWatch::start(pid, bounds.clone()));
        }
    }

    /// The byte bound the command was stopped for passing, if it was.
    pub(crate) fn storage_passed(&self) -> Option<u64> {
        self.watch.as_ref().filter(|w| w.passed.load(Ordering::Relaxed)).map(|w| w.max_bytes)
    }
}

/// How often, at most, the shared bounds are measured while a confined
/// command runs. A walk of the tenant's directory each time (at most
/// `max_files` entries, on the blocking pool), whose cost grows with the
/// tenant's files: 49 ms for 10,000 here (`bounds::tests`), so the pause
/// after a walk is also at least [`WATCH_PAUSE_PER_WALK`] times the walk,
/// which keeps the watcher under a tenth of a core.
const WATCH_INTERVAL: Duration = Duration::from_millis(250);

/// The pause after a walk, as a multiple of the walk's own time.
const WATCH_PAUSE_PER_WALK: u32 = 9;

/// Measures the shared bounds while a command runs, and kills it (its
/// group, and with its PID namespace everything it started) once they are
/// passed: a command's writes count against the tenant's `max_bytes` while
/// it runs, not only at the next check. Stops when dropped.
#[derive(Debug)]
struct StorageWatch {
    task: tokio::task::JoinHandle<()>,
    passed: Arc<AtomicBool>,
    max_bytes: u64,
}

impl StorageWatch {
    fn start(pid: u32, bounds: SharedBounds) -> Self {
        let passed = Arc::new(AtomicBool::new(false));
        let max_bytes = bounds.max_bytes();
        let flag = passed.clone();
        let task = tokio::spawn(async move {
            let mut pause = WATCH_INTERVAL;
            loop {
                tokio::time::sleep(pause).await;
                let measured = bounds.clone();
                let started = std::time::Instant::now();
                let Ok(over) = tokio::task::spawn_blocking(move || measured.is_over()).await else { return };
                pause = WATCH_INTERVAL.max(started.elapsed() * WATCH_PAUSE_PER_WALK);
                if over {
                    flag.store(true, Ordering::Relaxed);
                    kill_group(pid);
                    return;
                }
            }
        });
        StorageWatch { task, passed, max_bytes }
    }
}

impl Drop for StorageWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The directory under a shared bounds' directory that holds its commands'
/// temporary directories (no session's root is named so).
const TMP_DIR: &str = ".lovia-tmp";

/// Applies the kernel confinement to `cmd`, or refuses when it is required
/// and unavailable. The one place a command's confinement is decided:
/// under [`ShellSandbox::Required`] the command may write only the root and
/// a private temporary directory of its own, read the system's directories
/// and the root, open no network socket (each beyond that only as
/// [`crate::ShellGrants`] grants), and stays within
/// `lovia_confine::Limits`' defaults, in a session of its own. Under
/// [`ShellSandbox::Off`] it runs as the host's own process, in a process
/// group of its own.
pub(crate) fn confine(cmd: &mut Command, ws: &Session) -> Result<Option<Confined>, ShellError> {
    match ws.shell_sandbox {
        ShellSandbox::Off => {
            // Its own group, so a timeout, a cancel or the session's end
            // kills everything it started. (A confined command gets a
            // session of its own from lovia-confine instead: setsid fails
            // for a process that already leads a group.)
            cmd.process_group(0);
            Ok(None)
        }
        ShellSandbox::Required => {
            if let Some(reason) = unavailable(ws.shell_sandbox) {
                return Err(ShellError::Unconfined(reason));
            }
            // Under shared bounds, the temporary directory lives under the
            // bounded directory, so that what a command writes there counts.
            let tmp = match &ws.bounds {
                Some(bounds) => {
                    let parent = bounds.dir().join(TMP_DIR);
                    std::fs::create_dir_all(&parent)?;
                    lovia_confine::temp_dir_in(&parent, "shell")?
                }
                None => lovia_confine::temp_dir("shell")?,
            };
            // Under shared bounds, no one file may be larger than all of them.
            let mut limits = lovia_confine::Limits::default();
            if let Some(bounds) = &ws.bounds {
                limits = limits.file_size_bytes(limits.file_size_bytes.min(bounds.max_bytes()));
            }
            let grants = &ws.shell_grants;
            let mut confinement = lovia_confine::Confinement::new()
                .read_write(ws.paths.root())
                .private_tmp(tmp.path())
                .network(grants.network)
                .limits(limits);
            for path in &grants.read_only {
                confinement = confinement.read_only(path);
            }
            for path in &grants.read_write {
                confinement = confinement.read_write(path);
            }
            let prepared = confinement
                .apply(cmd)
                .map_err(|e| ShellError::Unconfined(format!("the command cannot be confined: {e}")))?;
            Ok(Some(Confined { prepared, _tmp: tmp, watch: None }))
        }
    }
}

/// A `sh -c` command in `cwd`, in a new process group, with the allowed
/// environment plus `PWD`; a root `.venv` or `venv` with `bin/python` goes
/// first on `PATH`.
pub(crate) fn command(line: &str, cwd: &Path, root: &Path) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(line).current_dir(cwd).env_clear().stdin(Stdio::null());
    for (key, value) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if ENV_ALLOWLIST.contains(&name.as_ref()) || name.starts_with("LC_") {
            cmd.env(&key, value);
        }
    }
    cmd.env("PWD", cwd);
    let venv = [".venv", "venv"].into_iter().map(|v| root.join(v)).find(|v| v.join("bin/python").is_file());
    if let Some(venv) = venv {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut joined = venv.join("bin").into_os_string();
        if !path.is_empty() {
            joined.push(":");
            joined.push(path);
        }
        cmd.env("PATH", joined).env("VIRTUAL_ENV", venv);
    }
    cmd
}

/// Kills the process group `pid` leads (SIGKILL); a group already gone is fine.
pub(crate) fn kill_group(pid: u32) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Kills the group when dropped: a foreground run the caller abandons
/// (a cancelled call, a dropped future) leaves nothing behind.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            kill_group(pid);
        }
    }
}

/// How a foreground command ended.
#[derive(Debug)]
pub(crate) enum Finished {
    /// It exited (a signal reads as the negative signal number).
    Exited { code: i32, stdout: String, stderr: String },
    /// The timeout passed; the group was killed.
    TimedOut { after: Duration },
    /// The shared bounds were passed while it ran; the group was killed.
    StorageFull { max_bytes: u64 },
}

/// Runs `cmd` to the end or to `timeout`, keeping the session's
/// `shell_output_chars` of each stream. Whatever the command left running
/// in its group is killed after.
pub(crate) async fn run(mut cmd: Command, ws: &Session, timeout: Duration) -> Result<Finished, ShellError> {
    let mut confined = confine(&mut cmd, ws)?;
    let limit_chars = ws.limits.shell_output_chars;
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    if let Some(confined) = &mut confined {
        confined.watch(child.id(), ws.bounds.as_ref());
    }
    let guard = GroupGuard(child.id());
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let work = async {
        let (stdout, stderr, status) = tokio::join!(drain(out, limit_chars), drain(err, limit_chars), child.wait());
        (stdout, stderr, status)
    };
    let finished = match tokio::time::timeout(timeout, work).await {
        Ok((stdout, stderr, status)) => {
            let status = status?;
            let code = status.code().unwrap_or_else(|| {
                use std::os::unix::process::ExitStatusExt;
                -status.signal().unwrap_or(0)
            });
            Finished::Exited { code, stdout, stderr }
        }
        Err(_) => Finished::TimedOut { after: timeout },
    };
    let finished = match confined.as_ref().and_then(Confined::storage_passed) {
        Some(max_bytes) => Finished::StorageFull { max_bytes },
        None => finished,
    };
    drop(guard);
    if let Some(confined) = &confined {
        confined.kill_all();
    }
    let _ = child.wait().await;
    drop(confined);
    Ok(finished)
}

async fn drain(stream: Option<impl tokio::io::AsyncRead + Unpin>, limit_chars: usize) -> String {
    let mut capture = HeadTail::new(limit_chars);
    if let Some(mut stream) = stream {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
            capture.push(&buf[..n]);
        }
    }
    capture.finish()
}

/// Starts `cmd` in the background with stdout and stderr piped; the
/// confinement must be kept as long as the process.
pub(crate) fn spawn_background(mut cmd: Command, ws: &Session) -> Result<(Child, Option<Confined>), ShellError> {
    let mut confined = confine(&mut cmd, ws)?;
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn()?;
    if let Some(confined) = &mut confined {
        confined.watch(child.id(), ws.bounds.as_ref());
    }
    Ok((child, confined))
}
