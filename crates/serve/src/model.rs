//! Which model a tenant's chats ask, built once from its config.

use super::config::{ProviderChoice, ProviderConfig};
use lovia_runner::providers::{self, ProviderKind, ProviderOptions};
use lovia_runner::{ModelProvider, ScriptedProvider};
use std::path::PathBuf;
use std::sync::Arc;

/// A tenant's model.
pub(crate) enum TenantModel {
    /// One provider shared by every run.
    Shared(Arc<dyn ModelProvider>),
    /// A script: each conversation gets the reply for its position.
    Script(Arc<ScriptedProvider>),
    /// None configured: chats answer 503 with this reason.
    Missing(String),
}

impl TenantModel {
    /// The model `config` names. A script that cannot be read or parsed is
    /// an error (the service does not start); a model that is not
    /// configured at all is [`TenantModel::Missing`].
    pub(crate) fn from_config(config: &ProviderConfig) -> Result<TenantModel, String> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let kind = match config.kind {
            ProviderChoice::Env if env("LOVIA_PROVIDER").as_deref() == Some("scripted") => {
                return match env("LOVIA_SCRIPT") {
                    Some(path) => Self::script(&PathBuf::from(path)).map_err(|e| format!("LOVIA_SCRIPT: {e}")),
                    None => Ok(TenantModel::Missing(
                        "LOVIA_PROVIDER=scripted needs LOVIA_SCRIPT (a JSON file of replies)".into(),
                    )),
                };
            }
            ProviderChoice::Env => {
                return Ok(match providers::from_env() {
                    Ok((_, provider)) => TenantModel::Shared(provider),
                    Err(e) => TenantModel::Missing(e.message),
                });
            }
            ProviderChoice::Scripted => {
                return match &config.script {
                    Some(path) => Self::script(path).map_err(|e| format!("[tenants.provider] script: {e}")),
                    None => Ok(TenantModel::Missing("a scripted provider needs `script`".into())),
                };
            }
            ProviderChoice::OpenaiChat => ProviderKind::OpenaiChat,
            ProviderChoice::OpenaiResponses => ProviderKind::OpenaiResponses,
            ProviderChoice::Anthropic => ProviderKind::Anthropic,
        };
        let (key_var, url, model) = match kind {
            ProviderKind::Anthropic => {
                ("ANTHROPIC_API_KEY", "https://api.anthropic.com", providers::DEFAULT_ANTHROPIC_MODEL)
            }
            _ => ("OPENAI_API_KEY", "https://api.openai.com/v1", providers::DEFAULT_OPENAI_MODEL),
        };
        let mut options = ProviderOptions::new(
            config.base_url.clone().unwrap_or_else(|| url.to_owned()),
            config.model.clone().unwrap_or_else(|| model.to_owned()),
        );
        options.api_key = env(config.api_key_env.as_deref().unwrap_or(key_var));
        options.stream = config.stream.unwrap_or(true);
        Ok(TenantModel::Shared(providers::build(kind, options)))
    }

    fn script(path: &std::path::Path) -> Result<TenantModel, String> {
        let provider = ScriptedProvider::from_file(path).map_err(|e| e.message)?;
        Ok(TenantModel::Script(Arc::new(provider)))
    }

    /// The provider for one run.
    pub(crate) fn provider(&self) -> Result<Arc<dyn ModelProvider>, String> {
        match self {
            TenantModel::Shared(p) => Ok(p.clone()),
            TenantModel::Script(p) => Ok(p.clone()),
            TenantModel::Missing(reason) => Err(reason.clone()),
        }
    }
}
