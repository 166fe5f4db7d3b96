//! The wasmtime engine and the [`Host`] that loads plugins.

use crate::artifacts::ArtifactCache;
pub(crate) use crate::bindings::Abi;
use crate::error::HostError;
use crate::sandbox::{CallLimits, SandboxState, Ticker};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

pub use crate::sandbox::EPOCH_TICK;

/// Host-wide settings. Every field documents its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostConfig {
    /// Where compiled components are cached, keyed by content digest and
    /// engine configuration. Default: `None`, no cache (the `lovia` CLI uses
    /// `$XDG_CACHE_HOME/lovia` or `~/.cache/lovia`). Created 0700; a
    /// directory that group or others may write, or that another user owns,
    /// is refused ([`HostError::CacheInsecure`]). Every artifact carries an
    /// HMAC under a per-host key kept in the directory (`artifact.key`,
    /// 0600); one that does not verify is recompiled, never loaded.
    pub cache_dir: Option<PathBuf>,
    /// The most bytes of compiled artifacts `cache_dir` keeps: after each
    /// new artifact is written, the least recently loaded ones (with their
    /// seals and descriptions) are removed until the rest fit; the one just
    /// written always stays. Default: 2 GiB.
    pub cache_max_bytes: u64,
    /// Instance slots reserved by the pooling allocator. Default: 128. Each
    /// slot reserves address space, not memory; if the reservation fails the
    /// host falls back to on-demand allocation.
    pub pool_slots: u32,
    /// Limits of every call unless a plugin or call sets tighter ones.
    /// Default: [`CallLimits::default`].
    pub limits: CallLimits,
    /// Counts fuel (deterministic CPU) in every call, so that
    /// [`CallLimits::fuel`] and `tenant_fuel` apply. Costs some speed.
    /// Default: false.
    pub fuel_metering: bool,
    /// Fuel each tenant may burn over the host's lifetime, across all its
    /// calls; a tenant past it gets `CPU budget exhausted`. Each call holds
    /// its fuel (its [`CallLimits::fuel`], or all that is left) from this
    /// budget while it runs and gives back what it did not burn, so parallel
    /// calls cannot overspend it. Needs `fuel_metering`. Default: none.
    pub tenant_fuel: Option<u64>,
    /// Size of the wasm call stack. Default: 512 KiB (wasmtime's). Past it
    /// the model sees `Tool error: stack overflow`.
    pub max_wasm_stack: usize,
    /// Instances one tenant may hold at once, across all plugins: running
    /// calls, `needs-approval` checks and parked warm instances. A tenant at
    /// its limit waits for its own instances (inside each call's deadline),
    /// never for another tenant's. Calls without a tenant count only against
    /// `pool_slots`. Default: 32, a quarter of the default `pool_slots`; keep
    /// `tenant_instances` × tenants at or under `pool_slots` to guarantee every
    /// tenant its share.
    pub tenant_instances: u32,
    /// How long a warm instance (session mode) may sit unused before it is
    /// dropped and its slot freed. Default: 300 s.
    pub warm_idle_timeout: Duration,
    /// The wall-clock deadline of each plugin query: `info()` and `tools()`
    /// at load, `needs-approval` before a call. It holds while the guest waits
    /// on the host (a sleep), not only while it computes. Default: 5 s.
    pub plugin_query_timeout: Duration,
    /// What each tenant's guests may write to the log through
    /// `context.log`, per minute and from which level (calls without a
    /// tenant share one budget); [`Host::guest_logs`] sets a tenant's own.
    /// Default: [`crate::sandbox::GuestLogLimits::default`], 1 MiB a minute
    /// from `info` up.
    pub guest_logs: crate::sandbox::GuestLogLimits,
    /// Compile components in a child process that is killed past its
    /// timeout ([`crate::compile_worker`]), so that no component can hold a
    /// core for longer; `lovia serve` sets it for uploads and configured
    /// plugins alike. Default: `None`, compiles run in this process without
    /// a deadline (a cached artifact never compiles).
    pub compile_worker: Option<crate::compile_worker::CompileWorker>,
    /// The cores each tenant's guest code (and its costly argument checks)
    /// may use at once: each epoch tick of a tenant's call takes a token
    /// from a bucket that fills at this many a millisecond, and a call that
    /// finds none waits for one ([`crate::sandbox::CpuShares`];
    /// [`Host::cpu_shares`] sets one tenant's own). Calls without a tenant
    /// are not counted. Default: none, no tenant is held back (`lovia serve`
    /// gives each tenant all the cores but one).
    pub tenant_cpu_cores: Option<f64>,
    /// Bytes at the start of each pooled linear memory that stay mapped
    /// between instances. The pages an instance wrote there are found with
    /// `PAGEMAP_SCAN` (Linux 6.7+) and reset in place, copied back from the
    /// component's image, so the next instance in the slot starts without a
    /// page fault; pages written past it are unmapped, and the next
    /// instance faults them in again (docs/performance.md, "Round three").
    /// The cost is memory: up to this many bytes per pool slot stay
    /// resident, but only of pages some instance wrote. Default: 2 MiB.
    pub keep_resident_bytes: usize,
    /// Called with a plugin's origin and size just before it is compiled
    /// (not when it loads from the cache): a compile takes seconds (6.5 s
    /// for an 18 MB Python plugin in a debug build, `lovia --no-cache call`),
    /// and a command-line door tells its user why it waits. Default: none.
    pub on_compile: Option<CompileNotice>,
}

