//! A [`Plugin`]: a loaded component, its info and tool specs, and its
//! calls. Loading is in `load`, the checks of what a plugin declares in
//! `declared`, a call's run in `call`.

pub(crate) mod cache;
mod call;
pub mod config;
mod declared;
mod digest;
#[doc(hidden)]
#[cfg(feature = "direct-calls")]
pub mod floor;
mod imports;
mod load;
pub mod manifest;
mod request;
mod shared;
mod warm;

pub(crate) use call::CallParts;
pub use declared::{
    MAX_DECLARED_BYTES, MAX_DESCRIPTION_BYTES, MAX_INSTRUCTIONS_BYTES, MAX_SCHEMA_BYTES, MAX_TOOLS, MAX_VERSION_BYTES,
};
pub use digest::sha256_hex;
pub use load::check_header;
pub use request::CallRequest;
pub use warm::{InstanceMode, WARM_INSTANCES};

use crate::args::ArgumentValidator;
use crate::bindings::ContractVersion;
use crate::call::{CallContext, CallOutcome, Failure, ToolSpec, text};
use crate::engine::{Host, Runtime};
use crate::sandbox::{self, CallLimits, GuestPre, SessionStore, StoreSpec};
use call::{prepare, unavailable};
use serde::{Deserialize, Serialize};
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
    /// What it shares with the other plugins of its bytes; held so that
    /// the next load of them finds it (`shared`).
    _assembly: Arc<shared::Assembly>,
}

#[derive(Clone)]
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

    /// The engine it was compiled for, its compiled component, and the ABI.
    pub(crate) fn compiled(&self) -> (&wasmtime::Engine, &wasmtime::component::Component, crate::engine::Abi) {
        (&self.inner.runtime.engine, self.inner.pre.component(), self.inner.runtime.abi)
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

    /// Runs one call straight into the sandbox: lookup, argument checks,
    /// then the component in a fresh sandbox. Every outcome, including
    /// traps and timeouts, is data. The call's timeout covers the argument
    /// checks too (docs/semantics.md D15).
    ///
    /// None of the executor's rules apply (approval, policies, retries,
    /// rendering, truncation), so it is public only with the
    /// `direct-calls` feature, for tests of a plugin and of the sandbox; an
    /// application runs a call with [`crate::Executor::call`].
    #[cfg(feature = "direct-calls")]
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
                tool.validator.prepare_value_charged(value, Some(&request.arguments), deadline, cpu).await
            }
            Err(e) => Err(e),
        };
        let args = match checked.map_err(call::rejection) {
            Ok(args) => args.to_string(),
            Err(None) => return timed_out(timeout.unwrap_or_default()),
            Err(Some(rejection)) => return rejection,
        };
        let run = self.execute(tool, call::CallParts::of(request), &args);
        match timeout {
            // The sandbox's own deadline is the full timeout; this one ends the
            // call when what the checks left runs out (dropping the store stops the guest).
            Some(t) => {
                tokio::time::timeout(t.saturating_sub(started.elapsed()), run).await.unwrap_or_else(|_| timed_out(t))
            }
            None => run.await,
        }
    }

    /// Runs tool `name` with arguments the executor already checked (as
    /// JSON text): the executor's last step.
    pub(crate) async fn run(&self, name: &str, parts: call::CallParts<'_>, arguments: &str) -> CallOutcome {
        let Some(tool) = self.loaded(name) else { return unavailable(name) };
        self.execute(tool, parts, arguments).await
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
    /// with [`crate::call::ApprovalMode::AskPlugin`]). Any error means the call is denied.
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
