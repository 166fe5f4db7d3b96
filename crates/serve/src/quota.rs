//! A tenant's call quotas — calls at once and calls per minute — kept for
//! direct calls and, through [`QuotaPolicy`], for the calls of its chats.
//! With a PostgreSQL store the minute's count is one row per tenant and
//! wall-clock minute, shared by every replica (one upsert per call); calls at
//! once stay per replica (docs/replicas.md).

use super::metrics::Metrics;
use super::stored::PluginStore;
use lovia_host::BoxFuture;
use lovia_host::CallContext;
use lovia_host::Failure;
use lovia_host::policy::{AttemptResult, Next, Policy};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    PerMinute,
    Concurrent,
    /// The shared count could not be taken: refused, as a quota that cannot
    /// be checked must not admit.
    Unavailable,
}

impl Refusal {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Refusal::PerMinute => "calls_per_minute",
            Refusal::Concurrent => "max_concurrent_calls",
            Refusal::Unavailable => "quota_store",
        }
    }

    pub(crate) fn message(self) -> &'static str {
        match self {
            Refusal::PerMinute => "calls per minute quota exceeded",
            Refusal::Concurrent => "too many calls in flight for this tenant",
            Refusal::Unavailable => "the quota store is unreachable; retry later",
        }
    }
}

pub(crate) struct Quota {
    pub(crate) tenant: String,
    slots: Arc<Semaphore>,
    max_concurrent: usize,
    per_minute: u32,
    /// (minute since start, calls started in it).
    window: Mutex<(u64, u32)>,
    started: Instant,
    metrics: Arc<Metrics>,
    /// The replicas' shared store, which then counts the minute's calls.
    shared: Option<Arc<PluginStore>>,
}

impl Quota {
    pub(crate) fn new(
        tenant: &str,
        max_concurrent: u32,
        per_minute: u32,
        metrics: Arc<Metrics>,
        shared: Option<Arc<PluginStore>>,
    ) -> Self {
        Self {
            tenant: tenant.to_owned(),
            slots: Arc::new(Semaphore::new(max_concurrent as usize)),
            max_concurrent: max_concurrent as usize,
            per_minute,
            window: Mutex::new((0, 0)),
            started: Instant::now(),
            metrics,
            shared,
        }
    }

    /// Calls running now.
    pub(crate) fn in_flight(&self) -> usize {
        self.max_concurrent - self.slots.available_permits()
    }

    /// Counts a call and takes a slot for it, or says why not (and counts
    /// the refusal in the metrics).
    pub(crate) async fn admit(&self) -> Result<OwnedSemaphorePermit, Refusal> {
        let refusal = if let Some(store) = &self.shared {
            match store.count_call(&self.tenant, self.per_minute).await {
                Ok(true) => None,
                Ok(false) => Some(Refusal::PerMinute),
                Err(e) => {
                    tracing::error!(tenant = %self.tenant, error = %e, "cannot count a call in the shared store");
                    Some(Refusal::Unavailable)
                }
            }
        } else {
            let minute = self.started.elapsed().as_secs() / 60;
            let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
            if window.0 != minute {
                *window = (minute, 0);
            }
            if window.1 >= self.per_minute {
                Some(Refusal::PerMinute)
            } else {
                window.1 += 1;
                None
            }
        };
        let outcome = match refusal {
            Some(r) => Err(r),
            None => self.slots.clone().try_acquire_owned().map_err(|_| Refusal::Concurrent),
        };
        if let Err(r) = outcome {
            self.metrics.refuse(&self.tenant, r.reason());
        }
        outcome
    }
}

/// Applies the tenant's quota to each attempt of a chat's calls: a refused
/// attempt is a tool error the model reads.
pub(crate) struct QuotaPolicy(pub(crate) Arc<Quota>);

impl Policy for QuotaPolicy {
    fn call<'a>(
        &'a self,
        _tool: &'a str,
        args: Value,
        _ctx: &'a CallContext,
        next: Next<'a>,
    ) -> BoxFuture<'a, AttemptResult> {
        Box::pin(async move {
            match self.0.admit().await {
                Ok(_slot) => next.run(args).await,
                Err(r) => Err(Failure::Tool { message: r.message().into(), hint: None, kind: None }),
            }
        })
    }
}
