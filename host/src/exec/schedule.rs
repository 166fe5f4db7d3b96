//! Batch scheduling (spec §8): parallel calls run concurrently; a barrier
//! waits for the calls in flight, runs alone, and later calls are not even
//! preflighted until it ends. Results are recorded in completion order.

use super::complete::{self, Results};
use super::preflight::{Preflight, preflight};
use super::{EventSink, Executor, RunState, ToolCall, ToolEvent, ToolResultEntry, TurnError, attempt};
use crate::sandbox::CallContext;
use crate::tool::def::Tool;
use crate::tool::outcome::Failure;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use tokio::task::JoinSet;

/// How one executed call ended.
enum CallEnd {
    Recorded,
    /// The tool asked to cancel the run; the call leaves no result.
    CancelRun(String),
}

pub(super) async fn run_turn(
    exec: &Executor,
    calls: &[ToolCall],
    run: &RunState,
    events: &EventSink,
) -> Result<Vec<ToolResultEntry>, TurnError> {
    let results: Results = Arc::new(Mutex::new(Vec::with_capacity(calls.len())));
    let mut in_flight: JoinSet<CallEnd> = JoinSet::new();
    let mut handoff = None;
    let mut budget = None;
    let end = async {
        for call in calls {
            // Sweep: calls that already finished may have asked to cancel the run.
            while let Some(done) = in_flight.try_join_next() {
                check(done, run)?;
            }
            let ctx = call_context(exec, run, call, events);
            match preflight(exec, call, &ctx, run, events, &results, &mut handoff).await {
                Preflight::Ready { tool, raw_args, prepared } if tool.is_barrier() => {
                    drain(&mut in_flight, run).await?;
                    let end = tokio::select! {
                        biased;
                        () = run.cancel.cancelled() => return Err(run.cancel.reason()),
                        end = execute(exec.clone(), tool, call.clone(), raw_args, prepared, ctx, events.clone(), results.clone()) => end,
                    };
                    check_end(end, run)?;
                }
                Preflight::Ready { tool, raw_args, prepared } => {
                    in_flight.spawn(execute(exec.clone(), tool, call.clone(), raw_args, prepared, ctx, events.clone(), results.clone()));
                }
                Preflight::Rejected => {}
                Preflight::Budget(message) => {
                    // Stop spawning; calls in flight run to completion and are recorded (spec §7).
                    budget = Some(message);
                    break;
                }
                Preflight::Cancelled => return Err(run.cancel.reason()),
            }
        }
        drain(&mut in_flight, run).await
    }
    .await;
    // Whatever ended the turn, nothing of it keeps running.
    in_flight.abort_all();
    while in_flight.join_next().await.is_some() {}
    let results = std::mem::take(&mut *results.lock().unwrap_or_else(|p| p.into_inner()));
    match (end, budget) {
        (Err(reason), _) => Err(TurnError::Cancelled { reason, results }),
        (Ok(()), Some(message)) => Err(TurnError::BudgetExceeded { message, results }),
        (Ok(()), None) => Ok(results),
    }
}

/// Waits for every call in flight; a cancellation aborts them at once.
async fn drain(in_flight: &mut JoinSet<CallEnd>, run: &RunState) -> Result<(), String> {
    loop {
        tokio::select! {
            biased;
            () = run.cancel.cancelled() => return Err(run.cancel.reason()),
            next = in_flight.join_next() => match next {
                None => return Ok(()),
                Some(done) => check(done, run)?,
            },
        }
    }
}

fn check(done: Result<CallEnd, tokio::task::JoinError>, run: &RunState) -> Result<(), String> {
    match done {
        Ok(end) => check_end(end, run),
        // A panicking task is a host bug: it must not take the run down silently.
        Err(e) if e.is_panic() => {
            tracing::error!("a tool call task panicked: {e}");
            Ok(())
        }
        Err(_) => Ok(()),
    }
}

fn check_end(end: CallEnd, run: &RunState) -> Result<(), String> {
    match end {
        CallEnd::Recorded => Ok(()),
        CallEnd::CancelRun(reason) => {
            run.cancel.cancel(Some(&reason));
            Err(run.cancel.reason())
        }
    }
}

fn call_context(exec: &Executor, run: &RunState, call: &ToolCall, events: &EventSink) -> CallContext {
    let sink = events.clone();
    let progress_call = call.clone();
    CallContext {
        run_id: run.run_id.clone(),
        session_id: run.session_id.clone(),
        call_id: call.id.clone(),
        agent: exec.settings.agent.clone(),
        tenant: run.tenant.clone(),
        turn: run.turn,
        dependencies: run.dependencies.clone(),
        cancelled: run.cancel.flag(),
        progress: Some(Arc::new(move |message: &str| {
            sink.emit(ToolEvent::ToolProgress { call: progress_call.clone(), message: message.to_owned() })
        })),
    }
}

#[expect(clippy::too_many_arguments, reason = "one call's whole state, moved into its task")]
async fn execute(
    exec: Executor,
    tool: Tool,
    call: ToolCall,
    raw_args: Value,
    prepared: Value,
    ctx: CallContext,
    events: EventSink,
    results: Results,
) -> CallEnd {
    events.emit(ToolEvent::ToolCallStarted { call: call.clone() });
    let outcome = attempt::run(&exec.settings, &tool, &raw_args, &prepared, &ctx).await;
    if let Err(Failure::RunCancelled(reason)) = outcome {
        return CallEnd::CancelRun(reason);
    }
    complete::finish(&results, &events, &exec.settings, &tool, &call, &ctx, outcome);
    CallEnd::Recorded
}
