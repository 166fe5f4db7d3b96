//! [`CodeEngine`]: the QuickJS component every program runs in, compiled
//! once, with the one import it may have.

use crate::error::CodeModeError;
use crate::state::{self, ProgramState};
use lovia_host::Host;
use lovia_host::sandbox::Ticker;
use std::sync::Arc;
use wasmtime::component::{InstancePre, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// The engine component: QuickJS by componentize-qjs from
/// `engine/engine.js` and `engine/engine.wit` (build.rs says which build).
pub const ENGINE_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/engine.wasm"));

/// Programs that can run at once in the pool (more wait for a slot).
const POOL_SLOTS: u32 = 64;

/// The largest memory a program's instance may have, whatever its limits say.
pub(crate) const MAX_MEMORY_BYTES: usize = 256 << 20;

/// The compiled engine. Cheap to share (`Arc`); each program gets a fresh
/// instance of it, so nothing one program does is seen by the next.
pub struct CodeEngine {
    pub(crate) engine: Engine,
    pub(crate) pre: InstancePre<ProgramState>,
    /// Advances the epoch while programs run (a busy loop is interrupted).
    pub(crate) ticker: Ticker,
    /// The host whose tenants' CPU shares programs draw from.
    pub(crate) host: Host,
    /// One permit per pool slot: a program past them waits for one.
    pub(crate) slots: tokio::sync::Semaphore,
}

impl std::fmt::Debug for CodeEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeEngine").field("bytes", &ENGINE_BYTES.len()).finish_non_exhaustive()
    }
}

impl CodeEngine {
    /// The engine for programs whose CPU counts against `host`'s tenant
    /// shares ([`lovia_host::HostConfig::tenant_cpu_cores`]). Compiling it
    /// takes seconds (1.8 s in a debug build here: `lovia mcp --code-mode` on
    /// an empty cache), so the compiled form is kept in
    /// `host`'s artifact cache ([`lovia_host::HostConfig::cache_dir`]) and
    /// later processes load it in milliseconds.
    pub fn new(host: &Host) -> Result<CodeEngine, CodeModeError> {
        Self::new_announcing(host, || {})
    }

    /// [`CodeEngine::new`], calling `compiling` first when the engine is not
    /// in the cache and is about to be compiled (a door tells its user to wait).
    pub fn new_announcing(host: &Host, compiling: impl FnOnce()) -> Result<CodeEngine, CodeModeError> {
        Self::build(host, ENGINE_BYTES, compiling)
    }

    /// Another build of the engine (it must have the same WIT world), through
    /// the same cache.
    pub fn from_component(host: &Host, bytes: &[u8]) -> Result<CodeEngine, CodeModeError> {
        Self::build(host, bytes, || {})
    }

    fn build(host: &Host, bytes: &[u8], compiling: impl FnOnce()) -> Result<CodeEngine, CodeModeError> {
        let engine_error = |e: wasmtime::Error| CodeModeError::Engine { reason: format!("{e:#}") };
        let mut config = Config::new();
        config.wasm_component_model(true);
        // The engine's `run` export is an async function: the program's
        // promises are driven to completion inside the one call.
        config.wasm_component_model_async(true);
        config.epoch_interruption(true);
        config.consume_fuel(true);
        config.max_wasm_stack(host.config().max_wasm_stack);
        config.generate_address_map(false);
        // Programs are instantiated often and briefly: a pool of slots keeps
        // instantiation to resetting a slot instead of mapping fresh memory.
        let mut pooling = PoolingAllocationConfig::default();
        pooling.total_component_instances(POOL_SLOTS);
        pooling.total_core_instances(POOL_SLOTS * 8);
        pooling.total_memories(POOL_SLOTS * 2);
        pooling.total_tables(POOL_SLOTS * 8);
        pooling.total_stacks(POOL_SLOTS);
        pooling.max_memory_size(MAX_MEMORY_BYTES);
        pooling.linear_memory_keep_resident(8 << 20);
        pooling.pagemap_scan(wasmtime::Enabled::Auto);
        let mut pooled = config.clone();
        pooled.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
        // Without the address space for the pool, instances are allocated on demand.
        let engine = match Engine::new(&pooled) {
            Ok(engine) => engine,
            Err(_) => Engine::new(&config).map_err(engine_error)?,
        };
        let component = host
            .compile_cached(&engine, bytes, "the code-mode engine", compiling)
            .map_err(|e| CodeModeError::Engine { reason: e.to_string() })?;
        // Whatever else the component imports fails to link here: a build
        // with a WASI import left in is refused, not given one.
        let mut linker = Linker::<ProgramState>::new(&engine);
        state::link(&mut linker).map_err(engine_error)?;
        let pre = linker.instantiate_pre(&component).map_err(engine_error)?;
        let ticker = Ticker::start(engine.clone());
        let slots = tokio::sync::Semaphore::new(POOL_SLOTS as usize);
        Ok(CodeEngine { engine, pre, ticker, host: host.clone(), slots })
    }

    /// The imports of the engine component, by name: exactly
    /// `lovia:code-mode/host@0.1.0`.
    pub fn imports(&self) -> Vec<String> {
        self.pre.component().component_type().imports(&self.engine).map(|(name, _)| name.to_owned()).collect()
    }
}

/// Shared by every `run_code` tool made from one engine.
pub(crate) type SharedEngine = Arc<CodeEngine>;
