//! Model providers over HTTP: OpenAI Chat Completions, OpenAI Responses and
//! Anthropic Messages, each streaming or not, with retries. Configure them
//! in code with [`ProviderOptions`] or from the environment with
//! [`from_env`].

mod anthropic;
mod http;
mod openai_chat;
mod openai_responses;
mod sse;

pub use anthropic::{ANTHROPIC_VERSION, Anthropic, DEFAULT_MAX_TOKENS};
pub use http::RetryPolicy;
pub use openai_chat::OpenAiChat;
pub use openai_responses::OpenAiResponses;

use super::provider::{ModelProvider, ProviderError};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// The largest non-streamed response body read: 16 MiB.
pub(crate) const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// The default OpenAI model.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4.1-mini";
/// The default Anthropic model.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";

/// Which wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions (`/chat/completions`).
    OpenaiChat,
    /// OpenAI Responses (`/responses`).
    OpenaiResponses,
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
}

/// Where and how to reach a model.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ProviderOptions {
    /// The API's base URL, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// The key; `None` sends no credentials (for local servers).
    pub api_key: Option<String>,
    /// The model when the agent names none.
    pub model: String,
    /// Stream replies (text deltas as they come). Default: true.
    pub stream: bool,
    /// Retries on 429, 5xx and failed connections. Default: [`RetryPolicy::default`].
    pub retry: RetryPolicy,
    /// How long one attempt may take to answer with its headers. Default: 120 s.
    pub timeout: Duration,
}

impl ProviderOptions {
    /// Options for `base_url` and `model` with the defaults.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            stream: true,
            retry: RetryPolicy::default(),
            timeout: Duration::from_secs(120),
        }
    }
}

/// The provider of `kind` with `options`.
pub fn build(kind: ProviderKind, options: ProviderOptions) -> Arc<dyn ModelProvider> {
    match kind {
        ProviderKind::OpenaiChat => Arc::new(OpenAiChat::new(options)),
        ProviderKind::OpenaiResponses => Arc::new(OpenAiResponses::new(options)),
        ProviderKind::Anthropic => Arc::new(Anthropic::new(options)),
    }
}

/// The provider the environment configures, the way the vendors' own SDKs
/// read it:
///
/// - `LOVIA_PROVIDER`: `openai-chat`, `openai-responses` or `anthropic`.
///   Default: `anthropic` when only `ANTHROPIC_API_KEY` is set, else `openai-chat`.
/// - `OPENAI_API_KEY`, `OPENAI_BASE_URL` (default `https://api.openai.com/v1`).
/// - `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`).
/// - `LOVIA_MODEL`: the model. Default: `gpt-4.1-mini` or `claude-sonnet-4-5`.
/// - `LOVIA_STREAM=0` turns streaming off.
///
/// Fails when no key and no base URL are set for the chosen provider: a
/// request without either could only be refused.
pub fn from_env() -> Result<(ProviderKind, Arc<dyn ModelProvider>), ProviderError> {
    from_vars(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
}

/// [`from_env`] over any variable lookup (for tests and config files).
pub fn from_vars(
    var: impl Fn(&str) -> Option<String>,
) -> Result<(ProviderKind, Arc<dyn ModelProvider>), ProviderError> {
    let kind = match var("LOVIA_PROVIDER").as_deref() {
        Some("openai-chat" | "openai") => ProviderKind::OpenaiChat,
        Some("openai-responses") => ProviderKind::OpenaiResponses,
        Some("anthropic") => ProviderKind::Anthropic,
        Some(other) => {
            return Err(ProviderError::new(
                "config",
                format!("LOVIA_PROVIDER={other:?} is not one of openai-chat, openai-responses, anthropic"),
            ));
        }
        None if var("ANTHROPIC_API_KEY").is_some() && var("OPENAI_API_KEY").is_none() => ProviderKind::Anthropic,
        None => ProviderKind::OpenaiChat,
    };
    let (key_var, url_var, default_url, default_model) = match kind {
        ProviderKind::Anthropic => {
            ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "https://api.anthropic.com", DEFAULT_ANTHROPIC_MODEL)
        }
        _ => ("OPENAI_API_KEY", "OPENAI_BASE_URL", "https://api.openai.com/v1", DEFAULT_OPENAI_MODEL),
    };
    let api_key = var(key_var);
    let base_url = var(url_var);
    if api_key.is_none() && base_url.is_none() {
        return Err(ProviderError::new(
            "config",
            format!("no model configured: set {key_var} (or {url_var} for a local server)"),
        ));
    }
    let mut options = ProviderOptions::new(
        base_url.unwrap_or_else(|| default_url.to_owned()),
        var("LOVIA_MODEL").unwrap_or_else(|| default_model.to_owned()),
    );
    options.api_key = api_key;
    options.stream = var("LOVIA_STREAM").is_none_or(|v| v != "0");
    Ok((kind, build(kind, options)))
}
