//! A call's run: a store and an instance (fresh, or a session's warm one),
//! the guest's `call` under the call's limits and deadline, and what it
//! returned made a [`CallOutcome`].

use super::warm;
use super::{InstanceMode, LoadedTool, Plugin};
use crate::args::ArgumentError;
use crate::bindings::wit;
use crate::call::CallContext;
use crate::call::{CallOutcome, ContentPart, ErrorKind, Failure, MAX_CONTENT_PARTS, is_valid_error_kind, text};
use crate::sandbox::SessionStore;
use crate::sandbox::{self, CallLimits};
use std::sync::Arc;
use std::time::Duration;

/// What one call of a component is given, borrowed from a `CallRequest`
/// or from the executor's call (which then clones its context once, into
/// the store, rather than into a request and again into the store).
pub(crate) struct CallParts<'a> {
    pub(crate) context: &'a CallContext,
    pub(crate) timeout: Option<Duration>,
    pub(crate) limits: Option<&'a CallLimits>,
    pub(crate) session_store: Option<&'a Arc<dyn SessionStore>>,
}

impl<'a> CallParts<'a> {
    #[cfg(feature = "direct-calls")]
    pub(super) fn of(request: &'a super::CallRequest) -> Self {
        CallParts {
            context: &request.context,
            timeout: request.timeout,
            limits: request.limits.as_ref(),
            session_store: request.session_store.as_ref(),
        }
    }
}

