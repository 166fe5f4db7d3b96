//! The agent loop around the executor: ask the model, run the tool calls it
//! asks for, answer every call id, ask again, until the model answers with
//! text (docs/semantics.md §6, §7, §8, §16, docs/semantics.md D8). Handoffs switch the active agent;
//! agents as tools run sub-runs; a [`RunStore`] makes a session's run
//! survive a crash.

mod agent;
mod checkpoint;
mod compaction;
mod context;
mod event;
mod memory;
#[cfg(feature = "postgres")]
mod pg_pool;
#[cfg(feature = "postgres")]
mod postgres;
mod provider;
pub mod providers;
pub mod scripted;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store_url;
mod stream;
mod trace;
pub mod wire;

pub use agent::{Agent, DEFAULT_MAX_TURNS, tool_name};
pub use checkpoint::{
    BadCursor, Checkpoint, MAX_JOURNAL_BYTES, PendingApproval, RunStatus, RunStore, SESSION_INPUT_PREVIEW_CHARS,
    SESSION_PAGE_DEFAULT, SESSION_PAGE_MAX, SessionCursor, SessionInfo, SessionPage, StoreError,
};
pub use compaction::{ContextPolicy, MIN_CONTEXT_WINDOW, RECALL_TOOL};
pub use event::RunEvent;
// Re-exported from lovia-host, where the factory lives beside the approval
// channel: the MCP server serves it too.
pub use lovia_host::human::{
    ASK_HUMAN, HumanChannel, HumanError, MAX_ANSWER_CHARS, MAX_QUESTION_CHARS, Question, QuestionOption, ask_human,
};
pub use memory::MemoryRunStore;
#[cfg(feature = "postgres")]
pub use pg_pool::{
    PG_CONNECT_TIMEOUT, PG_POOL_CONNECTIONS, PgClient, PgError, PgPool, SCHEMA_DEADLOCK_RETRIES, pg_message,
};
#[cfg(feature = "postgres")]
pub use postgres::PostgresRunStore;
pub use provider::{
    FinishReason, Message, ModelProvider, ModelReply, ModelRequest, ModelSettings, ProviderError, TextSink,
};
pub use scripted::{RECORDED_REQUESTS, ScriptedProvider};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteRunStore;
pub use store_url::StoreUrl;
pub use stream::RunHandle;

use lovia_host::call::text;
use lovia_host::exec::{
    BudgetMeter, EventSink, Executor, JournaledCall, RunState, ToolCall, ToolEvent, ToolResultEntry, TurnError, Usage,
};
use lovia_host::{ErrorKind, NameConflict};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// A finished run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// The model's final text.
    pub output: String,
    /// The session's transcript (without the system message), the final
    /// reply included.
    pub messages: Vec<Message>,
    /// Model turns this run took.
    pub turns: u32,
    /// The agent that answered.
    pub agent: String,
    /// Tokens this run spent.
    pub usage: Usage,
}

/// Why a run ended without output. The variants that end a conversation
/// carry it, with every call id answered (docs/semantics.md D8).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The model kept calling tools.
    #[error("Run exceeded max_turns={max} without producing output")]
    MaxTurns {
        /// The limit.
        max: u32,
        /// The conversation.
        messages: Vec<Message>,
    },
    /// The run was cancelled (by the token or by a tool).
    #[error("{reason}")]
    Cancelled {
        /// Why.
        reason: String,
        /// The conversation.
        messages: Vec<Message>,
    },
    /// A budget limit was exceeded (docs/semantics.md §7 messages).
    #[error("{message}")]
    BudgetExceeded {
        /// E.g. `tool call count 3 exceeds budget 2`.
        message: String,
        /// The conversation.
        messages: Vec<Message>,
    },
    /// The provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// Two tools of the agent share a name; nothing ran.
    #[error(transparent)]
    Tools(#[from] NameConflict),
    /// The run store failed; the run stopped where its last save landed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A checkpoint names an agent this runner does not know.
    #[error("the session's active agent '{agent}' is not reachable from '{root}'")]
    UnknownAgent {
        /// The saved agent.
        agent: String,
        /// The runner's agent.
        root: String,
    },
    /// The run's task ended abnormally.
    #[error("the run was aborted: {message}")]
    Aborted {
        /// What the runtime said.
        message: String,
    },
}

