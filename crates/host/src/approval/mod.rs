//! Approvals (docs/semantics.md §13, D7): when a call needs one, who decides, in
//! which order, and the channel that carries decisions. It fails closed.

use crate::call::BoxFuture;
use crate::call::CallContext;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// A host predicate deciding, from the raw arguments, whether a call needs approval.
pub type ApprovalPredicate = Arc<dyn Fn(&Value, &CallContext) -> Result<bool, String> + Send + Sync>;

/// When a tool's calls need approval.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum NeedsApproval {
    /// Never. The default.
    #[default]
    Never,
    /// Always.
    Always,
    /// A host predicate over the raw arguments; an `Err` denies the call.
    Predicate(ApprovalPredicate),
    /// The component's own `needs-approval` export decides.
    Plugin,
}

impl std::fmt::Debug for NeedsApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NeedsApproval::Never => "Never",
            NeedsApproval::Always => "Always",
            NeedsApproval::Predicate(_) => "Predicate",
            NeedsApproval::Plugin => "Plugin",
        })
    }
}

/// A decision on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalDecision {
    /// Run it.
    Approve,
    /// Do not run it: `Tool <name> was not approved.`
    Deny,
}

/// What an approval handler answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandlerAnswer {
    /// Run it.
    Allow,
    /// Do not run it.
    Deny,
    /// No decision: the call is denied unless someone decides out of band meanwhile.
    Ask,
    /// Nobody decided within the handler's wait (`lovia serve`'s
    /// `approval_timeout_secs`): denied, and traced as a timeout.
    TimedOut,
}

impl HandlerAnswer {
    /// The reference's string protocol: trimmed and lower-cased, `allow` →
    /// allow, `ask` → ask, anything else → deny.
    pub fn parse(text: &str) -> HandlerAnswer {
        match text.trim().to_lowercase().as_str() {
            "allow" => HandlerAnswer::Allow,
            "ask" => HandlerAnswer::Ask,
            _ => HandlerAnswer::Deny,
        }
    }
}

/// What a pending approval is about. A decision is bound to it: the call
/// id, the tool, the exact argument text and the plugin's digest (docs/semantics.md D7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    /// The call id.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The exact argument text the model sent.
    pub arguments: String,
    /// The SHA-256 of the plugin that would run it; `None` for native tools.
    pub plugin_digest: Option<String>,
}

/// Decides approvals the stream consumer left undecided. Called at most once
/// per gated call, after the consumer moved past its `ApprovalRequired`
/// event; an `Err` denies the call and is reported as `ToolCallFailed`.
pub trait ApprovalHandler: Send + Sync {
    /// The answer for `request`.
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<HandlerAnswer, String>>;
}

impl<F> ApprovalHandler for F
where
    F: Fn(&ApprovalRequest, &CallContext) -> Result<HandlerAnswer, String> + Send + Sync,
{
    fn decide<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        ctx: &'a CallContext,
    ) -> BoxFuture<'a, Result<HandlerAnswer, String>> {
        let answer = self(request, ctx);
        Box::pin(async move { answer })
    }
}

struct Pending {
    request: ApprovalRequest,
    respond: oneshot::Sender<Decided>,
    /// Who is about to decide ([`ApprovalChannel::note_decider`]).
    by: Option<&'static str>,
}

/// A decision and who made it, as the waiting call receives it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decided {
    pub(crate) decision: ApprovalDecision,
    /// Who decided, where the decider said (`lovia.approval.by` in traces).
    pub(crate) by: Option<&'static str>,
}

impl Pending {
    fn answer(self, decision: ApprovalDecision) -> bool {
        self.respond.send(Decided { decision, by: self.by }).is_ok()
    }
}

/// The run's approval channel: pending decisions by call id. Cheap to clone.
/// A decision for a call that is not pending is ignored: nothing can be
/// approved before it is asked, and nothing twice.
#[derive(Clone, Default)]
pub struct ApprovalChannel {
    pending: Arc<Mutex<HashMap<String, Pending>>>,
    /// Tools a person allowed for the rest of the session ("always allow
    /// this tool in this chat"): their calls are approved without asking.
    allowed: Arc<Mutex<std::collections::BTreeSet<String>>>,
}

impl std::fmt::Debug for ApprovalChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalChannel").field("pending", &self.pending_ids()).finish()
    }
}

