//! What a program's store holds: its budgets, why the host stopped it, its
//! nested calls in flight, and the host side of its one import, the `host`
//! interface: `start-call` starts a call and returns its id at once, and
//! `next-end` waits for the next call in flight to end. A program's calls
//! therefore run concurrently (`Promise.all`), each under the executor's
//! rules (a barrier still runs alone; `lovia_host::exec`).

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use lovia_host::BoxFuture;
use lovia_host::call::{NestedCalls, NestedResult, NestedStopped};
use lovia_host::sandbox::Ticking;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::ResourceLimiter;
use wasmtime::component::{ComponentType, Linker, Lower};

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
    /// The nested calls in flight, each with the id `start-call` gave it.
    /// They make progress while the program waits in `next-end`, on its own
    /// task: spawning each would cost a cross-thread wake per call, which
    /// was most of a nested call's time. Dropping the state (the program
    /// ended or was stopped) drops them.
    pub(crate) running: FuturesUnordered<BoxFuture<'static, (u32, Result<Answer, NestedStopped>)>>,
    /// Wall-clock time the program spent waiting on tools so far (blocked in
    /// `next-end`: calls in flight together count once), and its budget.
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

/// How a nested call ended, before the program reads it.
pub(crate) enum Answer {
    /// The executor ran it.
    Ran(NestedResult),
    /// It named a tool the program was not offered: this error result.
    Unknown(String),
}

/// `call-end` of the engine's WIT: a call's id and how it ended.
#[derive(ComponentType, Lower)]
#[component(record)]
struct CallEnd {
    id: u32,
    output: Result<String, String>,
}

/// Defines the `host` interface, the engine's one import.
pub(crate) fn link(linker: &mut Linker<ProgramState>) -> wasmtime::Result<()> {
    let mut host = linker.instance(HOST_INTERFACE)?;
    host.func_wrap_async("start-call", |mut store, (name, arguments): (String, String)| {
        Box::new(async move { start_call(store.data_mut(), name, arguments).await.map(|id| (id,)) })
    })?;
    host.func_wrap_async("next-end", |mut store, (): ()| {
        Box::new(async move { next_end(store.data_mut()).await.map(|end| (end,)) })
    })
}

/// Starts one nested call; its id is its 1-based number in the program.
/// `Err` stops the program (its call budget is spent), once the calls it
/// started before have ended.
async fn start_call(state: &mut ProgramState, name: String, arguments: String) -> wasmtime::Result<u32> {
    if state.calls >= state.max_calls {
        settle(state).await;
        return Err(stop(state, Stop::Calls(state.max_calls)));
    }
    state.calls += 1;
    let id = state.calls;
    if !state.tools.iter().any(|(_, tool)| *tool == name) {
        let refusal = lovia_host::call::text::unknown_tool(&name);
        state.running.push(Box::pin(async move { (id, Ok(Answer::Unknown(refusal))) }));
        return Ok(id);
    }
    // The executor's rules (approvals, barriers, the run's budget) hold
    // inside `call`.
    let nested = state.nested.clone();
    state.running.push(Box::pin(async move { (id, nested.call(&name, arguments).await.map(Answer::Ran)) }));
    Ok(id)
}

/// Lets the calls still in flight end, within what is left of the wait
/// budget, before the host stops the program: a call that started runs to
/// completion and is recorded, as a turn's calls in flight do when its
/// budget trips. (A cancelled run's calls end at once, by the same token.)
async fn settle(state: &mut ProgramState) {
    let left = state.max_wait.saturating_sub(state.waited);
    let started = Instant::now();
    let _ = tokio::time::timeout(left, async { while state.running.next().await.is_some() {} }).await;
    state.waited += started.elapsed();
}

/// Waits for the next nested call in flight to end. `Err` stops the
/// program: the wait budget is spent (the calls still in flight are then
/// dropped), the run was stopped, or nothing was in flight (only a program
/// that reaches past the engine's `tools` can ask).
async fn next_end(state: &mut ProgramState) -> wasmtime::Result<CallEnd> {
    let nothing = || "the program waited for a tool call, and none was in flight".to_owned();
    if state.running.is_empty() {
        return Err(stop(state, Stop::Run(nothing())));
    }
    let left = state.max_wait.saturating_sub(state.waited);
    let started = Instant::now();
    let next = tokio::time::timeout(left, state.running.next()).await;
    state.waited += started.elapsed();
    let (id, ended) = match next {
        Err(_) => return Err(stop(state, Stop::Wait(state.max_wait))),
        Ok(None) => return Err(stop(state, Stop::Run(nothing()))),
        Ok(Some(ended)) => ended,
    };
    let output = match ended {
        Err(NestedStopped(reason)) => {
            settle(state).await;
            return Err(stop(state, Stop::Run(reason)));
        }
        Ok(Answer::Unknown(refusal)) => Err(refusal),
        Ok(Answer::Ran(result)) if result.is_error => Err(result.output),
        Ok(Answer::Ran(result)) => Ok(match result.raw {
            Some(value) if !value.is_string() => json!({"json": value}).to_string(),
            _ => json!({"text": result.output}).to_string(),
        }),
    };
    Ok(CallEnd { id, output })
}

pub(crate) fn stop(state: &mut ProgramState, why: Stop) -> wasmtime::Error {
    state.stop = Some(why);
    wasmtime::Error::msg("the host stopped the program")
}
