//! A plugin's configuration: grants and limits, from a TOML file beside the
//! `.wasm` (`tool.wasm` → `tool.toml`) or from the host application.
//!
//! ```toml
//! digest = "sha256:4f2a…"   # optional: refuse any other component (`lovia inspect` prints it)
//! instance = "fresh"   # or "session": one warm instance per session
//! store_namespace = "notes"   # default: the component's SHA-256; shared only when given
//!
//! [grants]
//! env = ["LANG"]
//! dirs = [{ host = "data", guest = "/data", mode = "ro" }]
//! secrets = { API_TOKEN = { env = "LOVIA_SECRET_API_TOKEN" } }
//!
//! [limits]
//! memory_mib = 32
//! max_wall_clock_ms = 10000
//! fuel = 50000000
//! result_bytes = 1048576
//! ```

use super::warm::InstanceMode;
use crate::error::LoadError;
pub use crate::error::PluginConfigError;
use crate::sandbox::{CallLimits, Grants};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The pin's hex digest, lowercased, when `pin` is `sha256:<64 hex>`.
pub fn pinned_sha256(pin: &str) -> Option<String> {
    let hex = pin.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| hex.to_ascii_lowercase())
}

/// Grants and limits of one plugin. Default: nothing granted, the host's
/// limits, a fresh instance per call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PluginConfig {
    /// The component's SHA-256 as `sha256:<64 hex digits>`: a component
    /// with another digest is refused before it is compiled
    /// ([`LoadError::DigestMismatch`], naming both). Default: none, any
    /// component loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Fresh instance per call (the default) or one per session.
    #[serde(default)]
    pub instance: InstanceMode,
    /// What the plugin may touch.
    #[serde(default)]
    pub grants: Grants,
    /// Limits over the host's.
    #[serde(default)]
    pub limits: LimitOverrides,
    /// What keys the plugin's session store, with the tenant and the session:
    /// 1-128 letters, digits, `_`, `.` or `-`. Default: none, which means
    /// the component's SHA-256 (hex). The name a plugin declares in `info()`
    /// is never used: any component may call itself `notes`, and must not
    /// read another's notes for it. Two different components share data
    /// only when the operator gives both the same namespace; a new build of
    /// a plugin keeps its data only with a namespace set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_namespace: Option<String>,
}

crate::setters::setters!(PluginConfig {
    with_digest => digest: Option<String>,
    with_instance => instance: InstanceMode,
    with_grants => grants: Grants,
    with_limits => limits: LimitOverrides,
    with_store_namespace => store_namespace: Option<String>,
});

/// Whether `namespace` can be a [`PluginConfig::store_namespace`].
pub fn is_valid_store_namespace(namespace: &str) -> bool {
    (1..=128).contains(&namespace.len()) && namespace.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

/// Per-plugin limits; each absent one keeps the host's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    /// Linear memory in MiB.
    pub memory_mib: Option<u32>,
    /// Wall-clock ceiling of one attempt in ms.
    pub max_wall_clock_ms: Option<u64>,
    /// Fuel per call (needs a host with fuel metering).
    pub fuel: Option<u64>,
    /// Bytes of a result crossing the boundary.
    pub result_bytes: Option<usize>,
}

impl LimitOverrides {
    /// `base` with these overrides applied.
    pub fn apply(&self, base: &CallLimits) -> CallLimits {
        let mut out = base.clone();
        if let Some(m) = self.memory_mib {
            out.memory_bytes = (m as usize) << 20;
        }
        if let Some(ms) = self.max_wall_clock_ms {
            out.max_wall_clock = Duration::from_millis(ms);
        }
        if self.fuel.is_some() {
            out.fuel = self.fuel;
        }
        if let Some(b) = self.result_bytes {
            out.result_bytes = b;
        }
        out
    }
}

impl PluginConfig {
    /// The config file of the plugin at `wasm`: the same path with `.toml`
    /// instead of `.wasm`. Only a `.wasm` file has one.
    pub fn path_beside(wasm: &Path) -> Option<PathBuf> {
        (wasm.extension()? == "wasm").then(|| wasm.with_extension("toml"))
    }

    /// Reads the config beside `wasm`, if there is one. Relative directory
    /// grants are resolved against the file's directory and must exist.
    pub fn load_beside(wasm: &Path) -> Result<Option<PluginConfig>, LoadError> {
        match Self::path_beside(wasm) {
            Some(path) if path.exists() => Self::load(&path).map(Some),
            _ => Ok(None),
        }
    }

    /// Reads the config at `path`.
    pub fn load(path: &Path) -> Result<PluginConfig, LoadError> {
        let err = |source: PluginConfigError| LoadError::Config { path: path.to_owned(), source };
        let text = std::fs::read_to_string(path).map_err(|e| err(PluginConfigError::Read(e)))?;
        let mut config: PluginConfig =
            toml::from_str(&text).map_err(|e| err(PluginConfigError::Syntax { message: e.message().to_owned() }))?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.resolve(base).map_err(err)?;
        Ok(config)
    }

    /// Makes relative directory grants absolute against `base` and checks them.
    pub fn resolve(&mut self, base: &Path) -> Result<(), PluginConfigError> {
        if let Some(namespace) = &self.store_namespace
            && !is_valid_store_namespace(namespace)
        {
            return Err(PluginConfigError::StoreNamespace { namespace: namespace.clone() });
        }
        for dir in &mut self.grants.dirs {
            if dir.host.is_relative() {
                dir.host = base.join(&dir.host);
            }
            if !dir.host.is_dir() {
                return Err(PluginConfigError::NoSuchDirectory { path: dir.host.clone() });
            }
            if !dir.guest.starts_with('/') {
                return Err(PluginConfigError::RelativeGuestPath { guest: dir.guest.clone() });
            }
        }
        Ok(())
    }
}
