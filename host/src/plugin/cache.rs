//! Compiling components, with an on-disk cache of compiled artifacts keyed
//! by the component's content digest and the engine's configuration
//! (a precompiled artifact is only valid for the engine settings it was
//! compiled with, design §5).

use crate::error::LoadError;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The artifact path of `digest` for `engine` under `dir`.
pub(crate) fn artifact_path(dir: &Path, engine: &Engine, digest: &str) -> PathBuf {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    dir.join(format!("{digest}-{:016x}.cwasm", hasher.finish()))
}

/// Compiles `bytes`, or loads the cached artifact when one exists.
pub(crate) fn compile(
    engine: &Engine,
    bytes: &[u8],
    digest: &str,
    origin: &str,
    cache_dir: Option<&Path>,
) -> Result<Component, LoadError> {
    let Some(dir) = cache_dir else { return compile_fresh(engine, bytes, origin) };
    let path = artifact_path(dir, engine, digest);
    if path.exists() {
        match load_artifact(engine, &path) {
            Ok(component) => return Ok(component),
            // A stale or damaged artifact is rebuilt, never trusted.
            Err(err) => tracing::warn!(path = %path.display(), %err, "discarding an unusable cached artifact"),
        }
    }
    let component = compile_fresh(engine, bytes, origin)?;
    let serialized =
        component.serialize().map_err(|e| LoadError::Invalid { origin: origin.into(), reason: e.to_string() })?;
    write_atomically(&path, &serialized).map_err(|source| LoadError::Cache { path: path.clone(), source })?;
    Ok(component)
}

fn compile_fresh(engine: &Engine, bytes: &[u8], origin: &str) -> Result<Component, LoadError> {
    Component::new(engine, bytes).map_err(|e| LoadError::Invalid { origin: origin.into(), reason: root_cause(&e) })
}

#[expect(unsafe_code, reason = "deserialising a precompiled artifact is unsafe by wasmtime's contract")]
fn load_artifact(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // Read, not mmap: a mapped artifact that someone truncates or rewrites in
    // place (an operator clearing the cache, a second host) would kill this
    // process with SIGBUS. The copy costs well under a millisecond for the
    // artifacts of small plugins.
    let bytes = std::fs::read(path)?;
    // SAFETY: the cache directory is the host's own (created by `Host::new`),
    // artifacts are written only by `write_atomically` below from components
    // this process compiled, and wasmtime checks the header and the engine
    // compatibility before using one. An attacker who can write the cache
    // directory can already replace the host binary.
    unsafe { Component::deserialize(engine, &bytes) }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

pub(crate) fn root_cause(err: &wasmtime::Error) -> String {
    let mut parts: Vec<String> = err.chain().map(|c| c.to_string()).collect();
    parts.dedup();
    parts.join(": ")
}