/// The function of a [`CompileNotice`]: `(origin, bytes)`.
pub type CompileFn = dyn Fn(&str, usize) + Send + Sync;

/// What [`HostConfig::on_compile`] calls: `(origin, bytes)`.
#[derive(Clone)]
pub struct CompileNotice(pub Arc<CompileFn>);

impl std::fmt::Debug for CompileNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompileNotice(..)")
    }
}

crate::setters::setters!(HostConfig {
    with_cache_dir => cache_dir: Option<PathBuf>,
    with_cache_max_bytes => cache_max_bytes: u64,
    with_pool_slots => pool_slots: u32,
    with_limits => limits: CallLimits,
    with_fuel_metering => fuel_metering: bool,
    with_tenant_fuel => tenant_fuel: Option<u64>,
    with_max_wasm_stack => max_wasm_stack: usize,
    with_tenant_instances => tenant_instances: u32,
    with_warm_idle_timeout => warm_idle_timeout: Duration,
    with_plugin_query_timeout => plugin_query_timeout: Duration,
    with_guest_logs => guest_logs: crate::sandbox::GuestLogLimits,
    with_compile_worker => compile_worker: Option<crate::compile_worker::CompileWorker>,
    with_tenant_cpu_cores => tenant_cpu_cores: Option<f64>,
    with_keep_resident_bytes => keep_resident_bytes: usize,
    with_on_compile => on_compile: Option<CompileNotice>,
});

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            cache_dir: None,
            cache_max_bytes: 2 << 30,
            pool_slots: 128,
            limits: CallLimits::default(),
            fuel_metering: false,
            tenant_fuel: None,
            max_wasm_stack: 512 << 10,
            tenant_instances: 32,
            warm_idle_timeout: Duration::from_secs(300),
            plugin_query_timeout: Duration::from_secs(5),
            guest_logs: crate::sandbox::GuestLogLimits::default(),
            compile_worker: None,
            tenant_cpu_cores: None,
            on_compile: None,
            keep_resident_bytes: 2 << 20,
        }
    }
}

/// One engine and what runs on it: the linker of the lovia and WASI
/// imports, and the epoch ticker that interrupts its guests.
pub(crate) struct Runtime {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<SandboxState>,
    pub(crate) ticker: Ticker,
    pub(crate) pooled: bool,
    pub(crate) abi: Abi,
}

impl Runtime {
    fn new(config: &HostConfig, abi: Abi) -> Result<Runtime, HostError> {
        let (engine, pooled) = match Engine::new(&engine_config(config, true, abi)) {
            Ok(engine) => (engine, true),
            Err(err) => {
                tracing::warn!(%err, "pooling allocator unavailable; falling back to on-demand allocation");
                let engine =
                    Engine::new(&engine_config(config, false, abi)).map_err(|source| HostError::Engine { source })?;
                (engine, false)
            }
        };
        let linker = crate::sandbox::linker(&engine).map_err(|source| HostError::Linker { source })?;
        let ticker = Ticker::start(engine.clone());
        Ok(Runtime { engine, linker, ticker, pooled, abi })
    }
}

