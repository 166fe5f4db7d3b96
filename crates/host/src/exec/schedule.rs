//! Batch scheduling (docs/semantics.md §8): parallel calls run concurrently; a barrier
//! waits for the calls in flight, runs alone, and later calls are not even
//! preflighted until it ends. Results are recorded in completion order.

use super::complete::{self, Results};
use super::preflight::{Preflight, preflight};
use super::tool::Tool;
use super::{EventSink, Executor, RunState, ToolCall, ToolEvent, ToolResultEntry, TurnError, attempt};
use crate::call::CallContext;
use crate::call::Failure;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
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
    let mut in_flight =
        InFlight { set: JoinSet::new(), calls: HashMap::new(), results: results.clone(), events: events.clone() };
    let mut handoff = None;
    let mut budget = None;
    let end = async {
        for call in calls {
            // Sweep: calls that already finished may have asked to cancel the run.
            while let Some(done) = in_flight.set.try_join_next_with_id() {
                in_flight.settle(done, run)?;
            }
            let ctx = call_context(exec, run, call, events);
            match preflight(exec, call, &ctx, run, events, &results, &mut handoff).await {
                Preflight::Ready { tool, raw_args, prepared, checking } => {
                    let barrier = tool.is_barrier();
                    if barrier {
                        in_flight.drain(run).await?;
                    }
                    let task = execute(
                        exec.clone(),
                        tool,
                        call.clone(),
                        raw_args,
                        prepared,
                        checking,
                        ctx,
                        events.clone(),
                        results.clone(),
                    );
                    let handle = in_flight.set.spawn(task);
                    in_flight.calls.insert(handle.id(), call.clone());
                    // A barrier runs alone: nothing else starts until it ends.
                    if barrier {
                        in_flight.drain(run).await?;
                    }
                }
                Preflight::Rejected => {}
                Preflight::Budget(message) => {
                    // Stop spawning; calls in flight run to completion and are recorded (docs/semantics.md §7).
                    budget = Some(message);
                    break;
                }
                Preflight::Cancelled => return Err(run.cancel.reason()),
            }
        }
        in_flight.drain(run).await
    }
    .await;
    // Whatever ended the turn, nothing of it keeps running.
    in_flight.set.abort_all();
    while in_flight.set.join_next().await.is_some() {}
    let results = std::mem::take(&mut *results.lock().unwrap_or_else(|p| p.into_inner()));
    match (end, budget) {
        (Err(reason), _) => Err(TurnError::Cancelled { reason, results }),
        (Ok(()), Some(message)) => Err(TurnError::BudgetExceeded { message, results }),
        (Ok(()), None) => Ok(results),
    }
}

/// The calls running now, by task.
struct InFlight {
    set: JoinSet<CallEnd>,
    calls: HashMap<tokio::task::Id, ToolCall>,
    results: Results,
    events: EventSink,
}

impl InFlight {
    /// Waits for every call in flight; a cancellation aborts them at once.
    async fn drain(&mut self, run: &RunState) -> Result<(), String> {
        loop {
            tokio::select! {
                biased;
                () = run.cancel.cancelled() => return Err(run.cancel.reason()),
                next = self.set.join_next_with_id() => match next {
                    None => return Ok(()),
                    Some(done) => self.settle(done, run)?,
                },
            }
        }
    }

    fn settle(
        &mut self,
        done: Result<(tokio::task::Id, CallEnd), tokio::task::JoinError>,
        run: &RunState,
    ) -> Result<(), String> {
        match done {
            Ok((id, CallEnd::Recorded)) => {
                self.calls.remove(&id);
                Ok(())
            }
            Ok((id, CallEnd::CancelRun(reason))) => {
                self.calls.remove(&id);
                run.cancel.cancel(Some(&reason));
                Err(run.cancel.reason())
            }
            Err(e) => {
                // A host-native body that panicked: its call still gets its one result.
                if let Some(call) = self.calls.remove(&e.id())
                    && e.is_panic()
                {
                    let message = panic_text(e.into_panic());
                    tracing::error!(call = %call.id, tool = %call.name, "tool body panicked: {message}");
                    let failure = Failure::Panicked(message);
                    self.events.emit(ToolEvent::ToolCallFailed { call: call.clone(), error: failure.to_string() });
                    complete::record_error(&self.results, &self.events, &call, &failure);
                }
                Ok(())
            }
        }
    }
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
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
        cancel: run.cancel.clone(),
        progress: Some(Arc::new(move |message: &str| {
            sink.emit(ToolEvent::ToolProgress { call: progress_call.clone(), message: message.to_owned() })
        })),
    }
}

#[expect(clippy::too_many_arguments, reason = "one call's whole state, moved into its task")]
async fn execute(
    exec: Executor,
    tool: Arc<Tool>,
    call: ToolCall,
    raw_args: Value,
    prepared: Value,
    checking: Duration,
    ctx: CallContext,
    events: EventSink,
    results: Results,
) -> CallEnd {
    events.emit(ToolEvent::ToolCallStarted { call: call.clone() });
    let on_retry = |attempt: u32, failure: &Failure, retry_in: Duration| {
        events.emit(ToolEvent::AttemptFailed { call: call.clone(), attempt, error: failure.to_string(), retry_in });
    };
    let outcome = attempt::run(&exec.settings, &tool, &raw_args, &prepared, checking, &ctx, &on_retry).await;
    if let Err(Failure::RunCancelled(reason)) = outcome {
        return CallEnd::CancelRun(reason);
    }
    complete::finish(&results, &events, &exec.settings, &tool, &call, &ctx, outcome);
    CallEnd::Recorded
}
