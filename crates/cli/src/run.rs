//! `lovia run`: a scripted model drives [`lovia_runner::Runner`]: the
//! script's turns are the model's replies, and every event of the run is
//! printed as one JSON object per line.

use crate::CliError;
use lovia_host::{
    Composition, ExecSettings, HandlerAnswer, Host, MemoryStore, NeedsApproval, RateLimit, Redact, ResultCache,
    RunState, SessionStore, Tool, ToolCall, ToolEvent, ToolSource, capability::ToolList,
};
use lovia_runner::wire::{self, WireEvent};
use lovia_runner::{Agent, Message, ModelReply, RunError, RunEvent, Runner, ScriptedProvider};
use serde::{Deserialize, Deserializer, de::Error as _};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// A plugin whose tools the scripted model may call (repeatable).
    #[arg(long = "plugin", value_name = "PLUGIN.wasm", required_unless_present_any = ["mcp_servers", "workspace", "read_page", "searxng", "brave_search"])]
    plugins: Vec<PathBuf>,
    /// Give the agent the workspace tools (read_file, list_files,
    /// grep_files, write_file, edit_file, shell, ...) over DIR, after the
    /// plugins' tools, and their `## Workspace` section in its system
    /// message (docs/workspace.md) [default: no workspace].
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    #[command(flatten)]
    workspace_options: crate::workspace::WorkspaceOptions,
    #[command(flatten)]
    web: crate::web::WebOptions,
    /// MCP servers whose tools join the plugins' (`[[mcp_servers]]` tables;
    /// docs/mcp.md, "MCP servers as tool sources") [default: none].
    #[arg(long, value_name = "SERVERS.toml")]
    mcp_servers: Option<PathBuf>,
    /// The script: agent settings and the model's turns (docs/applications.md, "lovia run").
    #[arg(long, value_name = "SCRIPT.json")]
    script: PathBuf,
    /// How events are printed.
    #[arg(long, value_enum, default_value_t = EventFormat::Jsonl)]
    events: EventFormat,
    /// Also give the agent `run_code` (code mode): the model may send a
    /// JavaScript program that calls the other tools as async functions;
    /// each call it makes is printed with `"parent"`, the program's call id
    /// (docs/code-mode.md) [default: off].
    #[arg(long)]
    code_mode: bool,
    /// Grant the plugins an in-memory session store for this run [default: no store].
    #[arg(long, conflicts_with = "store")]
    memory_store: bool,
    /// Grant the plugins the session store kept in this SQLite file [default: no store].
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
    /// Also give the agent `ask_human`: a question is answered from the
    /// script's `agent.answers` by its call id, else asked on the terminal
    /// when stdin is one, else left without an answer (the model reads
    /// why) [default: off].
    #[arg(long)]
    ask_human: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum EventFormat {
    /// One JSON object per line.
    Jsonl,
    /// One readable line per event.
    Text,
}

/// The script file. Every enumerated value is checked where it is read, so
/// that a mistake names its key and the allowed values (docs/semantics.md §13
/// for what the approval values mean).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    #[serde(default)]
    agent: AgentScript,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(deserialize_with = "turns")]
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
    #[serde(default, deserialize_with = "approval_handler")]
    approval_handler: Option<HandlerAnswer>,
    /// Decisions the stream consumer makes, by call id: `approve`, `always`
    /// (approve, and allow the tool for the rest of the run) or `deny`.
    #[serde(default, deserialize_with = "decisions")]
    approvals: HashMap<String, Decision>,
    /// Answers to `ask_human` (`--ask-human`), by the question's call id: a
    /// text, or the labels chosen. A question without one is asked on the
    /// terminal when stdin is one, and otherwise gets no answer.
    #[serde(default, deserialize_with = "answers")]
    answers: HashMap<String, ScriptAnswer>,
    /// Settings over what a tool declared, by tool name.
    #[serde(default)]
    tools: HashMap<String, ToolOverride>,
    /// The model's window in tokens: compacts each request to fit it and
    /// offers `recall_tool_result`. Absent: no compaction.
    context_window_tokens: Option<usize>,
}

/// What the application may set over a tool's declaration.
#[derive(Debug, Default, Clone, Deserialize)]
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

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum PolicyScript {
    Cache { ttl_ms: u64 },
    RateLimit { per_second: f64, burst: u32 },
    Redact { patterns: Vec<String>, replacement: Option<String> },
}

