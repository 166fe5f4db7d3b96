//! [`Tool`]: one type for every source — component tools and host-native
//! Rust tools go through the same executor with the same semantics.

use crate::approval::NeedsApproval;
use crate::args::{ArgumentValidator, SchemaError};
use crate::call::CallContext;
use crate::call::Failure;
use crate::call::Renderer;
use crate::call::{ApprovalMode, ToolHints, ToolSpec};
use crate::call::{BoxFuture, ToolOutput};
use crate::plugin::Plugin;
use crate::policy::Policy;
use crate::sandbox::SessionStore;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The body of a host-native tool: receives the validated arguments.
pub type NativeFn = Arc<dyn Fn(Value, CallContext) -> BoxFuture<'static, Result<ToolOutput, Failure>> + Send + Sync>;

#[derive(Clone)]
pub(crate) enum Body {
    Component { plugin: Plugin, session_store: Option<Arc<dyn SessionStore>> },
    Native(NativeFn),
}

/// A tool as the executor runs it: its spec, its body, and the settings the
/// host application may set over what the tool declared.
#[derive(Clone)]
pub struct Tool {
    pub(crate) spec: ToolSpec,
    pub(crate) body: Body,
    pub(crate) validator: Option<Arc<ArgumentValidator>>,
    pub(crate) approval: NeedsApproval,
    pub(crate) renderer: Option<Renderer>,
    pub(crate) policies: Vec<Arc<dyn Policy>>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) handoff: Option<String>,
    /// Whether the body gets [`CallContext::nested`] to call the run's
    /// other tools (code mode's `run_code`).
    pub(crate) calls_tools: bool,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool").field("spec", &self.spec).field("policies", &self.policies.len()).finish_non_exhaustive()
    }
}

impl Tool {
    /// Starts a host-native tool named `name`.
    ///
    /// ```
    /// use lovia_host::{Tool, ToolOutput};
    /// let shout = Tool::builder("shout")
    ///     .description("Upper-cases text.")
    ///     .parameters(serde_json::json!({
    ///         "properties": {"text": {"type": "string"}}, "required": ["text"],
    ///         "type": "object", "additionalProperties": false
    ///     }))
    ///     .invoke(|args, _ctx| async move {
    ///         Ok(ToolOutput::Text(args["text"].as_str().unwrap_or_default().to_uppercase()))
    ///     })
    ///     .expect("a valid tool");
    /// assert_eq!(shout.name(), "shout");
    /// ```
    pub fn builder(name: impl Into<String>) -> ToolBuilder {
        ToolBuilder {
            spec: ToolSpec {
                name: name.into(),
                title: None,
                description: String::new(),
                parameters: serde_json::json!({"properties": {}, "type": "object", "additionalProperties": false}),
                output_schema: None,
                strict: false,
                parallel: true,
                retries: None,
                timeout_ms: None,
                max_output_chars: None,
                approval: ApprovalMode::Never,
                hints: ToolHints::default(),
            },
            validate: true,
            calls_tools: false,
        }
    }

    /// Every tool of `plugin`, with the settings the plugin declared. Calls
    /// get no session store (the default denies).
    pub fn from_plugin(plugin: &Plugin) -> Vec<Tool> {
        Self::from_plugin_with_store(plugin, None)
    }

