//! The task that drives one chat's run once it has started: its events to
//! the readers (as the SSE vocabulary of docs/operators.md) and the
//! metrics, its stop when the lease is lost or the fence ends, and its end:
//! the outcome, the last relayed events, the lease let go.

use super::{LiveRun, RELAY_FLUSH};
use crate::Service;
use crate::workspace::OpenWorkspace;
use lovia_host::exec::ToolEvent;
use lovia_runner::{RunEvent, RunHandle, wire};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::OwnedSemaphorePermit;

/// Everything one run's task holds until the run ends.
pub(super) struct RunTask {
    pub(super) service: Service,
    pub(super) live: Arc<LiveRun>,
    pub(super) handle: RunHandle,
    /// (tenant index, session): the run's entry in the live runs.
    pub(super) key: (usize, String),
    pub(super) tenant_name: String,
    pub(super) session: String,
    /// Whether the run resumed one the store held unfinished.
    pub(super) resumed: bool,
    /// With a shared store, the task writing the run's events to the table.
    pub(super) relaying: Option<tokio::task::JoinHandle<()>>,
    /// The tenant's run slot, held until the run ends.
    pub(super) permit: OwnedSemaphorePermit,
    /// The session's workspace: closed (its background processes ended)
    /// when the run's task ends.
    pub(super) workspace: Option<OpenWorkspace>,
}

impl RunTask {
    pub(super) async fn drive(mut self) {
        // What the session list says once the run is over; a run whose
        // stream ends without a final event counts as failed.
        let mut outcome: &'static str = "failed";
        let mut started: HashMap<String, Instant> = HashMap::new();
        let lost = loop {
            let Some(event) = self.next_event().await else { break false };
            let Some(event) = event else { break true };
            // A call a program made (code mode) is observed like the
            // model's own; its events stream with `parent`, the program's
            // call id (lovia_runner::wire, the vocabulary `lovia run` shares).
            if let Some(ended) = self.observe(&event, &mut started) {
                outcome = ended;
            }
            if let Some(wire) = wire::run_event(&event, Some(&self.session), self.resumed) {
                self.live.publish(wire.name, wire.data);
            }
        };
        self.end(outcome, lost).await;
    }

    /// The run's next event: `None` when its stream ended, `Some(None)`
    /// when it was stopped because the lease was lost or the fence ended.
    async fn next_event(&mut self) -> Option<Option<RunEvent>> {
        let fence = self.live.fence.clone();
        let fence_ended = async move {
            match fence {
                Some(fence) => fence.ended().await,
                None => std::future::pending().await,
            }
        };
        let next = tokio::select! {
            biased;
            () = self.live.lease_lost.notified() => None,
            () = fence_ended => None,
            event = self.handle.next_event() => Some(event),
        };
        // Told the lease is gone, or past the fence: another replica may
        // run it now. Stop here without saving (the checkpoint is what the
        // other resumes) and publish nothing more of it.
        match next {
            Some(event) if self.live.fence.as_ref().is_none_or(lovia_host::Fence::holds) => event.map(Some),
            _ => {
                self.handle.abort();
                Some(None)
            }
        }
    }

    /// What an event changes besides the stream: the metrics, the pending
    /// approvals' times. Returns the run's outcome when the event ends it.
    fn observe(&self, event: &RunEvent, started: &mut HashMap<String, Instant>) -> Option<&'static str> {
        let metrics = &self.service.inner.metrics;
        match event {
            RunEvent::Tool(event) => self.observe_tool(event, started),
            RunEvent::RunCompleted { .. } => {
                metrics.run_ended(&self.tenant_name, "completed");
                return Some("completed");
            }
            RunEvent::RunFailed { error } => {
                metrics.run_ended(&self.tenant_name, error.kind());
                return Some(error.kind());
            }
            _ => {}
        }
        None
    }

    /// A call's timing and metrics, and the approvals it waits for; a call
    /// a program made (code mode) like any other.
    fn observe_tool(&self, event: &ToolEvent, started: &mut HashMap<String, Instant>) {
        let asked = || self.live.asked.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            ToolEvent::ToolCallStarted { call } => {
                started.insert(call.id.clone(), Instant::now());
            }
            ToolEvent::ToolCallCompleted { call, error_kind, tool_error_kind, .. } => {
                asked().remove(&call.id);
                let elapsed = started.remove(&call.id).map_or(Duration::ZERO, |t| t.elapsed());
                let metrics = &self.service.inner.metrics;
                metrics.record_call(&self.tenant_name, &call.name, elapsed, *error_kind, tool_error_kind.as_deref());
            }
            ToolEvent::ApprovalRequired { call, .. } => {
                asked().insert(call.id.clone(), SystemTime::now());
            }
            ToolEvent::Nested { event, .. } => self.observe_tool(event, started),
            _ => {}
        }
    }

    /// The run is over, or stopped: its outcome recorded, its entry gone,
    /// its readers closed, its events in the table, its lease let go.
    async fn end(self, mut outcome: &'static str, lost: bool) {
        let RunTask { service, live, handle, key, tenant_name, session, relaying, permit, workspace, .. } = self;
        // No more events for the table: a lost run's next owner writes
        // the run's events from now on.
        let relay = live.relay.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(relay);
        if lost {
            outcome = "handed_over";
            live.publish(
                "error",
                json!({"type": "handed_over", "fatal": true,
                       "message": "this replica no longer holds the run; another replica continues it"}),
            );
        }
        let _ = handle.result().await;
        if let Some(tenant) = service.inner.tenants.get(key.0) {
            tenant.runs.outcomes.ended(&session, outcome);
        }
        {
            let mut map = service.inner.live.lock().unwrap_or_else(|p| p.into_inner());
            if map.get(&key).is_some_and(|l| Arc::ptr_eq(l, &live)) {
                map.remove(&key);
            }
        }
        live.close();
        // Every event is in the table before the lease goes: a remote
        // reader that sees no lease has read all there is.
        if let Some(relaying) = relaying {
            let _ = tokio::time::timeout(RELAY_FLUSH, relaying).await;
        }
        // The run ended here (its checkpoint says how), or stopped at its
        // fence or a lost lease: the lease goes. The delete names this
        // replica as the owner, so a lease another replica holds now
        // stays; one still this replica's (a fence that ended before a
        // late renewal came back) must go, or the renewals would keep
        // it, and with it the stopped run, from every other replica.
        if let Err(e) = service.inner.stores.leases.release(&tenant_name, &session).await {
            tracing::warn!(tenant = %tenant_name, %session, error = %e, "cannot release the run's lease; it expires");
        }
        drop((permit, workspace));
    }
}
