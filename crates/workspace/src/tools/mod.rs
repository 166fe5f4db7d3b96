//! The bundle's tools, one file per family, and what they share: argument
//! access, the path check every call starts with, and the link between an
//! approval asked in preflight and the call that runs after it.

mod grep;
mod list;
mod read;
mod shell;
mod write;

use crate::config::{Decision, Op};
use crate::policy::{Verdict, Why};
use crate::{Session, text};
use lovia_host::{CallContext, Failure, NeedsApproval, Tool, ToolHints, ToolOutput};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// Calls whose approval was asked, by run and call id. A body that finds
/// its operation is "ask" runs only if its call was asked: a tree changed
/// between preflight and the call (a symlink swapped in) cannot turn an
/// unasked call into an approved one.
#[derive(Debug, Default)]
pub(crate) struct AskedCalls(Mutex<HashSet<(String, String)>>);

/// Asked calls remembered at most (a rejected call is never taken back).
const MAX_ASKED: usize = 4096;

impl AskedCalls {
    fn record(&self, ctx: &CallContext) {
        let mut asked = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if asked.len() >= MAX_ASKED {
            asked.clear();
        }
        asked.insert((ctx.run_id.clone(), ctx.call_id.clone()));
    }

    fn take(&self, ctx: &CallContext) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(&(ctx.run_id.clone(), ctx.call_id.clone()))
    }
}

/// The MCP hints of a tool that only reads the workspace: it changes
/// nothing, and a repeat reads the same world again.
pub(crate) fn reads() -> ToolHints {
    ToolHints::stated(true, false, true, false)
}

/// The MCP hints of the shell and the tools that act on its processes, as
/// the session makes them: never read-only (even in `readonly` mode a
/// command may start, stop or signal processes), destructive wherever the
/// policy lets anything be written or the shell is not confined (then the
/// policy's path checks are all that stands between a command and the
/// host's files), and reaching an open world when commands have the network
/// or run unconfined.
pub(crate) fn commands(session: &Session) -> ToolHints {
    let unconfined = session.shell_sandbox == crate::config::ShellSandbox::Off;
    let destructive = session.paths.may_write() || unconfined;
    ToolHints::stated(false, destructive, false, session.shell_grants.network || unconfined)
}

/// The longest path a tool takes, in bytes: Linux's `PATH_MAX`. A longer
/// one could only be reached component by component, never by a command.
const PATH_MAX: usize = 4096;

/// A path the policy judged.
pub(crate) struct Target {
    pub(crate) abs: PathBuf,
    pub(crate) display: String,
}

impl Session {
    /// Fails once the session is closed.
    pub(crate) fn check_open(&self) -> Result<(), Failure> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(text::failure(format!("Workspace session {} is closed.", self.id), None));
        }
        Ok(())
    }

    /// Resolves `input` from the root.
    fn resolve(&self, input: &str) -> Result<PathBuf, Failure> {
        if input.len() > PATH_MAX {
            return Err(text::failure(
                format!(
                    "Path is too long: {} bytes (limit {} bytes).",
                    text::thousands(input.len() as u64),
                    text::thousands(PATH_MAX as u64)
                ),
                None,
            ));
        }
        self.paths
            .resolve(input, self.paths.root())
            .map_err(|e| text::failure(format!("Cannot resolve path '{input}': {e}"), None))
    }

    /// The most restrictive verdict of `input` over `ops`, and the path.
    fn judge(&self, input: &str, ops: &[Op]) -> Result<(Target, Decision), Failure> {
        let abs = self.resolve(input)?;
        let display = self.paths.display(&abs);
        let mut worst = Decision::Allow;
        for op in ops {
            let verdict = self.paths.judge(&abs, *op);
            if verdict.decision == Decision::Deny {
                return Err(self.denial(verdict, *op, &abs, &display));
            }
            worst = worst.max(verdict.decision);
        }
        Ok((Target { abs, display }, worst))
    }

    /// The failure a denied path reads as.
    fn denial(&self, verdict: Verdict, op: Op, abs: &std::path::Path, display: &str) -> Failure {
        match verdict.why {
            Why::DeniedPath | Why::Rule => {
                text::failure(format!("Path '{display}' is denied by workspace policy."), None)
            }
            Why::Inside => match op {
                Op::Write => text::failure(
                    format!("Workspace policy denies writing to '{display}'."),
                    Some(text::WRITE_MODE_HINT),
                ),
                Op::Read => text::failure(format!("Workspace policy denies reading '{display}'."), None),
            },
            Why::Outside => {
                let verb = if op == Op::Write { "Writing" } else { "Reading" };
                text::failure(
                    format!("{verb} outside the workspace is not permitted: {}", abs.display()),
                    Some(text::OUTSIDE_HINT),
                )
            }
        }
    }

    /// The path check every file call starts with: the session is open,
    /// nothing is denied, and an "ask" was asked for this very call.
    pub(crate) fn target(&self, input: &str, ops: &[Op], ctx: &CallContext) -> Result<Target, Failure> {
        self.check_open()?;
        let (target, decision) = self.judge(input, ops)?;
        self.confirm(decision, ctx)?;
        Ok(target)
    }

    /// Fails an "ask" decision whose call was never asked.
    pub(crate) fn confirm(&self, decision: Decision, ctx: &CallContext) -> Result<(), Failure> {
        if decision == Decision::Ask && !self.approvals.take(ctx) {
            return Err(text::failure(
                "The path or command changed after it was checked and now needs approval; call the tool again.",
                None,
            ));
        }
        Ok(())
    }

    /// The approval predicate's answer for a path argument: ask (and
    /// remember the call) when the most restrictive verdict is "ask"; a
    /// denied or allowed call is not asked. Not a string: ask (fails closed).
    fn asks_for_path(&self, path: &Value, ops: &[Op], ctx: &CallContext) -> bool {
        let decision = match path {
            Value::String(p) => self.judge(p, ops).ok().map(|(_, d)| d),
            _ => Some(Decision::Ask),
        };
        match decision {
            Some(Decision::Ask) => {
                self.approvals.record(ctx);
                true
            }
            _ => false,
        }
    }
}

