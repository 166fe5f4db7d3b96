//! Compiling components, with an on-disk cache of compiled artifacts keyed
//! by the component's content digest and the engine's configuration
//! (a precompiled artifact is only valid for the engine settings it was
//! compiled with, docs/performance.md).

use super::manifest::Manifest;
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

/// Where the checked manifest of `digest` is cached. The key includes
/// lovia's version, so a host that checks specs differently never trusts an
/// older host's verdict.
fn described_path(dir: &Path, engine: &Engine, digest: &str) -> PathBuf {
    let artifact = artifact_path(dir, engine, digest);
    artifact.with_extension(format!("lovia-{}.manifest.json", env!("CARGO_PKG_VERSION")))
}

/// What a first load learnt about a component: its checked manifest and its imports.
#[derive(serde::Deserialize)]
pub(crate) struct Described {
    pub(crate) manifest: Manifest,
    pub(crate) imports: Vec<String>,
}

#[derive(serde::Serialize)]
struct DescribedRef<'a> {
    manifest: &'a Manifest,
    imports: &'a [String],
}

/// The cached, already checked description of `digest`, if there is a usable one.
pub(crate) fn load_described(dir: &Path, engine: &Engine, digest: &str) -> Option<Described> {
    let text = std::fs::read(described_path(dir, engine, digest)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Caches a description; a failure only costs the next load a describe.
pub(crate) fn store_described(dir: &Path, engine: &Engine, digest: &str, manifest: &Manifest, imports: &[String]) {
    let path = described_path(dir, engine, digest);
    let written = serde_json::to_vec(&DescribedRef { manifest, imports })
        .map_err(std::io::Error::other)
        .and_then(|b| write_atomically(&path, &b));
    if let Err(err) = written {
        tracing::warn!(path = %path.display(), %err, "cannot cache the plugin's manifest");
    }
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