impl RunError {
    /// A short machine-readable kind: `max_turns`, `cancelled`,
    /// `budget_exceeded`, `provider`, `tools`, `store`, `unknown_agent`, `aborted`.
    pub fn kind(&self) -> &'static str {
        match self {
            RunError::MaxTurns { .. } => "max_turns",
            RunError::Cancelled { .. } => "cancelled",
            RunError::BudgetExceeded { .. } => "budget_exceeded",
            RunError::Provider(_) => "provider",
            RunError::Tools(_) => "tools",
            RunError::Store(_) => "store",
            RunError::UnknownAgent { .. } => "unknown_agent",
            RunError::Aborted { .. } => "aborted",
        }
    }
}

type Emit = Arc<dyn Fn(RunEvent) + Send + Sync>;

/// The pauses before each new try of writing how a run ended, after the
/// write failed in the database: 100, 400 and 1,600 ms, about 2 s in all,
/// which a database restart or a dropped pooled connection fits in.
const END_WRITE_RETRIES: [std::time::Duration; 3] = [
    std::time::Duration::from_millis(100),
    std::time::Duration::from_millis(400),
    std::time::Duration::from_millis(1_600),
];

/// A change to the run's checkpoint that an event brings, made and written
/// by [`Saver::update`].
type Change = Box<dyn FnOnce(&mut Checkpoint) + Send>;

/// Runs an agent against a model. Cheap to clone.
#[derive(Clone)]
pub struct Runner {
    agent: Arc<Agent>,
    provider: Arc<dyn ModelProvider>,
    store: Option<Arc<dyn RunStore>>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner").field("agent", &self.agent.name).field("provider", &self.provider.name()).finish()
    }
}

/// The persisted state of the run in progress and where it is saved.
struct Saver {
    /// The run's approvals, whose session-wide allowances the checkpoint keeps.
    approvals: lovia_host::ApprovalChannel,
    store: Option<(Arc<dyn RunStore>, String, String)>,
    /// Past its end nothing is saved (the run's `CancelToken` fence).
    fence: Option<lovia_host::Fence>,
    checkpoint: Mutex<Checkpoint>,
    /// Held from a change of the checkpoint to the end of its write, so
    /// that writes reach the store in the order of the changes (parallel
    /// calls end at once, and a later write must not be overtaken by an
    /// earlier, shorter checkpoint).
    writing: tokio::sync::Mutex<()>,
    failed: Mutex<Option<StoreError>>,
}

impl Saver {
    async fn update(&self, f: impl FnOnce(&mut Checkpoint)) -> Result<(), StoreError> {
        let _writing = self.writing.lock().await;
        let cp = {
            let mut cp = self.checkpoint.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut cp);
            // An "always allow" given since the last save is saved with this one.
            cp.allowed_tools = self.approvals.allowed_tools();
            // Written from a copy: the transcript stays readable meanwhile
            // (the recall tool reads it from inside a call).
            if self.store.is_none() {
                return Ok(());
            }
            cp.clone()
        };
        match &self.store {
            // Checked on the clock right before the write: a process that
            // stalled past its lease must not overwrite the next owner's
            // checkpoint with an older one.
            Some((_, _, session)) if self.fence.as_ref().is_some_and(|f| !f.holds()) => {
                Err(StoreError::Fenced { session: session.clone() })
            }
            // With a lease, the database checks it too: a write that passed
            // the clock's check just before a stall is refused there.
            Some((store, tenant, session)) => match self.fence.as_ref().and_then(lovia_host::Fence::lease) {
                Some(lease) => store.save_fenced(tenant, session, &cp, lease).await,
                None => store.save(tenant, session, &cp).await,
            },
            None => Ok(()),
        }
    }

    /// The transcript so far (a copy: a model request owns its messages).
    fn messages(&self) -> Vec<Message> {
        self.checkpoint.lock().unwrap_or_else(|p| p.into_inner()).messages.clone()
    }
}

