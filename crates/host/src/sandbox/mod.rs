//! One call's sandbox: a fresh `Store` with memory limits, an epoch deadline,
//! WASI with nothing granted, captured stdout/stderr, and the host side of
//! the `context` and `store` interfaces.

mod context;
mod cpu;
pub(crate) use context::escape_controls;
mod fuel;
mod grants;
mod guest;
mod http;
mod limits;
mod logs;
mod output;
mod slots;
#[cfg(feature = "sqlite-session-store")]
mod sqlite;
mod store;
mod ticker;
mod trap;

pub use cpu::{BURST_MS as CPU_BURST_MS, CpuShares, TenantCpu};
pub use fuel::FuelLedger;
use fuel::Reservation;
pub use grants::{DirGrant, DirMode, Grants, SecretSource};
pub(crate) use guest::{GuestInstance, GuestPre};
pub(crate) use http::HttpHooks;
pub use http::{HttpOrigin, InvalidOrigin, is_special_address, tls_client_config};
pub use limits::CallLimits;
pub(crate) use limits::{InstanceLimiter, MemoryLimitExceeded};
pub(crate) use logs::Admit;
pub use logs::{DEFAULT_GUEST_LOG_BYTES_PER_MINUTE, GUEST_LOG_LINE_OVERHEAD, GuestLogLimits, GuestLogs};
pub(crate) use slots::{IdleInstances, InstanceSlots, SlotPermit};
#[cfg(feature = "sqlite-session-store")]
pub use sqlite::{SqliteStore, StoreOpenError};
pub use store::{MemoryStore, SessionStore, StoreQuota};
pub(crate) use trap::{DeadlineExceeded, classify};

use crate::call::CallContext;
use output::OutputRing;
use std::sync::Arc;
use std::time::{Duration, Instant};
pub use ticker::EPOCH_TICK;
pub use ticker::{Ticker, Ticking};
use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// The data of one call's store.
pub struct SandboxState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    http_hooks: HttpHooks,
    table: ResourceTable,
    pub(crate) store_limits: InstanceLimiter,
    pub(crate) limits: CallLimits,
    pub(crate) call: CallContext,
    pub(crate) plugin: Arc<str>,
    /// The first 12 hex digits of the plugin's digest, in its log lines.
    pub(crate) digest: Arc<str>,
    /// Where its log lines are counted against its tenant's budget.
    pub(crate) guest_logs: Arc<GuestLogs>,
    /// The plugin's part of its session store's namespace, from the host.
    pub(crate) store_namespace: Arc<str>,
    pub(crate) tool: Arc<str>,
    pub(crate) session_store: Option<Arc<dyn SessionStore>>,
    /// The message of the guest's last `context.panicked` report in this
    /// export, bounded: what the model reads if the export then traps.
    pub(crate) panic_report: Option<String>,
    events_left: u32,
    /// Keeps the epoch ticker running while a call uses this store.
    ticking: Option<Ticking>,
}

impl WasiView for SandboxState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for SandboxState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.http_hooks }
    }
}

/// The linker every plugin is instantiated with: WASI 0.2, `wasi:http`
/// (outgoing requests, refused unless granted) and `lovia:tools`.
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<SandboxState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    guest::add_to_linker(&mut linker)?;
    Ok(linker)
}

/// A call's store together with the fuel held for it: whatever ends the
/// call (a return, a trap, a timeout, or the call's future being dropped),
/// the fuel it did not burn goes back to its tenant.
pub(crate) struct MeteredStore {
    /// `None` only after [`MeteredStore::into_store`], which consumes it.
    store: Option<Store<SandboxState>>,
    fuel: Reservation,
}

impl MeteredStore {
    pub(crate) fn new(store: Store<SandboxState>, fuel: Reservation) -> Self {
        Self { store: Some(store), fuel }
    }

    pub(crate) fn store_mut(&mut self) -> &mut Store<SandboxState> {
        self.store.as_mut().expect("a metered store holds its store until into_store consumes it")
    }

    /// Records the fuel burned so far and refunds the rest (once).
    pub(crate) fn settle(&mut self) {
        let left = self.store.as_ref().and_then(|s| s.get_fuel().ok());
        // What the attempt used, on its span when it is traced (docs/telemetry.md).
        if let Some(store) = &self.store {
            let telemetry = lovia_telemetry::Telemetry::in_current();
            let used = self.fuel.fuel.zip(left).map(|(given, left)| given.saturating_sub(left));
            telemetry.annotate_current(|| {
                lovia_telemetry::KeyValue::new(
                    lovia_telemetry::attr::MEMORY_BYTES,
                    store.data().store_limits.memory_bytes() as i64,
                )
            });
            if let Some(used) = used {
                telemetry
                    .annotate_current(|| lovia_telemetry::KeyValue::new(lovia_telemetry::attr::FUEL_USED, used as i64));
            }
        }
        self.fuel.finish(left);
    }