impl Plugin {
    pub(super) async fn execute(&self, tool: &LoadedTool, request: CallParts<'_>, arguments: &str) -> CallOutcome {
        let timeout = request.timeout.or(tool.spec.timeout_ms.map(Duration::from_millis));
        let host = &self.inner.host;
        // Every instance's memory slot is the host's size: a per-call memory
        // limit above it could not be had, so the model reads the real one.
        let clamped;
        let limits = match request.limits {
            Some(l) if l.memory_bytes > host.config.limits.memory_bytes => {
                clamped = l.clone().with_memory_bytes(host.config.limits.memory_bytes);
                &clamped
            }
            Some(l) => l,
            None => &self.inner.limits,
        };
        let tenant = request.context.tenant.as_deref();
        // Held before the call and refunded when `metered` drops, however
        // the call ends (return, trap, timeout, or this future dropped).
        let Ok(reservation) = host.tenant_fuel.reserve(tenant, limits.fuel, host.config.fuel_metering) else {
            return CallOutcome::Failed(Failure::CpuBudget);
        };
        let fuel = reservation.fuel;
        let deadline = sandbox::deadline_of(limits, timeout);
        let spec =
            self.store_spec(tool, request.context.clone(), limits, timeout, fuel, request.session_store.cloned());
        // Session mode: take the session's warm instance (if any) out of its
        // slot for the call; it goes back only if the call ends cleanly.
        let slot = match (&self.inner.config.instance, &request.context.session_id) {
            (InstanceMode::Session, Some(session)) => Some(self.inner.warm.slot(tenant, session)),
            _ => None,
        };
        let mut guard = match &slot {
            Some(slot) => Some(slot.lock().await),
            None => None,
        };
        // The instance slot is declared before the store so that it is
        // released after the store (and its instance) is gone.
        let mut permit: Option<sandbox::SlotPermit> = None;
        let (store, warm_instance) = match guard.as_mut().and_then(|g| g.take()) {
            Some(mut warm) => {
                sandbox::reuse_store(&mut warm.store, spec);
                permit = Some(warm.permit);
                (warm.store, Some(warm.instance))
            }
            None => (sandbox::new_store(&self.inner.runtime.engine, spec), None),
        };
        let mut metered = sandbox::MeteredStore::new(store, reservation);
        let session = request.context.session_id.as_deref().unwrap_or("");
        let held = &mut permit;
        let call = async {
            let store = metered.store_mut();
            let instance = match warm_instance {
                Some(instance) => instance,
                None => {
                    // Waiting for a slot counts against the call's deadline.
                    *held = Some(self.instance_slot(tenant, session).await);
                    self.inner.pre.instantiate_async(&mut *store).await?
                }
            };
            let output = instance.call(&mut *store, &tool.spec.name, arguments).await?;
            wasmtime::Result::Ok((output, instance))
        };
        let result = match tokio::time::timeout(deadline.budget, call).await {
            Ok(Ok((output, instance))) => {
                if let Some(guard) = guard.as_mut() {
                    // Only a call that returned (even with a tool error) leaves a usable instance.
                    let mut store = metered.into_store();
                    if let Some(permit) = permit.take() {
                        sandbox::park_store(&mut store);
                        **guard = Some(warm::Warm { store, instance, permit });
                        self.inner.warm.touch(tenant, session);
                    }
                    return self.finish(tool, &request, limits, Ok(output), None);
                }
                Ok(output)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(wasmtime::Error::new(deadline)),
        };
        metered.settle();
        self.finish(tool, &request, limits, result, Some(&*metered.store_mut()))
    }

    /// The outcome of a call from what the component returned, or from the
    /// error that ended it (classified with the help of its `store`).
    fn finish(
        &self,
        tool: &LoadedTool,
        request: &CallParts<'_>,
        limits: &CallLimits,
        result: wasmtime::Result<Result<wit::Output, wit::CallError>>,
        store: Option<&wasmtime::Store<sandbox::SandboxState>>,
    ) -> CallOutcome {
        let too_large = |len: usize| {
            (len > limits.result_bytes).then_some(Failure::ResultTooLarge { bytes: len, limit: limits.result_bytes })
        };
        let size = match &result {
            Ok(Ok(wit::Output::Text(t) | wit::Output::Json(t))) => Some(t.len()),
            Ok(Ok(wit::Output::Parts(parts))) => Some(parts.iter().map(part_bytes).sum()),
            _ => None,
        };
        if let Some(failure) = size.and_then(too_large) {
            tracing::warn!(plugin = %crate::sandbox::escape_controls(&self.inner.name), tool = %tool.name, call = %request.context.call_id, %failure, "limit hit");
            return CallOutcome::Failed(failure);
        }
        match result {
            Ok(Ok(wit::Output::Text(text))) => CallOutcome::Text(text),
            Ok(Ok(wit::Output::Json(text))) => match serde_json::from_str(&text) {
                Ok(value) => CallOutcome::Json(value),
                Err(e) => CallOutcome::Failed(Failure::InvalidResult(format!("the tool returned invalid JSON: {e}"))),
            },
            Ok(Ok(wit::Output::Parts(parts))) => match content_parts(parts) {
                Ok(parts) => CallOutcome::Parts(parts),
                Err(problem) => {
                    tracing::warn!(plugin = %crate::sandbox::escape_controls(&self.inner.name), tool = %tool.name, call = %request.context.call_id, %problem, "bad content parts");
                    CallOutcome::Failed(Failure::InvalidResult(format!("the tool returned invalid content: {problem}")))
                }
            },
            Ok(Err(error)) => call_error(error),
            Err(err) => {
                let failure = match store {
                    Some(store) => sandbox::classify(&err, store),
                    None => Failure::Trap(err.to_string()),
                };
                if failure.is_retryable() {
                    tracing::debug!(plugin = %crate::sandbox::escape_controls(&self.inner.name), tool = %tool.name, call = %request.context.call_id, %failure, "call failed");
                } else {
                    // Resource limits are an operator's business: say which plugin, tool and call hit one.
                    tracing::warn!(plugin = %crate::sandbox::escape_controls(&self.inner.name), tool = %tool.name, call = %request.context.call_id, %failure, "limit hit");
                }
                CallOutcome::Failed(failure)
            }
        }
    }
}

pub(super) fn prepare(tool: &LoadedTool, arguments: &str) -> Result<serde_json::Value, CallOutcome> {
    let checked = crate::args::parse_object(arguments).and_then(|v| tool.validator.prepare_value(v));
    // Without a deadline the check cannot time out.
    checked.map_err(|e| rejection(e).unwrap_or_else(|| CallOutcome::Failed(Failure::TimedOut { ms: 0 })))
}

/// What the model reads for rejected arguments (`None`: the deadline passed).
pub(super) fn rejection(e: ArgumentError) -> Option<CallOutcome> {
    match e {
        // Schema-invalid arguments read as the reference's execution error (docs/semantics.md D1, D4).
        ArgumentError::Invalid { .. } => {
            Some(CallOutcome::Rejected { kind: ErrorKind::InvalidArguments, text: text::tool_error(&e) })
        }
        ArgumentError::DeadlinePassed => None,
        other => Some(CallOutcome::Rejected { kind: ErrorKind::InvalidArguments, text: other.to_string() }),
    }
}

pub(super) fn unavailable(tool: &str) -> CallOutcome {
    CallOutcome::Rejected { kind: ErrorKind::UnknownTool, text: text::unknown_tool(tool) }
}

/// The bytes a result's parts hold, before they are checked.
pub(super) fn part_bytes(part: &wit::ContentPart) -> usize {
    match part {
        wit::ContentPart::Text(t) => t.len(),
        wit::ContentPart::Image(i) => i.mime_type.len() + i.data.len(),
        wit::ContentPart::ResourceLink(l) => l.uri.len() + l.name.len() + l.mime_type.as_ref().map_or(0, String::len),
    }
}

/// A tool's parts, checked: at most [`MAX_CONTENT_PARTS`], each within the
/// bounds [`ContentPart::problem`] names.
pub(super) fn content_parts(parts: Vec<wit::ContentPart>) -> Result<Vec<ContentPart>, String> {
    if parts.len() > MAX_CONTENT_PARTS {
        return Err(format!("{} content parts; the limit is {MAX_CONTENT_PARTS}", parts.len()));
    }
    parts
        .into_iter()
        .map(|part| {
            let part = match part {
                wit::ContentPart::Text(text) => ContentPart::Text { text },
                wit::ContentPart::Image(i) => ContentPart::Image { mime_type: i.mime_type, data: i.data },
                wit::ContentPart::ResourceLink(l) => {
                    ContentPart::ResourceLink { uri: l.uri, name: l.name, mime_type: l.mime_type }
                }
            };
            match part.problem() {
                Some(problem) => Err(problem),
                None => Ok(part),
            }
        })
        .collect()
}

pub(super) fn call_error(error: wit::CallError) -> CallOutcome {
    match error {
        // A kind outside the grammar is dropped: it would reach metrics labels and the model.
        wit::CallError::Tool(e) => CallOutcome::Failed(Failure::Tool {
            message: e.message,
            hint: e.hint,
            kind: e.kind.filter(|k| is_valid_error_kind(k)),
        }),
        wit::CallError::InvalidArguments(m) => CallOutcome::Failed(Failure::InvalidArguments(m)),
        wit::CallError::BudgetExceeded(m) => CallOutcome::Failed(Failure::BudgetExceeded(m)),
        wit::CallError::CancelRun(reason) => CallOutcome::CancelRun(reason),
    }
}
