//! `shell`, `read_process_output` and `kill_process`. A command is judged
//! by the command verdict (its segments, its cwd and its path claims) and
//! runs through `crate::shell`.

use super::{bool_arg, object, ok, str_arg};
use crate::config::{Decision, Op};
use crate::policy::command::{Chdir, chdir, command_decision, has_expansion, opaque, path_claims, split_segments};
use crate::shell::{self as run, Finished};
use crate::{Session, text};
use lovia_host::{CallContext, Failure, NeedsApproval, Tool};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const SHELL_DESCRIPTION: &str = "Run a shell command (sh -c) in the workspace.
- `cwd` (default '.') is relative to the workspace root.
- Returns the exit code, stdout and stderr (each cut to 30,000 characters, keeping the start and the end).
- `timeout` in seconds (default 300); the command and everything it started are killed when it passes.
- `background=true` starts a long-running process (a server, a watcher) and returns its id at once; poll it with read_process_output and stop it with kill_process.
- Prefer read_file, list_files, grep_files and edit_file for files.
- `description` says what the command is for, for people; it is never judged.";

const READ_DESCRIPTION: &str = "Read the new output of a background process started by shell with background=true.
- Returns its status (running, killed or exited with code N) and what it printed since the last read.
- Only the newest 30,000 characters are kept between reads.";

const KILL_DESCRIPTION: &str = "Stop a background process (and everything it started) and return its last output.";

/// The verdict of a command: its segments, the read check of `cwd`, and
/// its path claims resolved from `cwd`. The most restrictive wins.
///
/// The verdict is advisory (docs/workspace.md): only the kernel's
/// confinement binds. Still, it does not let a target it cannot know pass
/// as harmless: a segment that runs text it cannot read (`$(…)`,
/// backquotes, `eval`, `sh -c`, …), a path with an expansion in it, and a
/// `cd` it cannot follow are each asked about, as a write outside the root
/// would be (never denied for that alone). A
/// `cd DIR` it can follow moves where the later segments' paths resolve.
fn command_verdict(s: &Session, command: &str, cwd: &str) -> (Decision, Option<PathBuf>) {
    let mut worst = command_decision(command, s.decider.as_ref(), &s.rules.command_rules, s.shell_default());
    let Ok(cwd_abs) = s.paths.resolve(cwd, s.paths.root()) else { return (Decision::Deny, None) };
    worst = worst.max(s.paths.judge(&cwd_abs, Op::Read).decision);
    // Asked about where writing outside would be asked or refused; left as
    // it is where writing outside is allowed.
    let unknown = s.paths.judge(std::path::Path::new("/"), Op::Write).decision.min(Decision::Ask);
    let mut here = cwd_abs.clone();
    for segment in split_segments(command) {
        if opaque(&segment) {
            worst = worst.max(unknown);
        }
        for claim in path_claims(&segment) {
            if has_expansion(&claim.path) {
                worst = worst.max(unknown);
                continue;
            }
            let decision = match s.paths.resolve(&claim.path, &here) {
                Ok(abs) => s.paths.judge(&abs, claim.op).decision,
                // A path the policy cannot even resolve is not allowed blindly.
                Err(_) => Decision::Ask,
            };
            worst = worst.max(decision);
        }
        match chdir(&segment) {
            Chdir::Stays => {}
            Chdir::To(dir) => match s.paths.resolve(&dir, &here) {
                Ok(abs) => here = abs,
                Err(_) => worst = worst.max(unknown),
            },
            Chdir::Unknown => worst = worst.max(unknown),
        }
    }
    (worst, Some(cwd_abs))
}