/// The executor of a run led by `agent`: its tool table, and
/// `recall_tool_result` over the run's transcript when the agent compacts
/// its context and has no tool of that name already.
fn run_executor(agent: &Agent, saver: &Arc<Saver>) -> Result<Executor, RunError> {
    let mut tools = agent.toolset()?;
    if agent.context_policy.is_some() && tools.get(RECALL_TOOL).is_none() {
        let weak = Arc::downgrade(saver);
        let transcript = Arc::new(move || weak.upgrade().map(|s| s.messages()).unwrap_or_default());
        tools.add(lovia_host::ToolSource::AgentTools, [compaction::recall_tool(transcript)])?;
    }
    Ok(Executor::new(tools, agent.tool_settings.clone()))
}

impl Runner {
    /// A runner for `agent` asking `provider`, with no store.
    pub fn new(agent: impl Into<Arc<Agent>>, provider: Arc<dyn ModelProvider>) -> Self {
        Self { agent: agent.into(), provider, store: None }
    }

    /// Persists runs that have a session id in `store`.
    #[must_use]
    pub fn with_store(mut self, store: Arc<dyn RunStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The root agent.
    pub fn agent(&self) -> &Arc<Agent> {
        &self.agent
    }

    /// Runs until the model answers with text, with a fresh run state.
    pub async fn run(&self, input: &str) -> Result<RunResult, RunError> {
        self.run_with(Some(input), RunState::default()).await
    }

    /// Runs with `state` (ids, tenant, session, cancel token, approvals).
    /// With a session and a store, the session's transcript is continued;
    /// an unfinished run in it is first resumed: calls with results are not
    /// re-run, the others run, and pending approvals are asked again. With
    /// `input` `None`, only the resume happens.
    pub async fn run_with(&self, input: Option<&str>, state: RunState) -> Result<RunResult, RunError> {
        let emit: Emit = Arc::new(drop);
        self.drive(input.map(str::to_owned), state, emit).await
    }

    /// Starts the run on its own task and returns its handle.
    pub fn stream(&self, input: &str) -> RunHandle {
        self.stream_with(Some(input.to_owned()), RunState::default())
    }

    /// [`Runner::stream`] with a run state; see [`Runner::run_with`].
    pub fn stream_with(&self, input: Option<String>, state: RunState) -> RunHandle {
        let (tx, events) = tokio::sync::mpsc::unbounded_channel();
        let (approvals, cancel) = (state.approvals.clone(), state.cancel.clone());
        let runner = self.clone();
        let emit: Emit = Arc::new(move |event| drop(tx.send(event)));
        // The run's span is a child of the caller's context (an HTTP
        // request's `traceparent`, say), which a spawned task would lose.
        let parent = self.agent.tool_settings.telemetry.is_on().then(lovia_telemetry::Context::current);
        let task =
            tokio::spawn(
                async move { lovia_telemetry::within(parent.as_ref(), runner.drive(input, state, emit)).await },
            );
        RunHandle { events, approvals, cancel, task }
    }

    async fn drive(&self, input: Option<String>, mut state: RunState, emit: Emit) -> Result<RunResult, RunError> {
        let tenant = state.tenant.clone().unwrap_or_default();
        let stored = match (&self.store, &state.session_id) {
            (Some(store), Some(session)) => Some((store.clone(), tenant, session.clone())),
            _ => None,
        };
        let prior = match &stored {
            Some((store, tenant, session)) => store.load(tenant, session).await?,
            None => None,
        };
        let resuming = prior.as_ref().is_some_and(Checkpoint::is_unfinished);
        if state.run_id.is_empty() {
            state.run_id = match &prior {
                Some(cp) if resuming => cp.run_id.clone(),
                _ => new_id("run"),
            };
        }
        let mut checkpoint = match prior {
            Some(mut cp) => {
                if !resuming {
                    // A new run continues the session's transcript.
                    cp = Checkpoint {
                        messages: cp.messages,
                        allowed_tools: cp.allowed_tools,
                        ..Checkpoint::new(&state.run_id, &self.agent.name)
                    };
                }
                cp
            }
            None => Checkpoint::new(&state.run_id, &self.agent.name),
        };
        let mut agent = self
            .agent
            .find(&checkpoint.agent)
            .ok_or_else(|| RunError::UnknownAgent { agent: checkpoint.agent.clone(), root: self.agent.name.clone() })?;
        state.meter = Arc::new(BudgetMeter::new(agent.budget));
        if resuming {
            state.meter.add(checkpoint.usage);
            state.tool_calls.store(checkpoint.tool_calls, Ordering::SeqCst);
            // The pending calls' programs replay against what they did before.
            state.journal = lovia_host::exec::Journal::new(checkpoint.journal.iter().cloned());
        }
        // What a person allowed for the session holds in this run too.
        for tool in &checkpoint.allowed_tools {
            state.approvals.allow_tool(tool);
        }
        checkpoint.status = crate::RunStatus::Running;
        checkpoint.error = None;
        checkpoint.pending_approvals.clear();
        let saver = Arc::new(Saver {
            approvals: state.approvals.clone(),
            store: stored,
            fence: state.cancel.fence().cloned(),
            checkpoint: Mutex::new(checkpoint),
            writing: tokio::sync::Mutex::new(()),
            failed: Mutex::new(None),
        });
        // A name clash stops the run before any event (docs/semantics.md §15).
        let mut executor = run_executor(&agent, &saver)?;
        let span = trace::run_span(&agent, &*self.provider, &state, &saver.checkpoint, resuming);
        emit(RunEvent::RunStarted { agent: agent.name.clone(), run_id: state.run_id.clone() });
        let outcome = span.within(self.run_loop(input, &mut state, &mut agent, &mut executor, &saver, &emit)).await;
        trace::run_end(&span, &outcome, &state.meter.usage());
        // Record how the run ended; a store failure is the run's error.
        let mut end = saver
            .update(|cp| {
                cp.usage = state.meter.usage();
                cp.tool_calls = state.tool_calls.load(Ordering::SeqCst);
                cp.pending_approvals.clear();
                match &outcome {
                    Ok(_) => cp.status = RunStatus::Completed,
                    Err(RunError::Cancelled { .. } | RunError::BudgetExceeded { .. }) => {
                        cp.status = RunStatus::Interrupted;
                    }
                    Err(RunError::Store(_) | RunError::Aborted { .. }) => {}
                    Err(e) => {
                        cp.status = RunStatus::Failed;
                        cp.error = Some(e.to_string());
                    }
                }
            })
            .await;
        // How the run ended is written again after a failed write: lost
        // (one pooled connection the database had dropped in a restart), a
        // cancelled run read as running and the next takeover ran it on
        // (found by bench/fault-run). A fenced write is not retried: the
        // run is another replica's.
        for pause in END_WRITE_RETRIES {
            if !matches!(end, Err(StoreError::Database { .. })) {
                break;
            }
            tokio::time::sleep(pause).await;
            end = saver.update(|_| {}).await;
        }
        let outcome = match (outcome, end) {
            (Err(e), _) => Err(e),
            (Ok(_), Err(e)) => Err(RunError::Store(e)),
            (Ok(r), Ok(())) => Ok(r),
        };
        match &outcome {
            Ok(result) => emit(RunEvent::RunCompleted { output: result.output.clone() }),
            Err(error) => emit(RunEvent::RunFailed { error: error.clone() }),
        }
        outcome
    }

    async fn run_loop(
        &self,
        input: Option<String>,
        state: &mut RunState,
        agent: &mut Arc<Agent>,
        executor: &mut Executor,
        saver: &Arc<Saver>,
        emit: &Emit,
    ) -> Result<RunResult, RunError> {
        let mut turns = 0;
        let mut summary = compaction::SummaryCache::default();
        let pending = {
            let cp = saver.checkpoint.lock().unwrap_or_else(|p| p.into_inner());
            (state.turn, state.cut_off) = (cp.turn, cp.cut_off);
            cp.pending_calls.clone()
        };
        // A resumed run cancelled before it began does nothing: not its
        // pending calls, nor the answer it would end with. `lovia serve`
        // starts a run so when it resumes one whose cancel was stored while
        // its owner died (docs/replicas.md, "Faults"). A new input is saved
        // first (below), and the run stops at the top of its first turn.
        if input.is_none() && state.cancel.is_cancelled() {
            return Err(RunError::Cancelled { reason: state.cancel.reason(), messages: saver.messages() });
        }
        if !pending.is_empty() {
            // Resume: finish the interrupted turn before anything else.
            self.turn(&pending, state, agent, executor, saver, emit).await?;
        }
        // The journal is of the interrupted turn's calls only: a later turn's
        // ids (a scripted model may repeat them) start from nothing.
        state.journal = lovia_host::exec::Journal::default();
        if let Some(text) = input {
            saver.update(|cp| cp.messages.push(Message::User { content: text })).await?;
        } else if let Some(Message::Assistant { content, tool_calls }) = saver.messages().last()
            && tool_calls.is_empty()
            && pending.is_empty()
        {
            // Resumed after the final answer was saved but before the run was
            // marked ended (a replica killed or fenced in between): the answer
            // stands; asking the model again would cost a turn and change it.
            return Ok(RunResult {
                output: content.clone().unwrap_or_default(),
                messages: saver.messages(),
                turns: state.turn,
                agent: agent.name.clone(),
                usage: state.meter.usage(),
            });
        }
        loop {
            let messages = saver.messages();
            if turns >= agent.max_turns {
                return Err(RunError::MaxTurns { max: agent.max_turns, messages });
            }
            turns += 1;
            state.turn = turns;
            if state.cancel.is_cancelled() {
                return Err(RunError::Cancelled { reason: state.cancel.reason(), messages });
            }
            if let Err(exceeded) = state.meter.check(state.tool_calls.load(Ordering::SeqCst)) {
                return Err(RunError::BudgetExceeded { message: exceeded.to_string(), messages });
            }
            // Between turns, a source whose list changed (an MCP server's
            // list_changed, or its restart) gets the next turn a new table;
            // a name clash it brings ends the run (docs/semantics.md §20).
            if agent.capabilities.refresh().await {
                *executor = run_executor(agent, saver)?;
            }
            emit(RunEvent::TurnStarted { agent: agent.name.clone(), turn: turns });
            let mut request_messages = Vec::with_capacity(messages.len() + 2);
            request_messages.extend(context::system_message(agent.instructions.as_deref(), &agent.capabilities));
            let mut view = messages;
            if let Some(policy) = &agent.context_policy {
                // View-only: the checkpoint keeps every result whole.
                let specs: usize = executor
                    .tools()
                    .iter()
                    .map(|t| t.spec().parameters.to_string().len() + t.spec().description.len())
                    .sum();
                let fixed = compaction::estimate(&request_messages) + specs / 4;
                let model = agent.model.clone();
                // The summary stage asks the model: a cancel does not wait for it.
                let compacted = tokio::select! {
                    biased;
                    () = state.cancel.cancelled() => {
                        let messages = saver.messages();
                        return Err(RunError::Cancelled { reason: state.cancel.reason(), messages });
                    }
                    done = compaction::compact(policy, &mut view, fixed, &mut summary, &*self.provider, model, &state.meter) => done,
                };
                if let Some(done) = compacted {
                    emit(RunEvent::ContextCompacted {
                        reason: done.reason.to_owned(),
                        tokens_before: done.tokens_before,
                        tokens_after: done.tokens_after,
                    });
                }
            }
            request_messages.extend(view);
            // Shown on this turn only: the checkpoint above holds the transcript without it.
            request_messages.extend(context::reminders(&agent.capabilities));
            let request = ModelRequest {
                model: agent.model.clone(),
                messages: request_messages,
                tools: executor.tools().iter().map(|t| t.spec().clone()).collect(),
                settings: agent.settings.clone(),
            };
            let deltas = emit.clone();
            let on_text = move |text: &str| deltas(RunEvent::TextDelta { text: text.to_owned() });
            let span = trace::chat_span(agent, &*self.provider, &request, turns);
            let reply = tokio::select! {
                biased;
                () = state.cancel.cancelled() => {
                    span.fail("cancelled", "the run was cancelled");
                    let messages = saver.messages();
                    return Err(RunError::Cancelled { reason: state.cancel.reason(), messages });
                }
                reply = span.within(self.provider.respond(&request, &on_text)) => {
                    trace::chat_end(&span, &reply);
                    reply?
                }
            };
            span.end();
            if let Some(usage) = reply.usage {
                state.meter.add(usage);
            }
            let calls = reply.tool_calls.clone();
            // The executor sees the calls as the model sent them; the stored
            // and re-sent message carries only valid JSON objects (docs/semantics.md D11).
            let message = Message::Assistant {
                content: reply.content.clone(),
                tool_calls: calls.iter().map(wire_safe).collect(),
            };
            state.cut_off = reply.finish_reason == Some(FinishReason::Length);
            let (turn, cut_off, usage) = (turns, state.cut_off, state.meter.usage());
            saver
                .update(|cp| {
                    cp.messages.push(message.clone());
                    cp.pending_calls = calls.clone();
                    // A journal is of the pending calls' programs only.
                    cp.journal.clear();
                    cp.turn = turn;
                    cp.cut_off = cut_off;
                    cp.usage = usage;
                })
                .await?;
            emit(RunEvent::MessageCompleted { message });
            // Checked after every reply, the final one included (docs/semantics.md §7).
            if let Err(exceeded) = state.meter.check(state.tool_calls.load(Ordering::SeqCst)) {
                let mut messages = saver.messages();
                messages.extend(answer_every_call(&calls, &[], text::NOT_RUN_BUDGET));
                return Err(RunError::BudgetExceeded { message: exceeded.to_string(), messages });
            }
            if calls.is_empty() {
                emit(RunEvent::TurnEnded { agent: agent.name.clone(), turn: turns });
                return Ok(RunResult {
                    output: reply.content.unwrap_or_default(),
                    messages: saver.messages(),
                    turns,
                    agent: agent.name.clone(),
                    usage: state.meter.usage(),
                });
            }
            self.turn(&calls, state, agent, executor, saver, emit).await?;
        }
    }

    /// Runs one turn's `calls`, saves after each completion, then applies a
    /// handoff if one succeeded.
    async fn turn(
        &self,
        calls: &[ToolCall],
        state: &RunState,
        agent: &mut Arc<Agent>,
        executor: &mut Executor,
        saver: &Arc<Saver>,
        emit: &Emit,
    ) -> Result<(), RunError> {
        let sink = {
            let emit = emit.clone();
            EventSink::from_fn(move |event| emit(RunEvent::Tool(event)))
        };
        let sink = {
            let (saver, cancel) = (saver.clone(), state.cancel.clone());
            sink.keeping(move |event| {
                let change: Option<Change> = match event {
                    ToolEvent::ApprovalRequired { call, .. } => {
                        let pending = PendingApproval {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                        };
                        Some(Box::new(move |cp| cp.pending_approvals.push(pending)))
                    }
                    ToolEvent::ToolCallCompleted {
                        call, output, is_error, error_kind, parts, tool_error_kind, ..
                    } => {
                        let message = Message::Tool {
                            tool_call_id: call.id.clone(),
                            content: output.clone(),
                            is_error: *is_error,
                            error_kind: *error_kind,
                            parts: parts.clone(),
                            tool_error_kind: tool_error_kind.clone(),
                        };
                        let id = call.id.clone();
                        Some(Box::new(move |cp| {
                            cp.pending_approvals.retain(|p| p.id != id);
                            cp.pending_calls.retain(|c| c.id != id);
                            cp.journal.retain(|j| !j.is_nested_in(&id));
                            cp.messages.push(message);
                        }))
                    }
                    _ => None,
                };
                let (saver, cancel) = (saver.clone(), cancel.clone());
                Box::pin(async move {
                    let Some(change) = change else { return };
                    save_on_its_own(saver, cancel, change).await;
                })
            })
        };
        // A program's nested call is saved before the program reads it, while
        // what the turn journaled stays within MAX_JOURNAL_BYTES (counted as
        // it goes, from what a resumed turn's journal holds already).
        let sink = {
            let (saver, cancel) = (saver.clone(), state.cancel.clone());
            let held: usize = {
                let cp = saver.checkpoint.lock().unwrap_or_else(|p| p.into_inner());
                cp.journal.iter().map(JournaledCall::bytes).sum()
            };
            let held = Arc::new(std::sync::atomic::AtomicUsize::new(held));
            sink.journaling(move |call| {
                let bytes = call.bytes();
                if held.fetch_add(bytes, Ordering::SeqCst) + bytes > MAX_JOURNAL_BYTES {
                    held.fetch_sub(bytes, Ordering::SeqCst);
                    return Box::pin(std::future::ready(Err(text::journal_full(MAX_JOURNAL_BYTES))));
                }
                let (saver, cancel, call) = (saver.clone(), cancel.clone(), call.clone());
                Box::pin(async move {
                    // Only while its program's call is pending: an entry that
                    // lands after its parent's result would outlive it.
                    let keep = Box::new(move |cp: &mut Checkpoint| {
                        if cp.pending_calls.iter().any(|c| call.is_nested_in(&c.id)) {
                            cp.journal.push(call);
                        }
                    });
                    save_on_its_own(saver, cancel, keep).await;
                    Ok(())
                })
            })
        };
        let outcome = executor.run_turn(calls, state, &sink).await;
        if let Some(e) = saver.failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(RunError::Store(e));
        }
        saver.update(|cp| cp.tool_calls = state.tool_calls.load(Ordering::SeqCst)).await?;
        let results = match outcome {
            Ok(results) => results,
            Err(TurnError::Cancelled { results, .. }) => {
                let mut messages = saver.messages();
                messages.extend(fillers(calls, &results, text::RUN_CANCELLED));
                return Err(RunError::Cancelled { reason: state.cancel.reason(), messages });
            }
            Err(TurnError::BudgetExceeded { message, results }) => {
                let mut messages = saver.messages();
                messages.extend(fillers(calls, &results, text::NOT_RUN_BUDGET));
                return Err(RunError::BudgetExceeded { message, messages });
            }
            // A way of ending a turn this build does not know: the run stops
            // as cancelled, and every call id is still answered (docs/semantics.md D8).
            Err(other) => {
                let mut messages = saver.messages();
                messages.extend(fillers(calls, other.results(), text::RUN_CANCELLED));
                return Err(RunError::Cancelled { reason: other.to_string(), messages });
            }
        };
        emit(RunEvent::TurnEnded { agent: agent.name.clone(), turn: state.turn });
        // The first handoff that ran wins; later ones were rejected unrun (docs/semantics.md §8).
        let target = calls.iter().find_map(|call| {
            let tool = executor.tools().get(&call.name)?;
            let to = tool.handoff_target()?;
            results.iter().any(|r| r.call_id == call.id && !r.is_error).then(|| to.to_owned())
        });
        if let Some(to) = target
            && let Some(next) = agent.handoffs.iter().find(|a| a.name == to).cloned()
        {
            *executor = run_executor(&next, saver)?;
            emit(RunEvent::HandoffOccurred { from_agent: agent.name.clone(), to_agent: next.name.clone() });
            saver.update(|cp| cp.agent = next.name.clone()).await?;
            *agent = next;
        }
        Ok(())
    }
}

