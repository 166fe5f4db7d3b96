//! Turning a trap into the failure the model reads (docs/semantics.md D5, D6).

use super::SandboxState;
use crate::call::Failure;
use std::time::Duration;
use wasmtime::{Store, Trap};

/// The epoch callback's error when an attempt's wall-clock budget is spent.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("deadline of {} ms exceeded", budget.as_millis())]
pub(crate) struct DeadlineExceeded {
    pub(crate) budget: Duration,
    /// True when the tool's timeout set the budget, false for the host's ceiling.
    pub(crate) from_timeout: bool,
}

/// Classifies a call that ended in an error rather than a return value,
/// from typed facts only: the error's type, the trap code, and what the
/// store saw (a refused memory growth, the guest's `context.panicked`
/// report). The guest's stderr is never read: its text is the guest's to
/// write, and a format that changes between toolchains.
pub(crate) fn classify(err: &wasmtime::Error, store: &Store<SandboxState>) -> Failure {
    if let Some(d) = err.downcast_ref::<DeadlineExceeded>() {
        let ms = u64::try_from(d.budget.as_millis()).unwrap_or(u64::MAX);
        return if d.from_timeout { Failure::TimedOut { ms } } else { Failure::WallClockCap { ms } };
    }
    let state = store.data();
    let limit_mib = state.limits.memory_mib();
    // The limiter traps at once when the instance's memories would pass the limit.
    if err.chain().any(|cause| cause.downcast_ref::<super::MemoryLimitExceeded>().is_some()) {
        return Failure::OutOfMemory { limit_mib };
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::StackOverflow) => Failure::StackOverflow,
        // A shadow-stack overflow in a Rust guest runs the stack pointer below
        // zero: it surfaces as an out-of-bounds access, not as a stack trap.
        Some(Trap::MemoryOutOfBounds) => Failure::StackOverflow,
        Some(Trap::OutOfFuel) => Failure::CpuBudget,
        // A panic reports its message before it aborts; an allocator that saw
        // memory.grow fail aborts without one (Rust's does).
        Some(Trap::UnreachableCodeReached) => match &state.panic_report {
            Some(message) => Failure::Panicked(message.clone()),
            None if state.store_limits.growth_refused => Failure::OutOfMemory { limit_mib },
            None => Failure::Trap(Trap::UnreachableCodeReached.to_string()),
        },
        Some(trap) => Failure::Trap(trap.to_string()),
        // The host failed a growth it had allowed (memory_grow_failed).
        None if state.store_limits.growth_refused => Failure::OutOfMemory { limit_mib },
        None => Failure::Trap(root_message(err)),
    }
}

fn root_message(err: &wasmtime::Error) -> String {
    err.chain().last().map_or_else(|| err.to_string(), ToString::to_string)
}
