//! The epoch ticker: advances the engine's epoch while calls run, so an
//! epoch deadline can interrupt a busy guest.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use wasmtime::Engine;

/// How often the epoch advances. Deadlines are checked on each tick, so a
/// call stops within about this long of its budget (docs/semantics.md §22).
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Advances the engine's epoch every [`EPOCH_TICK`] while any store is
/// live, and parks 100 ms after the last one ends: an idle host burns no
/// CPU on ticks.
pub struct Ticker {
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
pub struct Ticking {
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
    /// Starts the ticker thread of `engine` (one per engine).
    pub fn start(engine: Engine) -> Ticker {
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
    pub fn enter(&self) -> Ticking {
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