/// A predicate asking when the `path` argument's verdict over `ops` is
/// "ask"; an absent or null path is `default`.
pub(crate) fn path_approval(session: &Arc<Session>, ops: &'static [Op], default: &'static str) -> NeedsApproval {
    let session = session.clone();
    NeedsApproval::Predicate(Arc::new(move |args: &Value, ctx: &CallContext| {
        let path = match args.get("path") {
            None | Some(Value::Null) => Value::String(default.to_owned()),
            Some(other) => other.clone(),
        };
        Ok(session.asks_for_path(&path, ops, ctx))
    }))
}

/// The string argument `key` (the schema made it one), or `default`.
pub(crate) fn str_arg<'a>(args: &'a Value, key: &str, default: &'a str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or(default)
}

/// The boolean argument `key`, false when absent.
pub(crate) fn bool_arg(args: &Value, key: &str) -> bool {
    args.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// The optional integer argument `key`.
pub(crate) fn int_arg(args: &Value, key: &str) -> Option<u64> {
    args.get(key).and_then(Value::as_u64)
}

/// An optional integer ≥ `min` (and ≤ `max`) or null, default null.
pub(crate) fn optional_int(description: &str, min: u64, max: Option<u64>) -> Value {
    let mut int = json!({"type": "integer", "minimum": min});
    if let Some(max) = max {
        int["maximum"] = json!(max);
    }
    json!({"anyOf": [int, {"type": "null"}], "default": null, "description": description})
}

/// An object schema with `additionalProperties: false`.
pub(crate) fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// Runs blocking file work off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(Failure::Panicked(format!("workspace file operation: {e}"))))
}

/// An I/O failure on `display`, in words the model can act on.
pub(crate) fn io_failure(display: &str, e: &std::io::Error) -> Failure {
    match e.kind() {
        std::io::ErrorKind::NotFound => text::failure(format!("No such file or directory: {display}"), None),
        std::io::ErrorKind::PermissionDenied => text::failure(format!("Permission denied: {display}"), None),
        _ => text::failure(format!("Cannot access {display}: {e}"), None),
    }
}

/// A successful text result.
pub(crate) fn ok(text: impl Into<String>) -> Result<ToolOutput, Failure> {
    Ok(ToolOutput::Text(text.into()))
}

/// The bundle for `session` (docs/workspace.md, "The tools").
pub(crate) fn bundle(session: &Arc<Session>) -> Vec<Tool> {
    let mut tools = vec![read::read_file(session)];
    if session.vision {
        tools.push(read::view_image(session));
    }
    tools.push(list::list_files(session));
    tools.push(grep::grep_files(session));
    if session.paths.may_write() {
        tools.push(write::write_file(session));
        tools.push(write::edit_file(session));
    }
    if session.shell_default().is_some() && crate::shell::unavailable(session.shell_sandbox).is_none() {
        tools.push(shell::shell(session));
        tools.push(shell::read_process_output(session));
        tools.push(shell::kill_process(session));
    }
    tools
}
