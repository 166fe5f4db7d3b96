//! `lovia run`: a scripted model drives the executor, turn by turn, and every
//! event is printed as one JSON object per line.

use crate::CliError;
use lovia_host::{
    ApprovalRequest, CallContext, EventSink, ExecSettings, Executor, HandlerAnswer, Host, MemoryStore, NeedsApproval,
    RateLimit, Redact, ResultCache, RunState, SessionStore, Tool, ToolCall, ToolEvent, ToolResultEntry, ToolSource,
    Toolset, TurnError,
};
use lovia_runner::{Message, answer_every_call};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// A plugin whose tools the scripted model may call (repeatable).
    #[arg(long = "plugin", value_name = "PLUGIN.wasm", required = true)]
    plugins: Vec<PathBuf>,
    /// The script: agent settings and the model's turns (docs/applications.md, "lovia run").
    #[arg(long, value_name = "SCRIPT.json")]
    script: PathBuf,
    /// How events are printed.
    #[arg(long, value_enum, default_value_t = EventFormat::Jsonl)]
    events: EventFormat,
    /// Grant the plugins an in-memory session store for this run [default: no store].
    #[arg(long, conflicts_with = "store")]
    memory_store: bool,
    /// Grant the plugins the session store kept in this SQLite file [default: no store].
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum EventFormat {
    /// One JSON object per line.
    Jsonl,
    /// One readable line per event.
    Text,
}

/// The script file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    #[serde(default)]
    agent: AgentScript,
    #[serde(default)]
    session_id: Option<String>,
    turns: Vec<Turn>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentScript {
    name: Option<String>,
    #[serde(default)]
    default_tool_retries: u32,
    default_tool_timeout_ms: Option<u64>,
    /// Absent: 200,000; null: unlimited.
    #[serde(default = "default_cap")]
    max_tool_output_chars: Option<u64>,
    max_tool_calls: Option<u64>,
    /// What the approval handler answers: `allow`, `deny` or `ask`.
    approval_handler: Option<String>,
    /// Decisions the stream consumer makes, by call id: `approve` or `deny`.
    #[serde(default)]
    approvals: HashMap<String, Decision>,
    /// Settings over what a tool declared, by tool name.
    #[serde(default)]
    tools: HashMap<String, ToolOverride>,
}

/// What the application may set over a tool's declaration.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolOverride {
    parallel: Option<bool>,
    retries: Option<u32>,
    timeout_ms: Option<u64>,
    max_output_chars: Option<u64>,
    /// `true`: always ask; `false`: never ask.
    needs_approval: Option<bool>,
    /// Outermost first.
    #[serde(default)]
    policies: Vec<PolicyScript>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum PolicyScript {
    Cache { ttl_ms: u64 },
    RateLimit { per_second: f64, burst: u32 },
    Redact { patterns: Vec<String>, replacement: Option<String> },
}

impl ToolOverride {
    fn apply(&self, mut tool: Tool) -> Result<Tool, CliError> {
        if let Some(p) = self.parallel {
            tool = tool.with_parallel(p);
        }
        if let Some(r) = self.retries {
            tool = tool.with_retries(r);
        }
        if let Some(ms) = self.timeout_ms {
            tool = tool.with_timeout(Duration::from_millis(ms));
        }
        if let Some(c) = self.max_output_chars {
            tool = tool.with_max_output_chars(c);
        }
        if let Some(ask) = self.needs_approval {
            tool = tool.with_approval(if ask { NeedsApproval::Always } else { NeedsApproval::Never });
        }
        for policy in &self.policies {
            let policy: Arc<dyn lovia_host::Policy> = match policy {
                PolicyScript::Cache { ttl_ms } => Arc::new(ResultCache::new(Duration::from_millis(*ttl_ms))),
                PolicyScript::RateLimit { per_second, burst } => Arc::new(RateLimit::new(*per_second, *burst)),
                PolicyScript::Redact { patterns, replacement } => {
                    let redact =
                        Redact::new(patterns).map_err(|e| CliError::new(format!("invalid redaction pattern: {e}")))?;
                    Arc::new(match replacement {
                        Some(r) => redact.replacement(r.clone()),
                        None => redact,
                    })
                }
            };
            tool = tool.with_policy(policy);
        }
        Ok(tool)
    }
}

