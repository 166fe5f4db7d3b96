//! `lovia serve`'s TOML config. Unknown keys are an error.
//!
//! ```toml
//! listen = "127.0.0.1:8700"          # default
//!
//! [[tenants]]
//! name = "acme"
//! # SHA-256 (hex) of each API key; `lovia serve --hash-key` prints one.
//! api_keys = ["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]
//! max_concurrent_calls = 16            # default; more at once get 429
//! calls_per_minute = 600               # default; more get 429
//!
//! [[tenants.plugins]]
//! path = "target/plugins/orders.wasm"  # relative to this file
//! instance = "fresh"
//! grants = { env = ["LANG"] }
//! limits = { memory_mib = 32 }
//! ```

use crate::plugin::InstanceMode;
use crate::plugin::config::{LimitOverrides, PluginConfig};
use crate::sandbox::Grants;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The whole service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// Where to listen. Default: `127.0.0.1:8700` (loopback only).
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// The tenants; each sees only its own tools.
    pub tenants: Vec<TenantConfig>,
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8700))
}

/// One tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Its name (in metrics and logs; never in another tenant's responses).
    pub name: String,
    /// Lower-case hex SHA-256 of each API key that acts as this tenant.
    pub api_keys: Vec<String>,
    /// Calls running at once; beyond, 429. Default: 16.
    #[serde(default = "default_concurrent")]
    pub max_concurrent_calls: u32,
    /// Calls started per minute; beyond, 429. Default: 600.
    #[serde(default = "default_per_minute")]
    pub calls_per_minute: u32,
    /// Its plugins.
    #[serde(default)]
    pub plugins: Vec<PluginEntry>,
}

fn default_concurrent() -> u32 {
    16
}

fn default_per_minute() -> u32 {
    600
}

/// One plugin of a tenant: its path plus the fields of a [`PluginConfig`].
/// (Spelled out rather than `#[serde(flatten)]`ed: serde cannot deny
/// unknown keys through a flattened struct.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginEntry {
    /// The `.wasm` component (relative to the config file).
    pub path: PathBuf,
    /// Fresh instance per call (default) or one per session.
    #[serde(default)]
    pub instance: InstanceMode,
    /// What it may touch. Default: nothing.
    #[serde(default)]
    pub grants: Grants,
    /// Limits over the host's.
    #[serde(default)]
    pub limits: LimitOverrides,
}

/// Why a config was refused.
#[derive(Debug, thiserror::Error)]
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
}

impl ServeConfig {
    /// Reads and checks the config at `path`; relative plugin paths and
    /// directory grants are resolved against its directory.
    pub fn load(path: &Path) -> Result<ServeConfig, ServeConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ServeConfigError::Read { path: path.to_owned(), source })?;
        let invalid = |reason: String| ServeConfigError::Invalid { path: path.to_owned(), reason };
        let mut config: ServeConfig = toml::from_str(&text).map_err(|e| invalid(e.message().to_owned()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.resolve(base).map_err(invalid)?;
        Ok(config)
    }

    /// Checks names, keys and quotas, and resolves relative paths against `base`.
    pub fn resolve(&mut self, base: &Path) -> Result<(), String> {
        let mut names = std::collections::HashSet::new();
        let mut keys = std::collections::HashSet::new();
        for tenant in &mut self.tenants {
            let valid = |c: char| c.is_ascii_alphanumeric() || "_.-".contains(c);
            if tenant.name.is_empty() || !tenant.name.chars().all(valid) {
                return Err(format!("tenant name {:?} must be letters, digits, _ . or -", tenant.name));
            }
            if !names.insert(tenant.name.clone()) {
                return Err(format!("tenant name {:?} is used twice", tenant.name));
            }
            if tenant.api_keys.is_empty() {
                return Err(format!("tenant {:?} has no api_keys", tenant.name));
            }
            for key in &tenant.api_keys {
                if key.len() != 64 || !key.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                    return Err(format!(
                        "tenant {:?}: api_keys hold the lower-case hex SHA-256 of a key (64 characters); `lovia serve --hash-key` prints one",
                        tenant.name
                    ));
                }
                if !keys.insert(key.clone()) {
                    return Err(format!("tenant {:?}: an API key is listed twice", tenant.name));
                }
            }
            if tenant.max_concurrent_calls == 0 || tenant.calls_per_minute == 0 {
                return Err(format!("tenant {:?}: quotas must be at least 1", tenant.name));
            }
            for plugin in &mut tenant.plugins {
                if plugin.path.is_relative() {
                    plugin.path = base.join(&plugin.path);
                }
                let mut config = plugin.plugin_config();
                config.resolve(base)?;
                plugin.grants = config.grants;
            }
        }
        Ok(())
    }
}

impl PluginEntry {
    /// The plugin config this entry describes.
    pub fn plugin_config(&self) -> PluginConfig {
        PluginConfig { instance: self.instance, grants: self.grants.clone(), limits: self.limits.clone() }
    }
}