/// D8 fillers for the calls of `calls` that have no result in `results`.
fn fillers(calls: &[ToolCall], results: &[ToolResultEntry], filler: &str) -> Vec<Message> {
    calls
        .iter()
        .filter(|c| !results.iter().any(|r| r.call_id == c.id))
        .map(|c| Message::Tool {
            tool_call_id: c.id.clone(),
            content: filler.to_owned(),
            is_error: true,
            error_kind: Some(ErrorKind::Cancelled),
            parts: None,
            tool_error_kind: None,
        })
        .collect()
}

/// `call` as the transcript keeps it: arguments that are not a JSON object
/// (malformed, cut off, or another JSON type) become `{"_raw": "<text>"}`,
/// so no provider ever receives invalid JSON in a tool call
/// (docs/semantics.md D11). Empty text, which the executor reads as `{}`, is
/// stored as `{}`.
///
/// ```
/// use lovia_host::ToolCall;
/// let safe = lovia_runner::wire_safe(&ToolCall::new("c1", "t", r#"{"a": 1"#));
/// assert_eq!(safe.arguments, r#"{"_raw":"{\"a\": 1"}"#);
/// ```
pub fn wire_safe(call: &ToolCall) -> ToolCall {
    let arguments = if call.arguments.is_empty() {
        "{}".to_owned()
    } else if matches!(serde_json::from_str::<serde_json::Value>(&call.arguments), Ok(serde_json::Value::Object(_))) {
        return call.clone();
    } else {
        serde_json::json!({"_raw": call.arguments}).to_string()
    };
    ToolCall { arguments, ..call.clone() }
}