    /// Settles, and hands the store over (to be kept warm).
    pub(crate) fn into_store(mut self) -> Store<SandboxState> {
        self.settle();
        self.store.take().expect("a metered store holds its store until into_store consumes it")
    }
}

impl Drop for MeteredStore {
    fn drop(&mut self) {
        self.settle();
    }
}

/// What one store is for.
pub(crate) struct StoreSpec<'a> {
    pub(crate) plugin: Arc<str>,
    /// The plugin's short digest ([`short_digest`]), or `""` before it is known.
    pub(crate) digest: Arc<str>,
    /// The host's guest log budgets.
    pub(crate) guest_logs: &'a Arc<GuestLogs>,
    /// The host-assigned identity that keys the plugin's session store.
    pub(crate) store_namespace: Arc<str>,
    pub(crate) tool: Arc<str>,
    pub(crate) call: CallContext,
    pub(crate) limits: &'a CallLimits,
    /// The attempt's timeout; the wall-clock ceiling applies when it is longer or absent.
    pub(crate) timeout: Option<Duration>,
    /// Fuel for the call when the engine meters it (`None`: as much as possible).
    pub(crate) fuel: Option<u64>,
    /// What the plugin is granted.
    pub(crate) grants: &'a Grants,
    /// The host's epoch ticker, kept running while the call lasts.
    pub(crate) ticker: &'a Ticker,
    pub(crate) session_store: Option<Arc<dyn SessionStore>>,
    /// The tenant's CPU share, when it has one: its calls pause past it.
    pub(crate) cpu: Option<Arc<TenantCpu>>,
}

/// A fresh store for one call, with exactly the plugin's grants (by
/// default: no directory, no environment, no network); stdout and stderr go
/// to bounded memory pipes.
pub(crate) fn new_store(engine: &Engine, spec: StoreSpec<'_>) -> Store<SandboxState> {
    let wasi = {
        let mut builder = WasiCtxBuilder::new();
        // `wasi:sockets` is linked (Rust's std imports it), but no socket may
        // be created, bound or connected, and no name looked up: these are
        // wasmtime-wasi's defaults, set here so that a change of default
        // cannot open the network behind the `wasi:http` allowlist.
        builder
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        builder.stdout(OutputRing::new(spec.limits.stdout_bytes)).stderr(OutputRing::new(spec.limits.stderr_bytes));
        spec.grants.apply(&mut builder, &spec.plugin);
        builder.build()
    };
    // The memory limit is one sum over every linear memory of the
    // instance: a component may define several (issue 12, item 15).
    let store_limits = InstanceLimiter::new(spec.limits.memory_bytes);
    let http_hooks = HttpHooks {
        origins: spec.grants.http.clone().into(),
        trace_origins: spec.grants.http_trace_context.clone().into(),
        plugin: spec.plugin.clone(),
        tool: spec.tool.clone(),
        call_id: spec.call.call_id.as_str().into(),
        cancel: spec.call.cancel.clone(),
    };
    let state = SandboxState {
        wasi,
        http: WasiHttpCtx::new(),
        http_hooks,
        table: ResourceTable::new(),
        store_limits,
        limits: spec.limits.clone(),
        events_left: spec.limits.events_per_call,
        call: spec.call,
        plugin: spec.plugin,
        digest: spec.digest,
        guest_logs: spec.guest_logs.clone(),
        store_namespace: spec.store_namespace,
        tool: spec.tool,
        session_store: spec.session_store,
        panic_report: None,
        ticking: Some(spec.ticker.enter()),
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.store_limits);
    arm(&mut store, spec.limits, spec.timeout, spec.fuel, spec.cpu);
    store
}

