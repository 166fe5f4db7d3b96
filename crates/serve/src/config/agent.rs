//! A tenant's `agent` and `provider`: what its chats run, and on which model.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which model a tenant's chats use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ProviderConfig {
    /// `env` (default: `LOVIA_PROVIDER`, `OPENAI_API_KEY`, `OPENAI_BASE_URL`,
    /// `ANTHROPIC_API_KEY`, `LOVIA_MODEL`, as
    /// [`lovia_runner::providers::from_env`] documents; also
    /// `LOVIA_PROVIDER=scripted` with `LOVIA_SCRIPT=<file>`),
    /// `openai-chat`, `openai-responses`, `anthropic`, or `scripted` (a
    /// JSON file of replies; a conversation with *n* assistant messages gets
    /// reply *n*, so every chat replays it from the start).
    #[serde(default)]
    pub kind: ProviderChoice,
    /// The API's base URL. Default: the vendor's.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the key. Default:
    /// `OPENAI_API_KEY` or `ANTHROPIC_API_KEY`. Keys never go in this file.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The model. Default: the provider's default.
    #[serde(default)]
    pub model: Option<String>,
    /// Stream replies. Default: true.
    #[serde(default)]
    pub stream: Option<bool>,
    /// For `scripted`: the replies file, relative to this config.
    #[serde(default)]
    pub script: Option<PathBuf>,
}

impl ProviderConfig {
    /// A scripted model: the replies in the JSON file `script` (relative to
    /// the config file when it is read from one), every other field its default.
    pub fn scripted(script: impl Into<PathBuf>) -> ProviderConfig {
        ProviderConfig { kind: ProviderChoice::Scripted, script: Some(script.into()), ..ProviderConfig::default() }
    }
}

/// The provider kinds of [`ProviderConfig`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ProviderChoice {
    /// From the environment.
    #[default]
    Env,
    /// OpenAI Chat Completions.
    OpenaiChat,
    /// OpenAI Responses.
    OpenaiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Replies from a file.
    Scripted,
}

/// The agent a tenant's chats run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AgentConfig {
    /// Its name; `/api/chat`'s `agent` must match it. Default: `assistant`.
    #[serde(default = "default_agent_name")]
    pub name: String,
    /// The system message. Default: none.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Model turns per run. Default: 50.
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    /// Token, tool-call and time limits per run. Default: unconstrained.
    #[serde(default)]
    pub budget: lovia_host::exec::Budget,
    /// Whether the model may ask for several calls at once. Default: true.
    #[serde(default = "default_true")]
    pub parallel_tool_calls: bool,
    /// The model's window in tokens: each request is compacted to fit it
    /// (the stored transcript never is) and the agent gets
    /// `recall_tool_result`. Default: none, no compaction.
    #[serde(default)]
    pub context_window_tokens: Option<usize>,
    /// Whether the agent has `ask_human`: its question reaches the chat's
    /// stream as a `question` event and the console, and
    /// `POST /api/chat/answer` answers it. Default: false.
    #[serde(default)]
    pub ask_human: bool,
    /// Whether the agent has `run_code` (code mode): the model may send a
    /// JavaScript program that calls the chat's other tools, each call under
    /// the same quotas, approvals and limits as a direct one; the stream and
    /// the console show them under their program (docs/code-mode.md).
    /// Default: false.
    #[serde(default)]
    pub code_mode: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            name: default_agent_name(),
            instructions: None,
            max_turns: default_max_turns(),
            budget: lovia_host::exec::Budget::default(),
            parallel_tool_calls: true,
            context_window_tokens: None,
            ask_human: false,
            code_mode: false,
        }
    }
}

fn default_agent_name() -> String {
    "assistant".into()
}

fn default_max_turns() -> u32 {
    lovia_runner::DEFAULT_MAX_TURNS
}

fn default_true() -> bool {
    true
}