/// The runtime that loads plugins. Cheap to clone; the epoch tickers stop
/// when the last clone is dropped.
#[derive(Clone)]
pub struct Host {
    /// The engine of synchronous plugins (every Rust and Python one):
    /// `sync_runtime`'s, kept here for the code that needs only an engine.
    pub(crate) engine: Engine,
    /// The runtime of synchronous plugins.
    pub(crate) sync_runtime: Arc<Runtime>,
    /// The engine of `async-plugin` components, made on first need: a host
    /// that loads none never pays for a second pool.
    async_runtime: Arc<std::sync::Mutex<Option<Arc<Runtime>>>>,
    pub(crate) config: Arc<HostConfig>,
    pub(crate) tenant_fuel: Arc<crate::sandbox::FuelLedger>,
    pub(crate) slots: Arc<crate::sandbox::InstanceSlots>,
    pub(crate) guest_logs: Arc<crate::sandbox::GuestLogs>,
    pub(crate) cpu: Arc<crate::sandbox::CpuShares>,
    /// The opened artifact cache (`cache_dir`), with its key.
    pub(crate) cache: Option<Arc<ArtifactCache>>,
    /// The plugins loaded and still alive, by digest: another load of the
    /// same bytes shares their compiled component, link, description and
    /// validators (`plugin::shared`), so a thousand tenants of one plugin
    /// hold one copy of it and start without compiling it again.
    pub(crate) assembled: crate::live::LiveByDigest,
    pooled: bool,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").field("config", &self.config).field("pooled", &self.pooled).finish_non_exhaustive()
    }
}

impl Host {
    /// Creates the engine (pooling allocator if possible), the linker with
    /// WASI 0.2 and the lovia interfaces, and starts the epoch ticker.
    pub fn new(config: HostConfig) -> Result<Host, HostError> {
        // Created 0700 and checked: whoever can write it could make this
        // host run their native code.
        let cache = config
            .cache_dir
            .as_deref()
            .map(|dir| ArtifactCache::open(dir, config.cache_max_bytes))
            .transpose()?
            .map(Arc::new);
        let runtime = Arc::new(Runtime::new(&config, Abi::Sync)?);
        let tenant_fuel = Arc::new(crate::sandbox::FuelLedger::new(config.tenant_fuel));
        let slots = Arc::new(crate::sandbox::InstanceSlots::new(config.pool_slots, config.tenant_instances));
        let guest_logs = Arc::new(crate::sandbox::GuestLogs::new(config.guest_logs));
        let cpu = Arc::new(crate::sandbox::CpuShares::new(config.tenant_cpu_cores));
        Ok(Host {
            slots,
            guest_logs,
            cpu,
            engine: runtime.engine.clone(),
            pooled: runtime.pooled,
            sync_runtime: runtime,
            async_runtime: Arc::default(),
            config: Arc::new(config),
            tenant_fuel,
            cache,
            assembled: Default::default(),
        })
    }

    /// The runtime of plugins of `abi`; the async one is made on first need.
    pub(crate) fn runtime(&self, abi: Abi) -> Result<Arc<Runtime>, HostError> {
        match abi {
            Abi::Sync => Ok(self.sync_runtime.clone()),
            Abi::Async => {
                let mut slot = self.async_runtime.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(runtime) = slot.as_ref() {
                    return Ok(runtime.clone());
                }
                let runtime = Arc::new(Runtime::new(&self.config, Abi::Async)?);
                *slot = Some(runtime.clone());
                Ok(runtime)
            }
        }
    }

