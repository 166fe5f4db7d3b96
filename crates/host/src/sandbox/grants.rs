//! Capability grants: what a plugin may touch beyond its own memory.
//! Everything defaults to nothing.

use super::HttpOrigin;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// What a plugin is granted. Default: nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Host directories mounted at guest paths. Paths outside a mount do not
    /// exist for the guest; `..` and symlinks cannot leave a mount (WASI
    /// preopens through cap-std).
    #[serde(default)]
    pub dirs: Vec<DirGrant>,
    /// Host environment variables passed through by name (values read at call time).
    #[serde(default)]
    pub env: Vec<String>,
    /// Secrets: guest variable name → the host variable that holds the value.
    /// Values are never logged or shown by `lovia inspect`.
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretSource>,
    /// Origins reachable through `wasi:http`, as `scheme://host[:port]`
    /// patterns (see [`HttpOrigin`]). Special addresses (loopback, private,
    /// link-local, metadata) only through an exactly written host.
    #[serde(default)]
    pub http: Vec<HttpOrigin>,
    /// Origins whose requests carry the call's trace context (W3C
    /// `traceparent` and `tracestate`, replacing any the guest set) when
    /// traces are on (docs/telemetry.md). Only requests to a granted origin
    /// leave at all; this says which of them may learn the trace. Default:
    /// none: a plugin's requests never carry it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_trace_context: Vec<HttpOrigin>,
}

/// One mounted directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirGrant {
    /// The host directory (relative paths are relative to the config file).
    pub host: PathBuf,
    /// Where the guest sees it, e.g. `/data`.
    pub guest: String,
    /// Read-only (the default) or read-write.
    #[serde(default)]
    pub mode: DirMode,
}

/// Access to a mounted directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DirMode {
    /// Read only. The default.
    #[default]
    Ro,
    /// Read and write.
    Rw,
}

/// Where a secret's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretSource {
    /// The host environment variable holding the value.
    pub env: String,
}

impl Grants {
    /// Whether nothing is granted.
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty() && self.env.is_empty() && self.secrets.is_empty() && self.http.is_empty()
    }

    /// Adds `other`'s grants to these.
    pub fn extend(&mut self, other: Grants) {
        self.dirs.extend(other.dirs);
        self.env.extend(other.env);
        self.secrets.extend(other.secrets);
        self.http.extend(other.http);
        self.http_trace_context.extend(other.http_trace_context);
    }

    /// One line per grant, secret values omitted.
    pub fn describe(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .dirs
            .iter()
            .map(|d| {
                let mode = if d.mode == DirMode::Rw { "read-write" } else { "read-only" };
                format!("dir {} -> {} ({mode})", d.host.display(), d.guest)
            })
            .collect();
        out.extend(self.env.iter().map(|e| format!("env {e}")));
        out.extend(self.secrets.iter().map(|(name, src)| format!("secret {name} (from ${})", src.env)));
        out.extend(self.http.iter().map(|origin| format!("http {origin}")));
        out.extend(self.http_trace_context.iter().map(|origin| format!("http {origin}: carries the trace context")));
        out
    }

    /// Applies the grants to a call's WASI context. A directory that cannot
    /// be opened is not mounted (and logged): a failed grant denies.
    pub(crate) fn apply(&self, builder: &mut WasiCtxBuilder, plugin: &str) {
        for dir in &self.dirs {
            let perms = match dir.mode {
                DirMode::Ro => FsPerms::ReadOnly,
                DirMode::Rw => FsPerms::ReadWrite,
            };
            if let Err(e) = builder.preopened_dir(&dir.host, &dir.guest, perms) {
                tracing::error!(plugin, host = %dir.host.display(), guest = %dir.guest, %e, "granted directory unavailable");
            }
        }
        for name in &self.env {
            if let Ok(value) = std::env::var(name) {
                builder.env(name, value);
            }
        }
        for (name, source) in &self.secrets {
            match std::env::var(&source.env) {
                Ok(value) => {
                    builder.env(name, value);
                }
                Err(_) => {
                    tracing::warn!(plugin, secret = %name, source = %source.env, "secret source variable is not set")
                }
            }
        }
    }
}
