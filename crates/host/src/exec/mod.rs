//! One model turn's tool calls with the full semantics of docs/semantics.md
//! (§3–§16 and its decisions): preflight in request order, barrier scheduling,
//! attempts with timeouts, retries and policies, rendering, truncation,
//! approvals, cancellation, budget and events.

mod attempt;
mod budget;
mod complete;
mod event;
mod journal;
mod nested;
mod preflight;
mod schedule;
mod tool;
mod toolset;
mod trace;

pub use crate::call::CancelToken;
pub use budget::{Budget, BudgetExceeded, BudgetMeter, Usage};
pub use event::{EventSink, ToolEvent};
pub use journal::{Journal, JournaledCall};
pub use tool::{InvalidTool, NativeFn, Tool, ToolBuilder};
pub use toolset::{NameConflict, ToolSource, Toolset};

use crate::approval::{ApprovalChannel, ApprovalHandler};
use crate::call::{ErrorKind, Renderer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// A call the model requested.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The model's id for the call.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The raw argument text (may be empty, malformed, or not an object).
    #[serde(default)]
    pub arguments: String,
}

impl ToolCall {
    /// A call of `name` with id `id` and the raw `arguments` text.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self { id: id.into(), name: name.into(), arguments: arguments.into() }
    }
}

/// One terminal outcome, as the transcript records it (docs/semantics.md §1).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResultEntry {
    /// The call it answers.
    pub call_id: String,
    /// The string the model sees.
    pub output: String,
    /// The retained value: the result on success, the error text after an
    /// execution error; `None` for rejections, truncated outputs and outputs
    /// over 16,000 characters.
    pub raw: Option<Value>,
    /// The content parts of a rich result (contract 0.2); `output` is their
    /// projection. `None` for every other result, and when the projection
    /// was truncated (the entry then degrades to text, docs/semantics.md §12).
    pub parts: Option<Vec<crate::call::ContentPart>>,
    /// The tool's own name for its failure, such as `ConnectError`
    /// (contract 0.2: `tool-error.kind`), when it gave a valid one.
    pub tool_error_kind: Option<String>,
    /// Whether it is an error result.
    pub is_error: bool,
    /// Why it is an error result; `None` for a successful one.
    pub error_kind: Option<ErrorKind>,
}

/// Agent-level settings of the executor. Every field documents its default.
#[derive(Clone)]
#[non_exhaustive]
pub struct ExecSettings {
    /// The agent's name, given to tools. Default: `"assistant"`.
    pub agent: String,
    /// Retries for tools that declare none. Default: 0.
    pub default_retries: u32,
    /// Per-attempt timeout for tools that declare none. Default: none.
    pub default_timeout: Option<Duration>,
    /// Output cap for tools that declare none. Default: 200,000 characters;
    /// `None` is unlimited.
    pub max_output_chars: Option<u64>,
    /// The agent's renderer, used when a tool has none. Default: none.
    pub renderer: Option<Renderer>,
    /// Decides approvals the consumer left undecided. Default: none, so
    /// undecided calls are denied.
    pub approval_handler: Option<Arc<dyn ApprovalHandler>>,
    /// Requested calls allowed per run (rejected calls count). Default: none.
    /// Checked with the run's other limits in [`RunState::meter`].
    pub max_tool_calls: Option<u64>,
    /// Where the spans of calls go (docs/telemetry.md). Default: off.
    pub telemetry: lovia_telemetry::Telemetry,
}

crate::setters::setters!(ExecSettings {
    with_agent => agent: String,
    with_default_retries => default_retries: u32,
    with_default_timeout => default_timeout: Option<Duration>,
    with_max_output_chars => max_output_chars: Option<u64>,
    with_renderer => renderer: Option<Renderer>,
    with_approval_handler => approval_handler: Option<Arc<dyn ApprovalHandler>>,
    with_max_tool_calls => max_tool_calls: Option<u64>,
    with_telemetry => telemetry: lovia_telemetry::Telemetry,
});

impl Default for ExecSettings {
    fn default() -> Self {
        Self {
            agent: "assistant".into(),
            default_retries: 0,
            default_timeout: None,
            max_output_chars: Some(crate::call::DEFAULT_MAX_OUTPUT_CHARS),
            renderer: None,
            approval_handler: None,
            max_tool_calls: None,
            telemetry: lovia_telemetry::Telemetry::off(),
        }
    }
}

impl std::fmt::Debug for ExecSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecSettings")
            .field("agent", &self.agent)
            .field("default_retries", &self.default_retries)
            .field("default_timeout", &self.default_timeout)
            .field("max_output_chars", &self.max_output_chars)
            .field("max_tool_calls", &self.max_tool_calls)
            .field("telemetry", &self.telemetry)
            .finish_non_exhaustive()
    }
}

