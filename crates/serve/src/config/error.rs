//! Why a config is refused.

use std::path::PathBuf;

/// Why a config was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TOML is malformed or has unknown keys.
    #[error("{path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the key.
        reason: String,
    },
    /// A setting breaks one of its rules ([`ServeConfig::resolve`](super::ServeConfig::resolve)).
    #[error("{path}: {source}")]
    Rule {
        /// The file.
        path: PathBuf,
        /// Which setting, and the rule.
        source: ConfigRuleError,
    },
}

/// A setting of the serve config that breaks one of its rules: which one,
/// whose (a tenant's, or the server's), and why. `Display` is the message
/// `lovia serve` prints after the file's path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
#[error("{message}")]
pub struct ConfigRuleError {
    /// The setting, as its key is written under `[[tenants]]` or at the top
    /// level: `compile_timeout_secs`, `web.allow`, `plugins`.
    pub setting: &'static str,
    /// The tenant whose setting it is; `None` for the server's own.
    pub tenant: Option<String>,
    /// The rule, as printed.
    message: String,
    /// The error beneath it: a plugin entry's or an MCP server's.
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ConfigRuleError {
    pub(super) fn caused_by(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }
}

/// The error of `setting` (of `tenant`, if a tenant's) breaking a rule.
pub(super) fn rule(setting: &'static str, tenant: Option<&str>, message: impl Into<String>) -> ConfigRuleError {
    ConfigRuleError { setting, tenant: tenant.map(str::to_owned), message: message.into(), source: None }
}