impl ToolOverride {
    /// The policies it names, outermost first, made once per run.
    fn policies(&self) -> Result<Vec<Arc<dyn lovia_host::Policy>>, CliError> {
        let mut made: Vec<Arc<dyn lovia_host::Policy>> = Vec::with_capacity(self.policies.len());
        for policy in &self.policies {
            made.push(match policy {
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
            });
        }
        Ok(made)
    }

    /// `tool` with these settings and `policies` (made by [`Self::policies`]).
    fn apply(&self, mut tool: Tool, policies: &[Arc<dyn lovia_host::Policy>]) -> Tool {
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
        for policy in policies {
            tool = tool.with_policy(policy.clone());
        }
        tool
    }
}

fn default_cap() -> Option<u64> {
    Some(lovia_host::DEFAULT_MAX_OUTPUT_CHARS)
}

#[derive(Debug, Clone, Copy)]
enum Decision {
    Approve,
    /// Approve, and allow the tool for the rest of the run.
    Always,
    Deny,
}

/// A scripted answer to `ask_human`: a text, or the labels chosen.
#[derive(Debug, Clone)]
enum ScriptAnswer {
    Text(String),
    Labels(Vec<String>),
}

const HANDLER_ANSWERS: &[(&str, HandlerAnswer)] =
    &[("allow", HandlerAnswer::Allow), ("deny", HandlerAnswer::Deny), ("ask", HandlerAnswer::Ask)];
const DECISIONS: &[(&str, Decision)] =
    &[("approve", Decision::Approve), ("always", Decision::Always), ("deny", Decision::Deny)];

/// `value` if it is one of `allowed`, exactly; else an error naming `key`,
/// what it holds and every allowed value. No trimming or case folding: a
/// near miss such as `"approve"` for a handler is a mistake, not a deny.
fn one_of<T: Copy>(key: &str, value: &Value, allowed: &[(&str, T)]) -> Result<T, String> {
    match value.as_str().and_then(|s| allowed.iter().find(|(name, _)| *name == s)) {
        Some((_, v)) => Ok(*v),
        None => {
            let names: Vec<String> = allowed.iter().map(|(name, _)| format!("`{name}`")).collect();
            Err(format!("`{key}` is {value}, expected one of {}", names.join(", ")))
        }
    }
}

fn approval_handler<'de, D: Deserializer<'de>>(d: D) -> Result<Option<HandlerAnswer>, D::Error> {
    Option::<Value>::deserialize(d)?
        .map(|v| one_of("agent.approval_handler", &v, HANDLER_ANSWERS))
        .transpose()
        .map_err(D::Error::custom)
}

