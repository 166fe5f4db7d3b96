//! Loading a component into a [`Plugin`]: the checks before anything is
//! parsed or compiled, the engine its exports choose, compilation (cached),
//! `InstancePre`, and the plugin's info and tool specs (cached beside the
//! artifact).

use super::declared::{check_declared_size, check_manifest, convert_spec, invalid_spec};
use super::digest::sha256_hex;
use super::shared::Assembly;
use super::{Inner, InstanceMode, LoadedTool, Plugin, PluginInfo, cache, config, imports, manifest};
use crate::args::ArgumentValidator;
use crate::bindings::{ContractVersion, guest, wit};
use crate::call::{CallContext, ToolSpec};
use crate::engine::{Abi, Host, Runtime};
use crate::error::{InvalidComponent, LoadError};
use crate::sandbox::{self, GuestPre, StoreSpec};
use std::path::Path;
use std::sync::Arc;

impl Host {
    /// Loads the plugin at `path`, with the config beside it (`tool.wasm` →
    /// `tool.toml`) if there is one; without one nothing is granted.
    pub async fn load_file(&self, path: impl AsRef<Path>) -> Result<Plugin, LoadError> {
        let path = path.as_ref();
        let config = config::PluginConfig::load_beside(path)?.unwrap_or_default();
        self.load_file_with(path, config).await
    }