/// The tool messages that answer a turn: one per result, in completion
/// order, then `filler` for every call id left without one, in request
/// order (docs/semantics.md D8: no provider ever sees a dangling call).
pub fn answer_every_call(calls: &[ToolCall], results: &[ToolResultEntry], filler: &str) -> Vec<Message> {
    let mut out: Vec<Message> = results
        .iter()
        .map(|r| Message::Tool {
            tool_call_id: r.call_id.clone(),
            content: r.output.clone(),
            is_error: r.is_error,
            error_kind: r.error_kind,
            parts: r.parts.clone(),
            tool_error_kind: r.tool_error_kind.clone(),
        })
        .collect();
    out.extend(fillers(calls, results, filler));
    out
}

/// A fresh id: `prefix_` and 16 hex digits, 64 bits from the thread's
/// OS-seeded CSPRNG, so ids are unpredictable and collide with odds of 2^-64.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{:016x}", rand::random::<u64>())
}

/// Saves `change` on a task of its own: a write that began finishes even
/// when the call that waits for it is dropped (the run cancelled meanwhile).
/// A store failure aborts the batch and fails the run (docs/semantics.md §8).
async fn save_on_its_own(saver: Arc<Saver>, cancel: lovia_host::exec::CancelToken, change: Change) {
    let saved = tokio::spawn(async move {
        if let Err(e) = saver.update(change).await {
            saver.failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
            cancel.cancel(Some("the run store failed"));
        }
    });
    let _ = saved.await;
}
