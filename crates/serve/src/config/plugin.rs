//! `[[tenants.plugins]]`: one configured plugin.

use lovia_host::plugin::InstanceMode;
use lovia_host::plugin::config::{LimitOverrides, PluginConfig};
use lovia_host::sandbox::Grants;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One plugin of a tenant: its path plus the fields of a [`PluginConfig`].
/// (Spelled out rather than `#[serde(flatten)]`ed: serde cannot deny
/// unknown keys through a flattened struct.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PluginEntry {
    /// The `.wasm` component (relative to the config file).
    pub path: PathBuf,
    /// The component's pinned SHA-256, `sha256:<64 hex digits>`: another
    /// component at `path` is refused at start. Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
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

impl PluginEntry {
    /// An entry for the plugin at `path`, with no digest pinned, the
    /// default instance mode, and no grants or limit overrides: what a
    /// `[[tenants.plugins]]` table with only `path` gives.
    pub fn new(path: impl Into<PathBuf>) -> PluginEntry {
        PluginEntry {
            path: path.into(),
            digest: None,
            instance: Default::default(),
            grants: Default::default(),
            limits: Default::default(),
        }
    }

    /// The plugin config this entry describes.
    pub fn plugin_config(&self) -> PluginConfig {
        PluginConfig::default()
            .with_digest(self.digest.clone())
            .with_instance(self.instance)
            .with_grants(self.grants.clone())
            .with_limits(self.limits.clone())
    }
}