    /// Every tool of `plugin`; calls get `session_store`.
    pub fn from_plugin_with_store(plugin: &Plugin, session_store: Option<Arc<dyn SessionStore>>) -> Vec<Tool> {
        plugin
            .tools()
            .map(|spec| Tool {
                approval: match spec.approval {
                    ApprovalMode::Never => NeedsApproval::Never,
                    ApprovalMode::Always => NeedsApproval::Always,
                    ApprovalMode::AskPlugin => NeedsApproval::Plugin,
                },
                timeout: spec.timeout_ms.map(Duration::from_millis),
                validator: plugin.validator(&spec.name),
                spec: spec.clone(),
                body: Body::Component { plugin: plugin.clone(), session_store: session_store.clone() },
                renderer: None,
                policies: Vec::new(),
                handoff: None,
                calls_tools: false,
            })
            .collect()
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The spec shown to the model.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The plugin that runs the tool; `None` for a host-native tool. What
    /// an approver or an operator looks at: which component (its digest)
    /// with which grants and limits.
    pub fn plugin(&self) -> Option<&Plugin> {
        match &self.body {
            Body::Component { plugin, .. } => Some(plugin),
            Body::Native(_) => None,
        }
    }

    /// The warm instance that the calls of `run` share, when the tool runs
    /// one per session (`InstanceMode::Session`) and the run has a session:
    /// such calls take turns on that one instance whatever the scheduler does.
    pub(crate) fn shared_instance(&self, run: &super::RunState) -> Option<usize> {
        match &self.body {
            Body::Component { plugin, .. }
                if run.session_id.is_some() && plugin.config().instance == crate::InstanceMode::Session =>
            {
                Some(plugin.instance_key())
            }
            _ => None,
        }
    }

    /// Replaces the description the model reads. Unlike
    /// [`ToolBuilder::description`] it is not held to the 4 KiB cap: it is
    /// the host application's own text, which the caller bounds (code
    /// mode's, with the tools' declarations, is at most 60,000 characters by
    /// default).
    #[must_use]
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.spec.description = description.into();
        self
    }

    /// False makes every call an execution barrier (docs/semantics.md §8).
    #[must_use]
    pub fn with_parallel(mut self, parallel: bool) -> Self {
        self.spec.parallel = parallel;
        self
    }

    /// Retries after the first attempt; overrides the declared value.
    #[must_use]
    pub fn with_retries(mut self, retries: u32) -> Self {
        self.spec.retries = Some(retries);
        self
    }

    /// Per-attempt timeout; overrides the declared value.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self.spec.timeout_ms = Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX));
        self
    }

    /// Output cap in characters; overrides the declared value.
    #[must_use]
    pub fn with_max_output_chars(mut self, chars: u64) -> Self {
        self.spec.max_output_chars = Some(chars);
        self
    }

    /// The renderer of successful results; wins over the executor's.
    #[must_use]
    pub fn with_renderer(mut self, renderer: Renderer) -> Self {
        self.renderer = Some(renderer);
        self
    }

    /// When to ask for approval; overrides the declared mode.
    #[must_use]
    pub fn with_approval(mut self, approval: NeedsApproval) -> Self {
        self.approval = approval;
        self
    }

    /// Appends a policy; the first one added is the outermost (docs/semantics.md §14).
    #[must_use]
    pub fn with_policy(mut self, policy: Arc<dyn Policy>) -> Self {
        self.policies.push(policy);
        self
    }

    /// Marks the tool as a handoff to `target`: always a barrier, and only the
    /// first handoff of a turn runs (docs/semantics.md §8).
    #[must_use]
    pub fn as_handoff(mut self, target: impl Into<String>) -> Self {
        self.handoff = Some(target.into());
        self.spec.parallel = false;
        self
    }

    /// Whether a call of it may need approval (always, or when its plugin
    /// says so).
    pub fn may_need_approval(&self) -> bool {
        !matches!(self.approval, NeedsApproval::Never)
    }

    /// The agent this tool hands off to, if it is a handoff.
    pub fn handoff_target(&self) -> Option<&str> {
        self.handoff.as_deref()
    }

    /// Whether the tool calls the run's other tools ([`ToolBuilder::calls_tools`]).
    pub fn calls_tools(&self) -> bool {
        self.calls_tools
    }

    /// Whether calls of this tool are execution barriers.
    pub fn is_barrier(&self) -> bool {
        !self.spec.parallel || self.handoff.is_some()
    }
}