impl ApprovalChannel {
    /// A new, empty channel.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn register(&self, request: ApprovalRequest) -> oneshot::Receiver<Decided> {
        let (respond, receive) = oneshot::channel();
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.insert(request.call_id.clone(), Pending { request, respond, by: None });
        receive
    }

    /// Says who is about to decide the pending call `call_id` (the door:
    /// `http_api`, `mcp_elicitation`, …), so that the call's trace can say
    /// it (docs/telemetry.md). Nothing when no such call is pending.
    pub fn note_decider(&self, call_id: &str, by: &'static str) {
        if let Some(p) = self.pending.lock().unwrap_or_else(|p| p.into_inner()).get_mut(call_id) {
            p.by = Some(by);
        }
    }

    pub(crate) fn discard(&self, call_id: &str) {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(call_id);
    }

    /// Decides the pending call `call_id`. Returns false when no call with
    /// that id is pending.
    pub fn resolve(&self, call_id: &str, decision: ApprovalDecision) -> bool {
        let entry = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(call_id);
        entry.is_some_and(|p| p.answer(decision))
    }

    /// Decides `call_id` only if it is still exactly `request` (same tool,
    /// same argument text, same plugin). Returns false otherwise.
    pub fn resolve_bound(&self, request: &ApprovalRequest, decision: ApprovalDecision) -> bool {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.get(&request.call_id).is_none_or(|p| p.request != *request) {
            return false;
        }
        let entry = pending.remove(&request.call_id);
        entry.is_some_and(|p| p.answer(decision))
    }

    /// [`ApprovalChannel::resolve_bound`] with approve, allowing the tool for
    /// the rest of the session in the same step: only when the decision
    /// lands, and before the call can run on (a runner that carries the
    /// allowed tools into its next turn must see it).
    fn approve_bound_always(&self, request: &ApprovalRequest) -> bool {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.get(&request.call_id).is_none_or(|p| p.request != *request) {
            return false;
        }
        // Lock order: pending, then allowed (nothing takes them the other way).
        self.allow_tool(&request.tool);
        let entry = pending.remove(&request.call_id);
        entry.is_some_and(|p| p.answer(ApprovalDecision::Approve))
    }

    /// Approves the pending call `call_id` and allows its tool for the rest
    /// of the session: later calls of it are approved without asking (and
    /// show as `AutoApproved`). Returns the tool's name; `None` when no call
    /// with that id is pending.
    pub fn approve_always(&self, call_id: &str) -> Option<String> {
        let entry = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(call_id)?;
        let tool = entry.request.tool.clone();
        self.allow_tool(&tool);
        entry.answer(ApprovalDecision::Approve).then_some(tool)
    }

    /// Allows `tool` for the rest of the session (a runner restores what a
    /// session's checkpoint holds).
    pub fn allow_tool(&self, tool: &str) {
        self.allowed.lock().unwrap_or_else(|p| p.into_inner()).insert(tool.to_owned());
    }

    /// Whether `tool` is allowed for the session.
    pub fn is_allowed(&self, tool: &str) -> bool {
        self.allowed.lock().unwrap_or_else(|p| p.into_inner()).contains(tool)
    }

    /// The tools allowed for the session, sorted.
    pub fn allowed_tools(&self) -> Vec<String> {
        self.allowed.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
    }

    /// Approves `call_id`; see [`ApprovalChannel::resolve`].
    pub fn approve(&self, call_id: &str) -> bool {
        self.resolve(call_id, ApprovalDecision::Approve)
    }

    /// Rejects `call_id`; see [`ApprovalChannel::resolve`].
    pub fn reject(&self, call_id: &str) -> bool {
        self.resolve(call_id, ApprovalDecision::Deny)
    }

    /// Decides every pending call at once; returns how many there were.
    pub fn release(&self, decision: ApprovalDecision) -> usize {
        let drained: Vec<Pending> =
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, p)| p).collect();
        let n = drained.len();
        for p in drained {
            let _ = p.answer(decision);
        }
        n
    }

    /// Whether `call_id` waits for a decision.
    pub fn is_pending(&self, call_id: &str) -> bool {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).contains_key(call_id)
    }

    /// The pending call ids.
    pub fn pending_ids(&self) -> Vec<String> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect()
    }

    /// The pending requests.
    pub fn pending(&self) -> Vec<ApprovalRequest> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).values().map(|p| p.request.clone()).collect()
    }
}

/// Carried by an `ApprovalRequired` event. The consumer decides with
/// [`ApprovalTicket::approve`] or [`ApprovalTicket::reject`]; dropping the
/// ticket undecided (moving on to the next event) hands the call to the
/// approval handler, and then fails closed.
#[derive(Debug)]
pub struct ApprovalTicket {
    pub(crate) request: ApprovalRequest,
    pub(crate) channel: ApprovalChannel,
    pub(crate) _held: oneshot::Sender<()>,
}

impl ApprovalTicket {
    /// What is asked.
    pub fn request(&self) -> &ApprovalRequest {
        &self.request
    }

    /// Says who is deciding it, for its trace ([`ApprovalChannel::note_decider`]).
    pub fn note_decider(&self, by: &'static str) {
        self.channel.note_decider(&self.request.call_id, by);
    }

    /// Approves the call.
    pub fn approve(self) -> bool {
        self.channel.resolve_bound(&self.request, ApprovalDecision::Approve)
    }

    /// Approves the call and allows its tool for the rest of the session:
    /// later calls of it are approved without asking (`AutoApproved`), as a
    /// chat's "always allow" does.
    pub fn approve_always(self) -> bool {
        // Only a decision that lands allows the tool: a stale ticket (its
        // call timed out or changed) allows nothing.
        self.channel.approve_bound_always(&self.request)
    }

    /// Rejects the call.
    pub fn reject(self) -> bool {
        self.channel.resolve_bound(&self.request, ApprovalDecision::Deny)
    }
}
