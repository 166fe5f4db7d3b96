//! Batch scheduling (docs/semantics.md §8): parallel calls run concurrently; a barrier
//! waits for the calls in flight, runs alone, and later calls are not even
//! preflighted until it ends. Results are recorded in completion order.

use super::complete::{self, Results};
use super::preflight::{Preflight, preflight};
use super::tool::Tool;
use super::{EventSink, Executor, RunState, ToolCall, ToolEvent, ToolResultEntry, TurnError, attempt, trace};
use crate::call::CallContext;
use crate::call::Failure;
use futures_util::FutureExt;
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
    let mut in_flight = InFlight {
        set: JoinSet::new(),
        calls: HashMap::new(),
        lanes: HashMap::new(),
        results: results.clone(),
        events: events.clone(),
    };
    let mut handoff = None;
    let mut budget = None;
    // The calls' spans are children of whatever the caller runs the turn in
    // (a run's span, an MCP request's, a program's call).
    let parent = exec.settings.telemetry.current();
    let end = async {
        for (index, call) in calls.iter().enumerate() {
            // Sweep: calls that already finished may have asked to cancel the run.
            while let Some(done) = in_flight.set.try_join_next_with_id() {
                in_flight.settle(done, run).await?;
            }
            let mut ctx = call_context(exec, run, call, events);
            let span = trace::tool_span(exec, run, call, &parent);
            match span.within(preflight(exec, call, &ctx, run, events, &results, &mut handoff)).await {
                Preflight::Ready { tool, raw_args, prepared, checking } => {
                    trace::plugin(&span, &tool);
                    if tool.calls_tools {
                        ctx.nested = Some(Arc::new(super::nested::ExecNested {
                            trace: span.context().cloned(),
                            exec: exec.clone(),
                            run: run.clone(),
                            events: events.clone(),
                            parent: call.id.clone(),
                            count: Default::default(),
                            diverged: Default::default(),
                            gate: Default::default(),
                        }));
                    }
                    let barrier = tool.is_barrier();
                    if barrier {
                        in_flight.drain(run).await?;
                    }
                    // A call with nothing beside it (a lone call, a barrier, or the
                    // last call once the others have ended) runs on this task: a task
                    // of its own would buy no concurrency and cost a spawn and a
                    // cross-thread wake-up, most of a lone call's overhead
                    // (docs/performance.md).
                    let alone = in_flight.set.is_empty() && (barrier || index + 1 == calls.len());
                    let lane = tool.shared_instance(run).filter(|_| !barrier);
                    // The first attempt's timeout runs from the start of the argument
                    // checks, through any wait for a lane (docs/semantics.md §10, §22).
                    let since = std::time::Instant::now().checked_sub(checking).unwrap_or_else(std::time::Instant::now);
                    let task = execute(
                        exec.clone(),
                        tool,
                        call.clone(),
                        raw_args,
                        prepared,
                        since,
                        ctx,
                        events.clone(),
                        results.clone(),
                        span,
                    );
                    if alone {
                        in_flight.run_inline(task, call, run).await?;
                        continue;
                    }
                    // (A barrier always ran inline above: the calls before it were drained.)
                    let task: CallTask = Box::pin(task);
                    let task = match lane {
                        Some(key) => match in_flight.queue(key, call, task) {
                            None => continue,
                            // The lane ended: a call in it cancelled the run. Settle that
                            // before this call may start.
                            Some(task) => {
                                in_flight.drain(run).await?;
                                task
                            }
                        },
                        None => task,
                    };
                    let handle = in_flight.set.spawn(task);
                    in_flight.calls.insert(handle.id(), call.clone());
                }
                Preflight::Rejected => trace::finish(&span, &results, &call.id),
                Preflight::Budget(message) => {
                    // Stop spawning; calls in flight run to completion and are recorded (docs/semantics.md §7).
                    span.fail("budget_exceeded", message.clone());
                    budget = Some(message);
                    break;
                }
                Preflight::Cancelled => {
                    span.fail("cancelled", "the run was cancelled");
                    return Err(run.cancel.reason());
                }
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

/// One call's whole execution, ready to be polled.
type CallTask = std::pin::Pin<Box<dyn Future<Output = CallEnd> + Send>>;

/// The calls running now, by task.
struct InFlight {
    set: JoinSet<CallEnd>,
    /// The calls of each spawned task that runs one call.
    calls: HashMap<tokio::task::Id, ToolCall>,
    /// Calls that share one warm instance (a session's, in session mode),
    /// queued to one task per instance, by [`Tool::shared_instance`].
    lanes: HashMap<usize, tokio::sync::mpsc::UnboundedSender<(ToolCall, CallTask)>>,
    results: Results,
    events: EventSink,
}

impl InFlight {
    /// Queues a call behind the others that share its instance. They would
    /// take turns on the instance anyway; one task running them in request
    /// order saves each a task, and the hand-offs of the instance between
    /// tasks on different threads (docs/performance.md). The wait counts
    /// against each call's first attempt, as waiting for the instance's
    /// lock did. Gives the task back when the lane has ended: only a call
    /// in it that cancelled the run ends a lane early.
    fn queue(&mut self, key: usize, call: &ToolCall, task: CallTask) -> Option<CallTask> {
        let item = (call.clone(), task);
        if let Some(lane) = self.lanes.get(&key) {
            return match lane.send(item) {
                Ok(()) => None,
                Err(tokio::sync::mpsc::error::SendError((_, task))) => {
                    self.lanes.remove(&key);
                    Some(task)
                }
            };
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(ToolCall, CallTask)>();
        let _ = tx.send(item);
        self.lanes.insert(key, tx);
        let (results, events) = (self.results.clone(), self.events.clone());
        self.set.spawn(async move {
            while let Some((call, task)) = rx.recv().await {
                match std::panic::AssertUnwindSafe(task).catch_unwind().await {
                    Ok(CallEnd::Recorded) => {}
                    Ok(CallEnd::CancelRun(reason)) => return CallEnd::CancelRun(reason),
                    Err(payload) => record_panic(&results, &events, &call, payload).await,
                }
            }
            CallEnd::Recorded
        });
        None
    }

    /// Waits for every call in flight; a cancellation aborts them at once.
    async fn drain(&mut self, run: &RunState) -> Result<(), String> {
        // Closing the lanes lets their tasks end once their queues are empty.
        self.lanes.clear();
        loop {
            tokio::select! {
                biased;
                () = run.cancel.cancelled() => return Err(run.cancel.reason()),
                next = self.set.join_next_with_id() => match next {
                    None => return Ok(()),
                    Some(done) => self.settle(done, run).await?,
                },
            }
        }
    }

    /// Runs one call on the turn's own task, as a spawned one would run:
    /// a cancellation drops it at once, a tool's `cancel-run` ends the turn,
    /// and a host-native body that panics still gets its one result.
    async fn run_inline(
        &mut self,
        task: impl Future<Output = CallEnd>,
        call: &ToolCall,
        run: &RunState,
    ) -> Result<(), String> {
        let task = std::panic::AssertUnwindSafe(task).catch_unwind();
        tokio::select! {
            biased;
            () = run.cancel.cancelled() => Err(run.cancel.reason()),
            end = task => match end {
                Ok(CallEnd::Recorded) => Ok(()),
                Ok(CallEnd::CancelRun(reason)) => {
                    run.cancel.cancel(Some(&reason));
                    Err(run.cancel.reason())
                }
                Err(payload) => {
                    self.record_panic(call, payload).await;
                    Ok(())
                }
            },
        }
    }

    async fn record_panic(&self, call: &ToolCall, payload: Box<dyn std::any::Any + Send>) {
        record_panic(&self.results, &self.events, call, payload).await;
    }

    async fn settle(
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
                    self.record_panic(&call, e.into_panic()).await;
                }
                Ok(())
            }
        }
    }
}

/// A host-native body that panicked: its call still gets its one result.
async fn record_panic(results: &Results, events: &EventSink, call: &ToolCall, payload: Box<dyn std::any::Any + Send>) {
    let message = panic_text(payload);
    tracing::error!(call = %call.id, tool = %call.name, "tool body panicked: {message}");
    let failure = Failure::Panicked(message);
    events.emit(ToolEvent::ToolCallFailed { call: call.clone(), error: failure.to_string() });
    complete::record_error(results, events, call, &failure).await;
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

fn call_context(exec: &Executor, run: &RunState, call: &ToolCall, events: &EventSink) -> CallContext {
    // Progress and log lines become events; with nobody listening there is
    // nothing to make. Both sinks share one copy of the call.
    let (progress, log) = if events.is_connected() {
        let call = Arc::new(call.clone());
        let (sink, progress_call) = (events.clone(), call.clone());
        let progress: crate::call::ProgressSink = Arc::new(move |message: &str| {
            sink.emit(ToolEvent::ToolProgress { call: (*progress_call).clone(), message: message.to_owned() })
        });
        let sink = events.clone();
        let log: crate::call::LogSink = Arc::new(move |level, message: &str| {
            sink.emit(ToolEvent::ToolLog { call: (*call).clone(), level, message: message.to_owned() })
        });
        (Some(progress), Some(log))
    } else {
        (None, None)
    };
    CallContext {
        run_id: run.run_id.clone(),
        session_id: run.session_id.clone(),
        call_id: call.id.clone(),
        agent: exec.settings.agent.clone(),
        tenant: run.tenant.clone(),
        turn: run.turn,
        dependencies: run.dependencies.clone(),
        cancel: run.cancel.clone(),
        progress,
        log,
        nested: None,
    }
}

#[expect(clippy::too_many_arguments, reason = "one call's whole state, moved into its task")]
async fn execute(
    exec: Executor,
    tool: Arc<Tool>,
    call: ToolCall,
    raw_args: Option<Value>,
    prepared: Value,
    since: std::time::Instant,
    ctx: CallContext,
    events: EventSink,
    results: Results,
    span: lovia_telemetry::Scope,
) -> CallEnd {
    let checking = since.elapsed();
    events.emit(ToolEvent::ToolCallStarted { call: call.clone() });
    let on_retry = |attempt: u32, failure: &Failure, retry_in: Duration| {
        events.emit(ToolEvent::AttemptFailed { call: call.clone(), attempt, error: failure.to_string(), retry_in });
    };
    let outcome =
        span.within(attempt::run(&exec.settings, &tool, raw_args.as_ref(), prepared, checking, &ctx, &on_retry)).await;
    if let Err(Failure::RunCancelled(reason)) = outcome {
        span.fail("cancelled", "the tool cancelled the run");
        return CallEnd::CancelRun(reason);
    }
    if let Err(failure) = &outcome {
        trace::limit(&span, failure);
    }
    span.within(complete::finish(&results, &events, &exec.settings, &tool, &call, &ctx, outcome)).await;
    trace::finish(&span, &results, &call.id);
    CallEnd::Recorded
}