/// Why [`ToolBuilder::invoke`] refused a tool.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTool {
    /// The name is not `^[a-zA-Z0-9_-]{1,64}$`.
    #[error("invalid tool name '{name}': a name must match ^[a-zA-Z0-9_-]{{1,64}}$")]
    Name {
        /// The name given.
        name: String,
    },
    /// The description is over [`crate::plugin::MAX_DESCRIPTION_BYTES`] (4 KiB).
    #[error("tool '{name}': the description is {bytes} bytes; the limit is {limit}")]
    Description {
        /// The tool.
        name: String,
        /// Its description's size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// The parameters schema does not compile.
    #[error("tool '{name}': {source}")]
    Schema {
        /// The tool.
        name: String,
        /// Why.
        #[source]
        source: SchemaError,
    },
}

/// Builds a host-native [`Tool`].
#[derive(Debug)]
pub struct ToolBuilder {
    spec: ToolSpec,
    validate: bool,
    calls_tools: bool,
}

impl ToolBuilder {
    /// A display title for people (clients, consoles). Default: none.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.spec.title = Some(title.into());
        self
    }

    /// The model's guidance. Default: empty.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.spec.description = description.into();
        self
    }

    /// The JSON Schema of the arguments. Default: no arguments.
    #[must_use]
    pub fn parameters(mut self, schema: Value) -> Self {
        self.spec.parameters = schema;
        self
    }

    /// The JSON Schema of the tool's JSON result (MCP's `outputSchema`). A
    /// tool that declares one keeps its raw value up to its output cap, so
    /// that an MCP client gets the structured content. Default: none.
    #[must_use]
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.spec.output_schema = Some(schema);
        self
    }

    /// The client hints (MCP annotations). Default: none stated.
    #[must_use]
    pub fn hints(mut self, hints: ToolHints) -> Self {
        self.spec.hints = hints;
        self
    }

    /// Rejects unknown argument keys. Default: false (they are dropped).
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        self.spec.strict = strict;
        self
    }

    /// Gives the body [`CallContext::nested`], through which it calls the
    /// run's other tools, each as a call of its own (validated, approved,
    /// wrapped in policies, counted against the run's budget). Such a tool
    /// cannot itself be called that way. Default: false.
    #[must_use]
    pub fn calls_tools(mut self, calls_tools: bool) -> Self {
        self.calls_tools = calls_tools;
        self
    }

    /// Validates arguments against the schema in preflight. Default: true.
    /// Turn it off for tools whose schema is only advisory (as MCP tools).
    #[must_use]
    pub fn validate(mut self, validate: bool) -> Self {
        self.validate = validate;
        self
    }

    /// Finishes the tool with its body.
    pub fn invoke<F, Fut>(self, body: F) -> Result<Tool, InvalidTool>
    where
        F: Fn(Value, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, Failure>> + Send + 'static,
    {
        if !crate::call::is_valid_name(&self.spec.name) {
            return Err(InvalidTool::Name { name: self.spec.name });
        }
        // The same cap as for a plugin's tools: a model reads it every turn.
        let limit = crate::plugin::MAX_DESCRIPTION_BYTES;
        if self.spec.description.len() > limit {
            return Err(InvalidTool::Description { name: self.spec.name, bytes: self.spec.description.len(), limit });
        }
        let validator = if self.validate {
            let validator = ArgumentValidator::new(&self.spec.name, &self.spec.parameters, self.spec.strict)
                .map_err(|source| InvalidTool::Schema { name: self.spec.name.clone(), source })?;
            Some(Arc::new(validator))
        } else {
            None
        };
        let body: NativeFn = Arc::new(move |args, ctx| Box::pin(body(args, ctx)));
        Ok(Tool {
            spec: self.spec,
            body: Body::Native(body),
            validator,
            approval: NeedsApproval::Never,
            renderer: None,
            policies: Vec::new(),
            timeout: None,
            handoff: None,
            calls_tools: self.calls_tools,
        })
    }
}
