//! The workspace tools (issue 34; docs/workspace.md) through the real
//! executor: renderings and errors, the policy's asks and denials, escape
//! attempts against the directory capability, and the shell.

mod agent;
mod confined;
mod escapes;
mod files;
mod mcp;
mod policy;
mod shell;

use lovia_host::{ExecSettings, Executor, RunState, ToolSource, Toolset};
use lovia_tests::turn::{Turn, call, run};
use lovia_workspace::{Mode, ShellSandbox, Workspace, WorkspaceBuilder};
use std::path::{Path, PathBuf};

/// A fresh root (canonical) and the directory beside it that stands for
/// "outside the workspace".
pub(crate) struct Dirs {
    _tmp: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) outside: PathBuf,
}

pub(crate) fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().canonicalize().expect("canonical");
    let (root, outside) = (base.join("proj"), base.join("outside"));
    std::fs::create_dir(&root).expect("root");
    std::fs::create_dir(&outside).expect("outside");
    Dirs { _tmp: tmp, root, outside }
}

/// A builder over `root` in `mode`, with the shell unconfined: these tests
/// are about the policy and the tools; confined.rs tests the confinement.
pub(crate) fn builder(root: &Path, mode: Mode) -> WorkspaceBuilder {
    Workspace::builder(root).mode(mode).shell_sandbox(ShellSandbox::Off)
}

/// An executor over the workspace's bundle.
pub(crate) fn executor(workspace: &Workspace) -> Executor {
    let tools = Toolset::new().with(ToolSource::Workspace, workspace.tools()).expect("unique names");
    Executor::new(tools, ExecSettings::default())
}

/// One call; the consumer approves every ask.
pub(crate) async fn call_one(exec: &Executor, name: &str, args: serde_json::Value) -> Turn {
    run(exec, vec![call("c", name, &args.to_string())], &RunState::default(), |_| Some(true)).await
}

/// One call; the consumer answers asks with `approve`.
pub(crate) async fn call_deciding(exec: &Executor, name: &str, args: serde_json::Value, approve: bool) -> Turn {
    run(exec, vec![call("c", name, &args.to_string())], &RunState::default(), move |_| Some(approve)).await
}

/// The output of one approved call.
pub(crate) async fn out(exec: &Executor, name: &str, args: serde_json::Value) -> String {
    call_one(exec, name, args).await.output("c").to_owned()
}

/// Whether the call asked for approval.
pub(crate) fn asked(turn: &Turn) -> bool {
    turn.trace().iter().any(|t| t == "approval_required:c")
}

/// Whether the one result is an error result.
pub(crate) fn is_error(turn: &Turn) -> bool {
    turn.results()[0].is_error
}
