//! Compiling components, with an on-disk cache of compiled artifacts keyed
//! by the component's content digest and the engine's configuration
//! (a precompiled artifact is only valid for the engine settings it was
//! compiled with, docs/performance.md). Every cached file is sealed with
//! the cache's key ([`crate::artifacts`]); one that does not verify is
//! never deserialised: it is recompiled and replaced.

use super::manifest::Manifest;
use crate::artifacts::{ArtifactCache, ArtifactError, FileStamp};
use crate::error::{InvalidComponent, LoadError};
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

/// The note that `digest` was compiled for the engine of async plugins: the
/// next load probes that engine's artifact (making the engine) only when it
/// exists, so a synchronous plugin's first load never makes it. Empty and
/// unsealed: it only says where to look, and what is found there is
/// proven like any artifact. Eviction leaves it; a stale note costs one
/// failed probe.
pub(crate) fn async_note(dir: &Path, digest: &str) -> PathBuf {
    dir.join(format!("{digest}.async-plugin"))
}

/// Writes the artifact of a `component` compiled by [`compile_fresh`], for the
/// next load of `digest`.
pub(crate) fn store_artifact(
    engine: &Engine,
    cache: &ArtifactCache,
    digest: &str,
    origin: &str,
    component: &Component,
) -> Result<(), LoadError> {
    let path = artifact_path(cache.dir(), engine, digest);
    let serialized = component
        .serialize()
        .map_err(|e| LoadError::Invalid { origin: origin.into(), source: InvalidComponent::Serialize(e) })?;
    cache.write_artifact(&path, &serialized).map_err(|source| LoadError::Cache { path: path.clone(), source })
}

/// The cached artifact of `digest`, if there is one and it verifies.
pub(crate) fn load_cached(engine: &Engine, cache: &ArtifactCache, digest: &str) -> Option<Component> {
    let path = artifact_path(cache.dir(), engine, digest);
    if !path.exists() {
        return None;
    }
    match load_artifact(engine, cache, &path) {
        Ok(component) => {
            cache.mark_used(&path);
            Some(component)
        }
        // A stale, damaged or forged artifact is rebuilt, never trusted.
        Err(err) => {
            tracing::warn!(path = %path.display(), %err, "discarding an unusable cached artifact");
            None
        }
    }
}

/// Counts the artifact of `digest` as used now, if the cache holds it.
pub(crate) fn mark_used(cache: &ArtifactCache, engine: &Engine, digest: &str) {
    let path = artifact_path(cache.dir(), engine, digest);
    if path.exists() {
        cache.mark_used(&path);
    }
}

/// Compiles `bytes`. A fresh compile is not cached yet: [`store_artifact`]
/// keeps it once the plugin has loaded, so a component that is refused (an
/// unknown import, a bad manifest) leaves nothing on disk.
pub(crate) fn compile_fresh(engine: &Engine, bytes: &[u8], origin: &str) -> Result<Component, LoadError> {
    Component::new(engine, bytes)
        .map_err(|e| LoadError::Invalid { origin: origin.into(), source: InvalidComponent::Compile(e) })
}