    /// Loads the plugin at `path` with `config` (the file beside it is not read).
    pub async fn load_file_with(
        &self,
        path: impl AsRef<Path>,
        config: config::PluginConfig,
    ) -> Result<Plugin, LoadError> {
        use std::io::Read;
        let path = path.as_ref();
        let origin = path.display().to_string();
        let read_error = |source| LoadError::Read { path: path.to_owned(), source };
        let mut file = std::fs::File::open(path).map_err(read_error)?;
        let stamp = file.metadata().ok().as_ref().and_then(crate::artifacts::FileStamp::of);
        // A file loaded before, unchanged since, loads from the cache without
        // being read or hashed again: for a Python plugin that is most of a
        // cached load (docs/performance.md).
        if let (Some(cache), Some(stamp)) = (self.cache.as_deref(), &stamp)
            && let Some(digest) = cache.known_digest(path, stamp)
            && let Some(loaded) = self.load_cached(&digest, &origin, &config).await
        {
            return loaded;
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(read_error)?;
        let plugin = self.load_bytes_with(&bytes, &origin, config).await?;
        // The digest stands for the file only if the file did not change while it was read.
        let after = file.metadata().ok().as_ref().and_then(crate::artifacts::FileStamp::of);
        if let (Some(cache), Some(stamp)) = (self.cache.as_deref(), stamp)
            && after == Some(stamp)
        {
            cache.remember_digest(path, &stamp, plugin.digest());
        }
        Ok(plugin)
    }

    /// Loads the plugin of `digest` from the cache alone (artifact and
    /// checked description), or `None` when either is missing or unusable.
    async fn load_cached(
        &self,
        digest: &str,
        origin: &str,
        config: &config::PluginConfig,
    ) -> Option<Result<Plugin, LoadError>> {
        let cache = self.cache.as_deref()?;
        if let Some(assembly) = self.assembled.get::<Assembly>(digest) {
            if let Err(e) = check_store_namespace(config, origin).and_then(|()| check_digest(config, digest, origin)) {
                return Some(Err(e));
            }
            return Some(self.configure_shared(assembly, origin, config.clone()));
        }
        let (runtime, component) = self.cached_artifact(cache, digest)?;
        let described = cache::load_described(cache, &runtime.engine, digest)?;
        if let Err(e) = check_store_namespace(config, origin).and_then(|()| check_digest(config, digest, origin)) {
            return Some(Err(e));
        }
        Some(
            self.assemble(
                runtime,
                component,
                digest.to_owned(),
                Some(described.manifest),
                described.imports,
                origin,
                config.clone(),
            )
            .await,
        )
    }

    /// The cached artifact of `digest` and the runtime it was compiled for:
    /// the synchronous engine's first (every Rust and Python plugin), then,
    /// when the cache notes `digest` as an async plugin, the async engine's.
    fn cached_artifact(
        &self,
        cache: &crate::artifacts::ArtifactCache,
        digest: &str,
    ) -> Option<(Arc<Runtime>, wasmtime::component::Component)> {
        if let Some(component) = cache::load_cached(&self.engine, cache, digest) {
            return Some((self.sync_runtime.clone(), component));
        }
        if !cache::async_note(cache.dir(), digest).exists() {
            return None;
        }
        let runtime = self.runtime(Abi::Async).ok()?;
        let component = cache::load_cached(&runtime.engine, cache, digest)?;
        Some((runtime, component))
    }

    /// Compiles `bytes` for `runtime`, here or in a compile worker with a
    /// deadline when the host has one ([`crate::HostConfig::compile_worker`]),
    /// on tokio's blocking pool: a compile takes up to seconds of CPU (or
    /// of waiting for the worker), which must not hold an async worker
    /// thread and stall the calls and streams it serves. Outside a tokio
    /// runtime it runs on the caller's thread.
    async fn compile(
        &self,
        runtime: &Runtime,
        bytes: &[u8],
        origin: &str,
    ) -> Result<wasmtime::component::Component, LoadError> {
        if let Some(notice) = &self.config.on_compile {
            (notice.0)(origin, bytes.len());
        }
        let worker = self.config.compile_worker.clone().map(|w| (w, self.engine_settings(runtime)));
        let engine = runtime.engine.clone();
        let compile = {
            let origin = origin.to_owned();
            move |bytes: &[u8]| match worker {
                None => cache::compile_fresh(&engine, bytes, &origin),
                Some((worker, settings)) => crate::compile_worker::compile(&worker, settings, &engine, bytes, &origin),
            }
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return compile(bytes);
        }
        // The copy costs a memcpy of the component; the compile, thousands of them.
        let bytes = bytes.to_vec();
        match tokio::task::spawn_blocking(move || compile(&bytes)).await {
            Ok(compiled) => compiled,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(LoadError::Cancelled { origin: origin.into() }),
        }
    }

    /// Loads a plugin from `bytes` with nothing granted; `origin` names it in errors.
    pub async fn load_bytes(&self, bytes: &[u8], origin: &str) -> Result<Plugin, LoadError> {
        self.load_bytes_with(bytes, origin, config::PluginConfig::default()).await
    }

    /// Loads a plugin from `bytes` with `config`.
    pub async fn load_bytes_with(
        &self,
        bytes: &[u8],
        origin: &str,
        config: config::PluginConfig,
    ) -> Result<Plugin, LoadError> {
        check_header(bytes, origin)?;
        check_store_namespace(&config, origin)?;
        let digest = sha256_hex(bytes);
        // Before anything of the component is parsed or compiled.
        check_digest(&config, &digest, origin)?;
        // The same bytes loaded before, and still alive: only the config is new.
        if let Some(assembly) = self.assembled.get::<Assembly>(&digest) {
            return self.configure_shared(assembly, origin, config);
        }
        let read = || {
            manifest::read_static(bytes)
                .map_err(|e| LoadError::Invalid { origin: origin.into(), source: InvalidComponent::Sections(e) })
        };
        let cache_dir = self.cache.as_deref();
        let (runtime, component, fresh, imports_read) =
            match cache_dir.and_then(|cache| self.cached_artifact(cache, &digest)) {
                Some((runtime, component)) => (runtime, component, false, None),
                None => {
                    // Read before the compile, which may take seconds of CPU
                    // for a large component: an import the host certainly
                    // lacks is refused for the cost of a parse. The exports
                    // say which engine compiles it.
                    let view = read()?;
                    imports::check(&view.imports, origin)?;
                    let asynchronous = view.exports.iter().any(|e| e == ContractVersion::ASYNC_PLUGIN_EXPORT);
                    let runtime = self
                        .runtime(if asynchronous { Abi::Async } else { Abi::Sync })
                        .map_err(|e| LoadError::Engine { origin: origin.into(), source: Box::new(e) })?;
                    let component = self.compile(&runtime, bytes, origin).await?;
                    (runtime, component, true, Some(view.imports))
                }
            };
        // What `info()` and `tools()` said, checked, and the imports are
        // cached beside the artifact: a cached load runs none of the
        // plugin's code and parses none of its bytes.
        let cached = cache_dir.and_then(|cache| cache::load_described(cache, &runtime.engine, &digest));
        let (cached, imports) = match cached {
            Some(described) => (Some(described.manifest), described.imports),
            None => (None, imports_read.map_or_else(|| read().map(|v| v.imports), Ok)?),
        };
        let plugin = self.assemble(runtime.clone(), component.clone(), digest, cached, imports, origin, config).await?;
        // Only a component that loaded is kept: a refused one (an import
        // the host lacks, a manifest over a limit) leaves no artifact behind.
        if fresh && let Some(cache) = self.cache.as_deref() {
            // The plugin loaded; a cache that cannot take its artifact (a
            // full disk) costs the next load a compile, not this load.
            // Failing here left a replica without a tenant's upload for
            // good (found by bench/fault-run, its disk fault).
            if let Err(e) = cache::store_artifact(&runtime.engine, cache, plugin.digest(), origin, &component) {
                tracing::warn!(%e, "the compiled artifact is not cached; the next load compiles again");
            }
            if runtime.abi == Abi::Async {
                let note = cache::async_note(cache.dir(), plugin.digest());
                if let Err(e) = std::fs::write(&note, b"") {
                    // The next load compiles again; nothing is wrong with this one.
                    tracing::warn!(path = %note.display(), %e, "cannot note an async plugin in the cache");
                }
            }
        }
        Ok(plugin)
    }

    /// A plugin from its compiled `component`: linked, described (by the
    /// `cached` manifest, else by asking the component), checked.
    #[expect(clippy::too_many_arguments, reason = "each is one part of what a plugin is made of")]
    async fn assemble(
        &self,
        runtime: Arc<Runtime>,
        component: wasmtime::component::Component,
        digest: String,
        cached: Option<manifest::Manifest>,
        imports: Vec<String>,
        origin: &str,
        config: config::PluginConfig,
    ) -> Result<Plugin, LoadError> {
        let cache_dir = self.cache.as_deref();
        let instance_pre = runtime.linker.instantiate_pre(&component).map_err(|e| {
            let reason = cache::root_cause(&e);
            let import = imports.iter().find(|i| reason.contains(i.as_str())).cloned().unwrap_or(reason);
            LoadError::UnknownImport { origin: origin.into(), import }
        })?;
        let pre = GuestPre::new(instance_pre)
            .map_err(|e| LoadError::WrongExports { origin: origin.into(), reason: cache::root_cause(&e) })?;
        let from_cache = cached.is_some();
        let described = match cached {
            Some(manifest) => manifest,
            None => {
                let (info, specs) = describe(self, &runtime, &pre, origin, &digest).await?;
                check_declared_size(&info, &specs, origin)?;
                let info = PluginInfo { name: info.name, version: info.version, instructions: info.instructions };
                let mut tools: Vec<ToolSpec> = Vec::with_capacity(specs.len());
                for spec in specs {
                    let spec = convert_spec(spec, origin)?;
                    if tools.iter().any(|t| t.name == spec.name) {
                        return Err(invalid_spec(origin, &spec.name, "the name is declared twice in this plugin"));
                    }
                    tools.push(spec);
                }
                manifest::Manifest { manifest_version: 1, info, tools }
            }
        };
        // Also for a cached description: it may predate a limit.
        check_manifest(&described, origin)?;
        // A cached description is sealed, keyed by lovia's version and
        // written only once its schemas compiled (below), so its validators
        // are compiled at each tool's first check: compiling them was about
        // a third of a cached load (docs/performance.md, round five).
        let mut validators = Vec::with_capacity(described.tools.len());
        for spec in &described.tools {
            validators.push(if from_cache {
                ArgumentValidator::deferred(&spec.name, &spec.parameters, spec.strict)
            } else {
                ArgumentValidator::new(&spec.name, &spec.parameters, spec.strict)
                    .map_err(|reason| invalid_spec(origin, &spec.name, &reason.to_string()))?
            });
        }
        if let (Some(dir), false) = (cache_dir, from_cache) {
            cache::store_described(dir, &runtime.engine, &digest, &described, &imports);
        }
        let manifest::Manifest { info, tools: specs, .. } = described;
        let tools: Vec<LoadedTool> = specs
            .into_iter()
            .zip(validators)
            .map(|(spec, validator)| LoadedTool {
                name: spec.name.as_str().into(),
                spec,
                validator: Arc::new(validator),
            })
            .collect();
        let assembly = Arc::new(Assembly { runtime, digest, pre, info, tools, imports });
        self.assembled.keep(&assembly.digest, &assembly);
        self.configure(assembly, origin, config)
    }

    /// A plugin of a live `assembly` another load made. Its artifact counts
    /// as used, as a load from the disk cache would have counted it, so the
    /// cache's bound does not drop what is in use first.
    fn configure_shared(
        &self,
        assembly: Arc<Assembly>,
        origin: &str,
        config: config::PluginConfig,
    ) -> Result<Plugin, LoadError> {
        if let Some(cache) = self.cache.as_deref() {
            cache::mark_used(cache, &assembly.runtime.engine, &assembly.digest);
        }
        self.configure(assembly, origin, config)
    }

    /// A plugin of `assembly` (shared with every plugin of its bytes) with
    /// its own `config`: its limits, instance mode and store namespace.
    fn configure(
        &self,
        assembly: Arc<Assembly>,
        origin: &str,
        config: config::PluginConfig,
    ) -> Result<Plugin, LoadError> {
        let limits = config.limits.apply(&self.config.limits);
        // Each instance's memory slot is the host's size: a plugin limit above
        // it would be reported to the model but never be had.
        if limits.memory_bytes > self.config.limits.memory_bytes {
            return Err(LoadError::MemoryAboveHost {
                origin: origin.into(),
                asked_mib: limits.memory_mib(),
                host_mib: self.config.limits.memory_mib(),
            });
        }
        let plugin = Plugin {
            inner: Arc::new(Inner {
                limits,
                store_namespace: config.store_namespace.as_deref().unwrap_or(&assembly.digest).into(),
                config,
                host: self.clone(),
                runtime: assembly.runtime.clone(),
                origin: origin.into(),
                digest: assembly.digest.clone(),
                name: assembly.info.name.as_str().into(),
                pre: assembly.pre.clone(),
                info: assembly.info.clone(),
                tools: assembly.tools.clone(),
                imports: assembly.imports.clone(),
                warm: Arc::default(),
                _assembly: assembly,
            }),
        };
        if plugin.inner.config.instance == InstanceMode::Session {
            let warm: Arc<dyn sandbox::IdleInstances> = plugin.inner.warm.clone();
            self.slots.register_idle(Arc::downgrade(&warm));
            plugin.sweep_idle_warm_instances();
        }
        Ok(plugin)
    }
}

/// Refuses a malformed pin, and a component whose `digest` (hex) is not
/// the pinned one.
fn check_digest(config: &config::PluginConfig, digest: &str, origin: &str) -> Result<(), LoadError> {
    let Some(pin) = &config.digest else { return Ok(()) };
    match config::pinned_sha256(pin) {
        None => Err(LoadError::BadDigest { origin: origin.into(), digest: pin.clone() }),
        Some(expected) if expected == digest => Ok(()),
        Some(_) => {
            Err(LoadError::DigestMismatch { origin: origin.into(), expected: pin.clone(), actual: digest.into() })
        }
    }
}

fn check_store_namespace(config: &config::PluginConfig, origin: &str) -> Result<(), LoadError> {
    match &config.store_namespace {
        Some(namespace) if !config::is_valid_store_namespace(namespace) => {
            Err(LoadError::StoreNamespace { origin: origin.into(), namespace: namespace.clone() })
        }
        _ => Ok(()),
    }
}

/// Checks that `bytes` look like a component: `\0asm`, then a version that
/// is not the core-module version 1.
pub fn check_header(bytes: &[u8], origin: &str) -> Result<(), LoadError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(LoadError::NotWasm { origin: origin.into() });
    }
    if bytes[4..8] == [1, 0, 0, 0] {
        return Err(LoadError::CoreModule { origin: origin.into() });
    }
    Ok(())
}

