//! The executor's [`NestedCalls`]: a call made by a running tool is one
//! more turn of one call, under the same executor and run state, so it gets
//! every rule a call of the model's gets (docs/semantics.md §3–§16); its
//! events reach the run's sink wrapped in [`ToolEvent::Nested`]. A tool may
//! have several nested calls in flight (a program's `Promise.all`); they run
//! concurrently as a turn's parallel calls do, and a barrier's call runs
//! alone: it waits for the calls in flight and holds back the next ones.

use super::{EventSink, Executor, JournaledCall, RunState, ToolCall, ToolEvent, TurnError};
use crate::call::{BoxFuture, NestedCalls, NestedResult, NestedStopped};
use std::sync::atomic::{AtomicU64, Ordering};

/// The nested calls of one call (`parent`).
pub(super) struct ExecNested {
    pub(super) exec: Executor,
    pub(super) run: RunState,
    pub(super) events: EventSink,
    pub(super) parent: String,
    /// The parent call's span: the nested calls' spans are its children.
    pub(super) trace: Option<lovia_telemetry::Context>,
    pub(super) count: AtomicU64,
    /// Set once a resumed program asked for a call other than its journal's:
    /// from then on none of its calls acts, including ones already started
    /// beside it (`Promise.all`), which the program lets end.
    pub(super) diverged: std::sync::atomic::AtomicBool,
    /// Taken shared by a call and exclusively by a barrier's call, or a call
    /// of a session's shared instance (whose calls a turn runs in one lane).
    pub(super) gate: tokio::sync::RwLock<()>,
}

impl NestedCalls for ExecNested {
    fn call<'a>(&'a self, name: &'a str, arguments: String) -> BoxFuture<'a, Result<NestedResult, NestedStopped>> {
        Box::pin(async move {
            let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
            let call = ToolCall::new(format!("{}/{n}", self.parent), name, arguments);
            // A resumed program replays from its start: a call it made before
            // is answered from the journal, never made again.
            if self.diverged.load(Ordering::SeqCst) {
                return Err(NestedStopped(crate::call::text::journal_diverged(&call.id)));
            }
            if let Some(done) = self.run.journal.get(&call.id) {
                if done.name != call.name || done.arguments != call.arguments {
                    self.diverged.store(true, Ordering::SeqCst);
                    return Err(NestedStopped(crate::call::text::journal_mismatch(&call.id, &call.name, &done.name)));
                }
                // It counted against the run's budget when it ran; the count
                // a resumed run starts from may predate it.
                self.run.tool_calls.fetch_add(1, Ordering::SeqCst);
                return Ok(done.clone().into_result());
            }
            // A tool that calls tools is not callable from inside one: a
            // program could otherwise start programs without end.
            let tool = self.exec.tools.get(name);
            if tool.is_some_and(|tool| tool.calls_tools) {
                return Ok(NestedResult {
                    call_id: call.id,
                    output: crate::call::text::nested_not_callable(name),
                    raw: None,
                    is_error: true,
                });
            }
            let alone = tool.is_some_and(|tool| tool.is_barrier() || tool.shared_instance(&self.run).is_some());
            let (_shared, _exclusive) =
                if alone { (None, Some(self.gate.write().await)) } else { (Some(self.gate.read().await), None) };
            let parent = self.parent.clone();
            let outer = self.events.clone();
            let events = EventSink::from_fn(move |event| {
                outer.emit(ToolEvent::Nested { parent: parent.clone(), event: Box::new(event) })
            });
            // The argument text of a nested call is whole: never "cut off".
            let run = RunState { cut_off: false, ..self.run.clone() };
            let done = lovia_telemetry::within(self.trace.as_ref(), self.exec.call(&call, &run, &events)).await;
            match done {
                Ok(entry) => {
                    let journaled = JournaledCall::new(call, entry.output, entry.raw, entry.is_error);
                    // Durable before the program reads it (and acts on it).
                    if let Err(reason) = self.events.journal(&journaled).await {
                        self.diverged.store(true, Ordering::SeqCst);
                        return Err(NestedStopped(reason));
                    }
                    Ok(journaled.into_result())
                }
                Err(TurnError::Cancelled { reason, .. }) => Err(NestedStopped(reason)),
                Err(TurnError::BudgetExceeded { message, .. }) => Err(NestedStopped(message)),
            }
        })
    }
}
