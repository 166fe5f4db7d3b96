//! The process of a `command` server: started with exactly the environment
//! its configuration names, confined by the kernel unless its sandbox is
//! `off` (docs/confinement.md), and ended with everything it started.

use super::config::McpServerConfig;
use super::start_error::StartError;
use lovia_confine::{Confinement, Prepared};
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, ChildStdin, ChildStdout};

/// Where a command named without a `/` is looked for when the server gets
/// no `PATH`: the C library's default search path, where `execvp` (and so
/// an unconfined server) looks then.
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// How long a stopped confined server's cleanup waits for the processes of
/// its cgroup to be gone before it removes the cgroup (a later start removes
/// one that was still busy). Fixed: 2 s.
const SETTLE: Duration = Duration::from_secs(2);

/// A running server process. Dropping it kills the process; a confined one
/// with its whole process group and every process of its cgroup, then its
/// cgroup and working directory are removed.
pub(crate) struct ServerProcess {
    child: Option<Child>,
    confined: Option<Confined>,
}

/// What a confined server holds while it runs.
struct Confined {
    /// Its pids cgroup: kept as long as the child (docs/confinement.md).
    prepared: Prepared,
    /// Its working directory and `TMPDIR`, removed when it is dropped.
    _workdir: tempfile::TempDir,
}

impl ServerProcess {
    /// Starts `command` for `config`, with piped stdin and stdout (the
    /// protocol) and lovia's stderr (its log).
    pub(crate) fn spawn(
        config: &McpServerConfig,
        command: &str,
    ) -> Result<(Self, ChildStdout, ChildStdin), StartError> {
        let server = || config.name.clone();
        let spawn_failed = |reason: String| StartError::Spawn { server: server(), command: command.to_owned(), reason };
        let mut env: Vec<(OsString, OsString)> = config.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
        for name in &config.env_from {
            let value = std::env::var_os(name).ok_or_else(|| StartError::MissingVariable {
                server: server(),
                variable: name.clone(),
                key: "env_from",
            })?;
            env.push((name.into(), value));
        }
        let confine = config.sandbox.confined();
        // A confined server gets its own working directory, so a relative
        // program would be looked for there: it is resolved against lovia's
        // first, and its install directory is granted.
        let program = if confine {
            let path = env.iter().rev().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_os_str());
            resolve(command, path).map_err(spawn_failed)?
        } else {
            PathBuf::from(command)
        };
        let mut cmd = tokio::process::Command::new(&program);
        cmd.args(&config.args).env_clear().envs(env).kill_on_drop(true);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        let confined = if confine { Some(confine_command(config, &program, &mut cmd)?) } else { None };
        let mut child = cmd.spawn().map_err(|e| spawn_failed(e.to_string()))?;
        let (stdout, stdin) = (child.stdout.take(), child.stdin.take());
        let process = Self { child: Some(child), confined };
        let (Some(stdout), Some(stdin)) = (stdout, stdin) else {
            return Err(spawn_failed("its stdin or stdout is not a pipe".into()));
        };
        Ok((process, stdout, stdin))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Unconfined: the child alone is killed (`kill_on_drop`), as before.
        let Some(confined) = self.confined.take() else { return };
        let child = self.child.take();
        // Not reaped yet, so its pid is still its process group's id.
        if let Some(pid) = child.as_ref().and_then(Child::id)
            && let Err(e) = lovia_confine::kill_group(pid)
        {
            tracing::warn!("stopping an MCP server: {e}");
        }
        if let Err(e) = confined.prepared.kill_all() {
            tracing::warn!("stopping an MCP server: {e}");
        }
        // Reaping the child and letting the killed processes leave the cgroup
        // takes a moment; without a runtime, both go now (tokio reaps the
        // child, a later start removes a cgroup that was still busy).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Some(mut child) = child {
                    let _ = child.wait().await;
                }
                confined.settle().await;
            });
        }
    }
}

