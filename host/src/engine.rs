//! The wasmtime engine, its epoch ticker, and the [`Host`] that loads plugins.

use crate::error::HostError;
use crate::sandbox::{CallLimits, SandboxState};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    _ticker: Arc<Ticker>,
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
            _ticker: Arc::new(ticker),
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
    if pooled {
        let mut pooling = PoolingAllocationConfig::default();
        let slots = host.pool_slots.max(1);
        pooling.total_component_instances(slots);
        pooling.total_core_instances(slots.saturating_mul(4));
        pooling.total_memories(slots.saturating_mul(2));
        pooling.total_tables(slots.saturating_mul(4));
        pooling.total_stacks(slots);
        pooling.max_memory_size(host.limits.memory_bytes);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    }
    config
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Ticker {
    fn start(engine: Engine) -> Ticker {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("lovia-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .map_or_else(|e| tracing::error!(%e, "cannot start the epoch ticker; deadlines will not fire"), drop);
        Ticker { stop }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
