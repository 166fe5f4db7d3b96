//! `lovia bench --only workspace`: `read_file`, `edit_file` and `shell
//! "true"` through the executor, beside the floor of spawning the same
//! `sh -c true` unconfined in the same run (docs/performance.md).

use super::{Latency, turn};
use crate::CliError;
use lovia_host::{ExecSettings, Executor, RunState, ToolCall, ToolSource, Toolset};
use lovia_workspace::{Mode, ShellSandbox, Workspace};
use serde::Serialize;
use std::time::Instant;

/// The workspace rows.
#[derive(Serialize)]
pub(super) struct WorkspaceFigure {
    /// `read_file` of a 10 KiB file.
    read_file: Latency,
    /// `edit_file` replacing one word of it (an atomic rewrite).
    edit_file: Latency,
    /// `shell` running `true`: confined (Landlock, seccomp, rlimits, a
    /// pids cgroup), or unconfined when the kernel cannot confine.
    shell: Latency,
    /// Whether `shell` ran confined.
    confined: bool,
    /// `sh -c true` spawned and awaited directly, unconfined: the floor.
    spawn: Latency,
}

pub(super) async fn workspace() -> Result<WorkspaceFigure, CliError> {
    let dir = tempfile::tempdir().map_err(|e| CliError::new(format!("cannot make a temporary directory: {e}")))?;
    let body: String = (0..1024).map(|i| if i == 512 { "alpha \n" } else { "0123456789\n" }).collect();
    std::fs::write(dir.path().join("file.txt"), body).map_err(|e| CliError::new(e.to_string()))?;
    let build = |sandbox| {
        Workspace::builder(dir.path())
            .mode(Mode::Trusted)
            .shell_sandbox(sandbox)
            .build()
            .map_err(|e| CliError::new(format!("the benchmark's workspace: {e}")))
    };
    let mut workspace = build(ShellSandbox::Required)?;
    let confined = workspace.unavailable_reason().is_none();
    if !confined {
        workspace = build(ShellSandbox::Off)?;
    }
    let tools =
        Toolset::new().with(ToolSource::Workspace, workspace.tools()).map_err(|e| CliError::new(e.to_string()))?;
    let exec = Executor::new(tools, ExecSettings::default());
    let run = RunState::default();

    let read = [ToolCall::new("r", "read_file", r#"{"path": "file.txt"}"#)];
    let read_file = sample(&exec, &run, 200, 2_000, |_| &read).await;
    let edits = [
        [ToolCall::new("e", "edit_file", r#"{"path": "file.txt", "old": "alpha", "new": "omega"}"#)],
        [ToolCall::new("e", "edit_file", r#"{"path": "file.txt", "old": "omega", "new": "alpha"}"#)],
    ];
    let edit_file = sample(&exec, &run, 20, 1_000, |i| &edits[i % 2]).await;
    let shell_call = [ToolCall::new("s", "shell", r#"{"command": "true"}"#)];
    let shell = sample(&exec, &run, 10, 200, |_| &shell_call).await;
    workspace.close();

    let mut times = Vec::new();
    for i in 0..210 {
        let start = Instant::now();
        let status = tokio::process::Command::new("sh").args(["-c", "true"]).status().await;
        if i >= 10 && status.is_ok_and(|s| s.success()) {
            times.push(start.elapsed().as_secs_f64());
        }
    }
    let spawn = Latency::of_seconds(times);
    Ok(WorkspaceFigure { read_file, edit_file, shell, confined, spawn })
}

/// `samples` one-call turns after `warm_up` ones; turn `i` runs `calls(i)`.
async fn sample<'a>(
    exec: &Executor,
    run: &RunState,
    warm_up: usize,
    samples: usize,
    calls: impl Fn(usize) -> &'a [ToolCall; 1],
) -> Latency {
    let mut times = Vec::with_capacity(samples);
    for i in 0..warm_up + samples {
        let (elapsed, _) = turn(exec, calls(i), run).await;
        if i >= warm_up {
            times.push(elapsed.as_secs_f64());
        }
    }
    Latency::of_seconds(times)
}

pub(super) fn rows(w: &WorkspaceFigure) -> String {
    let row = |name: &str, l: &Latency| {
        format!("workspace   {name:<38} p50 {:>8.1} µs   p99 {:>8.1} µs\n", l.p50_us, l.p99_us)
    };
    let mut out = row("read_file (10 KiB)", &w.read_file);
    out += &row("edit_file (one word, atomic rewrite)", &w.edit_file);
    out += &row(
        if w.confined { "shell \"true\", confined" } else { "shell \"true\", UNCONFINED (no kernel support)" },
        &w.shell,
    );
    out += &row("floor: spawn sh -c true unconfined", &w.spawn);
    out
}
