//! A tenant's call quotas — calls at once, calls per minute and, with a
//! shared store, fuel per minute — kept for direct calls and, through
//! [`QuotaPolicy`], for the calls of its chats. With a PostgreSQL store the
//! minute's calls and fuel are one row per tenant and wall-clock minute,
//! shared by every replica: the upsert that counts a call also holds its
//! fuel cap, and a second statement after the call gives the hold back and
//! charges what the tenant burned. Calls at once stay per replica: they
//! bound this process's memory and cores (docs/replicas.md).

use super::metrics::Metrics;
use super::shared_counts::{Counted, SharedCounts};
use lovia_host::BoxFuture;
use lovia_host::CallContext;
use lovia_host::Failure;
use lovia_host::policy::{AttemptResult, Next, Policy};
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    PerMinute,
    Concurrent,
    /// The minute's `fuel_per_minute`, across replicas, is burned or held.
    Fuel,
    /// The shared count could not be taken: refused, as a quota that cannot
    /// be checked must not admit.
    Unavailable,
}

impl Refusal {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Refusal::PerMinute => "calls_per_minute",
            Refusal::Concurrent => "max_concurrent_calls",
            Refusal::Fuel => "fuel_per_minute",
            Refusal::Unavailable => "quota_store",
        }
    }

    pub(crate) fn message(self) -> &'static str {
        match self {
            Refusal::PerMinute => "calls per minute quota exceeded",
            Refusal::Concurrent => "too many calls in flight for this tenant",
            Refusal::Fuel => "fuel per minute quota exceeded",
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
    /// The replicas' shared counts, which then count the minute's calls.
    shared: Option<Arc<SharedCounts>>,
    /// With a shared store and `fuel_per_minute`: the minute's fuel there.
    fuel: Option<SharedFuel>,
}

/// A tenant's `fuel_per_minute` across replicas. The host's ledger holds
/// and charges each call's fuel on this replica (crates/host `FuelLedger`);
/// this mirrors it in the shared minute row.
struct SharedFuel {
    per_minute: u64,
    /// The host, whose ledger counts what the tenant burned here.
    host: lovia_host::Host,
    /// The ledger's count already charged to the shared row.
    charged: AtomicU64,
}

/// An admitted call: its slot and the fuel it holds in the shared minute.
/// Dropped without [`Quota::end`] (the call's future was dropped: its run
/// was cancelled, its client left), it gives the hold back in a task of its own.
pub(crate) struct Admitted {
    _slot: OwnedSemaphorePermit,
    quota: Arc<Quota>,
    /// (minute, fuel held) in the shared row, to give back at the end.
    hold: Option<(i64, u64)>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let Some(hold) = self.hold.take() else { return };
        let quota = self.quota.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { quota.give_back(Some(hold)).await });
        }
    }
}

impl Quota {
    pub(crate) fn new(
        tenant: &str,
        max_concurrent: u32,
        per_minute: u32,
        metrics: Arc<Metrics>,
        shared: Option<Arc<SharedCounts>>,
        fuel: Option<(u64, lovia_host::Host)>,
    ) -> Self {
        let fuel = fuel.filter(|_| shared.is_some()).map(|(per_minute, host)| {
            let charged = AtomicU64::new(host.tenant_fuel().used(tenant));
            SharedFuel { per_minute, host, charged }
        });
        Self {
            tenant: tenant.to_owned(),
            slots: Arc::new(Semaphore::new(max_concurrent as usize)),
            max_concurrent: max_concurrent as usize,
            per_minute,
            window: Mutex::new((0, 0)),
            started: Instant::now(),
            metrics,
            shared,
            fuel,
        }
    }

    /// Calls running now.
    pub(crate) fn in_flight(&self) -> usize {
        self.max_concurrent - self.slots.available_permits()
    }

