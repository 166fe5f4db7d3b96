//! A tenant's rules around each `/mcp` call, the same as around
//! `POST /api/tools/{name}/call`: its quotas admit the call (a refusal is an
//! `isError` result with the message the route gives in its 429 body, and
//! is counted), its metrics record it, and while it waits for an approval
//! it is listed by `GET /api/approvals` and can be decided by
//! `POST /api/chat/approve`.

use super::super::metrics::Metrics;
use super::super::quota::{Admitted, Quota};
use lovia_host::BoxFuture;
use lovia_host::approval::{ApprovalChannel, ApprovalDecision, ApprovalRequest};
use lovia_mcp::{CallHook, CallOutcome, CallPermit, CallStart};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// A tenant's `/mcp` calls in progress, by their run id (`mcp-<n>`), which
/// the approve route takes as the `session_id`.
#[derive(Default)]
pub(crate) struct Waiting(Mutex<HashMap<String, InProgress>>);

struct InProgress {
    approvals: ApprovalChannel,
    /// When its approval was asked for, once it was.
    asked: Option<SystemTime>,
}

/// One pending approval of an `/mcp` call.
pub(crate) struct Pending {
    pub(crate) session: String,
    pub(crate) request: ApprovalRequest,
    pub(crate) asked: SystemTime,
}

impl Waiting {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, InProgress>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lists a direct call's approvals (`POST /api/tools/{name}/call` with
    /// `x-lovia-approval: wait`) under `session` until the returned guard
    /// is dropped: its approvals are asked of a person from the start.
    pub(crate) fn register_direct(self: &Arc<Self>, session: String, approvals: ApprovalChannel) -> Registered {
        let entry = InProgress { approvals, asked: Some(SystemTime::now()) };
        self.lock().insert(session.clone(), entry);
        Registered { waiting: self.clone(), session }
    }

    /// The approvals waiting now.
    pub(crate) fn pending(&self) -> Vec<Pending> {
        let calls = self.lock();
        calls
            .iter()
            .filter_map(|(session, call)| Some((session, call.asked?, call.approvals.pending())))
            .flat_map(|(session, asked, requests)| {
                requests.into_iter().map(move |request| Pending { session: session.clone(), request, asked })
            })
            .collect()
    }

    /// Decides `call_id` of the `/mcp` call `session`: `None` when no such
    /// call waits for that approval (the session may be a chat's), else
    /// whether the decision landed. The first decision wins, whether it comes
    /// from here or from the client's elicitation.
    pub(crate) fn decide(&self, session: &str, call_id: &str, decision: ApprovalDecision) -> Option<bool> {
        // Only a call that waits for a person: never a 2026-07-28 round trip,
        // whose answer is the client's own retry.
        let approvals = self.lock().get(session).filter(|c| c.asked.is_some())?.approvals.clone();
        // A call id it does not wait on may be a chat's whose session has the
        // same name: that is for the chats to answer.
        approvals.is_pending(call_id).then(|| {
            approvals.note_decider(call_id, "http_api");
            approvals.resolve(call_id, decision)
        })
    }
}

/// A direct call's place in the approval listing, given back when dropped.
pub(crate) struct Registered {
    waiting: Arc<Waiting>,
    session: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.waiting.lock().remove(&self.session);
    }
}

/// The tenant's quota, metrics and approval listing for its `/mcp` calls.
pub(crate) struct TenantHook {
    pub(crate) tenant: String,
    pub(crate) quota: Arc<Quota>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) waiting: Arc<Waiting>,
}

impl CallHook for TenantHook {
    fn admit<'a>(&'a self, call: &'a CallStart<'a>) -> BoxFuture<'a, Result<Box<dyn CallPermit>, String>> {
        Box::pin(async move {
            // The refusal is counted by `admit`, as for the other routes.
            let fuel_cap = super::super::quota::fuel_cap_of(call.tool);
            let admitted = self.quota.admit(fuel_cap).await.map_err(|refusal| refusal.message().to_owned())?;
            let session = call.run.run_id.clone();
            let entry = InProgress { approvals: call.run.approvals.clone(), asked: None };
            self.waiting.lock().insert(session.clone(), entry);
            let permit = Permit {
                _admitted: admitted,
                tenant: self.tenant.clone(),
                metrics: self.metrics.clone(),
                waiting: self.waiting.clone(),
                session,
            };
            Ok(Box::new(permit) as Box<dyn CallPermit>)
        })
    }
}

/// Held by an admitted call: its slot of `max_concurrent_calls`, its hold
/// on the shared minute's fuel (given back, and the burn charged, when it
/// is dropped) and its place in the approval listing, all given back when
/// it ends.
struct Permit {
    _admitted: Admitted,
    tenant: String,
    metrics: Arc<Metrics>,
    waiting: Arc<Waiting>,
    session: String,
}

impl CallPermit for Permit {
    fn approval_asked(&self) {
        if let Some(call) = self.waiting.lock().get_mut(&self.session) {
            call.asked = Some(SystemTime::now());
        }
    }

    fn finished(self: Box<Self>, outcome: &CallOutcome<'_>) {
        // A round that only answered `input_required` ran nothing: the retry
        // is the call that counts.
        if outcome.input_required {
            return;
        }
        let (error_kind, tool_error_kind) = match outcome.result {
            Some(entry) => (entry.error_kind, entry.tool_error_kind.as_deref()),
            None => (Some(lovia_host::ErrorKind::Cancelled), None),
        };
        self.metrics.record_call(&self.tenant, outcome.tool, outcome.elapsed, error_kind, tool_error_kind);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.waiting.lock().remove(&self.session);
    }
}