fn approval(session: &Arc<Session>) -> NeedsApproval {
    let s = session.clone();
    NeedsApproval::Predicate(Arc::new(move |args: &Value, ctx: &CallContext| {
        let (Some(command), cwd) = (args.get("command"), args.get("cwd")) else { return Ok(false) };
        let cwd = match cwd {
            None | Some(Value::Null) => Some("."),
            Some(c) => c.as_str(),
        };
        let decision = match (command.as_str(), cwd) {
            (Some(command), Some(cwd)) => command_verdict(&s, command, cwd).0,
            // Not strings: ask (fails closed).
            _ => Decision::Ask,
        };
        if decision == Decision::Ask {
            s.approvals.record(ctx);
        }
        Ok(decision == Decision::Ask)
    }))
}

fn denied() -> Failure {
    text::failure(text::COMMAND_DENIED, Some(text::COMMAND_DENIED_HINT))
}

pub(crate) fn shell(session: &Arc<Session>) -> Tool {
    let s = session.clone();
    Tool::builder("shell")
        .description(SHELL_DESCRIPTION)
        .hints(super::commands(session))
        .parameters(object(
            json!({
                "command": {"type": "string", "description": "The command, run with sh -c."},
                "cwd": {"type": "string", "default": ".", "description": "The working directory, relative to the workspace root."},
                "timeout": {"anyOf": [{"type": "number", "minimum": 1}, {"type": "null"}], "default": null, "description": "Seconds before the command is killed (default 300)."},
                "background": {"type": "boolean", "default": false, "description": "Start it in the background and return its id."},
                "description": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "description": "What the command is for, for people."},
            }),
            &["command"],
        ))
        .invoke(move |args, ctx| {
            let s = s.clone();
            async move {
                s.check_open()?;
                let command = str_arg(&args, "command", "").to_owned();
                let cwd_arg = str_arg(&args, "cwd", ".");
                let (decision, cwd) = command_verdict(&s, &command, cwd_arg);
                if decision == Decision::Deny {
                    return Err(denied());
                }
                s.confirm(decision, &ctx)?;
                let Some(cwd) = cwd.filter(|c| c.is_dir()) else {
                    return Err(text::failure(format!("Not a directory: {cwd_arg}"), None));
                };
                // The shared bounds: room left, and a place among the commands running at once,
                // held until the command (a background one too) has exited.
                let permit = match &s.bounds {
                    Some(bounds) => {
                        bounds.check_room(0).await?;
                        Some(bounds.command()?)
                    }
                    None => None,
                };
                let cmd = run::command(&command, &cwd, s.paths.root());
                if bool_arg(&args, "background") {
                    s.processes.check_room(s.limits.background_processes).map_err(|full| {
                        text::failure(
                            format!("Too many background processes (limit {}).", full.0),
                            Some("Stop one with kill_process, or read the final output of one that exited, then start this one again."),
                        )
                    })?;
                    let (child, confined) = run::spawn_background(cmd, &s)
                        .map_err(|e| text::failure(e.to_string(), None))?;
                    let bg = s.processes.register(child, confined, permit, &command, s.limits.shell_output_chars);
                    let id = &bg.id;
                    return ok(format!(
                        "started background process {id} (pid {}). Poll read_process_output('{id}') for its output; kill_process('{id}') stops it.",
                        bg.pid
                    ));
                }
                let asked = args.get("timeout").and_then(Value::as_f64).map(|t| Duration::from_secs_f64(t.clamp(1.0, 1e9)));
                let timeout = asked.unwrap_or(s.limits.shell_timeout).min(s.limits.max_shell_timeout);
                let span = command_span(&s, &command);
                let finished = span.within(run::run(cmd, &s, timeout)).await;
                command_end(&span, &finished);
                let finished = finished.map_err(|e| text::failure(e.to_string(), None))?;
                drop(permit);
                ok(match finished {
                    Finished::TimedOut { after } => {
                        format!("command timed out\n[timeout after {:.1}s]", after.as_secs_f64())
                    }
                    Finished::StorageFull { max_bytes } => format!(
                        "command stopped\n[this account's workspaces passed their storage bound of {} bytes while it ran; remove files, then run it again]",
                        text::thousands(max_bytes)
                    ),
                    Finished::Exited { code, stdout, stderr } => {
                        let (stdout, stderr) = (stdout.trim_end_matches('\n'), stderr.trim_end_matches('\n'));
                        let mut out = format!("exit code: {code}\n");
                        if stdout.is_empty() && stderr.is_empty() {
                            out.push_str("(no output)");
                        } else {
                            out.push_str(stdout);
                            if !stderr.is_empty() {
                                out.push_str("\n--- stderr ---\n");
                                out.push_str(stderr);
                            }
                        }
                        out
                    }
                })
            }
        })
        .expect("shell's schema is valid")
        .with_parallel(false)
        .with_retries(0)
        .with_approval(approval(session))
}