async fn describe(
    host: &Host,
    runtime: &Runtime,
    pre: &GuestPre,
    origin: &str,
    digest: &str,
) -> Result<(guest::PluginInfo, Vec<wit::ToolSpec>), LoadError> {
    let timeout = host.config.plugin_query_timeout;
    let timed_out = |function: &'static str| LoadError::Describe {
        origin: origin.into(),
        function,
        reason: format!("no answer within {} ms (the plugin query timeout)", timeout.as_millis()),
    };
    // Loading runs outside any tenant's call, so it takes one of the host's
    // slots only; `lovia serve` bounds the loads of each tenant.
    let _permit =
        tokio::time::timeout(timeout, host.slots.acquire(None)).await.map_err(|_| timed_out("instantiate"))?;
    let mut store = sandbox::new_store(
        &runtime.engine,
        StoreSpec {
            plugin: origin.into(),
            digest: sandbox::short_digest(digest),
            guest_logs: &host.guest_logs,
            // info() and tools() get no session store.
            store_namespace: "".into(),
            tool: "".into(),
            call: CallContext::default(),
            limits: &host.config.limits,
            timeout: Some(host.config.plugin_query_timeout),
            fuel: host.config.limits.fuel,
            grants: &crate::sandbox::Grants::default(),
            ticker: &runtime.ticker,
            session_store: None,
            cpu: None,
        },
    );
    let fail = |function: &'static str, err: &wasmtime::Error, store: &wasmtime::Store<sandbox::SandboxState>| {
        LoadError::Describe { origin: origin.into(), function, reason: sandbox::classify(err, store).to_string() }
    };
    // The epoch deadline stops a guest that computes; these wall-clock
    // deadlines stop one that waits on the host (a sleep) as well.
    let instance = tokio::time::timeout(timeout, pre.instantiate_async(&mut store))
        .await
        .map_err(|_| timed_out("instantiate"))?
        .map_err(|e| fail("instantiate", &e, &store))?;
    let info = tokio::time::timeout(timeout, instance.info(&mut store))
        .await
        .map_err(|_| timed_out("info"))?
        .map_err(|e| fail("info", &e, &store))?;
    let tools = tokio::time::timeout(timeout, instance.tools(&mut store))
        .await
        .map_err(|_| timed_out("tools"))?
        .map_err(|e| fail("tools", &e, &store))?;
    Ok((info, tools))
}
