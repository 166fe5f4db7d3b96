//! [`Agent`]: the immutable configuration of a run, and the tools the runner
//! derives from agents: handoffs (`transfer_to_<slug>`) and agents as tools
//! (`ask_<slug>`), named per docs/semantics.md §15.

use super::provider::{ModelProvider, ModelSettings};
use super::{RunError, Runner};
use lovia_host::Failure;
use lovia_host::exec::{Budget, ExecSettings, RunState};
use lovia_host::plugin::Plugin;
use lovia_host::{Capability, Composition, NameConflict, ToolSource, Toolset};
use lovia_host::{Tool, ToolOutput};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The run's turn limit unless the agent sets one.
pub const DEFAULT_MAX_TURNS: u32 = 50;

/// The longest tool name providers accept.
const MAX_TOOL_NAME: usize = 64;

/// An agent: immutable configuration of a run. Build it with
/// [`Agent::new`] and set the public fields; share it as `Arc<Agent>`.
///
/// ```
/// use lovia_runner::Agent;
/// use std::sync::Arc;
/// let billing = Arc::new(Agent::new("Billing desk"));
/// let mut triage = Agent::new("triage");
/// triage.instructions = Some("Route the user.".into());
/// triage.handoffs.push(billing);
/// let tools = triage.toolset().expect("no name clash");
/// assert!(tools.get("transfer_to_billing_desk").is_some());
/// ```
#[derive(Clone, Debug)]
pub struct Agent {
    /// Its name (tools see it as the requesting agent).
    pub name: String,
    /// The system message, if any. Default: none.
    pub instructions: Option<String>,
    /// The model to ask. Default: the provider's default model.
    pub model: Option<String>,
    /// Model settings, `parallel_tool_calls` included.
    pub settings: ModelSettings,
    /// Tools the application listed (source `agent.tools`), first in the
    /// table. Default: none.
    pub tools: Vec<Tool>,
    /// Everything else the agent is given, one capability each: plugins
    /// ([`Agent::with_plugin`]), the workspace (`Agent::with_workspace`),
    /// MCP servers (`lovia_mcp::source::McpSource`, whose list changes are
    /// followed between turns), the web tools, `ask_human`, code mode. Each
    /// one's tools join the table in its source's place, its section joins
    /// the system message after the agent's instructions (in the order
    /// given, the plugins' last), and its reminder follows the transcript
    /// on each turn without being stored (docs/architecture.md). Default:
    /// none.
    pub capabilities: Composition,
    /// Agents this one may hand the conversation to. Default: none.
    pub handoffs: Vec<Arc<Agent>>,
    /// Tool defaults: retries, timeout, output cap (200,000 characters),
    /// renderer, approval handler. Default: [`ExecSettings::default`].
    pub tool_settings: ExecSettings,
    /// Token, tool-call and time limits. Default: unconstrained.
    pub budget: Budget,
    /// Model turns before the run fails. Default: 50.
    pub max_turns: u32,
    /// Keeps each request within the model's window, changing only what
    /// the request sends, and adds `recall_tool_result` (unless a tool of
    /// that name exists). Default: none, every request sends the whole
    /// transcript.
    pub context_policy: Option<crate::ContextPolicy>,
}