impl Confined {
    /// Waits (up to [`SETTLE`]) until no process is left in the cgroup, so
    /// that dropping `prepared` removes it.
    async fn settle(self) {
        let deadline = tokio::time::Instant::now() + SETTLE;
        while tokio::time::Instant::now() < deadline {
            match self.prepared.processes() {
                Ok(Some(pids)) if !pids.is_empty() => {
                    let _ = self.prepared.kill_all();
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                _ => break,
            }
        }
    }
}

/// Installs `config`'s sandbox on `cmd`: refused (the server does not
/// start) when the kernel cannot confine it or a grant cannot be made.
fn confine_command(
    config: &McpServerConfig,
    program: &Path,
    cmd: &mut tokio::process::Command,
) -> Result<Confined, StartError> {
    let refused = |reason: String| StartError::Confine { server: config.name.clone(), reason };
    Confinement::check_supported().map_err(|e| refused(e.to_string()))?;
    let workdir = lovia_confine::temp_dir(&format!("mcp-{}", config.name))
        .map_err(|e| refused(format!("cannot make its working directory: {e}")))?;
    let sandbox = &config.sandbox;
    let mut confinement =
        Confinement::new().network(sandbox.network).limits(sandbox.limits()).private_tmp(workdir.path());
    for dir in install_dirs(program) {
        confinement = confinement.read_only(dir);
    }
    for path in &sandbox.read_only {
        confinement = confinement.read_only(path);
    }
    for path in &sandbox.read_write {
        confinement = confinement.read_write(path);
    }
    cmd.current_dir(workdir.path());
    let prepared = confinement.apply(cmd).map_err(|e| refused(e.to_string()))?;
    Ok(Confined { prepared, _workdir: workdir })
}

/// The absolute path of `command`: one with a `/` against lovia's working
/// directory, a bare name on `path` (the server's `PATH`, else
/// [`DEFAULT_PATH`]), the first executable file found.
fn resolve(command: &str, path: Option<&OsStr>) -> Result<PathBuf, String> {
    if command.contains('/') {
        return std::path::absolute(command).map_err(|e| e.to_string());
    }
    let path = path.unwrap_or(OsStr::new(DEFAULT_PATH));
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(command))
        .find(|candidate| {
            std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| format!("no executable {command:?} on the server's PATH ({})", path.to_string_lossy()))
}

/// The directories `program` needs to run, granted read-only: the one it
/// is in and the one it really is in (an npm `.bin` shim and a venv's
/// `python` are symlinks); the root of a Python virtual environment whose
/// `bin` holds either (the interpreter reads `pyvenv.cfg` and `lib/`
/// there); the install prefix of an interpreter that really is in a
/// `<prefix>/bin` whose `<prefix>/lib` holds its library (`python3.*`,
/// `node_modules`: a pyenv or nvm install outside `/usr`); the outermost
/// `node_modules` above either (a package's dependencies are its siblings
/// there). `/` itself is never granted.
fn install_dirs(program: &Path) -> Vec<PathBuf> {
    let real = std::fs::canonicalize(program).ok();
    let mut dirs = Vec::new();
    for path in std::iter::once(program).chain(real.as_deref()) {
        let Some(dir) = path.parent().filter(|d| d.parent().is_some()) else { continue };
        dirs.push(dir.to_path_buf());
        if dir.file_name() == Some(OsStr::new("bin"))
            && let Some(prefix) = dir.parent().filter(|p| p.parent().is_some())
            && (prefix.join("pyvenv.cfg").is_file() || holds_interpreter_library(&prefix.join("lib")))
        {
            dirs.push(prefix.to_path_buf());
        }
        if let Some(modules) = path.ancestors().filter(|a| a.file_name() == Some(OsStr::new("node_modules"))).last() {
            dirs.push(modules.to_path_buf());
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

/// Whether `lib` holds a Python (`python3.*`) or node (`node_modules`)
/// library: its `..` is an interpreter's install prefix.
fn holds_interpreter_library(lib: &Path) -> bool {
    std::fs::read_dir(lib).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("python3") || name == "node_modules"
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_found_on_the_servers_path_or_the_default_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let exe = dir.path().join("my-server");
        std::fs::write(&exe, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::write(dir.path().join("not-executable"), "").expect("write");
        let path = std::env::join_paths(["relative/dir".into(), dir.path().to_path_buf()]).expect("path");
        assert_eq!(resolve("my-server", Some(&path)), Ok(exe));
        assert!(resolve("not-executable", Some(&path)).is_err());
        assert!(resolve("my-server", None).is_err(), "not on /bin:/usr/bin");
        assert!(resolve("sh", None).is_ok_and(|p| p.is_absolute()));
        assert_eq!(resolve("/srv/x", None), Ok(PathBuf::from("/srv/x")));
    }

    #[test]
    fn a_venv_and_node_modules_are_granted_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let venv_bin = root.join("venv/bin");
        std::fs::create_dir_all(&venv_bin).expect("venv");
        std::fs::write(root.join("venv/pyvenv.cfg"), "home = /usr/bin\n").expect("cfg");
        std::fs::write(venv_bin.join("python"), "").expect("python");
        assert_eq!(install_dirs(&venv_bin.join("python")), [root.join("venv"), venv_bin.clone()]);

        let pkg = root.join("app/node_modules/@scope/server/dist");
        std::fs::create_dir_all(&pkg).expect("pkg");
        std::fs::create_dir_all(root.join("app/node_modules/.bin")).expect("bin");
        std::fs::write(pkg.join("index.js"), "").expect("js");
        let shim = root.join("app/node_modules/.bin/server");
        std::os::unix::fs::symlink("../@scope/server/dist/index.js", &shim).expect("symlink");
        let real_root = std::fs::canonicalize(root).expect("canonical");
        let dirs = install_dirs(&shim);
        assert!(dirs.contains(&root.join("app/node_modules")), "{dirs:?}");
        assert!(dirs.contains(&real_root.join("app/node_modules/@scope/server/dist")), "{dirs:?}");
        assert!(!dirs.iter().any(|d| d == Path::new("/") || d == &root.join("app")), "{dirs:?}");
        assert!(install_dirs(Path::new("/init")).is_empty(), "/ is never granted");

        // An interpreter installed under a prefix of its own (pyenv, nvm).
        let prefix = root.join("pyenv/versions/3.11.7");
        std::fs::create_dir_all(prefix.join("bin")).expect("bin");
        std::fs::create_dir_all(prefix.join("lib/python3.11")).expect("lib");
        std::fs::write(prefix.join("bin/python3.11"), "").expect("python");
        let dirs = install_dirs(&prefix.join("bin/python3.11"));
        assert!(dirs.contains(&prefix), "{dirs:?}");
        std::fs::create_dir_all(root.join("home/bin")).expect("home bin");
        std::fs::write(root.join("home/bin/tool"), "").expect("tool");
        assert_eq!(install_dirs(&root.join("home/bin/tool")), [root.join("home/bin")], "a plain bin is not widened");
    }
}