fn answers<'de, D: Deserializer<'de>>(d: D) -> Result<HashMap<String, ScriptAnswer>, D::Error> {
    // Sorted, so that of several mistakes the first by call id is reported.
    let raw = BTreeMap::<String, Value>::deserialize(d)?;
    let mut out = HashMap::with_capacity(raw.len());
    for (id, v) in raw {
        let answer = match &v {
            Value::String(text) => ScriptAnswer::Text(text.clone()),
            Value::Array(labels) if labels.iter().all(Value::is_string) => {
                ScriptAnswer::Labels(labels.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            }
            _ => {
                return Err(D::Error::custom(format!(
                    "`agent.answers.{id}` is {v}, expected a text or a list of the labels chosen"
                )));
            }
        };
        out.insert(id, answer);
    }
    Ok(out)
}

fn decisions<'de, D: Deserializer<'de>>(d: D) -> Result<HashMap<String, Decision>, D::Error> {
    // Sorted, so that of several mistakes the first by call id is reported.
    let raw = BTreeMap::<String, Value>::deserialize(d)?;
    let mut out = HashMap::with_capacity(raw.len());
    for (id, v) in raw {
        let decision = one_of(&format!("agent.approvals.{id}"), &v, DECISIONS).map_err(D::Error::custom)?;
        out.insert(id, decision);
    }
    Ok(out)
}

/// One reply of the scripted model.
#[derive(Debug)]
enum Turn {
    /// The model asks for calls.
    Calls {
        tool_calls: Vec<ToolCall>,
        /// Cancels the run this long after the turn's calls start.
        cancel_after_ms: Option<u64>,
    },
    /// The model's final answer.
    Text(String),
}

const TURN_KEYS: &str = "`tool_calls` and `cancel_after_ms` (a turn of calls) or `text` (the final answer)";

fn turns<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Turn>, D::Error> {
    let raw = Vec::<Value>::deserialize(d)?;
    let turns = raw.into_iter().enumerate().map(|(i, v)| turn(i, v)).collect::<Result<Vec<_>, _>>();
    turns.and_then(|t| check_turns(&t).map(|()| t)).map_err(D::Error::custom)
}

/// Reads `turns[i]` by hand: serde's untagged enums only say that nothing matched.
fn turn(i: usize, v: Value) -> Result<Turn, String> {
    let at = format!("turns[{i}]");
    let Value::Object(map) = v else {
        return Err(format!("`{at}` is {v}, expected an object with {TURN_KEYS}"));
    };
    if let Some(key) = map.keys().find(|k| !["tool_calls", "cancel_after_ms", "text"].contains(&k.as_str())) {
        return Err(format!("`{at}` has unknown key `{key}`, expected {TURN_KEYS}"));
    }
    match (map.get("tool_calls"), map.get("text")) {
        (Some(_), Some(_)) => Err(format!("`{at}` has both `tool_calls` and `text`; a turn is one or the other")),
        (None, None) => Err(format!("`{at}` has neither `tool_calls` nor `text`, expected {TURN_KEYS}")),
        (None, Some(text)) => {
            if map.contains_key("cancel_after_ms") {
                return Err(format!("`{at}.cancel_after_ms` applies to a turn of calls, not to a text turn"));
            }
            let text = text.as_str().ok_or_else(|| format!("`{at}.text` is {text}, expected a string"))?;
            Ok(Turn::Text(text.to_owned()))
        }
        (Some(calls), None) => {
            let calls = calls.as_array().ok_or_else(|| {
                format!("`{at}.tool_calls` is {calls}, expected an array of {{\"id\", \"name\", \"arguments\"}}")
            })?;
            if calls.is_empty() {
                // A reply without calls is the model's final answer; an empty list would end the run silently.
                return Err(format!(
                    "`{at}.tool_calls` is empty; a turn without calls is the final answer: write {{\"text\": \"...\"}}"
                ));
            }
            let tool_calls = calls
                .iter()
                .enumerate()
                .map(|(j, c)| {
                    let c = lovia_runner::scripted::ScriptCall::deserialize(c)
                        .map_err(|e| format!("`{at}.tool_calls[{j}]`: {e}"))?;
                    Ok(ToolCall::from(c))
                })
                .collect::<Result<Vec<_>, String>>()?;
            let cancel_after_ms = match map.get("cancel_after_ms") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_u64().ok_or_else(|| {
                    format!("`{at}.cancel_after_ms` is {v}, expected a whole number of milliseconds")
                })?),
            };
            Ok(Turn::Calls { tool_calls, cancel_after_ms })
        }
    }
}

