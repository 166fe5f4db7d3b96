//! The floors `lovia bench` prints beside its figures: the same component
//! on the same engine (the same configuration, the same pooling allocator)
//! with none of lovia's work around it. A figure divided by its floor holds
//! on any machine, where an absolute figure does not (docs/performance.md).
//!
//! These are measuring instruments, not a way to run tools: a floor call
//! skips every check, limit and policy a call through
//! [`crate::exec::Executor`] gets, so nothing here takes a tenant or a
//! model's input. Hidden from the docs, and not a stable API.

use super::Plugin;
use crate::error::root_cause;
use crate::sandbox::{self, GuestInstance, SandboxState};
use std::path::Path;
use wasmtime::Store;
use wasmtime::component::Component;

/// Why a floor measurement could not be taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FloorError {
    /// The plugin has no tool of that name.
    #[error("the plugin has no tool `{tool}`")]
    NoSuchTool {
        /// The name asked for.
        tool: String,
    },
    /// wasmtime failed to instantiate, call or load (the root cause).
    #[error("the bare {step} failed: {reason}")]
    Wasmtime {
        /// What was being done.
        step: &'static str,
        /// wasmtime's error chain.
        reason: String,
    },
    /// The tool answered with an error, so the floor would not measure a
    /// successful call.
    #[error("the tool `{tool}` answered with an error")]
    ToolError {
        /// The tool called.
        tool: String,
    },
    /// The cached artifact did not prove to be this host's own (its tag,
    /// or it changed while it was loaded): it is not deserialised.
    #[error("the cached artifact is refused: {reason}")]
    Unproven {
        /// Why.
        reason: String,
    },
    /// The host has no artifact cache (`HostConfig::cache_dir`).
    #[error("the host has no artifact cache, so there is no cached load to measure")]
    NotCached,
}

fn wasmtime(step: &'static str) -> impl FnOnce(wasmtime::Error) -> FloorError {
    move |e| FloorError::Wasmtime { step, reason: root_cause(&e) }
}

impl Plugin {
    /// The fresh floor: instantiate the component in a bare store, call
    /// `tool` with `arguments` (JSON text), and drop the instance.
    #[doc(hidden)]
    pub async fn floor_fresh_call(&self, tool: &str, arguments: &str) -> Result<(), FloorError> {
        let mut store = sandbox::bare_store(&self.inner.runtime.engine);
        let instance = self.inner.pre.instantiate_async(&mut store).await.map_err(wasmtime("instantiation"))?;
        floor_call(&mut store, &instance, tool, arguments).await
    }

    /// The warm floor: one live instance in a bare store, whose
    /// [`WarmFloor::call`] is a bare call and nothing else.
    #[doc(hidden)]
    pub async fn floor_warm(&self) -> Result<WarmFloor, FloorError> {
        let mut store = sandbox::bare_store(&self.inner.runtime.engine);
        let instance = self.inner.pre.instantiate_async(&mut store).await.map_err(wasmtime("instantiation"))?;
        Ok(WarmFloor { store, instance })
    }

    /// Checks that `tool` is one of the plugin's, so a floor is not the
    /// cost of an unknown-tool answer.
    #[doc(hidden)]
    pub fn floor_check_tool(&self, tool: &str) -> Result<(), FloorError> {
        match self.loaded(tool) {
            Some(_) => Ok(()),
            None => Err(FloorError::NoSuchTool { tool: tool.to_owned() }),
        }
    }
}

/// A live instance for the warm floor.
#[doc(hidden)]
pub struct WarmFloor {
    store: Store<SandboxState>,
    instance: GuestInstance,
}

impl WarmFloor {
    /// One bare call on the live instance.
    pub async fn call(&mut self, tool: &str, arguments: &str) -> Result<(), FloorError> {
        floor_call(&mut self.store, &self.instance, tool, arguments).await
    }
}

async fn floor_call(
    store: &mut Store<SandboxState>,
    instance: &GuestInstance,
    tool: &str,
    arguments: &str,
) -> Result<(), FloorError> {
    match instance.call(store, tool, arguments).await.map_err(wasmtime("call"))? {
        Ok(_) => Ok(()),
        Err(_) => Err(FloorError::ToolError { tool: tool.to_owned() }),
    }
}

impl Plugin {
    /// The cached-load floor: how long wasmtime's own
    /// `Component::deserialize_file` of this plugin's compiled artifact in
    /// the host's cache takes, with no manifest, no validators and no
    /// `instantiate_pre`. The artifact's tag is proven first, as every load
    /// proves it, but untimed: the floor is the deserialisation alone.
    #[doc(hidden)]
    pub fn floor_cached_load(&self) -> Result<std::time::Duration, FloorError> {
        let host = &self.inner.host;
        let Some(cache) = host.cache.as_deref() else { return Err(FloorError::NotCached) };
        let engine = &self.inner.runtime.engine;
        let path = super::cache::artifact_path(cache.dir(), engine, &self.inner.digest);
        let unproven = |reason: String| FloorError::Unproven { reason };
        let proven = cache.verify_artifact(&path).map_err(|e| unproven(e.to_string()))?;
        let started = std::time::Instant::now();
        let component = deserialize_proven(engine, &path);
        let elapsed = started.elapsed();
        component.map_err(wasmtime("deserialization"))?;
        let now = std::fs::metadata(&path).ok().and_then(|m| crate::artifacts::FileStamp::of(&m));
        if now != proven {
            return Err(unproven("it changed while it was loaded".into()));
        }
        Ok(elapsed)
    }
}

#[expect(unsafe_code, reason = "deserialising a precompiled artifact is unsafe by wasmtime's contract")]
fn deserialize_proven(engine: &wasmtime::Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: as in `cache::load_artifact`, whose check the caller has just
    // made: the file carries a valid tag under this host's key in a
    // directory only this user can write, so this host wrote it; the stamp
    // is compared again afterwards.
    unsafe { Component::deserialize_file(engine, path) }
}