impl Agent {
    /// An agent named `name` with the defaults.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        Self {
            tool_settings: ExecSettings::default().with_agent(name.clone()),
            name,
            instructions: None,
            model: None,
            settings: ModelSettings::default(),
            tools: Vec::new(),
            capabilities: Composition::new(),
            handoffs: Vec::new(),
            budget: Budget::default(),
            max_turns: DEFAULT_MAX_TURNS,
            context_policy: None,
        }
    }

    /// Gives the agent `plugin`: its tools (source `plugin`) and its
    /// instructions. Builder style.
    #[must_use]
    pub fn with_plugin(mut self, plugin: &Plugin) -> Self {
        self.capabilities.push(Arc::new(plugin.clone()));
        self
    }

    /// Gives the agent `capability`, after those it has. Builder style.
    #[must_use]
    pub fn with_capability(mut self, capability: Arc<dyn Capability>) -> Self {
        self.capabilities.push(capability);
        self
    }

    /// Gives the agent `workspace`: its tools after the plugins' (the
    /// shell's only when the kernel can confine it or the workspace chose
    /// `shell_sandbox = "off"`), its `## Workspace` section after the
    /// instructions (first when it is the first capability given), and
    /// each turn the reminder of its background processes. Builder style.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), lovia_workspace::ConfigError> {
    /// use lovia_runner::Agent;
    /// let workspace = lovia_workspace::Workspace::builder("/srv/project").build()?;
    /// let agent = Agent::new("coder").with_workspace(&workspace);
    /// assert!(agent.toolset().is_ok());
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "workspace")]
    #[must_use]
    pub fn with_workspace(self, workspace: &lovia_workspace::Workspace) -> Self {
        self.with_capability(Arc::new(workspace.clone()))
    }

    /// The tool table of a run led by this agent, in the spec's order:
    /// agent tools, then the capabilities' tools by source (the host's
    /// single tools, plugin tools, workspace tools, MCP servers' current
    /// tools), then one handoff tool per target.
    pub fn toolset(&self) -> Result<Toolset, NameConflict> {
        let mut set = Toolset::new();
        set.add(ToolSource::AgentTools, self.tools.iter().cloned())?;
        self.capabilities.add_to(&mut set)?;
        set.add(ToolSource::Handoff, self.handoffs.iter().map(|a| handoff_tool(a)))?;
        Ok(set)
    }

    /// The agent named `name`: this one or one reachable by handoffs.
    pub fn find(self: &Arc<Self>, name: &str) -> Option<Arc<Agent>> {
        let mut seen = Vec::new();
        let mut todo = vec![self.clone()];
        while let Some(agent) = todo.pop() {
            if agent.name == name {
                return Some(agent);
            }
            if seen.contains(&agent.name) {
                continue;
            }
            seen.push(agent.name.clone());
            todo.extend(agent.handoffs.iter().cloned());
        }
        None
    }

    /// This agent as a tool `ask_<slug>` of another agent: each call runs a
    /// sub-run with `provider` and this agent's own budget, and answers with
    /// its output. A sub-run that exceeds its budget, hits max_turns or
    /// fails at its provider is an error result for the parent; a cancelled
    /// sub-run cancels the parent (docs/semantics.md §6, §7).
    pub fn as_tool(self: &Arc<Self>, provider: Arc<dyn ModelProvider>, description: impl Into<String>) -> Tool {
        let agent = self.clone();
        let name = tool_name("ask_", &self.name);
        Tool::builder(name)
            .description(description)
            .parameters(serde_json::json!({
                "type": "object",
                "properties": {"input": {"type": "string", "description": "What to ask."}},
                "required": ["input"],
                "additionalProperties": false
            }))
            .invoke(move |args, ctx| {
                let runner = Runner::new(agent.clone(), provider.clone());
                async move {
                    let input = args["input"].as_str().unwrap_or_default().to_owned();
                    // The sub-run is cancelled with the parent's run (a child token).
                    let state = RunState {
                        run_id: format!("{}/{}", ctx.run_id, ctx.call_id),
                        tenant: ctx.tenant.clone(),
                        dependencies: ctx.dependencies.clone(),
                        cancel: ctx.cancel.child(),
                        ..RunState::default()
                    };
                    match runner.run_with(Some(&input), state).await {
                        Ok(result) => Ok(ToolOutput::Text(result.output)),
                        Err(RunError::Cancelled { reason, .. }) => Err(Failure::RunCancelled(reason)),
                        Err(RunError::BudgetExceeded { message, .. }) => Err(Failure::BudgetExceeded(message)),
                        Err(other) => Err(Failure::Tool { message: other.to_string(), hint: None, kind: None }),
                    }
                }
            })
            .unwrap_or_else(|e| unreachable_tool(&e))
    }
}

/// The handoff tool for `target`: a barrier whose result reads
/// `Transferred to <target>` plus ` (<reason>)` when one is given.
fn handoff_tool(target: &Agent) -> Tool {
    let to = target.name.clone();
    Tool::builder(tool_name("transfer_to_", &target.name))
        .description(format!("Hand the conversation over to the agent '{}'.", target.name))
        .parameters(serde_json::json!({
            "type": "object",
            "properties": {"reason": {"type": "string", "description": "Why, in a few words."}},
            "additionalProperties": false
        }))
        .invoke(move |args, _ctx| {
            let text = match args.get("reason").and_then(|r| r.as_str()).filter(|r| !r.is_empty()) {
                Some(reason) => format!("Transferred to {to} ({reason})"),
                None => format!("Transferred to {to}"),
            };
            async move { Ok(ToolOutput::Text(text)) }
        })
        .unwrap_or_else(|e| unreachable_tool(&e))
        .as_handoff(target.name.clone())
}

/// The builder refuses only invalid names and schemas; ours are valid by
/// construction, so this is a bug if ever reached.
fn unreachable_tool(error: &lovia_host::InvalidTool) -> Tool {
    unreachable!("a derived tool is always valid: {error}")
}

/// `prefix` + the slug of `name` (docs/semantics.md §15): lower-cased, ASCII
/// alphanumerics and `_` kept, space and `-` mapped to `_`, the rest
/// dropped; empty becomes `agent` (with a digest when `name` was not
/// empty); cut with a digest suffix to fit 64 characters.
///
/// ```
/// use lovia_runner::tool_name;
/// assert_eq!(tool_name("transfer_to_", "Billing Desk"), "transfer_to_billing_desk");
/// assert!(tool_name("ask_", "日本").starts_with("ask_agent_"));
/// assert_eq!(tool_name("ask_", &"x".repeat(100)).len(), 64);
/// ```
pub fn tool_name(prefix: &str, name: &str) -> String {
    let digest = || hex::encode(&Sha256::digest(name.as_bytes())[..4]);
    let mut slug: String = name
        .chars()
        .filter_map(|c| match c {
            ' ' | '-' => Some('_'),
            c if c.is_ascii_alphanumeric() || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect();
    if slug.is_empty() {
        slug = if name.is_empty() { "agent".into() } else { format!("agent_{}", digest()) };
    }
    let mut full = format!("{prefix}{slug}");
    if full.len() > MAX_TOOL_NAME {
        full.truncate(MAX_TOOL_NAME - 9);
        full.push('_');
        full.push_str(&digest());
    }
    full
}