fn default_cap() -> Option<u64> {
    Some(lovia_host::DEFAULT_MAX_OUTPUT_CHARS)
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Decision {
    Approve,
    Deny,
}

#[derive(Debug, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
enum Turn {
    Calls {
        tool_calls: Vec<ToolCall>,
        /// Cancels the run this long after the turn's calls start.
        cancel_after_ms: Option<u64>,
    },
    Text {
        text: String,
    },
}

pub(crate) async fn run(args: Args, host: Host) -> Result<ExitCode, CliError> {
    let text = std::fs::read_to_string(&args.script)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", args.script.display())))?;
    let script: Script = serde_json::from_str(&text).map_err(|e| {
        CliError::new(format!("{} is not a valid script: {e}", args.script.display()))
            .hint("see docs/applications.md, section \"lovia run\", for the script format")
    })?;
    let store: Option<Arc<dyn SessionStore>> = match (&args.store, args.memory_store) {
        (Some(path), _) => Some(Arc::new(
            lovia_host::SqliteStore::open(path)
                .map_err(|e| CliError::new(e.to_string()).hint("pass a writable file path to --store"))?,
        )),
        (None, true) => Some(Arc::new(MemoryStore::default())),
        (None, false) => None,
    };
    let mut tools = Toolset::new();
    for path in &args.plugins {
        let plugin = host.load_file(path).await?;
        let plugin_tools = Tool::from_plugin_with_store(&plugin, store.clone())
            .into_iter()
            .map(|t| match script.agent.tools.get(t.name()) {
                Some(o) => o.apply(t),
                None => Ok(t),
            })
            .collect::<Result<Vec<_>, _>>()?;
        tools.add(ToolSource::Plugin, plugin_tools).map_err(|e| {
            CliError::new(e.to_string().replace("\n  hint: ", " — ")).hint("load plugins whose tool names differ")
        })?;
    }
    if let Some(name) = script.agent.tools.keys().find(|n| tools.get(n).is_none()) {
        return Err(CliError::new(format!("the script configures tool `{name}`, which no plugin provides"))
            .hint(format!("available tools: {}", tools.iter().map(Tool::name).collect::<Vec<_>>().join(", "))));
    }
    let handler_answer = script.agent.approval_handler.as_deref().map(HandlerAnswer::parse);
    let settings = ExecSettings {
        agent: script.agent.name.clone().unwrap_or_else(|| "assistant".into()),
        default_retries: script.agent.default_tool_retries,
        default_timeout: script.agent.default_tool_timeout_ms.map(Duration::from_millis),
        max_output_chars: script.agent.max_tool_output_chars,
        max_tool_calls: script.agent.max_tool_calls,
        approval_handler: handler_answer.map(|answer| {
            let handler = move |_: &ApprovalRequest, _: &CallContext| Ok(answer);
            Arc::new(handler) as Arc<dyn lovia_host::ApprovalHandler>
        }),
        renderer: None,
    };
    let exec = Executor::new(tools, settings);
    let printer = Printer { start: Instant::now(), format: args.events };
    let mut state = RunState { run_id: "run_1".into(), session_id: script.session_id.clone(), ..RunState::default() };
    let decisions = Arc::new(script.agent.approvals);

    for (i, turn) in script.turns.iter().enumerate() {
        state.turn = u32::try_from(i + 1).unwrap_or(u32::MAX);
        printer.print(json!({"event": "turn_started", "turn": state.turn}));
        let (calls, cancel_after) = match turn {
            Turn::Text { text } => {
                printer.print(json!({"event": "turn_ended", "turn": state.turn}));
                printer.print(json!({"event": "run_completed", "output": text}));
                return Ok(ExitCode::SUCCESS);
            }
            Turn::Calls { tool_calls, cancel_after_ms } => (tool_calls, *cancel_after_ms),
        };
        if let Some(ms) = cancel_after {
            let token = state.cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                token.cancel(Some("cancelled by the script"));
            });
        }
        let (sink, mut rx) = EventSink::channel();
        let consumer = {
            let printer = printer.clone();
            let decisions = decisions.clone();
            tokio::spawn(async move {
                while let Some(event) = rx.recv().await {
                    printer.event(event, &decisions);
                }
            })
        };
        let result = exec.run_turn(calls, &state, &sink).await;
        drop(sink);
        let _ = consumer.await;
        match result {
            Ok(results) => {
                printer.print(
                    json!({"event": "tool_messages", "turn": state.turn, "messages": messages(calls, &results, None)}),
                );
                printer.print(json!({"event": "turn_ended", "turn": state.turn}));
            }
            Err(error) => {
                let (filler, kind) = match &error {
                    TurnError::BudgetExceeded { .. } => ("Tool error: not run: budget exceeded", "BudgetExceeded"),
                    _ => ("Tool error: run cancelled", "RunCancelled"),
                };
                let results = error.results();
                // docs/semantics.md D8: the next request answers every call id, so no provider sees a dangling call.
                printer.print(json!({"event": "tool_messages", "turn": state.turn, "messages": messages(calls, results, Some(filler))}));
                printer.print(json!({"event": "run_failed", "error": {"type": kind, "message": error.to_string()}}));
                return Ok(ExitCode::from(1));
            }
        }
    }
    printer.print(json!({"event": "run_failed", "error": {"type": "ScriptExhausted", "message": "the script ended without a text turn"}}));
    Ok(ExitCode::from(1))
}