/// What no single turn shows: a call id used twice (approvals and tool
/// messages are keyed by it, docs/semantics.md D7, D8) and turns after the
/// final answer, which would never play.
fn check_turns(turns: &[Turn]) -> Result<(), String> {
    let mut seen: HashMap<&str, String> = HashMap::new();
    for (i, t) in turns.iter().enumerate() {
        match t {
            Turn::Text(_) if i + 1 < turns.len() => {
                return Err(format!(
                    "`turns[{i}]` is a text turn, which ends the run, but {} more turn(s) follow it",
                    turns.len() - i - 1
                ));
            }
            Turn::Text(_) => {}
            Turn::Calls { tool_calls, .. } => {
                for (j, c) in tool_calls.iter().enumerate() {
                    let here = format!("turns[{i}].tool_calls[{j}].id");
                    if let Some(first) = seen.insert(&c.id, here.clone()) {
                        return Err(format!(
                            "`{here}` is {:?}, already the id of `{first}`; call ids must be unique",
                            c.id
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

pub(crate) async fn run(args: Args, host: Host, supply: &crate::supply::Supply) -> Result<ExitCode, CliError> {
    let text = std::fs::read_to_string(&args.script)
        .map_err(|e| CliError::new(format!("cannot read {}: {e}", args.script.display())))?;
    let invalid = |e: &dyn std::fmt::Display| {
        CliError::new(format!("{} is not a valid script: {e}", args.script.display()))
            .hint("see docs/applications.md, section \"lovia run\", for the script format")
    };
    let script: Script = serde_json::from_str(&text).map_err(|e| invalid(&e))?;
    let call_ids: Vec<&str> = script
        .turns
        .iter()
        .flat_map(|t| match t {
            Turn::Calls { tool_calls, .. } => tool_calls.iter().map(|c| c.id.as_str()).collect(),
            Turn::Text(_) => Vec::new(),
        })
        .collect();
    // A decision for a call the script never makes is a typo that would silently leave the real call denied.
    let mut decided: Vec<&String> = script.agent.approvals.keys().collect();
    decided.sort();
    // `<id>/<n>` is the n-th call a program made in call `<id>` (code mode).
    let known = |id: &str| {
        call_ids.contains(&id)
            || id.split_once('/').is_some_and(|(parent, n)| call_ids.contains(&parent) && n.parse::<u32>().is_ok())
    };
    if let Some(id) = decided.into_iter().find(|id| !known(id)) {
        return Err(invalid(&format!(
            "`agent.approvals.{id}` names a call no turn makes, expected one of the script's call ids: {}",
            call_ids.join(", ")
        )));
    }
    let mut answered: Vec<&String> = script.agent.answers.keys().collect();
    answered.sort();
    if let Some(id) = answered.into_iter().find(|id| !known(id)) {
        return Err(invalid(&format!(
            "`agent.answers.{id}` names a call no turn makes, expected one of the script's call ids: {}",
            call_ids.join(", ")
        )));
    }
    if !args.ask_human && !script.agent.answers.is_empty() {
        return Err(CliError::new("the script has `agent.answers`, but the agent has no ask_human")
            .hint("pass --ask-human to give the agent the tool"));
    }
    let store: Option<Arc<dyn SessionStore>> = match (&args.store, args.memory_store) {
        (Some(path), _) => Some(Arc::new(
            lovia_host::SqliteStore::open(path)
                .map_err(|e| CliError::new(e.to_string()).hint("pass a writable file path to --store"))?,
        )),
        (None, true) => Some(Arc::new(MemoryStore::default())),
        (None, false) => None,
    };
    let mut door = Composition::new();
    for path in &args.plugins {
        let plugin = supply.load(&host, path, crate::supply::Supply::config_beside(path)?).await?;
        let tools = Tool::from_plugin_with_store(&plugin, store.clone());
        door.push(Arc::new(ToolList::plugins(format!("plugin '{}'", plugin.info().name), tools)));
    }
    // The MCP servers, the web tools and the workspace, from the flags
    // `lovia mcp` shares.
    let workspace = crate::door::add_shared(
        &mut door,
        crate::door::SharedFlags {
            command: "lovia run",
            mcp_servers: args.mcp_servers.as_deref(),
            web: &args.web,
            workspace: args.workspace.as_deref().map(|dir| (dir, &args.workspace_options)),
        },
    )
    .await?;
    // Name clashes are refused with a hint before anything runs; the
    // runner builds its own table from the agent.
    let tools = door.toolset().map_err(|e| crate::door::refusal("lovia run", e))?;
    // The script's settings name tools of the plugins, the workspace, the
    // web options or code mode; an MCP server's tools take theirs from
    // its `[[mcp_servers]]` entry (they may change mid-run).
    let mut configured: Vec<&String> = script.agent.tools.keys().collect();
    configured.sort();
    let from_server: Vec<String> = door
        .capabilities()
        .iter()
        .filter(|c| matches!(c.source(), ToolSource::Mcp(_)))
        .flat_map(|c| c.tools())
        .map(|t| t.name().to_owned())
        .collect();
    let offered = |n: &str| {
        (tools.get(n).is_some() && !from_server.iter().any(|s| s == n)) || (args.code_mode && n == lovia_code::RUN_CODE)
    };
    if let Some(name) = configured.into_iter().find(|n| !offered(n)) {
        return Err(CliError::new(format!(
            "the script configures tool `{name}`, which no plugin, workspace or web option provides"
        ))
        .hint(format!("available tools: {}", tools.iter().map(Tool::name).collect::<Vec<_>>().join(", "))));
    }
    // Each configured tool's settings, its policies made once (a cache
    // or a rate limit keeps its state when the run's table is rebuilt).
    let mut tunings = HashMap::new();
    for (name, tuning) in &script.agent.tools {
        tunings.insert(name.clone(), (tuning.clone(), tuning.policies()?));
    }
    door.set_adjust(Arc::new(move |tool: Tool| match tunings.get(tool.name()) {
        Some((tuning, policies)) => tuning.apply(tool, policies),
        None => tool,
    }));
    // Before code mode, so that a program can ask too.
    if args.ask_human {
        let answers = RunAnswers {
            answers: script.agent.answers.clone(),
            terminal: std::io::IsTerminal::is_terminal(&std::io::stdin()),
        };
        door.push(Arc::new(lovia_host::human::ask_human_capability(lovia_host::human::ask_human(Arc::new(answers)))));
    }
    if args.code_mode {
        // Over every tool listed now (the MCP servers' lists may change).
        let engine = crate::code_engine(&host, "lovia run")?;
        let code_mode = lovia_code::code_mode(engine, &door, lovia_code::CodeLimits::default())
            .map_err(|e| CliError::new(format!("--code-mode: {e}")))?;
        door.push(Arc::new(code_mode));
    }
    // The script (or the terminal) answers questions and decides approvals.
    door.check_needs("lovia run", lovia_host::capability::Needs::NOTHING.questions().approvals())
        .map_err(|e| crate::door::refusal("lovia run", e))?;
    door.toolset().map_err(|e| crate::door::refusal("lovia run", e))?;
    let name = script.agent.name.clone().unwrap_or_else(|| "assistant".into());
    let mut agent = Agent::new(name.clone());
    agent.capabilities = door;
    // The workspace is the agent's from here (its tools hold it).
    drop(workspace);
    if let Some(n) = script.agent.context_window_tokens.filter(|n| *n < lovia_runner::MIN_CONTEXT_WINDOW) {
        return Err(CliError::new(format!("`agent.context_window_tokens` is {n}; it must be at least 1024"))
            .hint("give the model's context window in tokens, such as 128000"));
    }
    agent.context_policy = script.agent.context_window_tokens.map(lovia_runner::ContextPolicy::for_window);
    agent.tool_settings = ExecSettings::default()
        .with_agent(name)
        .with_telemetry(crate::telemetry::handle())
        .with_default_retries(script.agent.default_tool_retries)
        .with_default_timeout(script.agent.default_tool_timeout_ms.map(Duration::from_millis))
        .with_max_output_chars(script.agent.max_tool_output_chars)
        .with_max_tool_calls(script.agent.max_tool_calls)
        .with_approval_handler(script.agent.approval_handler.map(|answer| {
            let handler = move |_: &lovia_host::ApprovalRequest, _: &lovia_host::CallContext| Ok(answer);
            Arc::new(handler) as Arc<dyn lovia_host::ApprovalHandler>
        }));
    // One model turn per script turn: a run still calling tools after the
    // last one has run out of script (reported as ScriptExhausted below),
    // and no turn is started that the script has no reply for.
    agent.max_turns = u32::try_from(script.turns.len()).unwrap_or(u32::MAX);
    let replies = script.turns.iter().map(|t| match t {
        Turn::Calls { tool_calls, .. } => ModelReply::calls(tool_calls.iter().cloned()),
        Turn::Text(text) => ModelReply::text(text.clone()),
    });
    let runner = Runner::new(agent, Arc::new(ScriptedProvider::new(replies)));
    let state = RunState { run_id: "run_1".into(), session_id: script.session_id.clone(), ..RunState::default() };
    let cancel = state.cancel.clone();
    let printer = Printer { start: Instant::now(), format: args.events };
    // No user message: the script is the whole conversation.
    let mut handle = runner.stream_with(None, state);

    let mut turn = 0;
    // The open turn's tool messages, in the order the transcript records them.
    let mut open: Option<Vec<Value>> = None;
    let mut code = ExitCode::from(1);
    while let Some(event) = handle.next_event().await {
        match event {
            // The text turn's text is the run_completed output.
            RunEvent::RunStarted { .. } | RunEvent::TextDelta { .. } => {}
            RunEvent::TurnStarted { turn: n, .. } => {
                turn = n;
                printer.print(json!({"event": "turn_started", "turn": n}));
            }
            RunEvent::MessageCompleted { message: Message::Assistant { tool_calls, .. } } if !tool_calls.is_empty() => {
                open = Some(Vec::with_capacity(tool_calls.len()));
                let index = usize::try_from(turn).unwrap_or(usize::MAX).saturating_sub(1);
                if let Some(Turn::Calls { cancel_after_ms: Some(ms), .. }) = script.turns.get(index) {
                    let (token, ms) = (cancel.clone(), *ms);
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        token.cancel(Some("cancelled by the script"));
                    });
                }
            }
            RunEvent::MessageCompleted { .. } => {}
            RunEvent::Tool(event) => {
                if let (ToolEvent::ToolCallCompleted { call, output, .. }, Some(messages)) = (&event, open.as_mut()) {
                    messages.push(tool_message(&call.id, output));
                }
                printer.tool(event, &script.agent.approvals);
            }
            RunEvent::TurnEnded { turn: n, .. } => {
                if let Some(messages) = open.take() {
                    printer.print(json!({"event": "tool_messages", "turn": n, "messages": messages}));
                }
                printer.print(json!({"event": "turn_ended", "turn": n}));
            }
            RunEvent::RunFailed { error } => {
                if open.take().is_some() {
                    // docs/semantics.md D8: the next request answers every call id, so
                    // no provider sees a dangling call; the runner added the fillers.
                    let messages = last_tool_messages(&error);
                    printer.print(json!({"event": "tool_messages", "turn": turn, "messages": messages}));
                }
                let script_ended = matches!(error, RunError::MaxTurns { .. });
                if let Some(mut wire) =
                    wire::run_event(&RunEvent::RunFailed { error }, script.session_id.as_deref(), false)
                {
                    if script_ended {
                        // One model turn per script turn: running out of turns is running out of script.
                        wire.data["message"] = json!("the script ended without a text turn");
                    }
                    printer.wire(wire);
                }
            }
            event => {
                if matches!(event, RunEvent::RunCompleted { .. }) {
                    code = ExitCode::SUCCESS;
                }
                // An event a newer runner adds and the wire does not carry is not printed.
                if let Some(wire) = wire::run_event(&event, script.session_id.as_deref(), false) {
                    printer.wire(wire);
                }
            }
        }
    }
    // The outcome was printed as run_completed or a fatal error.
    let _ = handle.result().await;
    Ok(code)
}

fn tool_message(call_id: &str, content: &str) -> Value {
    json!({"role": "tool", "tool_call_id": call_id, "content": content})
}

/// The tool messages after the last assistant message of a failed run's
/// conversation: the interrupted turn's results, then the fillers for the
/// call ids left without one (docs/semantics.md D8).
fn last_tool_messages(error: &RunError) -> Vec<Value> {
    let messages = match error {
        RunError::Cancelled { messages, .. }
        | RunError::BudgetExceeded { messages, .. }
        | RunError::MaxTurns { messages, .. } => messages.as_slice(),
        _ => &[],
    };
    let start = messages.iter().rposition(|m| matches!(m, Message::Assistant { .. })).map_or(0, |i| i + 1);
    messages[start..]
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, content, .. } => Some(tool_message(tool_call_id, content)),
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

    /// Prints a wire event as one line, `event` naming it.
    fn wire(&self, wire: WireEvent) {
        let mut value = json!({"event": wire.name});
        if let (Some(line), Value::Object(data)) = (value.as_object_mut(), wire.data) {
            line.extend(data);
        }
        self.print(value);
    }

    /// Prints a tool event; an approval (a program's nested one too) is
    /// decided here by the script's `approvals`, and the line says how.
    fn tool(&self, event: ToolEvent, decisions: &HashMap<String, Decision>) {
        let Some(mut wire) = wire::tool_event(&event) else { return };
        let mut innermost = event;
        while let ToolEvent::Nested { event, .. } = innermost {
            innermost = *event;
        }
        if let ToolEvent::ApprovalRequired { call, ticket } = innermost {
            let decision = decisions.get(&call.id).copied();
            wire.data["decision"] = json!(match decision {
                Some(Decision::Approve) => "approve",
                Some(Decision::Always) => "always",
                Some(Decision::Deny) => "deny",
                None => "undecided",
            });
            // The script's `approvals` decide it (traced as `lovia.approval.by`).
            ticket.note_decider("script");
            match decision {
                Some(Decision::Approve) => {
                    ticket.approve();
                }
                Some(Decision::Always) => {
                    ticket.approve_always();
                }
                Some(Decision::Deny) => {
                    ticket.reject();
                }
                None => drop(ticket),
            }
        }
        self.wire(wire);
    }
}

fn text_line(v: &Value) -> String {
    let s = |k: &str| v.get(k).map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned)).unwrap_or_default();
    let head = format!("{:>9.1} ms  {:<20}", v["t_ms"].as_f64().unwrap_or(0.0), s("event"));
    match v["event"].as_str().unwrap_or_default() {
        "tool_result" => {
            format!("{head} {} {}{}", s("id"), if v["is_error"] == true { "ERROR " } else { "" }, s("result"))
        }
        "tool_call" | "approval_required" => format!("{head} {} {}({})", s("id"), s("name"), s("arguments")),
        "approval_auto" => format!("{head} {} {}", s("id"), s("name")),
        "error" => format!("{head} {} {}: {}", s("call_id"), s("type"), s("message")),
        "tool_progress" => format!("{head} {} {}", s("id"), s("message")),
        "tool_attempt_failed" => format!("{head} {} attempt {}: {}", s("id"), s("attempt"), s("error")),
        "tool_messages" => format!("{head} {}", v["messages"]),
        "run_completed" => format!("{head} {}", s("output")),
        "turn_started" | "turn_ended" => format!("{head} turn {}", s("turn")),
        _ => format!("{head} {}", v),
    }
}

/// `ask_human` for `lovia run`: the script's answer for the question's call
/// id, else the person at the terminal, else no answer.
#[derive(Debug)]
struct RunAnswers {
    answers: HashMap<String, ScriptAnswer>,
    /// Whether stdin is a terminal to ask at.
    terminal: bool,
}

impl lovia_host::human::HumanChannel for RunAnswers {
    fn ask<'a>(
        &'a self,
        question: &'a lovia_host::human::Question,
        ctx: &'a lovia_host::CallContext,
    ) -> lovia_host::BoxFuture<'a, Result<String, lovia_host::human::HumanError>> {
        use lovia_host::human::HumanError;
        Box::pin(async move {
            if let Some(answer) = self.answers.get(&ctx.call_id) {
                return Ok(match answer {
                    ScriptAnswer::Text(text) => text.clone(),
                    ScriptAnswer::Labels(labels) => labels.join("\n"),
                });
            }
            if !self.terminal {
                return Err(HumanError::Cancelled(
                    "nobody can answer: the script has no answer for this question and there is no terminal — continue without one"
                        .into(),
                ));
            }
            let question = question.clone();
            // Reading stdin blocks: keep it off the async workers.
            tokio::task::spawn_blocking(move || answer_on_terminal(&question)).await.map_err(|_| HumanError::Closed)?
        })
    }
}

/// Asks `question` on the terminal (stderr) and reads one line: a free
/// answer, or the option's number or label (several, comma-separated, when
/// more than one may be chosen).
fn answer_on_terminal(question: &lovia_host::human::Question) -> Result<String, lovia_host::human::HumanError> {
    use lovia_host::human::HumanError;
    use std::io::BufRead;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "The agent asks: {}", question.question);
    let options = question.options.clone().unwrap_or_default();
    for (i, option) in options.iter().enumerate() {
        let about = if option.description.is_empty() { String::new() } else { format!(" — {}", option.description) };
        let _ = writeln!(err, "  {}. {}{about}", i + 1, option.label);
    }
    let _ = write!(
        err,
        "{}",
        if options.is_empty() {
            "Answer: "
        } else if question.multi_select {
            "Choose (e.g. 1,3): "
        } else {
            "Choose: "
        }
    );
    let _ = err.flush();
    drop(err);
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => return Err(HumanError::Cancelled("no answer (end of input) — continue without one".into())),
        Ok(_) => {}
    }
    let line = line.trim();
    if options.is_empty() {
        return Ok(line.to_owned());
    }
    // A number or a label names an option; anything else is taken as written.
    let pick = |word: &str| {
        word.parse::<usize>()
            .ok()
            .and_then(|n| options.get(n.wrapping_sub(1)))
            .or_else(|| options.iter().find(|o| o.label == word))
            .map_or_else(|| word.to_owned(), |o| o.label.clone())
    };
    Ok(line.split(',').map(str::trim).filter(|w| !w.is_empty()).map(pick).collect::<Vec<_>>().join("\n"))
}
