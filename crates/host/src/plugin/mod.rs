//! Loading a component into a [`Plugin`]: checks, compilation (cached),
//! `InstancePre`, the plugin's info and tool specs, and calls.

pub(crate) mod cache;
pub mod config;
#[doc(hidden)]
pub mod floor;
mod imports;
pub mod manifest;
mod request;
mod warm;

pub use request::CallRequest;
pub use warm::{InstanceMode, WARM_INSTANCES};

use crate::args::{ArgumentError, ArgumentValidator};
use crate::bindings::{ContractVersion, guest, wit};
use crate::call::CallContext;
use crate::call::{ApprovalMode, MAX_CONTENT_PARTS, MAX_TITLE_BYTES, ToolHints, ToolSpec, is_valid_name};
use crate::call::{CallOutcome, ContentPart, ErrorKind, Failure, is_valid_error_kind, text};
use crate::engine::{Abi, Host, Runtime};
use crate::error::LoadError;
use crate::sandbox::{self, CallLimits, GuestPre, SessionStore, StoreSpec};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Who a plugin is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Extra instructions for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// Why a plugin's `needs-approval` check gave no answer; the call is then
/// denied (docs/semantics.md §13: the check fails closed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalCheckError {
    /// The plugin has no such tool.
    #[error("{}", text::unknown_tool(tool))]
    UnknownTool {
        /// The name asked about.
        tool: String,
    },
    /// The plugin answered with an error.
    #[error("the plugin's approval check failed: {reason}")]
    Refused {
        /// What the plugin said.
        reason: String,
    },
    /// The check trapped or hit a limit.
    #[error("the plugin's approval check failed: {reason}")]
    Failed {
        /// The failure, as the model would read it.
        reason: String,
    },
    /// The check outlived [`crate::HostConfig::plugin_query_timeout`].
    #[error("the plugin's approval check took longer than {ms} ms")]
    TimedOut {
        /// The deadline.
        ms: u64,
    },
    /// The call's run was cancelled while the check ran.
    #[error("the run was cancelled during the approval check")]
    Cancelled,
}

/// A loaded plugin: compiled, linked, described. Cheap to clone.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<Inner>,
}

struct Inner {
    host: Host,
    /// The engine it was compiled for and runs on (by its exports' ABI).
    runtime: Arc<Runtime>,
    config: config::PluginConfig,
    limits: CallLimits,
    origin: String,
    digest: String,
    name: Arc<str>,
    /// What keys its session store: the config's `store_namespace`, else the digest.
    store_namespace: Arc<str>,
    pre: GuestPre,
    info: PluginInfo,
    tools: Vec<LoadedTool>,
    imports: Vec<String>,
    warm: Arc<warm::WarmInstances>,
}