    /// Counts a call and takes a slot for it, or says why not (and counts
    /// the refusal in the metrics). `fuel_cap` is the call's fuel limit
    /// (`None`: uncapped, so it may burn the whole minute's fuel): with the
    /// shared fuel quota it is held in the minute's row until [`Quota::end`].
    pub(crate) async fn admit(self: &Arc<Self>, fuel_cap: Option<u64>) -> Result<Admitted, Refusal> {
        let fuel = self.fuel.as_ref().map(|f| (fuel_cap.unwrap_or(f.per_minute).min(f.per_minute), f.per_minute));
        let mut minute = None;
        let refusal = if let Some(store) = &self.shared {
            match store.count_call(&self.tenant, self.per_minute, fuel).await {
                Ok(Counted::Yes { minute: m }) => {
                    minute = Some(m);
                    None
                }
                Ok(Counted::PerMinute) => Some(Refusal::PerMinute),
                Ok(Counted::Fuel) => Some(Refusal::Fuel),
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
        let hold = minute.zip(fuel.map(|(held, _)| held));
        let outcome = match refusal {
            Some(r) => Err(r),
            None => match self.slots.clone().try_acquire_owned() {
                Ok(slot) => Ok(Admitted { _slot: slot, quota: self.clone(), hold }),
                Err(_) => {
                    // Counted but not run: its fuel hold goes back.
                    self.give_back(hold).await;
                    Err(Refusal::Concurrent)
                }
            },
        };
        if let Err(r) = outcome {
            self.metrics.refuse(&self.tenant, r.reason());
        }
        outcome
    }

    /// Ends an admitted call: gives its fuel hold back to the shared minute
    /// and charges it what the tenant burned here since the last charge
    /// (this call's fuel, and that of calls ending beside it).
    pub(crate) async fn end(&self, mut admitted: Admitted) {
        self.give_back(admitted.hold.take()).await;
    }

    async fn give_back(&self, hold: Option<(i64, u64)>) {
        let (Some((minute, held)), Some(fuel), Some(store)) = (hold, &self.fuel, &self.shared) else { return };
        // The ledger's count only grows; each unit of it is charged once,
        // by whichever call's end sees it first.
        let used = fuel.host.tenant_fuel().used(&self.tenant);
        let burned = used.saturating_sub(fuel.charged.fetch_max(used, Ordering::AcqRel));
        if let Err(e) = store.charge_fuel(&self.tenant, minute, held, burned).await {
            // The hold stays in the row: the minute admits less, never more.
            tracing::warn!(tenant = %self.tenant, error = %e, "cannot give a call's fuel back to the shared minute");
        }
    }
}

/// The fuel a call of `tool` may burn, for [`Quota::admit`]: its plugin's
/// cap (`None` when the plugin has none: it may burn the minute). A tool
/// that is no component (an MCP server's) or no tool at all (a name a
/// client made up) runs no wasm and holds none of the minute's fuel.
pub(crate) fn fuel_cap_of(tool: Option<&lovia_host::Tool>) -> Option<u64> {
    match tool.map(lovia_host::Tool::plugin) {
        Some(Some(plugin)) => plugin.limits().fuel,
        Some(None) | None => Some(0),
    }
}

/// Applies the tenant's quota to each attempt of a chat's calls of one
/// tool (whose fuel cap is `.1`): a refused attempt is a tool error the
/// model reads.
pub(crate) struct QuotaPolicy(pub(crate) Arc<Quota>, pub(crate) Option<u64>);

impl Policy for QuotaPolicy {
    fn call<'a>(
        &'a self,
        _tool: &'a str,
        args: Value,
        _ctx: &'a CallContext,
        next: Next<'a>,
    ) -> BoxFuture<'a, AttemptResult> {
        under_quota(&self.0, self.1, args, next)
    }
}

/// The tenant's quota at a door that admits its own calls at the door (the
/// direct route, `/mcp`): a call a program made there (its id is
/// `<parent>/<n>`, which no call at the door has) is admitted here, as a
/// chat's calls are; any other call passed the door already and goes on
/// as it is.
pub(crate) struct NestedQuotaPolicy(pub(crate) Arc<Quota>, pub(crate) Option<u64>);

impl Policy for NestedQuotaPolicy {
    fn call<'a>(
        &'a self,
        _tool: &'a str,
        args: Value,
        ctx: &'a CallContext,
        next: Next<'a>,
    ) -> BoxFuture<'a, AttemptResult> {
        if ctx.call_id.contains('/') { under_quota(&self.0, self.1, args, next) } else { next.run(args) }
    }
}

/// Runs `next` once `quota` admits an attempt burning up to `fuel`; a
/// refusal is a tool error the model reads.
fn under_quota<'a>(
    quota: &'a Arc<Quota>,
    fuel: Option<u64>,
    args: Value,
    next: Next<'a>,
) -> BoxFuture<'a, AttemptResult> {
    Box::pin(async move {
        match quota.admit(fuel).await {
            Ok(admitted) => {
                let result = next.run(args).await;
                quota.end(admitted).await;
                result
            }
            Err(r) => Err(Failure::Tool { message: r.message().into(), hint: None, kind: None }),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::fuel_cap_of;
    use lovia_host::{Tool, ToolOutput};

    #[test]
    fn a_tool_that_runs_no_wasm_holds_no_fuel() {
        // An MCP server's tool is a native tool of the host, as this one.
        let native = Tool::builder("remote")
            .invoke(|_args, _ctx| async move { Ok(ToolOutput::Text("x".into())) })
            .expect("a valid tool");
        assert_eq!(fuel_cap_of(Some(&native)), Some(0));
        // A name the client made up runs nothing.
        assert_eq!(fuel_cap_of(None), Some(0));
    }
}
