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

/// Classifies a call that ended in an error rather than a return value.
pub(crate) fn classify(err: &wasmtime::Error, store: &Store<SandboxState>) -> Failure {
    if let Some(d) = err.downcast_ref::<DeadlineExceeded>() {
        let ms = u64::try_from(d.budget.as_millis()).unwrap_or(u64::MAX);
        return if d.from_timeout { Failure::TimedOut { ms } } else { Failure::WallClockCap { ms } };
    }
    let state = store.data();
    let stderr = state.stderr.contents();
    let stderr = String::from_utf8_lossy(&stderr);
    let limit_mib = state.limits.memory_mib();
    match err.downcast_ref::<Trap>() {
        // With trap_on_grow_failure, a refused memory.grow traps at once.
        _ if is_memory_grow_failure(err) => Failure::OutOfMemory { limit_mib },
        Some(Trap::StackOverflow) => Failure::StackOverflow,
        // A shadow-stack overflow in a Rust guest runs the stack pointer below
        // zero: it surfaces as an out-of-bounds access, not as a stack trap.
        Some(Trap::MemoryOutOfBounds) => Failure::StackOverflow,
        Some(Trap::OutOfFuel) => Failure::CpuBudget,
        Some(Trap::UnreachableCodeReached) => {
            if stderr.contains("memory allocation of") {
                Failure::OutOfMemory { limit_mib }
            } else if let Some(message) = panic_message(&stderr) {
                Failure::Panicked(message)
            } else {
                Failure::Trap(Trap::UnreachableCodeReached.to_string())
            }
        }
        Some(trap) => Failure::Trap(trap.to_string()),
        None => Failure::Trap(root_message(err)),
    }
}

fn is_memory_grow_failure(err: &wasmtime::Error) -> bool {
    err.chain().any(|cause| {
        if cause.downcast_ref::<super::MemoryLimitExceeded>().is_some() {
            return true;
        }
        let text = cause.to_string();
        text.contains("forcing trap when growing memory") || text.contains("memory minimum size")
    })
}

fn root_message(err: &wasmtime::Error) -> String {
    err.chain().last().map_or_else(|| err.to_string(), ToString::to_string)
}

/// The message of a Rust panic from its stderr: the lines after
/// `thread '…' panicked at FILE:LINE:COL:` up to the backtrace note, bounded.
fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.find("panicked at ")?;
    let rest = &stderr[start..];
    let body = rest.split_once('\n').map_or("", |(_, b)| b);
    let body = body.split("\nnote: ").next().unwrap_or(body).trim();
    let mut message: String = body.chars().take(1_000).collect();
    if body.chars().count() > 1_000 {
        message.push('…');
    }
    Some(message)
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_message_is_the_text_after_the_location() {
        let stderr = "\nthread '<unnamed>' panicked at src/lib.rs:3:5:\nboom: bad input\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(panic_message(stderr).as_deref(), Some("boom: bad input"));
        assert_eq!(panic_message("no panic here"), None);
    }
}