/// The store a bare wasmtime embedder would make for one call of a
/// plugin: a default WASI context (nothing granted, output discarded), no
/// memory limiter, as much fuel as the engine holds, and an epoch deadline
/// that never comes. Only the floors `lovia bench` prints beside its
/// figures use it ([`crate::plugin::floor`]): no call a model or tenant
/// makes runs in it.
#[cfg(feature = "direct-calls")]
pub(crate) fn bare_store(engine: &Engine) -> Store<SandboxState> {
    let limits = CallLimits::default();
    let state = SandboxState {
        wasi: WasiCtxBuilder::new().build(),
        http: WasiHttpCtx::new(),
        http_hooks: HttpHooks {
            origins: Arc::from([]),
            trace_origins: Arc::from([]),
            plugin: Arc::from(""),
            tool: Arc::from(""),
            call_id: Arc::from(""),
            cancel: crate::call::CancelToken::default(),
        },
        table: ResourceTable::new(),
        store_limits: InstanceLimiter::new(usize::MAX),
        events_left: limits.events_per_call,
        limits,
        call: CallContext::default(),
        plugin: Arc::from(""),
        digest: Arc::from(""),
        guest_logs: Arc::default(),
        store_namespace: Arc::from(""),
        tool: Arc::from(""),
        session_store: None,
        panic_report: None,
        ticking: None,
    };
    let mut store = Store::new(engine, state);
    // Fails harmlessly on an engine that does not meter fuel.
    let _ = store.set_fuel(u64::MAX);
    // No ticker runs for this store, and other calls' ticks are far from
    // this many.
    store.set_epoch_deadline(u64::MAX / 2);
    store
}

/// Readies a warm store (session mode) for its next call: the call's
/// context, tool, limits, fuel and deadline replace the previous call's. The
/// grants and the memory limit stay those the instance was created with.
pub(crate) fn reuse_store(store: &mut Store<SandboxState>, spec: StoreSpec<'_>) {
    let state = store.data_mut();
    state.http_hooks.tool = spec.tool.clone();
    state.http_hooks.call_id = spec.call.call_id.as_str().into();
    state.http_hooks.cancel = spec.call.cancel.clone();
    state.limits = spec.limits.clone();
    state.events_left = spec.limits.events_per_call;
    state.call = spec.call;
    state.tool = spec.tool;
    state.session_store = spec.session_store;
    state.ticking = Some(spec.ticker.enter());
    // A panic message must come from this call, not an earlier one.
    state.panic_report = None;
    state.store_limits.growth_refused = false;
    arm(store, spec.limits, spec.timeout, spec.fuel, spec.cpu);
}

/// Lets go of everything a finished call lent its warm store: its context
/// (whose progress sink keeps the run's event stream open) and its session
/// store.
pub(crate) fn park_store(store: &mut Store<SandboxState>) {
    let state = store.data_mut();
    state.call = CallContext::default();
    state.http_hooks.cancel = crate::call::CancelToken::default();
    state.session_store = None;
    // An idle warm instance must not keep the ticker (and a core) awake.
    state.ticking = None;
}

/// The first 12 hex digits of a plugin's SHA-256 digest: what its log
/// lines carry, enough to tell two plugins of one name apart.
pub(crate) fn short_digest(digest: &str) -> Arc<str> {
    digest.get(..12).unwrap_or(digest).into()
}

/// Sets a call's fuel and wall-clock deadline on `store`.
fn arm(
    store: &mut Store<SandboxState>,
    limits: &CallLimits,
    timeout: Option<Duration>,
    fuel: Option<u64>,
    cpu: Option<Arc<TenantCpu>>,
) {
    // Fails harmlessly on an engine that does not meter fuel.
    let _ = store.set_fuel(fuel.unwrap_or(u64::MAX));
    let DeadlineExceeded { budget, from_timeout } = deadline_of(limits, timeout);
    let deadline = Instant::now() + budget;
    // Yield on every tick so the call future can be dropped at any time, and
    // fail once the wall-clock budget is spent (docs/semantics.md §22).
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            return Err(wasmtime::Error::new(DeadlineExceeded { budget, from_timeout }));
        }
        // Without a token of its tenant's CPU share, the call waits for one
        // before it runs again (never past its own deadline, which the next
        // tick checks).
        match cpu.as_ref().and_then(|cpu| cpu.tick().map(|first| (cpu.clone(), first))) {
            Some((cpu, first)) => Ok(UpdateDeadline::YieldCustom(1, Box::pin(cpu.take(first, deadline)))),
            None => Ok(UpdateDeadline::Yield(1)),
        }
    });
}

/// The wall-clock budget of one attempt: its timeout, or the host's ceiling
/// when there is none or it is longer. The epoch callback enforces it while
/// guest code runs; the caller enforces it while the guest waits on the host
/// (a sleep, an HTTP response).
pub(crate) fn deadline_of(limits: &CallLimits, timeout: Option<Duration>) -> DeadlineExceeded {
    let cap = limits.max_wall_clock;
    match timeout {
        Some(t) if t <= cap => DeadlineExceeded { budget: t, from_timeout: true },
        _ => DeadlineExceeded { budget: cap, from_timeout: false },
    }
}
