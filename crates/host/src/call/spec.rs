//! A tool as the model sees it: its name, description, schema and settings.

use serde::{Deserialize, Serialize};

/// When the host must ask for approval before running a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApprovalMode {
    /// Runs without asking. The default.
    #[default]
    Never,
    /// Every call is approved first.
    Always,
    /// The plugin's `needs-approval` export decides per call.
    AskPlugin,
}

/// Client hints (MCP annotations); never trusted for security.
///
/// Each hint is `None` when the tool's author did not state it. A component
/// always states all four (the contract's `tool-hints` has no absent value);
/// a tool from an MCP server states what the server sent, and an MCP client
/// reads an absent hint by the protocol's defaults (`destructiveHint` is
/// true there), so an unstated hint is never turned into an explicit `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[non_exhaustive]
pub struct ToolHints {
    /// Does not change its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// May perform destructive updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// Repeating a call has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// Reaches an open world of external entities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

impl ToolHints {
    /// All four hints stated, as a component states them.
    pub fn stated(read_only: bool, destructive: bool, idempotent: bool, open_world: bool) -> Self {
        Self {
            read_only: Some(read_only),
            destructive: Some(destructive),
            idempotent: Some(idempotent),
            open_world: Some(open_world),
        }
    }
}

impl ToolSpec {
    /// The tool in OpenAI's function-calling format:
    /// `{"type":"function","function":{name,description,parameters,strict}}`.
    pub fn openai_function(&self) -> serde_json::Value {
        serde_json::json!({"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters, "strict": self.strict,
        }})
    }

    /// The tool in Anthropic's format: `{name,description,input_schema}`.
    pub fn anthropic_tool(&self) -> serde_json::Value {
        serde_json::json!({"name": self.name, "description": self.description, "input_schema": self.parameters})
    }
}

/// One tool as its plugin declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// `^[a-zA-Z0-9_-]{1,64}$`.
    pub name: String,
    /// A display title for people, beside the name (contract 0.2); at most
    /// [`MAX_TITLE_BYTES`]. Models see the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The model's guidance.
    pub description: String,
    /// JSON Schema (2020-12) of the argument object.
    pub parameters: serde_json::Value,
    /// JSON Schema of a JSON result, if declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    /// Closed schema, every argument required, unknown keys rejected.
    pub strict: bool,
    /// False: every call is an execution barrier.
    pub parallel: bool,
    /// Retries after the first attempt; `None` inherits the host default (0).
    pub retries: Option<u32>,
    /// Per-attempt timeout in ms; `None` inherits the host default (none).
    pub timeout_ms: Option<u64>,
    /// Output cap in chars; `None` inherits the host default (200,000).
    pub max_output_chars: Option<u64>,
    /// Approval mode.
    pub approval: ApprovalMode,
    /// Client hints.
    pub hints: ToolHints,
}

/// Longest tool title, in bytes. Fixed: 128.
pub const MAX_TITLE_BYTES: usize = 128;

/// Whether `name` is a valid tool name (`^[a-zA-Z0-9_-]{1,64}$`, docs/semantics.md §18).
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
