//! What a program's store holds: its budgets, why the host stopped it, and
//! the host side of its one import, `call-tool`.

use lovia_host::call::{NestedCalls, NestedStopped};
use lovia_host::sandbox::Ticking;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::ResourceLimiter;
use wasmtime::component::Linker;

/// The import every program may use, and nothing else.
pub(crate) const HOST_INTERFACE: &str = "lovia:code-mode/host@0.1.0";

/// What a program's store holds.
pub(crate) struct ProgramState {
    pub(crate) memory: MemoryLimit,
    pub(crate) nested: Arc<dyn NestedCalls>,
    /// The tools the program was offered, (identifier, tool name); any
    /// other name is unknown to it.
    pub(crate) tools: Arc<Vec<(String, String)>>,
    pub(crate) calls: u32,
    pub(crate) max_calls: u32,
    /// Wall-clock time spent waiting on tools so far, and its budget.
    pub(crate) waited: Duration,
    pub(crate) max_wait: Duration,
    /// Milliseconds of the program's own CPU (epoch ticks while it runs).
    pub(crate) cpu_ms: u64,
    pub(crate) max_cpu_ms: u64,
    /// Why the host stopped the program, when it did.
    pub(crate) stop: Option<Stop>,
    /// Keeps the engine's epoch ticker running while the program lives.
    pub(crate) _ticking: Ticking,
}

/// Why the host stopped a program (it traps; the program cannot catch it).
pub(crate) enum Stop {
    Calls(u32),
    Wait(Duration),
    Cpu(u64),
    Run(String),
}

/// The memory and table bounds of one instance: `bytes` is a sum over all
/// of its linear memories.
pub(crate) struct MemoryLimit {
    pub(crate) bytes: usize,
    /// What its memories hold now, together.
    pub(crate) used: usize,
    pub(crate) hit: bool,
}

/// The most table elements a program's instance may have.
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl ResourceLimiter for MemoryLimit {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let used = self.used.saturating_add(desired.saturating_sub(current));
        if used > self.bytes {
            self.hit = true;
            return Err(wasmtime::Error::msg("the program's memory limit"));
        }
        self.used = used;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// Defines `call-tool`, the engine's one import.
pub(crate) fn link(linker: &mut Linker<ProgramState>) -> wasmtime::Result<()> {
    linker.instance(HOST_INTERFACE)?.func_wrap_async("call-tool", |mut store, (name, arguments): (String, String)| {
        Box::new(async move { call_tool(store.data_mut(), name, arguments).await.map(|r| (r,)) })
    })
}

/// One nested call. `Ok(Err(text))` is an error result the program gets as a
/// `ToolError`; `Err` stops the program.
async fn call_tool(
    state: &mut ProgramState,
    name: String,
    arguments: String,
) -> wasmtime::Result<Result<String, String>> {
    if state.calls >= state.max_calls {
        return Err(stop(state, Stop::Calls(state.max_calls)));
    }
    state.calls += 1;
    if !state.tools.iter().any(|(_, tool)| *tool == name) {
        return Ok(Err(lovia_host::call::text::unknown_tool(&name)));
    }
    let left = state.max_wait.saturating_sub(state.waited);
    let started = Instant::now();
    let outcome = tokio::time::timeout(left, state.nested.call(&name, arguments)).await;
    state.waited += started.elapsed();
    match outcome {
        Err(_) => Err(stop(state, Stop::Wait(state.max_wait))),
        Ok(Err(NestedStopped(reason))) => Err(stop(state, Stop::Run(reason))),
        Ok(Ok(result)) if result.is_error => Ok(Err(result.output)),
        Ok(Ok(result)) => Ok(Ok(match result.raw {
            Some(value) if !value.is_string() => json!({"json": value}).to_string(),
            _ => json!({"text": result.output}).to_string(),
        })),
    }
}

pub(crate) fn stop(state: &mut ProgramState, why: Stop) -> wasmtime::Error {
    state.stop = Some(why);
    wasmtime::Error::msg("the host stopped the program")
}