/// The tool messages of the next model request: one per call id (docs/semantics.md D8).
fn messages(calls: &[ToolCall], results: &[ToolResultEntry], filler: Option<&str>) -> Vec<Value> {
    // Without an abort every call already has its result.
    answer_every_call(calls, results, filler.unwrap_or("Tool error: no result"))
        .into_iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, content, .. } => {
                Some(json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}))
            }
            _ => None,
        })
        .collect()
}

#[derive(Clone)]
struct Printer {
    start: Instant,
    format: EventFormat,
}

impl Printer {
    fn print(&self, mut value: Value) {
        let t_ms = (self.start.elapsed().as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("t_ms".into(), json!(t_ms));
        }
        let line = match self.format {
            EventFormat::Jsonl => value.to_string(),
            EventFormat::Text => text_line(&value),
        };
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
    }

    fn event(&self, event: ToolEvent, decisions: &HashMap<String, Decision>) {
        let call = event.call().clone();
        let base = |name: &str| json!({"event": name, "call_id": call.id, "name": call.name});
        let value = match event {
            ToolEvent::ApprovalRequired { ticket, .. } => {
                let mut v = base("approval_required");
                v["arguments"] = json!(call.arguments);
                let decision = decisions.get(&call.id).copied();
                v["decision"] = json!(match decision {
                    Some(Decision::Approve) => "approve",
                    Some(Decision::Deny) => "deny",
                    None => "undecided",
                });
                match decision {
                    Some(Decision::Approve) => {
                        ticket.approve();
                    }
                    Some(Decision::Deny) => {
                        ticket.reject();
                    }
                    None => drop(ticket),
                }
                v
            }
            ToolEvent::ToolCallStarted { .. } => {
                let mut v = base("tool_call_started");
                v["arguments"] = json!(call.arguments);
                v
            }
            ToolEvent::ToolCallFailed { error, .. } => {
                let mut v = base("tool_call_failed");
                v["error"] = json!(error);
                v
            }
            ToolEvent::ToolCallCompleted { output, is_error, .. } => {
                let mut v = base("tool_call_completed");
                v["output"] = json!(output);
                v["is_error"] = json!(is_error);
                v
            }
            ToolEvent::ToolProgress { message, .. } => {
                let mut v = base("tool_progress");
                v["message"] = json!(message);
                v
            }
            // An event this build does not print.
            _ => return,
        };
        self.print(value);
    }
}

fn text_line(v: &Value) -> String {
    let s = |k: &str| v.get(k).map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned)).unwrap_or_default();
    let head = format!("{:>9.1} ms  {:<20}", v["t_ms"].as_f64().unwrap_or(0.0), s("event"));
    match v["event"].as_str().unwrap_or_default() {
        "tool_call_completed" => {
            format!("{head} {} {}{}", s("call_id"), if v["is_error"] == true { "ERROR " } else { "" }, s("output"))
        }
        "tool_call_started" | "approval_required" => {
            format!("{head} {} {}({})", s("call_id"), s("name"), s("arguments"))
        }
        "tool_call_failed" => format!("{head} {} {}", s("call_id"), s("error")),
        "tool_progress" => format!("{head} {} {}", s("call_id"), s("message")),
        "tool_messages" => format!("{head} {}", v["messages"]),
        "run_completed" => format!("{head} {}", s("output")),
        "run_failed" => format!("{head} {}", v["error"]),
        _ => format!("{head} turn {}", s("turn")),
    }
}