/// A foreground command's span (docs/telemetry.md), a child of its call's:
/// how it was confined, and (with content captured) its command line.
fn command_span(s: &Session, command: &str) -> lovia_telemetry::Scope {
    use lovia_telemetry::{KeyValue, SpanKind, Telemetry, attr};
    let telemetry = Telemetry::in_current();
    let confinement = match s.shell_sandbox {
        crate::ShellSandbox::Required => "kernel",
        crate::ShellSandbox::Off => "none",
    };
    let span = telemetry.start("lovia.workspace.command", SpanKind::Internal, &telemetry.current(), || {
        vec![KeyValue::new(attr::CONFINEMENT, confinement)]
    });
    span.set_content(|| vec![KeyValue::new(attr::PROCESS_COMMAND_LINE, command.to_owned())]);
    span
}

/// How the command ended, on its span.
fn command_end(span: &lovia_telemetry::Scope, finished: &Result<Finished, run::ShellError>) {
    use lovia_telemetry::{KeyValue, attr};
    match finished {
        Ok(Finished::Exited { code, .. }) => {
            span.set(KeyValue::new(attr::PROCESS_EXIT_CODE, i64::from(*code)));
            if *code != 0 {
                span.fail("exit_code", format!("exit code {code}"));
            }
        }
        Ok(Finished::TimedOut { .. }) => span.fail("timeout", "the command timed out"),
        Ok(Finished::StorageFull { .. }) => span.fail("storage_full", "the workspaces' storage bound was passed"),
        Err(e) => span.fail("spawn", e.to_string()),
    }
}

fn process_schema() -> Value {
    object(
        json!({"process_id": {"type": "string", "description": "The id shell returned, e.g. bg-1a2b3c."}}),
        &["process_id"],
    )
}

pub(crate) fn read_process_output(session: &Arc<Session>) -> Tool {
    let s = session.clone();
    Tool::builder("read_process_output")
        .description(READ_DESCRIPTION)
        // Reads what a process printed: a repeat may read more, but changes nothing.
        .hints(super::reads())
        .parameters(process_schema())
        .invoke(move |args, _| {
            let s = s.clone();
            async move {
                s.check_open()?;
                let id = str_arg(&args, "process_id", "");
                match s.processes.get(id) {
                    Some(bg) => ok(bg.read()),
                    None => Err(s.processes.unknown(id)),
                }
            }
        })
        .expect("read_process_output's schema is valid")
}

pub(crate) fn kill_process(session: &Arc<Session>) -> Tool {
    let s = session.clone();
    Tool::builder("kill_process")
        .description(KILL_DESCRIPTION)
        .hints(lovia_host::ToolHints::stated(false, true, true, false))
        .parameters(process_schema())
        .invoke(move |args, _| {
            let s = s.clone();
            async move {
                s.check_open()?;
                let id = str_arg(&args, "process_id", "");
                match s.processes.get(id) {
                    Some(bg) => {
                        bg.kill();
                        // Give the readers a moment to take in what the process printed last.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        ok(bg.read())
                    }
                    None => Err(s.processes.unknown(id)),
                }
            }
        })
        .expect("kill_process' schema is valid")
        .with_parallel(false)
        .with_retries(0)
}