struct LoadedTool {
    spec: ToolSpec,
    name: Arc<str>,
    validator: Arc<ArgumentValidator>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("origin", &self.inner.origin)
            .field("info", &self.inner.info)
            .field("tools", &self.inner.tools.iter().map(|t| &t.spec.name).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

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

    /// Compiles `bytes` for `runtime` here, or in a compile worker with a
    /// deadline when the host has one ([`crate::HostConfig::compile_worker`]).
    fn compile(
        &self,
        runtime: &Runtime,
        bytes: &[u8],
        origin: &str,
    ) -> Result<wasmtime::component::Component, LoadError> {
        match &self.config.compile_worker {
            None => cache::compile_fresh(&runtime.engine, bytes, origin),
            Some(worker) => {
                crate::compile_worker::compile(worker, self.engine_settings(runtime), &runtime.engine, bytes, origin)
            }
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
        let read = || {
            manifest::read_static(bytes)
                .map_err(|e| LoadError::Invalid { origin: origin.into(), reason: e.to_string() })
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
                    let component = self.compile(&runtime, bytes, origin)?;
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
            cache::store_artifact(&runtime.engine, cache, plugin.digest(), origin, &component)?;
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
                let manifest = manifest::Manifest { manifest_version: 1, info, tools };
                if let Some(dir) = cache_dir {
                    cache::store_described(dir, &runtime.engine, &digest, &manifest, &imports);
                }
                manifest
            }
        };
        // Also for a cached description: it may predate a limit.
        check_manifest(&described, origin)?;
        let manifest::Manifest { info, tools: specs, .. } = described;
        let mut tools: Vec<LoadedTool> = Vec::with_capacity(specs.len());
        for spec in specs {
            let validator = ArgumentValidator::new(&spec.name, &spec.parameters, spec.strict)
                .map_err(|reason| invalid_spec(origin, &spec.name, &reason.to_string()))?;
            tools.push(LoadedTool { name: spec.name.as_str().into(), spec, validator: Arc::new(validator) });
        }
        let plugin = Plugin {
            inner: Arc::new(Inner {
                limits: config.limits.apply(&self.config.limits),
                store_namespace: config.store_namespace.as_deref().unwrap_or(&digest).into(),
                config,
                host: self.clone(),
                runtime,
                origin: origin.into(),
                digest,
                name: info.name.as_str().into(),
                pre,
                info,
                tools,
                imports,
                warm: Arc::default(),
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

impl Plugin {
    /// The plugin's info.
    pub fn info(&self) -> &PluginInfo {
        &self.inner.info
    }

    /// Where it was loaded from.
    pub fn origin(&self) -> &str {
        &self.inner.origin
    }

    /// The version of the `lovia:tools` contract it was built against
    /// (docs/contract.md).
    pub fn contract_version(&self) -> ContractVersion {
        self.inner.pre.version()
    }

    /// The SHA-256 of its bytes, hex.
    pub fn digest(&self) -> &str {
        &self.inner.digest
    }

    /// What keys its session store (with the tenant and the session): the
    /// config's `store_namespace`, or else its digest.
    pub fn store_namespace(&self) -> &str {
        &self.inner.store_namespace
    }

    /// What the plugin is granted and its limits.
    pub fn config(&self) -> &config::PluginConfig {
        &self.inner.config
    }

    /// Identifies this loaded plugin (and so its warm instances) among the
    /// others in this process: clones share it, two loads of one file do not.
    pub(crate) fn instance_key(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// The limits of its calls (the host's with the plugin's overrides).
    pub fn limits(&self) -> &CallLimits {
        &self.inner.limits
    }

    /// The component's imports (what it may use).
    pub fn imports(&self) -> &[String] {
        &self.inner.imports
    }

    /// Its tools, in declaration order.
    pub fn tools(&self) -> impl ExactSizeIterator<Item = &ToolSpec> {
        self.inner.tools.iter().map(|t| &t.spec)
    }

    /// One tool's spec.
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.inner.tools.iter().find(|t| t.spec.name == name).map(|t| &t.spec)
    }

    /// The compiled argument validator of `tool`.
    pub fn validator(&self, tool: &str) -> Option<Arc<ArgumentValidator>> {
        self.loaded(tool).map(|t| t.validator.clone())
    }

    /// The manifest `lovia pack` embeds.
    pub fn manifest(&self) -> manifest::Manifest {
        manifest::Manifest {
            manifest_version: 1,
            info: self.inner.info.clone(),
            tools: self.tools().cloned().collect(),
        }
    }

    /// Checks the raw argument text of `tool` (docs/semantics.md §3, D1–D4): the
    /// object the tool would receive, or the rejection the model would read.
    pub fn prepare_arguments(&self, tool: &str, arguments: &str) -> Result<serde_json::Value, CallOutcome> {
        let Some(t) = self.loaded(tool) else { return Err(unavailable(tool)) };
        prepare(t, arguments)
    }

    /// Runs one call: lookup, argument checks, then the component in a fresh
    /// sandbox. Every outcome, including traps and timeouts, is data. The
    /// call's timeout covers the argument checks too (docs/semantics.md D15).
    pub async fn invoke(&self, request: &CallRequest) -> CallOutcome {
        let Some(tool) = self.loaded(&request.tool) else { return unavailable(&request.tool) };
        let started = std::time::Instant::now();
        let timeout = request.timeout.or(tool.spec.timeout_ms.map(Duration::from_millis));
        let timed_out = |t: Duration| {
            CallOutcome::Failed(Failure::TimedOut { ms: u64::try_from(t.as_millis()).unwrap_or(u64::MAX) })
        };
        let deadline = timeout.and_then(|t| started.checked_add(t));
        let checked = match crate::args::parse_object(&request.arguments) {
            Ok(value) => {
                let cpu = self.cpu_share(request.context.tenant.as_deref());
                tool.validator.prepare_value_charged(value, deadline, cpu).await
            }
            Err(e) => Err(e),
        };
        let args = match checked.map_err(rejection) {
            Ok(args) => args.to_string(),
            Err(None) => return timed_out(timeout.unwrap_or_default()),
            Err(Some(rejection)) => return rejection,
        };
        let run = self.execute(tool, request, &args);
        match timeout {
            // The sandbox's own deadline is the full timeout; this one ends the
            // call when what the checks left runs out (dropping the store stops the guest).
            Some(t) => {
                tokio::time::timeout(t.saturating_sub(started.elapsed()), run).await.unwrap_or_else(|_| timed_out(t))
            }
            None => run.await,
        }
    }

    /// Runs the component with arguments that [`Plugin::prepare_arguments`]
    /// already accepted (as JSON text).
    pub async fn run(&self, request: &CallRequest, arguments: &str) -> CallOutcome {
        let Some(tool) = self.loaded(&request.tool) else { return unavailable(&request.tool) };
        self.execute(tool, request, arguments).await
    }

    async fn execute(&self, tool: &LoadedTool, request: &CallRequest, arguments: &str) -> CallOutcome {
        let timeout = request.timeout.or(tool.spec.timeout_ms.map(Duration::from_millis));
        let limits = request.limits.as_ref().unwrap_or(&self.inner.limits);
        let host = &self.inner.host;
        let tenant = request.context.tenant.as_deref();
        // Held before the call and refunded when `metered` drops, however
        // the call ends (return, trap, timeout, or this future dropped).
        let Ok(reservation) = host.tenant_fuel.reserve(tenant, limits.fuel, host.config.fuel_metering) else {
            return CallOutcome::Failed(Failure::CpuBudget);
        };
        let fuel = reservation.fuel;
        let deadline = sandbox::deadline_of(limits, timeout);
        let spec = self.store_spec(tool, request.context.clone(), limits, timeout, fuel, request.session_store.clone());
        // Session mode: take the session's warm instance (if any) out of its
        // slot for the call; it goes back only if the call ends cleanly.
        let slot = match (&self.inner.config.instance, &request.context.session_id) {
            (InstanceMode::Session, Some(session)) => Some(self.inner.warm.slot(tenant, session)),
            _ => None,
        };
        let mut guard = match &slot {
            Some(slot) => Some(slot.lock().await),
            None => None,
        };
        // The instance slot is declared before the store so that it is
        // released after the store (and its instance) is gone.
        let mut permit: Option<sandbox::SlotPermit> = None;
        let (store, warm_instance) = match guard.as_mut().and_then(|g| g.take()) {
            Some(mut warm) => {
                sandbox::reuse_store(&mut warm.store, spec);
                permit = Some(warm.permit);
                (warm.store, Some(warm.instance))
            }
            None => (sandbox::new_store(&self.inner.runtime.engine, spec), None),
        };
        let mut metered = sandbox::MeteredStore::new(store, reservation);
        let session = request.context.session_id.as_deref().unwrap_or("");
        let held = &mut permit;
        let call = async {
            let store = metered.store_mut();
            let instance = match warm_instance {
                Some(instance) => instance,
                None => {
                    // Waiting for a slot counts against the call's deadline.
                    *held = Some(self.instance_slot(tenant, session).await);
                    self.inner.pre.instantiate_async(&mut *store).await?
                }
            };
            let output = instance.call(&mut *store, &tool.spec.name, arguments).await?;
            wasmtime::Result::Ok((output, instance))
        };
        let result = match tokio::time::timeout(deadline.budget, call).await {
            Ok(Ok((output, instance))) => {
                if let Some(guard) = guard.as_mut() {
                    // Only a call that returned (even with a tool error) leaves a usable instance.
                    let mut store = metered.into_store();
                    if let Some(permit) = permit.take() {
                        sandbox::park_store(&mut store);
                        **guard = Some(warm::Warm { store, instance, permit });
                        self.inner.warm.touch(tenant, session);
                    }
                    return self.finish(tool, request, limits, Ok(output), None);
                }
                Ok(output)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(wasmtime::Error::new(deadline)),
        };
        metered.settle();
        self.finish(tool, request, limits, result, Some(&*metered.store_mut()))
    }

    /// The outcome of a call from what the component returned, or from the
    /// error that ended it (classified with the help of its `store`).
    fn finish(
        &self,
        tool: &LoadedTool,
        request: &CallRequest,
        limits: &CallLimits,
        result: wasmtime::Result<Result<wit::Output, wit::CallError>>,
        store: Option<&wasmtime::Store<sandbox::SandboxState>>,
    ) -> CallOutcome {
        let too_large = |len: usize| {
            (len > limits.result_bytes).then_some(Failure::ResultTooLarge { bytes: len, limit: limits.result_bytes })
        };
        let size = match &result {
            Ok(Ok(wit::Output::Text(t) | wit::Output::Json(t))) => Some(t.len()),
            Ok(Ok(wit::Output::Parts(parts))) => Some(parts.iter().map(part_bytes).sum()),
            _ => None,
        };
        if let Some(failure) = size.and_then(too_large) {
            tracing::warn!(plugin = %crate::sandbox::escape_controls(&self.inner.name), tool = %tool.name, call = %request.context.call_id, %failure, "limit hit");
            return CallOutcome::Failed(failure);
        }
        match result {
            Ok(Ok(wit::Output::Text(text))) => CallOutcome::Text(text),
            Ok(Ok(wit::Output::Json(text))) => match serde_json::from_str(&text) {
                Ok(value) => CallOutcome::Json(value),
                Err(e) => CallOutcome::Failed(Failure::InvalidResult(format!("the tool returned invalid JSON: {e}"))),
            },
            Ok(Ok(wit::Output::Parts(parts))) => match content_parts(parts) {
                Ok(parts) => CallOutcome::Parts(parts),
                Err(problem) => {
                    tracing::warn!(plugin = %crate::sandbox::escape_controls(&self.inner.name), tool = %tool.name, call = %request.context.call_id, %problem, "bad content parts");
                    CallOutcome::Failed(Failure::InvalidResult(format!("the tool returned invalid content: {problem}")))
                }
            },
            Ok(Err(error)) => call_error(error),
            Err(err) => {
                let failure = match store {
                    Some(store) => sandbox::classify(&err, store),
                    None => Failure::Trap(err.to_string()),
                };
                if failure.is_retryable() {
                    tracing::debug!(plugin = %crate::sandbox::escape_controls(&self.inner.name), tool = %tool.name, call = %request.context.call_id, %failure, "call failed");
                } else {
                    // Resource limits are an operator's business: say which plugin, tool and call hit one.
                    tracing::warn!(plugin = %crate::sandbox::escape_controls(&self.inner.name), tool = %tool.name, call = %request.context.call_id, %failure, "limit hit");
                }
                CallOutcome::Failed(failure)
            }
        }
    }

    /// Drops the warm instance of a session (session mode); true if there
    /// was one. The session's next call starts a fresh instance.
    pub fn end_session(&self, tenant: Option<&str>, session: &str) -> bool {
        self.inner.warm.end(tenant, session)
    }

    /// How many sessions hold a warm instance (session mode).
    pub fn warm_sessions(&self) -> usize {
        self.inner.warm.len()
    }

    /// Drops warm instances idle for [`crate::HostConfig::warm_idle_timeout`],
    /// from a task that lives as long as the plugin (it holds it weakly).
    fn sweep_idle_warm_instances(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(plugin = %crate::sandbox::escape_controls(&self.inner.name), "no tokio runtime: idle warm instances are dropped only when evicted");
            return;
        };
        let idle = self.inner.host.config.warm_idle_timeout;
        // Check a few times per timeout, but never spin.
        let every = (idle / 4).max(Duration::from_millis(50));
        let plugin = Arc::downgrade(&self.inner);
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(inner) = plugin.upgrade() else { return };
                let dropped = inner.warm.sweep(idle);
                if dropped > 0 {
                    tracing::debug!(plugin = %crate::sandbox::escape_controls(&inner.name), dropped, "idle warm instances dropped");
                }
            }
        });
    }

    /// Asks the plugin's `needs-approval` export about one call (for tools
    /// with [`ApprovalMode::AskPlugin`]). Any error means the call is denied.
    ///
    /// The check has a wall-clock deadline
    /// ([`crate::HostConfig::plugin_query_timeout`], which holds while the
    /// guest sleeps too) and ends at once when the call's run is cancelled.
    pub async fn needs_approval(
        &self,
        tool: &str,
        arguments: &str,
        context: &CallContext,
    ) -> Result<bool, ApprovalCheckError> {
        let Some(t) = self.loaded(tool) else { return Err(ApprovalCheckError::UnknownTool { tool: tool.into() }) };
        let limits = &self.inner.limits;
        let timeout = self.inner.host.config.plugin_query_timeout;
        let tenant = context.tenant.as_deref();
        let host = &self.inner.host;
        // The check burns the tenant's fuel like a call: held before, the
        // rest refunded after (see `execute`).
        let Ok(reservation) = host.tenant_fuel.reserve(tenant, limits.fuel, host.config.fuel_metering) else {
            return Err(ApprovalCheckError::Failed { reason: Failure::CpuBudget.to_string() });
        };
        let spec = self.store_spec(t, context.clone(), limits, Some(timeout), reservation.fuel, None);
        let mut permit: Option<sandbox::SlotPermit> = None;
        let mut metered = sandbox::MeteredStore::new(sandbox::new_store(&self.inner.runtime.engine, spec), reservation);
        let held = &mut permit;
        let check = async {
            let store = metered.store_mut();
            *held = Some(self.instance_slot(tenant, "").await);
            let instance = self.inner.pre.instantiate_async(&mut *store).await?;
            instance.needs_approval(&mut *store, tool, arguments).await
        };
        let result = tokio::select! {
            result = tokio::time::timeout(timeout, check) => result,
            () = context.cancel.cancelled() => return Err(ApprovalCheckError::Cancelled),
        };
        metered.settle();
        match result {
            Ok(Ok(answer)) => answer.map_err(|reason| ApprovalCheckError::Refused { reason }),
            Ok(Err(err)) => {
                Err(ApprovalCheckError::Failed { reason: sandbox::classify(&err, metered.store_mut()).to_string() })
            }
            Err(_) => Err(ApprovalCheckError::TimedOut { ms: timeout.as_millis() as u64 }),
        }
    }

    /// An instance slot for a call of `tenant`: at once when one is free;
    /// else the tenant gives up its least recently used idle warm instance
    /// (other than `session`'s) in this plugin, or failing that in another,
    /// and the call waits its turn.
    async fn instance_slot(&self, tenant: Option<&str>, session: &str) -> sandbox::SlotPermit {
        let slots = &self.inner.host.slots;
        if let Some(permit) = slots.try_acquire(tenant) {
            return permit;
        }
        slots.evict_idle(&*self.inner.warm, tenant, session);
        slots.acquire(tenant).await
    }

    /// What one call's store is for.
    fn store_spec<'a>(
        &'a self,
        tool: &LoadedTool,
        call: CallContext,
        limits: &'a CallLimits,
        timeout: Option<Duration>,
        fuel: Option<u64>,
        session_store: Option<Arc<dyn SessionStore>>,
    ) -> StoreSpec<'a> {
        let cpu = self.inner.host.cpu.of(call.tenant.as_deref());
        StoreSpec {
            cpu,
            plugin: self.inner.name.clone(),
            digest: sandbox::short_digest(&self.inner.digest),
            guest_logs: &self.inner.host.guest_logs,
            store_namespace: self.inner.store_namespace.clone(),
            tool: tool.name.clone(),
            call,
            limits,
            fuel,
            grants: &self.inner.config.grants,
            ticker: &self.inner.runtime.ticker,
            timeout,
            session_store,
        }
    }

    /// The CPU share of `tenant`'s calls to this plugin, if it has one.
    pub(crate) fn cpu_share(&self, tenant: Option<&str>) -> Option<Arc<sandbox::TenantCpu>> {
        self.inner.host.cpu.of(tenant)
    }

    fn loaded(&self, name: &str) -> Option<&LoadedTool> {
        self.inner.tools.iter().find(|t| t.spec.name == name)
    }
}

fn prepare(tool: &LoadedTool, arguments: &str) -> Result<serde_json::Value, CallOutcome> {
    let checked = crate::args::parse_object(arguments).and_then(|v| tool.validator.prepare_value(v));
    // Without a deadline the check cannot time out.
    checked.map_err(|e| rejection(e).unwrap_or_else(|| CallOutcome::Failed(Failure::TimedOut { ms: 0 })))
}

/// What the model reads for rejected arguments (`None`: the deadline passed).
fn rejection(e: ArgumentError) -> Option<CallOutcome> {
    match e {
        // Schema-invalid arguments read as the reference's execution error (docs/semantics.md D1, D4).
        ArgumentError::Invalid { .. } => {
            Some(CallOutcome::Rejected { kind: ErrorKind::InvalidArguments, text: text::tool_error(&e) })
        }
        ArgumentError::DeadlinePassed => None,
        other => Some(CallOutcome::Rejected { kind: ErrorKind::InvalidArguments, text: other.to_string() }),
    }
}

fn unavailable(tool: &str) -> CallOutcome {
    CallOutcome::Rejected { kind: ErrorKind::UnknownTool, text: text::unknown_tool(tool) }
}

/// The bytes a result's parts hold, before they are checked.
fn part_bytes(part: &wit::ContentPart) -> usize {
    match part {
        wit::ContentPart::Text(t) => t.len(),
        wit::ContentPart::Image(i) => i.mime_type.len() + i.data.len(),
        wit::ContentPart::ResourceLink(l) => l.uri.len() + l.name.len() + l.mime_type.as_ref().map_or(0, String::len),
    }
}

/// A tool's parts, checked: at most [`MAX_CONTENT_PARTS`], each within the
/// bounds [`ContentPart::problem`] names.
fn content_parts(parts: Vec<wit::ContentPart>) -> Result<Vec<ContentPart>, String> {
    if parts.len() > MAX_CONTENT_PARTS {
        return Err(format!("{} content parts; the limit is {MAX_CONTENT_PARTS}", parts.len()));
    }
    parts
        .into_iter()
        .map(|part| {
            let part = match part {
                wit::ContentPart::Text(text) => ContentPart::Text { text },
                wit::ContentPart::Image(i) => ContentPart::Image { mime_type: i.mime_type, data: i.data },
                wit::ContentPart::ResourceLink(l) => {
                    ContentPart::ResourceLink { uri: l.uri, name: l.name, mime_type: l.mime_type }
                }
            };
            match part.problem() {
                Some(problem) => Err(problem),
                None => Ok(part),
            }
        })
        .collect()
}

fn call_error(error: wit::CallError) -> CallOutcome {
    match error {
        // A kind outside the grammar is dropped: it would reach metrics labels and the model.
        wit::CallError::Tool(e) => CallOutcome::Failed(Failure::Tool {
            message: e.message,
            hint: e.hint,
            kind: e.kind.filter(|k| is_valid_error_kind(k)),
        }),
        wit::CallError::InvalidArguments(m) => CallOutcome::Failed(Failure::InvalidArguments(m)),
        wit::CallError::BudgetExceeded(m) => CallOutcome::Failed(Failure::BudgetExceeded(m)),
        wit::CallError::CancelRun(reason) => CallOutcome::CancelRun(reason),
    }
}

/// A store namespace the config names must be a valid one.
/// The SHA-256 of a component's bytes, hex: what [`Plugin::digest`] says
/// and what a `digest = "sha256:…"` pin names.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
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

fn invalid_spec(origin: &str, tool: &str, reason: &str) -> LoadError {
    LoadError::InvalidSpec { origin: origin.into(), tool: tool.into(), reason: reason.into() }
}

/// Largest parameters (or output) schema accepted, in bytes of JSON text. Fixed: 256 KiB.
pub const MAX_SCHEMA_BYTES: usize = 256 << 10;

/// Largest tool description accepted, in bytes; also the cap on each
/// `description` and `title` string inside a schema. Models read it every
/// turn. Fixed: 4 KiB.
pub const MAX_DESCRIPTION_BYTES: usize = 4 << 10;

/// Largest `instructions` a plugin's `info()` may give, in bytes. Fixed: 8 KiB.
pub const MAX_INSTRUCTIONS_BYTES: usize = 8 << 10;

/// Longest plugin version, in bytes (the name follows the tool-name grammar,
/// `^[a-zA-Z0-9_-]{1,64}$`). Fixed: 64.
pub const MAX_VERSION_BYTES: usize = 64;

/// Most tools one plugin may declare (OpenAI accepts 128 per request). Fixed: 128.
pub const MAX_TOOLS: usize = 128;

/// Most text one plugin may put before a model, in bytes: its instructions
/// and every tool's name, description and schemas together, which
/// `/api/tools` serves and a model reads every turn. Fixed: 1 MiB.
pub const MAX_DECLARED_BYTES: usize = 1 << 20;

fn invalid_plugin(origin: &str, reason: String) -> LoadError {
    LoadError::InvalidPlugin { origin: origin.into(), reason }
}

/// The count and total size of what `info()` and `tools()` returned, checked
/// before any schema is parsed, so that a plugin declaring a million tools
/// costs one pass over their lengths.
fn check_declared_size(info: &guest::PluginInfo, specs: &[wit::ToolSpec], origin: &str) -> Result<(), LoadError> {
    check_info(&info.name, &info.version, info.instructions.as_deref(), origin)?;
    if specs.len() > MAX_TOOLS {
        return Err(invalid_plugin(
            origin,
            format!("the plugin declares {} tools; the limit is {MAX_TOOLS}", specs.len()),
        ));
    }
    // Each tool's own limits first: their errors name the tool.
    for spec in specs {
        let shown: String = spec.name.chars().take(80).collect();
        if let Some(problem) = spec.title.as_deref().and_then(title_problem) {
            return Err(invalid_spec(origin, &shown, &problem));
        }
        if spec.description.len() > MAX_DESCRIPTION_BYTES {
            return Err(invalid_spec(
                origin,
                &shown,
                &format!("the description is {} bytes; the limit is {MAX_DESCRIPTION_BYTES}", spec.description.len()),
            ));
        }
        for (what, text) in [("parameters", Some(&spec.parameters)), ("output", spec.output_schema.as_ref())] {
            if let Some(text) = text
                && text.len() > MAX_SCHEMA_BYTES
            {
                return Err(invalid_spec(
                    origin,
                    &shown,
                    &format!("the {what} schema is {} bytes; the limit is {MAX_SCHEMA_BYTES}", text.len()),
                ));
            }
        }
    }
    let text = |s: &wit::ToolSpec| {
        s.name.len()
            + s.title.as_ref().map_or(0, String::len)
            + s.description.len()
            + s.parameters.len()
            + s.output_schema.as_ref().map_or(0, String::len)
    };
    let total = specs.iter().map(text).sum::<usize>() + info.instructions.as_ref().map_or(0, String::len);
    check_total(total, origin)
}

fn check_total(total: usize, origin: &str) -> Result<(), LoadError> {
    if total > MAX_DECLARED_BYTES {
        return Err(invalid_plugin(
            origin,
            format!(
                "the plugin's instructions, tool names, descriptions and schemas are {total} bytes; the limit is {MAX_DECLARED_BYTES}"
            ),
        ));
    }
    Ok(())
}

/// The plugin's name (the tool-name grammar: it reaches logs, metrics and
/// `/api/tools`), version and instructions.
fn check_info(name: &str, version: &str, instructions: Option<&str>, origin: &str) -> Result<(), LoadError> {
    if !is_valid_name(name) {
        // Shown escaped and cut: the name may hold newlines meant to forge log lines.
        let shown: String = name.chars().take(80).collect();
        return Err(invalid_plugin(
            origin,
            format!("the plugin name \"{}\" must match ^[a-zA-Z0-9_-]{{1,64}}$", shown.escape_debug()),
        ));
    }
    if version.len() > MAX_VERSION_BYTES {
        return Err(invalid_plugin(
            origin,
            format!("the plugin version is {} bytes; the limit is {MAX_VERSION_BYTES}", version.len()),
        ));
    }
    let instructions = instructions.map_or(0, str::len);
    if instructions > MAX_INSTRUCTIONS_BYTES {
        return Err(invalid_plugin(
            origin,
            format!("the plugin's instructions are {instructions} bytes; the limit is {MAX_INSTRUCTIONS_BYTES}"),
        ));
    }
    Ok(())
}

/// What the plugin says about itself, whether just described or cached:
/// a plugin name of the tool-name grammar (it reaches logs, metrics and
/// `/api/tools`), bounded version and instructions, and every text a model
/// reads bounded (docs/tool-authors.md, "Limits").
fn check_manifest(manifest: &manifest::Manifest, origin: &str) -> Result<(), LoadError> {
    let info = &manifest.info;
    check_info(&info.name, &info.version, info.instructions.as_deref(), origin)?;
    let instructions = info.instructions.as_ref().map_or(0, String::len);
    if manifest.tools.len() > MAX_TOOLS {
        return Err(invalid_plugin(
            origin,
            format!("the plugin declares {} tools; the limit is {MAX_TOOLS}", manifest.tools.len()),
        ));
    }
    let mut total = instructions;
    for spec in &manifest.tools {
        if let Some(problem) = spec.title.as_deref().and_then(title_problem) {
            return Err(invalid_spec(origin, &spec.name, &problem));
        }
        if spec.description.len() > MAX_DESCRIPTION_BYTES {
            return Err(invalid_spec(
                origin,
                &spec.name,
                &format!("the description is {} bytes; the limit is {MAX_DESCRIPTION_BYTES}", spec.description.len()),
            ));
        }
        for (what, schema) in [("parameters", Some(&spec.parameters)), ("output", spec.output_schema.as_ref())] {
            if let Some(bytes) = schema.and_then(longest_description)
                && bytes > MAX_DESCRIPTION_BYTES
            {
                return Err(invalid_spec(
                    origin,
                    &spec.name,
                    &format!(
                        "a description in the {what} schema is {bytes} bytes; the limit is {MAX_DESCRIPTION_BYTES}"
                    ),
                ));
            }
        }
        total += spec.name.len()
            + spec.title.as_ref().map_or(0, String::len)
            + spec.description.len()
            + spec.parameters.to_string().len()
            + spec.output_schema.as_ref().map_or(0, |s| s.to_string().len());
    }
    check_total(total, origin)
}

/// Why a tool's title is refused: longer than [`MAX_TITLE_BYTES`], or with
/// control characters (it reaches logs, consoles and MCP clients).
fn title_problem(title: &str) -> Option<String> {
    if title.len() > MAX_TITLE_BYTES {
        Some(format!("the title is {} bytes; the limit is {MAX_TITLE_BYTES}", title.len()))
    } else if title.chars().any(char::is_control) {
        Some("the title must not contain control characters".into())
    } else {
        None
    }
}

/// The longest `description` or `title` string anywhere in `schema`, in bytes.
fn longest_description(schema: &serde_json::Value) -> Option<usize> {
    let mut longest = None;
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        match node {
            serde_json::Value::Object(obj) => {
                for (key, value) in obj {
                    match value {
                        serde_json::Value::String(s) if key == "description" || key == "title" => {
                            longest = longest.max(Some(s.len()));
                        }
                        other => stack.push(other),
                    }
                }
            }
            serde_json::Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    longest
}

fn convert_spec(spec: wit::ToolSpec, origin: &str) -> Result<ToolSpec, LoadError> {
    if !is_valid_name(&spec.name) {
        let shown: String = spec.name.chars().take(80).collect();
        return Err(invalid_spec(origin, &shown, "a tool name must match ^[a-zA-Z0-9_-]{1,64}$"));
    }
    let parse = |text: &str, what: &str| -> Result<serde_json::Value, LoadError> {
        if text.len() > MAX_SCHEMA_BYTES {
            return Err(invalid_spec(
                origin,
                &spec.name,
                &format!("the {what} schema is {} bytes; the limit is {MAX_SCHEMA_BYTES}", text.len()),
            ));
        }
        serde_json::from_str(text)
            .map_err(|e| invalid_spec(origin, &spec.name, &format!("the {what} schema is not JSON: {e}")))
    };
    let parameters = parse(&spec.parameters, "parameters")?;
    let output_schema = spec.output_schema.as_deref().map(|s| parse(s, "output")).transpose()?;
    Ok(ToolSpec {
        parameters,
        output_schema,
        title: spec.title,
        description: spec.description,
        strict: spec.strict,
        parallel: spec.parallel,
        retries: spec.retries,
        timeout_ms: spec.timeout_ms,
        max_output_chars: spec.max_output_chars,
        approval: match spec.approval {
            wit::Approval::Never => ApprovalMode::Never,
            wit::Approval::Always => ApprovalMode::Always,
            wit::Approval::AskPlugin => ApprovalMode::AskPlugin,
        },
        hints: ToolHints::stated(
            spec.hints.read_only,
            spec.hints.destructive,
            spec.hints.idempotent,
            spec.hints.open_world,
        ),
        name: spec.name,
    })
}
