//! The workspace given to an agent: its tools after the plugins', its
//! `## Workspace` section between the agent's instructions and the plugins'
//! in the system message, the per-turn reminder of background processes
//! that the transcript never holds, and the same through `lovia run`.

use super::{builder, dirs};
use lovia_runner::{Agent, Message, ModelReply, Runner, ScriptedProvider};
use lovia_tests::{fixtures, load};
use lovia_workspace::Mode;
use std::process::Command;
use std::sync::Arc;

const ORDERS_INSTRUCTIONS: &str = "Amounts are in cents. Look an order up before refunding it.";

#[tokio::test]
async fn an_agent_sees_the_workspace_section_and_each_turn_its_background_processes() {
    let d = dirs();
    let workspace = builder(&d.root, Mode::Trusted).build().expect("workspace");
    let mut agent = Agent::new("coder").with_plugin(&load(fixtures::ORDERS).await).with_workspace(&workspace);
    agent.instructions = Some("Be brief.".into());
    let model = Arc::new(ScriptedProvider::new([
        ModelReply::calls([lovia_host::ToolCall::new("bg", "shell", r#"{"command": "sleep 30", "background": true}"#)]),
        ModelReply::calls([lovia_host::ToolCall::new("w", "write_file", r#"{"path": "a.txt", "content": "hi\n"}"#)]),
        ModelReply::text("Done."),
    ]));
    let result = Runner::new(agent, model.clone()).run("Start the server.").await.expect("run");
    assert_eq!(result.output, "Done.");
    assert_eq!(std::fs::read_to_string(d.root.join("a.txt")).expect("written"), "hi\n");

    let requests = model.requests();
    let system = format!("Be brief.\n\n{}\n\n{ORDERS_INSTRUCTIONS}", workspace.prompt_fragment());
    assert!(workspace.prompt_fragment().starts_with("## Workspace\nYou work in a workspace named 'proj'."));
    for request in &requests {
        assert_eq!(request.messages[0], Message::System { content: system.clone() });
    }
    // The table: the plugin's tools, then the workspace's.
    let names: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap_or_else(|| panic!("{n} not in {names:?}"));
    assert!(at("refund") < at("read_file") && at("read_file") < at("shell"), "{names:?}");

    // No process before the first turn: the request ends with the user's message.
    assert_eq!(requests[0].messages.last(), Some(&Message::User { content: "Start the server.".into() }));
    // After it, every request ends with the reminder of the running process.
    for request in &requests[1..] {
        let Some(Message::User { content }) = request.messages.last() else {
            panic!("no reminder after {:?}", request.messages.last())
        };
        assert!(content.starts_with("<system-reminder>\nBackground processes:\n- bg-"), "{content}");
        assert!(content.contains(" running: sleep 30\n") && content.ends_with("</system-reminder>"), "{content}");
    }
    // The transcript and what the next request replays never hold it.
    assert!(
        !result.messages.iter().any(|m| matches!(m, Message::User { content } if content.contains("system-reminder")))
    );
    assert_eq!(
        requests[2]
            .messages
            .iter()
            .filter(|m| matches!(m, Message::User { content } if content.contains("system-reminder")))
            .count(),
        1
    );
    workspace.close();
}

#[tokio::test]
async fn lovia_run_gives_the_script_a_confined_workspace_whose_asks_are_the_scripts_approvals() {
    let d = dirs();
    let script = d.outside.join("script.json");
    // The policy sees a path inside the root; only the kernel stands between it and /etc.
    let etc = format!("/etc/lovia-run-{}", std::process::id());
    let escape = format!("d=/e; echo x > ${{d}}{}", &etc[2..]);
    std::fs::write(
        &script,
        serde_json::json!({
            "agent": {"approvals": {"sh": "approve", "etc": "approve"}},
            "turns": [
                {"tool_calls": [{"id": "w", "name": "write_file", "arguments": r#"{"path": "notes/hello.txt", "content": "hi\n"}"#}]},
                {"tool_calls": [
                    {"id": "sh", "name": "shell", "arguments": r#"{"command": "cat notes/hello.txt"}"#},
                ]},
                {"tool_calls": [
                    {"id": "etc", "name": "shell", "arguments": serde_json::json!({"command": escape}).to_string()},
                ]},
                {"tool_calls": [{"id": "out", "name": "write_file", "arguments": r#"{"path": "/tmp/lovia-run-outside.txt", "content": "x"}"#}]},
                {"text": "Done."}
            ]
        })
        .to_string(),
    )
    .expect("script");
    let o = lovia_run(&[], &d.root, &script);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "stderr: {}\nstdout: {stdout}", String::from_utf8_lossy(&o.stderr));
    let events: Vec<serde_json::Value> =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect();
    let completed = |id: &str| {
        events
            .iter()
            .find(|e| e["event"] == "tool_result" && e["id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {stdout}"))
    };
    let asked = |id: &str| events.iter().any(|e| e["event"] == "approval_required" && e["id"] == id);
    assert_eq!(std::fs::read_to_string(d.root.join("notes/hello.txt")).expect("written"), "hi\n");
    // Coding mode: writes inside run, commands ask and the script approves them.
    assert!(!asked("w") && asked("sh") && asked("etc"));
    assert_eq!(completed("sh")["result"], "exit code: 0\nhi", "{}", completed("sh"));
    // An approved command still cannot write outside the root: the kernel refuses it.
    let refused = completed("etc")["result"].as_str().expect("text").to_owned();
    assert!(
        refused.starts_with("exit code: ")
            && !refused.starts_with("exit code: 0")
            && refused.contains("Read-only file system"),
        "{refused}"
    );
    assert!(!std::path::Path::new(&etc).exists(), "{etc} was written");
    // A write outside the root is denied by the policy, not asked.
    assert!(!asked("out"));
    assert!(
        completed("out")["result"]
            .as_str()
            .expect("text")
            .starts_with("Tool error: Writing outside the workspace is not permitted: "),
        "{}",
        completed("out")
    );
    assert!(!std::path::Path::new("/tmp/lovia-run-outside.txt").exists());
}

/// A kernel without Landlock, for real: `lovia run` runs under a seccomp
/// filter that answers `landlock_create_ruleset` with `ENOSYS`, which is
/// what a kernel built without Landlock answers. The shell tools are then
/// not offered (the reason on stderr), the file tools still are; with
/// `--shell-sandbox off` the shell runs, unconfined.
#[tokio::test]
#[expect(unsafe_code, reason = "a pre_exec hook installs the seccomp filter in the child")]
async fn without_landlock_the_shell_is_not_offered_unless_chosen_off() {
    use std::os::unix::process::CommandExt;
    let d = dirs();
    let script = d.outside.join("script.json");
    std::fs::write(
        &script,
        serde_json::json!({
            "agent": {"approval_handler": "allow"},
            "turns": [
                {"tool_calls": [
                    {"id": "sh", "name": "shell", "arguments": r#"{"command": "echo ran > ran.txt"}"#},
                    {"id": "w", "name": "write_file", "arguments": r#"{"path": "w.txt", "content": "x"}"#},
                ]},
                {"text": "Done."}
            ]
        })
        .to_string(),
    )
    .expect("script");
    let filter = no_landlock_filter();
    let run = |sandbox: &str| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lovia"));
        cmd.args(["run", "--shell-sandbox", sandbox, "--workspace"]).arg(&d.root).arg("--script").arg(&script);
        let filter = filter.clone();
        // SAFETY: between fork and exec only async-signal-safe work: two
        // prctl calls on a program built before the fork.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                seccompiler::apply_filter(&filter).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
            });
        }
        let o = cmd.output().expect("run lovia");
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "stderr: {stderr}\nstdout: {stdout}");
        let events: Vec<serde_json::Value> =
            stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect();
        let output = |id: &str| {
            events
                .iter()
                .find(|e| e["event"] == "tool_result" && e["id"] == id)
                .and_then(|e| e["result"].as_str())
                .unwrap_or_else(|| panic!("no result for {id}: {stdout}"))
                .to_owned()
        };
        (output("sh"), output("w"), stderr)
    };

    let (shell, write, stderr) = run("required");
    assert_eq!(shell, "Tool 'shell' is not available.");
    assert_eq!(write, "created w.txt (1 bytes)", "the file tools stay");
    assert!(
        stderr.contains(
            "lovia run: the workspace's shell tools are not offered: the shell tools need kernel confinement"
        ),
        "{stderr}"
    );
    assert!(!d.root.join("ran.txt").exists());

    let (shell, _, stderr) = run("off");
    assert!(shell.starts_with("exit code: 0"), "{shell}");
    assert_eq!(std::fs::read_to_string(d.root.join("ran.txt")).expect("ran"), "ran\n");
    assert!(stderr.contains("without kernel confinement"), "{stderr}");
}

/// A filter that lets everything through but `landlock_create_ruleset`,
/// refused with `ENOSYS`.
fn no_landlock_filter() -> seccompiler::BpfProgram {
    use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
    let arch = if cfg!(target_arch = "aarch64") { TargetArch::aarch64 } else { TargetArch::x86_64 };
    let rules = [(libc::SYS_landlock_create_ruleset, vec![])].into_iter().collect();
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32), arch)
        .expect("filter");
    filter.try_into().expect("compile")
}

/// Round two of the confinement, item 3, at a door: a command `lovia run`
/// started dies when `lovia run` dies, however it dies (SIGKILL, SIGTERM,
/// SIGINT), wherever the command is in its run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(unsafe_code, reason = "a pre_exec hook restores SIGINT's default in the child")]
async fn a_command_dies_with_lovia_run_however_it_dies() {
    for signal in ["KILL", "TERM", "INT"] {
        let d = dirs();
        let duration = lovia_tests::processes::unique_sleep();
        let sleeper = ["sleep", duration.as_str()];
        let script = d.outside.join("script.json");
        let command = serde_json::json!({"command": format!("sleep {duration}")}).to_string();
        std::fs::write(
            &script,
            serde_json::json!({
                "agent": {"approvals": {"sh": "approve"}},
                "turns": [{"tool_calls": [{"id": "sh", "name": "shell", "arguments": command}]}, {"text": "Done."}]
            })
            .to_string(),
        )
        .expect("script");
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_lovia"));
        command
            .args(["run", "--workspace"])
            .arg(&d.root)
            .arg("--script")
            .arg(&script)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // A shell without job control starts a background job with SIGINT
        // ignored, and a child keeps an ignored signal across exec: run so
        // (as CI may be), lovia run would rightly ignore the INT this test
        // sends. A terminal's Ctrl-C reaches a process whose SIGINT is the
        // default, which is what this test means.
        // SAFETY: between fork and exec only signal(2), which is
        // async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                if libc::signal(libc::SIGINT, libc::SIG_DFL) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut run = command.spawn().expect("lovia run");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while lovia_tests::processes::running(&sleeper).is_empty() {
            assert!(std::time::Instant::now() < deadline, "the command did not start");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let killed = Command::new("kill").args(["-s", signal]).arg(run.id().to_string()).status().expect("kill");
        assert!(killed.success());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while run.try_wait().expect("wait for lovia run").is_none() {
            if std::time::Instant::now() > deadline {
                let _ = run.kill();
                panic!("signal {signal}: lovia run did not end within 30 s");
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(lovia_tests::processes::gone(&sleeper).await, "signal {signal}: the command outlived lovia run");
    }
}

/// `--max-background-processes` is the section's `max_background_processes`
/// at `lovia run`: the workspace holds that many background processes, and
/// the next is refused with the limit it names.
#[test]
fn lovia_run_holds_as_many_background_processes_as_its_flag_says() {
    let d = dirs();
    let script = d.outside.join("script.json");
    let background = r#"{"command": "sleep 30", "background": true}"#;
    std::fs::write(
        &script,
        serde_json::json!({
            "turns": [
                {"tool_calls": [{"id": "a", "name": "shell", "arguments": background}]},
                {"tool_calls": [{"id": "b", "name": "shell", "arguments": background}]},
                {"text": "Done."}
            ]
        })
        .to_string(),
    )
    .expect("script");
    let o = lovia_run(&["--mode", "trusted", "--max-background-processes", "1"], &d.root, &script);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "stderr: {}\nstdout: {stdout}", String::from_utf8_lossy(&o.stderr));
    let result = |id: &str| {
        stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["event"] == "tool_result" && e["id"] == id)
            .and_then(|e| e["result"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("no result for {id}: {stdout}"))
    };
    assert!(!result("a").starts_with("Tool error"), "{}", result("a"));
    assert!(result("b").starts_with("Tool error: Too many background processes (limit 1)."), "{}", result("b"));
}

/// `lovia run` with `flags`, the workspace `root` and the `script`.
fn lovia_run(flags: &[&str], root: &std::path::Path, script: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lovia"))
        .arg("run")
        .args(flags)
        .arg("--workspace")
        .arg(root)
        .arg("--script")
        .arg(script)
        .output()
        .expect("run lovia")
}