/// The state of one run that outlives its turns.
#[derive(Debug, Clone, Default)]
pub struct RunState {
    /// The run's id.
    pub run_id: String,
    /// The session, if any.
    pub session_id: Option<String>,
    /// The tenant, for per-tenant limits.
    pub tenant: Option<String>,
    /// The current 1-based turn.
    pub turn: u32,
    /// The cancel token.
    pub cancel: CancelToken,
    /// Pending approvals and out-of-band decisions.
    pub approvals: ApprovalChannel,
    /// Tool calls requested so far (for `max_tool_calls`).
    pub tool_calls: Arc<AtomicU64>,
    /// JSON values granted to tools, by key.
    pub dependencies: Arc<HashMap<String, String>>,
    /// Tokens and time spent, against the run's token and time limits.
    /// Default: unconstrained.
    pub meter: Arc<BudgetMeter>,
    /// The model's reply that asked for this turn's calls was cut off at its
    /// output token limit (`finish_reason=length`): argument text that does
    /// not parse is reported as incomplete (docs/semantics.md §3).
    pub cut_off: bool,
    /// The nested calls a resumed run's programs made before their host
    /// stopped: a program replayed from its start is answered from it
    /// (docs/code-mode.md, "Resumed programs"). Default: empty.
    pub journal: Journal,
}

/// Why a turn ended early. Results surfaced before the end are kept.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TurnError {
    /// The run was cancelled (token, or a tool's `cancel-run`).
    #[error("{reason}")]
    Cancelled {
        /// The reason.
        reason: String,
        /// Results recorded before the cancellation, in completion order.
        results: Vec<ToolResultEntry>,
    },
    /// The run's tool-call budget tripped in preflight; calls already in flight finished.
    #[error("{message}")]
    BudgetExceeded {
        /// `tool call count N exceeds budget M`.
        message: String,
        /// Results recorded, in completion order.
        results: Vec<ToolResultEntry>,
    },
}

impl TurnError {
    /// The results recorded before the turn ended, in completion order.
    pub fn results(&self) -> &[ToolResultEntry] {
        match self {
            TurnError::Cancelled { results, .. } | TurnError::BudgetExceeded { results, .. } => results,
        }
    }
}

/// Runs turns of tool calls against a [`Toolset`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Executor {
    pub(crate) tools: Arc<Toolset>,
    pub(crate) settings: Arc<ExecSettings>,
}

impl Executor {
    /// An executor over `tools` with `settings`.
    pub fn new(tools: Toolset, settings: ExecSettings) -> Self {
        Self { tools: Arc::new(tools), settings: Arc::new(settings) }
    }

    /// The tools.
    pub fn tools(&self) -> &Toolset {
        &self.tools
    }

    /// The settings.
    pub fn settings(&self) -> &ExecSettings {
        &self.settings
    }

    /// Runs one turn's `calls` (docs/semantics.md §8) and returns their results in
    /// completion order. Events go to `events`.
    pub async fn run_turn(
        &self,
        calls: &[ToolCall],
        run: &RunState,
        events: &EventSink,
    ) -> Result<Vec<ToolResultEntry>, TurnError> {
        schedule::run_turn(self, calls, run, events).await
    }

    /// Runs one call as a turn of its own, under every rule a turn applies
    /// (validation, approval, policies, retries, timeout, rendering,
    /// truncation), and returns its result. This is the one way to run a
    /// single call: `lovia call`, `lovia serve`'s call route, `lovia mcp` and
    /// code mode's nested calls all go through it. An error means the call
    /// left no result of its own: the run was cancelled (by the token, or by
    /// the tool's `cancel-run`) or its tool-call budget was spent.
    pub async fn call(
        &self,
        call: &ToolCall,
        run: &RunState,
        events: &EventSink,
    ) -> Result<ToolResultEntry, TurnError> {
        let results = self.run_turn(std::slice::from_ref(call), run, events).await?;
        match results.into_iter().find(|r| r.call_id == call.id) {
            Some(entry) => Ok(entry),
            // Every call that is not cancelled records one result (docs/semantics.md §1).
            None => Err(TurnError::Cancelled { reason: run.cancel.reason(), results: Vec::new() }),
        }
    }

    /// Runs tool `name` with the argument text `arguments` (a JSON object),
    /// as [`Executor::call`] does, in a run of its own with no event
    /// consumer: a call that needs approval goes to
    /// [`ExecSettings::approval_handler`], and is denied without one.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use lovia_host::{ExecSettings, Executor, Host, HostConfig, Tool, ToolSource, Toolset};
    ///
    /// let plugin = Host::new(HostConfig::default())?.load_file("docs.wasm").await?;
    /// let tools = Toolset::new().with(ToolSource::Plugin, Tool::from_plugin(&plugin))?;
    /// let exec = Executor::new(tools, ExecSettings::default());
    /// let result = exec.call_tool("search_docs", r#"{"query": "timeouts"}"#).await?;
    /// println!("{}", result.output);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_tool(&self, name: &str, arguments: &str) -> Result<ToolResultEntry, TurnError> {
        let call = ToolCall::new("call_1", name, arguments);
        self.call(&call, &RunState::default(), &EventSink::none()).await
    }
}
