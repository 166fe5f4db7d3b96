//! The wasmtime engine, its epoch ticker, and the [`Host`] that loads plugins.

use crate::error::HostError;
use crate::sandbox::{CallLimits, SandboxState};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances. Deadlines are checked on each tick, so a
/// call stops within about this long of its budget (design §4).
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Host-wide settings. Every field documents its default.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Where compiled components are cached, keyed by content digest and
    /// engine configuration. Default: `None`, no cache (the `lovia` CLI uses
    /// `$XDG_CACHE_HOME/lovia` or `~/.cache/lovia`).
    pub cache_dir: Option<PathBuf>,
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
    /// calls; a tenant past it gets `CPU budget exhausted`. Needs
    /// `fuel_metering`. Default: none.
    pub tenant_fuel: Option<u64>,
    /// Size of the wasm call stack. Default: 512 KiB (wasmtime's). Past it
    /// the model sees `Tool error: stack overflow`.
    pub max_wasm_stack: usize,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            cache_dir: None,
            pool_slots: 128,
            limits: CallLimits::default(),
            fuel_metering: false,
            tenant_fuel: None,
            max_wasm_stack: 512 << 10,
        }
    }
}

/// The runtime that loads plugins. Cheap to clone; the epoch ticker stops
/// when the last clone is dropped.
#[derive(Clone)]
pub struct Host {
    pub(crate) engine: Engine,
    pub(crate) linker: Arc<Linker<SandboxState>>,
    pub(crate) config: Arc<HostConfig>,
    pub(crate) tenant_fuel: Arc<crate::sandbox::FuelLedger>,
    pooled: bool,
    pub(crate) ticker: Arc<Ticker>,
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
        if let Some(dir) = &config.cache_dir {
            std::fs::create_dir_all(dir).map_err(|source| HostError::CacheDir { path: dir.clone(), source })?;
        }
        let (engine, pooled) = match Engine::new(&engine_config(&config, true)) {
            Ok(engine) => (engine, true),
            Err(err) => {
                tracing::warn!(%err, "pooling allocator unavailable; falling back to on-demand allocation");
                let engine = Engine::new(&engine_config(&config, false))
                    .map_err(|e| HostError::Engine { reason: e.to_string() })?;
                (engine, false)
            }
        };
        let linker = crate::sandbox::linker(&engine).map_err(|e| HostError::Engine { reason: e.to_string() })?;
        let ticker = Ticker::start(engine.clone());
        let tenant_fuel = Arc::new(crate::sandbox::FuelLedger::new(config.tenant_fuel));
        Ok(Host {
            engine,
            linker: Arc::new(linker),
            config: Arc::new(config),
            tenant_fuel,
            pooled,
            ticker: Arc::new(ticker),
        })
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

    /// Whether the pooling allocator is in use (false after a fallback).
    pub fn is_pooled(&self) -> bool {
        self.pooled
    }
}

fn engine_config(host: &HostConfig, pooled: bool) -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.wasm_component_model(true);
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
        // every call (it dominated profiles: design §5). Instead keep the
        // first pages of each memory and table resident and reset only the
        // dirty ones with memset (PAGEMAP_SCAN, Linux 6.7+; plain memset of
        // the kept bytes before that), and batch what must still be decommitted.
        pooling.linear_memory_keep_resident(KEEP_RESIDENT_BYTES);
        pooling.table_keep_resident(64 << 10);
        pooling.pagemap_scan(wasmtime::Enabled::Auto);
        pooling.decommit_batch_size(DECOMMIT_BATCH);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    }
    config
}

/// Bytes of each pooled linear memory kept resident between instances.
const KEEP_RESIDENT_BYTES: usize = 2 << 20;
/// Slots decommitted together.
const DECOMMIT_BATCH: usize = 32;

/// Advances the engine's epoch every [`EPOCH_TICK`] while any store is
/// live, and parks 100 ms after the last one ends: an idle host burns no
/// CPU on ticks.
pub(crate) struct Ticker {
    shared: Arc<TickerShared>,
    thread: Option<std::thread::Thread>,
}

struct TickerShared {
    stop: AtomicBool,
    /// Stores alive now (calls, `info`/`tools`, approvals).
    active: AtomicUsize,
    /// Whether the ticker thread is parked (or about to park).
    parked: AtomicBool,
}

/// Keeps the ticker running while alive; one per live store.
pub(crate) struct Ticking {
    shared: Arc<TickerShared>,
}

impl Drop for Ticking {
    fn drop(&mut self) {
        self.shared.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Ticks without any live store before the ticker parks: back-to-back calls
/// then cost no wake-up.
const IDLE_TICKS_BEFORE_PARKING: u32 = 100;

impl Ticker {
    fn start(engine: Engine) -> Ticker {
        let shared = Arc::new(TickerShared {
            stop: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            parked: AtomicBool::new(false),
        });
        let state = shared.clone();
        let thread = std::thread::Builder::new()
            .name("lovia-epoch".into())
            .spawn(move || {
                let mut idle = 0;
                while !state.stop.load(Ordering::Acquire) {
                    if state.active.load(Ordering::Acquire) == 0 {
                        idle += 1;
                        if idle >= IDLE_TICKS_BEFORE_PARKING {
                            // SeqCst on `parked` and `active`, here and in `enter`: each side
                            // writes one and then reads the other, and weaker orderings would
                            // let both read stale values, parking the ticker under a running
                            // call whose deadline then never fires.
                            state.parked.store(true, Ordering::SeqCst);
                            // Re-check after announcing: a store that started in between
                            // either sees `parked` and unparks us, or is counted here.
                            if state.active.load(Ordering::SeqCst) == 0 && !state.stop.load(Ordering::Acquire) {
                                std::thread::park();
                            }
                            state.parked.store(false, Ordering::SeqCst);
                            idle = 0;
                            continue;
                        }
                    } else {
                        idle = 0;
                    }
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .map_err(|e| tracing::error!(%e, "cannot start the epoch ticker; deadlines will not fire"))
            .ok();
        Ticker { shared, thread: thread.map(|t| t.thread().clone()) }
    }

    /// Marks a store live until the guard drops, waking the ticker if it sleeps.
    pub(crate) fn enter(&self) -> Ticking {
        self.shared.active.fetch_add(1, Ordering::SeqCst);
        if self.shared.parked.load(Ordering::SeqCst)
            && let Some(t) = &self.thread
        {
            t.unpark();
        }
        Ticking { shared: self.shared.clone() }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = &self.thread {
            t.unpark();
        }
    }
}
