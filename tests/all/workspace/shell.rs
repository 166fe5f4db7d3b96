//! The shell tools (spec §1.4, §1.7, §1.8) with `ShellSandbox::Off`: the
//! command verdict through the approval channel, the renderings, the
//! timeout that kills the whole group, the environment allowlist, and
//! background processes.

use super::{asked, builder, call_deciding, call_one, dirs, executor, is_error, out};
use lovia_workspace::{CommandRule, Decision, Limits, Mode};
use serde_json::json;
use std::time::{Duration, Instant};

/// Whether `pid` is a live (not zombie) process.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits up to two seconds for `pid` to be gone.
pub(super) async fn gone(pid: u32) -> bool {
    for _ in 0..40 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// The id and pid in a background start message.
pub(super) fn started(text: &str) -> (String, u32) {
    let id = text.strip_prefix("started background process ").and_then(|r| r.split_once(' ')).expect("an id").0;
    let pid = text.split_once("(pid ").and_then(|(_, r)| r.split_once(')')).expect("a pid").0;
    assert_eq!(
        text,
        format!(
            "started background process {id} (pid {pid}). Poll read_process_output('{id}') for its output; kill_process('{id}') stops it."
        )
    );
    assert!(id.len() == 9 && id.starts_with("bg-") && id[3..].bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    (id.to_owned(), pid.parse().expect("pid"))
}

#[tokio::test]
async fn coding_mode_asks_then_runs_and_renders() {
    let d = dirs();
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    let hi = call_one(&exec, "shell", json!({"command": "echo hi"})).await;
    assert!(asked(&hi), "a coding-mode command asks");
    assert_eq!(hi.output("c"), "exit code: 0\nhi");
    let rejected = call_deciding(&exec, "shell", json!({"command": "touch made"}), false).await;
    assert_eq!(rejected.output("c"), "Tool shell was not approved.");
    assert!(!d.root.join("made").exists());
    let failing = call_one(&exec, "shell", json!({"command": "echo out; echo err >&2; exit 3"})).await;
    assert_eq!(failing.output("c"), "exit code: 3\nout\n--- stderr ---\nerr");
    assert!(!is_error(&failing), "a non-zero exit is a successful result");
    assert_eq!(out(&exec, "shell", json!({"command": "true"})).await, "exit code: 0\n(no output)");
    std::fs::create_dir(d.root.join("sub")).expect("mkdir");
    assert_eq!(
        out(&exec, "shell", json!({"command": "pwd", "cwd": "sub"})).await,
        format!("exit code: 0\n{}", d.root.join("sub").display())
    );
}

#[tokio::test]
async fn rules_deny_and_compound_commands_take_the_most_restrictive() {
    let d = dirs();
    let workspace = builder(&d.root, Mode::Coding)
        .command_rule(CommandRule::new("echo", Decision::Allow))
        .command_rule(CommandRule::new("rm -rf", Decision::Deny))
        .build()
        .expect("workspace");
    let exec = executor(&workspace);
    let denied = "Tool error: Command denied by workspace policy.\n  hint: The command (or a path it references) is denied by the workspace's policy, which only the user can change (a less restrictive mode, or in Rust a command rule). Use another command, or work within the workspace.";
    for command in [
        "echo a; rm -rf sub",
        "echo a && rm -rf sub",
        "echo a || rm -rf sub",
        "echo a | rm -rf sub",
        "echo a & rm -rf sub",
    ] {
        std::fs::create_dir_all(d.root.join("sub")).expect("mkdir");
        let turn = call_one(&exec, "shell", json!({"command": command})).await;
        assert!(!asked(&turn), "{command}: a denied command is not asked");
        assert_eq!(turn.output("c"), denied, "{command}");
        assert!(d.root.join("sub").exists(), "{command} did not run");
    }
    let redirect = call_one(&exec, "shell", json!({"command": "echo ok 2>&1"})).await;
    assert!(!asked(&redirect), "an fd redirection does not split: echo is allowed");
    assert_eq!(redirect.output("c"), "exit code: 0\nok");
    let outside = d.outside.join("x");
    let write_out = call_one(&exec, "shell", json!({"command": format!("echo pwned > {}", outside.display())})).await;
    assert!(write_out.output("c").contains("denied by workspace policy"), "a write claim outside is denied");
    assert!(!outside.exists());
    let read_out = call_deciding(&exec, "shell", json!({"command": "echo /etc/hostname"}), false).await;
    assert!(asked(&read_out), "a read claim outside asks, though echo is allowed");
    let decided = builder(&d.root, Mode::Coding)
        .command_decider(|segment| segment.starts_with("ls").then_some(Decision::Allow))
        .build()
        .expect("workspace");
    let ls = call_one(&executor(&decided), "shell", json!({"command": "ls"})).await;
    assert!(!asked(&ls), "the decider allowed it");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_group() {
    let d = dirs();
    let exec = executor(&builder(&d.root, Mode::Trusted).build().expect("workspace"));
    let started_at = Instant::now();
    // A grandchild that ignores SIGTERM and outlives its parent's wait.
    let command = "sh -c 'echo $$ > gc.pid; trap \"\" TERM; exec sleep 30' & wait";
    let text = out(&exec, "shell", json!({"command": command, "timeout": 1})).await;
    assert_eq!(text, "command timed out\n[timeout after 1.0s]");
    assert!(started_at.elapsed() < Duration::from_secs(5), "{:?}", started_at.elapsed());
    let pid: u32 = std::fs::read_to_string(d.root.join("gc.pid")).expect("pid file").trim().parse().expect("pid");
    assert!(gone(pid).await, "the grandchild {pid} was killed with the group");
}

#[tokio::test]
async fn a_cancelled_call_kills_the_group_and_stdin_is_closed() {
    let d = dirs();
    let exec = executor(&builder(&d.root, Mode::Trusted).build().expect("workspace"));
    assert_eq!(
        out(&exec, "shell", json!({"command": "cat"})).await,
        "exit code: 0\n(no output)",
        "cat reads an empty stdin"
    );
    let abandoned = tokio::time::timeout(
        Duration::from_millis(500),
        out(&exec, "shell", json!({"command": "echo $$ > sh.pid; sleep 30"})),
    )
    .await;
    assert!(abandoned.is_err(), "the call was still running");
    let pid: u32 = std::fs::read_to_string(d.root.join("sh.pid")).expect("pid file").trim().parse().expect("pid");
    assert!(gone(pid).await, "dropping the call killed {pid}");
}

#[tokio::test]
async fn the_environment_is_an_allowlist() {
    let d = dirs();
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some(), "cargo sets it for the test process");
    let exec = executor(&builder(&d.root, Mode::Trusted).build().expect("workspace"));
    let env = out(&exec, "shell", json!({"command": "env"})).await;
    assert!(!env.contains("CARGO_"), "{env}");
    assert!(env.contains(&format!("PWD={}", d.root.display())), "{env}");
    std::fs::create_dir_all(d.root.join(".venv/bin")).expect("venv");
    std::fs::write(d.root.join(".venv/bin/python"), "").expect("python");
    let path = out(&exec, "shell", json!({"command": "echo $PATH"})).await;
    assert!(path.starts_with(&format!("exit code: 0\n{}", d.root.join(".venv/bin").display())), "{path}");
}

#[tokio::test]
async fn output_keeps_head_and_tail() {
    let d = dirs();
    let mut limits = Limits::default();
    limits.shell_output_chars = 100;
    let exec = executor(&builder(&d.root, Mode::Trusted).limits(limits).build().expect("workspace"));
    let text = out(&exec, "shell", json!({"command": "seq 1 1000"})).await;
    assert!(text.starts_with("exit code: 0\n1\n2\n3\n"), "{text}");
    assert!(text.contains("\n[... truncated: showing 100 of 3893 chars. Re-run with a filter (e.g. pipe through grep/head) for more.]\n"), "{text}");
    assert!(text.ends_with("998\n999\n1000"), "{text}");
}

#[tokio::test]
async fn background_processes_are_polled_killed_and_reminded() {
    let d = dirs();
    let workspace = builder(&d.root, Mode::Trusted).build().expect("workspace");
    let exec = executor(&workspace);
    assert_eq!(workspace.reminder(), None);
    assert_eq!(
        out(&exec, "read_process_output", json!({"process_id": "bg-x"})).await,
        "Tool error: Unknown process id: 'bg-x' — no background processes exist in this session.\n  hint: Background processes do not survive a session restart; re-run the command with background=true to start it again."
    );
    let (id, pid) =
        started(&out(&exec, "shell", json!({"command": "echo started; sleep 30", "background": true})).await);
    assert_eq!(
        workspace.reminder(),
        Some(format!(
            "<system-reminder>\nBackground processes:\n- {id} running: echo started; sleep 30\n</system-reminder>"
        ))
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        out(&exec, "read_process_output", json!({"process_id": id})).await,
        format!("process {id}: running\nstarted\n")
    );
    assert_eq!(
        out(&exec, "read_process_output", json!({"process_id": id})).await,
        format!("process {id}: running\n(no new output)")
    );
    assert_eq!(
        out(&exec, "read_process_output", json!({"process_id": "bg-000000"})).await,
        format!(
            "Tool error: Unknown process id: 'bg-000000'.\n  hint: Known processes: {id} (running: echo started; sleep 30)"
        )
    );
    assert_eq!(
        out(&exec, "kill_process", json!({"process_id": id})).await,
        format!("process {id}: killed\n(no new output)")
    );
    assert!(gone(pid).await, "killed");

    let (done, _) = started(&out(&exec, "shell", json!({"command": "echo done; exit 4", "background": true})).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        workspace.reminder(),
        Some(format!(
            "<system-reminder>\nBackground processes:\n- {done} exited (exit code 4): echo done; exit 4 — call read_process_output('{done}') for its final output\n</system-reminder>"
        ))
    );
    assert_eq!(
        out(&exec, "read_process_output", json!({"process_id": done})).await,
        format!("process {done}: exited with code 4\ndone\n")
    );
    assert_eq!(workspace.reminder(), None, "its final output was read");
}

#[tokio::test]
async fn the_tail_buffer_says_what_it_dropped() {
    let d = dirs();
    let mut limits = Limits::default();
    limits.shell_output_chars = 10;
    let exec = executor(&builder(&d.root, Mode::Trusted).limits(limits).build().expect("workspace"));
    let (id, _) = started(&out(&exec, "shell", json!({"command": "seq 1 100", "background": true})).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        out(&exec, "read_process_output", json!({"process_id": id})).await,
        format!(
            "process {id}: exited with code 0\n[... earlier output dropped: only the newest output is kept between reads ...]\n98\n99\n100\n"
        )
    );
}

#[tokio::test]
async fn background_processes_are_bounded_and_die_with_the_session() {
    let d = dirs();
    let mut limits = Limits::default();
    limits.background_processes = 2;
    let workspace = builder(&d.root, Mode::Trusted).limits(limits).build().expect("workspace");
    let exec = executor(&workspace);
    let (_, first) = started(&out(&exec, "shell", json!({"command": "sleep 30", "background": true})).await);
    let (_, second) = started(&out(&exec, "shell", json!({"command": "sleep 31", "background": true})).await);
    assert_eq!(
        out(&exec, "shell", json!({"command": "sleep 32", "background": true})).await,
        "Tool error: Too many background processes (limit 2).\n  hint: Stop one with kill_process, or read the final output of one that exited, then start this one again."
    );
    workspace.close();
    assert!(gone(first).await && gone(second).await, "closing the session killed them");
    assert_eq!(
        out(&exec, "shell", json!({"command": "true"})).await,
        format!("Tool error: Workspace session {} is closed.", workspace.id())
    );
}

#[tokio::test]
async fn dropping_the_last_handle_kills_background_processes() {
    let d = dirs();
    let workspace = builder(&d.root, Mode::Trusted).build().expect("workspace");
    let exec = executor(&workspace);
    let (_, pid) = started(&out(&exec, "shell", json!({"command": "sleep 30", "background": true})).await);
    drop(exec);
    drop(workspace);
    assert!(gone(pid).await, "the session's end killed it");
}
