//! One program's run: a fresh store and instance of the engine, armed with
//! the program's budgets, and what its outcome reads as.

use crate::engine::CodeEngine;
use crate::limits::CodeLimits;
use crate::state::{MemoryLimit, ProgramState, Stop, stop};
use lovia_host::{CallContext, Failure, ToolOutput};
use serde::Deserialize;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::{Store, UpdateDeadline};

/// What the engine's `run` returns (engine.wit).
#[derive(Deserialize)]
struct Outcome {
    #[serde(default)]
    logs: String,
    #[serde(default)]
    cut: bool,
    value: Option<String>,
    error: Option<String>,
}

/// Runs `code` with `tools` (identifier, tool name) under `limits`.
pub(crate) async fn run(
    engine: &CodeEngine,
    code: String,
    tools: Arc<Vec<(String, String)>>,
    limits: &CodeLimits,
    ctx: &CallContext,
) -> Result<ToolOutput, Failure> {
    let Some(nested) = ctx.nested.clone() else {
        // Only the executor runs this tool, and it always gives one.
        return Err(Failure::Tool {
            message: "run_code needs the executor's nested calls".into(),
            hint: None,
            kind: None,
        });
    };
    let cancelled = || Failure::Tool { message: ctx.cancel.reason(), hint: None, kind: None };
    // A program past the pool's slots waits for one (inside its call's timeout).
    let _slot = tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => return Err(cancelled()),
        slot = engine.slots.acquire() => slot.map_err(|_| cancelled())?,
    };
    let state = ProgramState {
        memory: MemoryLimit { bytes: limits.memory_bytes.min(crate::engine::MAX_MEMORY_BYTES), used: 0, hit: false },
        nested,
        tools: tools.clone(),
        calls: 0,
        max_calls: limits.max_calls,
        running: Default::default(),
        waited: Duration::ZERO,
        max_wait: limits.max_wait,
        cpu_ms: 0,
        max_cpu_ms: u64::try_from(limits.max_cpu.as_millis()).unwrap_or(u64::MAX),
        stop: None,
        _ticking: engine.ticker.enter(),
    };
    let mut store = Store::new(&engine.engine, state);
    store.limiter(|s| &mut s.memory);
    store.set_fuel(limits.fuel).map_err(|e| engine_failure(&e))?;
    let cpu = engine.host.cpu_shares().of(ctx.tenant.as_deref());
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |mut store| {
        let state = store.data_mut();
        state.cpu_ms += 1;
        if state.cpu_ms > state.max_cpu_ms {
            return Err(stop(state, Stop::Cpu(state.max_cpu_ms)));
        }
        // A tick without a token of the tenant's CPU share waits for one,
        // as a plugin's call does.
        match cpu.as_ref().and_then(|cpu| cpu.tick().map(|first| (cpu.clone(), first))) {
            Some((cpu, first)) => {
                // At most a second per wait: the next tick asks again.
                let deadline = Instant::now() + Duration::from_secs(1);
                Ok(UpdateDeadline::YieldCustom(1, Box::pin(cpu.take(first, deadline))))
            }
            None => Ok(UpdateDeadline::Yield(1)),
        }
    });
    let max_log = u32::try_from(limits.max_log_chars).unwrap_or(u32::MAX);
    let outcome = async {
        let instance = engine.pre.instantiate_async(&mut store).await?;
        let run = instance.get_typed_func::<(String, Vec<(String, String)>, u32), (String,)>(&mut store, "run")?;
        let (text,) = run.call_async(&mut store, (code, tools.as_ref().clone(), max_log)).await?;
        wasmtime::Result::Ok(text)
    };
    let text = tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => return Err(cancelled()),
        text = outcome => text,
    };
    let state = store.data_mut();
    let text = match text {
        Ok(text) => text,
        Err(error) => return Err(stopped(state, limits, &error)),
    };
    let outcome: Outcome = serde_json::from_str(&text).map_err(|e| Failure::Tool {
        message: format!("the code-mode engine answered with something that is not its outcome: {e}"),
        hint: None,
        kind: None,
    })?;
    let mut logs = outcome.logs;
    if outcome.cut {
        logs.push_str(&format!("\n[console output cut at {} characters]", limits.max_log_chars));
    }
    if let Some(error) = outcome.error {
        let message = if logs.is_empty() { error } else { format!("{error}\nconsole output before it:\n{logs}") };
        return Err(Failure::Tool { message, hint: None, kind: None });
    }
    let mut out = logs;
    if let Some(value) = outcome.value {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&value);
    }
    Ok(ToolOutput::Text(out))
}

/// The failure of a program that trapped: the host's reason when it stopped
/// it, else what the trap says.
fn stopped(state: &mut ProgramState, limits: &CodeLimits, error: &wasmtime::Error) -> Failure {
    if let Some(why) = state.stop.take() {
        return match why {
            Stop::Calls(max) => Failure::BudgetExceeded(format!("the program made more than {max} tool calls")),
            Stop::Wait(max) => {
                Failure::BudgetExceeded(format!("the program waited on tools for more than {} s", max.as_secs_f64()))
            }
            Stop::Cpu(max) => Failure::BudgetExceeded(format!("the program ran for more than {max} ms of CPU")),
            Stop::Run(reason) => Failure::Tool { message: reason, hint: None, kind: None },
        };
    }
    if state.memory.hit {
        return Failure::OutOfMemory { limit_mib: limits.memory_bytes.min(crate::engine::MAX_MEMORY_BYTES) >> 20 };
    }
    match error.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::OutOfFuel) => Failure::CpuBudget,
        Some(wasmtime::Trap::StackOverflow) => Failure::StackOverflow,
        // Every WASI import of the engine is a stub that traps: a program
        // that reaches one used something code mode does not give it. What
        // it reads is that, not the engine's backtrace.
        // (An engine that aborts traps the same way: the log keeps the
        // backtrace for the operator.)
        Some(wasmtime::Trap::UnreachableCodeReached) => {
            tracing::warn!(error = %format!("{error:#}"), "a program stopped at an unreachable: a stubbed import, or the engine aborted");
            Failure::Tool {
                message: "the program used something code mode does not have (a clock, timers, files, the network or the environment) and was stopped".into(),
                hint: Some("Use only tools and console; ask a tool for what the program needs from outside.".into()),
                kind: None,
            }
        }
        _ => engine_failure(error),
    }
}

fn engine_failure(error: &wasmtime::Error) -> Failure {
    tracing::warn!(error = %format!("{error:#}"), "code-mode engine failed");
    Failure::Tool { message: format!("the code-mode engine failed: {error}"), hint: None, kind: None }
}