    /// The runtime of async plugins, if one was made.
    pub(crate) fn async_runtime_if_made(&self) -> Option<Arc<Runtime>> {
        self.async_runtime.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The settings this host was created with.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// The fuel `tenant` may still burn (`None`: unlimited).
    pub fn tenant_fuel_remaining(&self, tenant: Option<&str>) -> Option<u64> {
        self.tenant_fuel.remaining(tenant)
    }

    /// The per-tenant fuel accounts (needs `fuel_metering`).
    pub fn tenant_fuel(&self) -> &crate::sandbox::FuelLedger {
        &self.tenant_fuel
    }

    /// The tenants' CPU shares: [`crate::sandbox::CpuShares::limit`] sets a
    /// tenant's own.
    pub fn cpu_shares(&self) -> &crate::sandbox::CpuShares {
        &self.cpu
    }

    /// The guest log budgets: [`crate::sandbox::GuestLogs::limit`] sets a
    /// tenant's own.
    pub fn guest_logs(&self) -> &crate::sandbox::GuestLogs {
        &self.guest_logs
    }

    /// Instances `tenant` holds now: running calls, approval checks and
    /// warm instances.
    pub fn tenant_instances(&self, tenant: &str) -> usize {
        self.slots.in_use(tenant)
    }

    /// Whether the pooling allocator is in use (false after a fallback).
    pub fn is_pooled(&self) -> bool {
        self.pooled
    }

    /// What a compile worker needs to build an engine whose artifacts
    /// `runtime`'s accepts.
    pub(crate) fn engine_settings(&self, runtime: &Runtime) -> crate::compile_worker::EngineSettings {
        crate::compile_worker::EngineSettings {
            fuel_metering: self.config.fuel_metering,
            max_wasm_stack: self.config.max_wasm_stack,
            pool_slots: self.config.pool_slots,
            memory_bytes: self.config.limits.memory_bytes,
            pooled: runtime.pooled,
            abi: runtime.abi,
        }
    }
}

pub(crate) fn engine_config(host: &HostConfig, pooled: bool, abi: Abi) -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.wasm_component_model(true);
    match abi {
        // The workspace builds wasmtime with component-model async (code
        // mode, async plugins); synchronous plugins' stores skip the
        // concurrent runtime's state.
        Abi::Sync => {
            config.concurrency_support(false);
        }
        // `async-plugin`'s exports are lifted with the component-model
        // async ABI (JavaScript: docs/contract.md).
        Abi::Async => {
            config.wasm_component_model_async(true);
            config.concurrency_support(true);
        }
    }
    config.consume_fuel(host.fuel_metering);
    config.max_wasm_stack(host.max_wasm_stack);
    // Wasm-level backtraces and their address maps are for debugging guests;
    // traps are classified by their codes. Leaving them out makes artifacts
    // smaller and cached loads faster.
    config.generate_address_map(false);
    config.wasm_backtrace_max_frames(None);
    // Native unwind tables only serve host debuggers and profilers walking
    // through guest frames; registering them dominated cached loads.
    config.native_unwind_info(false);
    if pooled {
        let mut pooling = PoolingAllocationConfig::default();
        let slots = host.pool_slots.max(1);
        pooling.total_component_instances(slots);
        pooling.total_core_instances(slots.saturating_mul(4));
        pooling.total_memories(slots.saturating_mul(2));
        pooling.total_tables(slots.saturating_mul(4));
        pooling.total_stacks(slots);
        pooling.max_memory_size(host.limits.memory_bytes);
        // Resetting a slot with madvise shoots down TLBs on every core on
        // every call (it dominated profiles: docs/performance.md). Instead keep the
        // first pages of each memory and table resident and reset only the
        // dirty ones with memset (PAGEMAP_SCAN, Linux 6.7+; plain memset of
        // the kept bytes before that), and batch what must still be decommitted.
        pooling.linear_memory_keep_resident(host.keep_resident_bytes);
        pooling.table_keep_resident(64 << 10);
        pooling.pagemap_scan(wasmtime::Enabled::Auto);
        pooling.decommit_batch_size(DECOMMIT_BATCH);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    } else {
        // The on-demand fallback serves a host whose address space is
        // bounded (`RLIMIT_AS`: lovia run as a confined MCP server of
        // another lovia, a container), where the pool could not be mapped.
        // wasmtime's defaults would reserve 4 GiB and a 32 GiB guard per
        // memory, which such a host cannot map either: reserve only what a
        // plugin may use, with explicit bounds checks instead of guards.
        config.memory_reservation(host.limits.memory_bytes as u64);
        config.memory_guard_size(0);
        config.memory_reservation_for_growth(0);
        config.guard_before_linear_memory(false);
    }
    config
}

/// The compile worker's side ([`crate::compile_worker`]): reads a component on stdin, compiles it for the engine
/// `settings` (the last argument the parent passed) describe, and writes
/// the artifact on stdout. A failure is one line on stderr and exit status 1.
pub fn serve_compile_worker(settings: &str) -> std::process::ExitCode {
    match compile_stdio(settings) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            std::process::ExitCode::from(1)
        }
    }
}

fn compile_stdio(settings: &str) -> Result<(), String> {
    let settings: crate::compile_worker::EngineSettings =
        serde_json::from_str(settings).map_err(|e| format!("unreadable engine settings: {e}"))?;
    let mut config = crate::HostConfig {
        fuel_metering: settings.fuel_metering,
        max_wasm_stack: settings.max_wasm_stack,
        pool_slots: settings.pool_slots,
        ..crate::HostConfig::default()
    };
    config.limits.memory_bytes = settings.memory_bytes;
    let engine = Engine::new(&engine_config(&config, settings.pooled, settings.abi)).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes).map_err(|e| e.to_string())?;
    let artifact = engine.precompile_component(&bytes).map_err(|e| crate::error::root_cause(&e))?;
    std::io::Write::write_all(&mut std::io::stdout(), &artifact).map_err(|e| e.to_string())
}

/// Slots decommitted together.
const DECOMMIT_BATCH: usize = 32;