/// Why a cached artifact was not used.
#[derive(Debug, thiserror::Error)]
enum LoadArtifactError {
    #[error(transparent)]
    Unproven(#[from] ArtifactError),
    #[error("wasmtime refused it: {0}")]
    Deserialize(wasmtime::Error),
}

#[expect(unsafe_code, reason = "deserialising a precompiled artifact is unsafe by wasmtime's contract")]
fn load_artifact(engine: &Engine, cache: &ArtifactCache, path: &Path) -> Result<Component, LoadArtifactError> {
    let proven = cache.verify_artifact(path)?;
    // SAFETY: the file carries a valid HMAC under this host's key (checked
    // now, or checked earlier and unchanged since: same inode, size and
    // times), and only this user can read the key or write the directory
    // (0600 in 0700, both checked by `ArtifactCache::open`), so it is what
    // `write_artifact` wrote from a component this host compiled; wasmtime
    // also checks the header and the engine compatibility. wasmtime maps it
    // copy-on-write instead of reading it: the files are only ever replaced
    // by rename, never rewritten in place, so the mapping stays valid.
    let component = unsafe { Component::deserialize_file(engine, path) }.map_err(LoadArtifactError::Deserialize)?;
    // The file wasmtime opened is the one proven only if the path still
    // names it now.
    let now = std::fs::metadata(path).ok().and_then(|m| FileStamp::of(&m));
    if now != proven {
        return Err(ArtifactError::Changed.into());
    }
    Ok(component)
}

/// Where the checked manifest of `digest` is cached. The key includes
/// lovia's version, so a host that checks specs differently never trusts an
/// older host's verdict, and says that its schemas compiled before it was
/// written (`schemas`), which a load from it relies on to compile them only
/// when first used; a description from before that rule is not read.
fn described_path(dir: &Path, engine: &Engine, digest: &str) -> PathBuf {
    let artifact = artifact_path(dir, engine, digest);
    artifact.with_extension(format!("lovia-{}.schemas.manifest.json", env!("CARGO_PKG_VERSION")))
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
pub(crate) fn load_described(cache: &ArtifactCache, engine: &Engine, digest: &str) -> Option<Described> {
    let path = described_path(cache.dir(), engine, digest);
    let sealed = std::fs::read(&path).ok()?;
    // The description decides approvals and schemas: it is authenticated
    // like the artifact.
    let Some(body) = cache.open_sealed(&path, &sealed) else {
        tracing::warn!(path = %path.display(), "discarding a cached description whose tag does not verify");
        return None;
    };
    serde_json::from_slice(body).ok()
}

/// Caches a description; a failure only costs the next load a describe.
pub(crate) fn store_described(
    cache: &ArtifactCache,
    engine: &Engine,
    digest: &str,
    manifest: &Manifest,
    imports: &[String],
) {
    let path = described_path(cache.dir(), engine, digest);
    let written = serde_json::to_vec(&DescribedRef { manifest, imports })
        .map_err(std::io::Error::other)
        .and_then(|b| cache.write_sealed(&path, &b));
    if let Err(err) = written {
        tracing::warn!(path = %path.display(), %err, "cannot cache the plugin's manifest");
    }
}

pub(crate) use crate::error::root_cause;

impl crate::Host {
    /// `bytes` compiled for `engine`, through this host's artifact cache:
    /// loaded from it when it holds a verified artifact for `engine`'s
    /// settings, else compiled here and kept for the next process. For
    /// components the host runs itself with an engine of their own (the
    /// code-mode engine), which are not plugins: no manifest is read or
    /// cached. Without a cache directory it compiles every time.
    /// `compiling` is called just before a compile (a door tells its user to wait).
    pub fn compile_cached(
        &self,
        engine: &Engine,
        bytes: &[u8],
        origin: &str,
        compiling: impl FnOnce(),
    ) -> Result<Component, LoadError> {
        let Some(cache) = self.cache.as_deref() else {
            compiling();
            return compile_fresh(engine, bytes, origin);
        };
        let digest = super::digest::sha256_hex(bytes);
        if let Some(component) = load_cached(engine, cache, &digest) {
            return Ok(component);
        }
        compiling();
        let component = compile_fresh(engine, bytes, origin)?;
        // A cache that cannot be written costs the next start a compile;
        // this one has its component.
        if let Err(err) = store_artifact(engine, cache, &digest, origin, &component) {
            tracing::warn!(%err, "cannot keep a compiled component in the cache");
        }
        Ok(component)
    }

    /// Keeps what loading `plugin` produced (its compiled artifact and its
    /// checked description) for `packed` too, when `packed` is exactly the
    /// plugin's bytes with a manifest section appended, as `lovia pack` and
    /// `lovia build` write it. A custom section changes the digest but not
    /// the compiled code, so the first load of the packed component is a
    /// cached one instead of a second compile (6.5 s for an 18 MB Python
    /// plugin in a debug build). Returns whether it kept them; any other `packed`, or a host
    /// without a cache, keeps nothing.
    pub fn keep_compiled_for_packed(&self, plugin: &crate::Plugin, packed: &[u8]) -> Result<bool, LoadError> {
        let Some(cache) = self.cache.as_deref() else { return Ok(false) };
        let Ok(view) = super::manifest::read_static(packed) else { return Ok(false) };
        let Some(at) = view.trailing_manifest_at() else { return Ok(false) };
        if super::digest::sha256_hex(&packed[..at]) != plugin.digest() {
            return Ok(false);
        }
        let digest = super::digest::sha256_hex(packed);
        let (engine, component, abi) = plugin.compiled();
        store_artifact(engine, cache, &digest, plugin.origin(), component)?;
        store_described(cache, engine, &digest, &plugin.manifest(), plugin.imports());
        if abi == crate::engine::Abi::Async
            && let Err(e) = std::fs::write(async_note(cache.dir(), &digest), b"")
        {
            tracing::warn!(%e, "cannot note an async plugin in the cache");
        }
        Ok(true)
    }

    /// Removes what the cache holds for the component of `digest` (its
    /// artifacts for every engine of this host, their seals and
    /// descriptions): for a component compiled once and never loaded again,
    /// such as the unpacked build `lovia build` packs. Failures are ignored:
    /// the cache's size bound removes what is left in time.
    pub fn forget_compiled(&self, digest: &str) {
        let Some(cache) = self.cache.as_deref() else { return };
        let async_engine = self.async_runtime_if_made().map(|r| r.engine.clone());
        for engine in std::iter::once(self.engine.clone()).chain(async_engine) {
            let artifact = artifact_path(cache.dir(), &engine, digest);
            let described = described_path(cache.dir(), &engine, digest);
            let mut seal = artifact.clone().into_os_string();
            seal.push(".seal");
            for path in [artifact, std::path::PathBuf::from(seal), described] {
                let _ = std::fs::remove_file(path);
            }
        }
        let _ = std::fs::remove_file(async_note(cache.dir(), digest));
    }
}
