//! Runs moving between replicas (docs/replicas.md, "Run ownership"): the
//! resume at start, the renewal of this replica's leases, the takeover of
//! runs whose owner died, and the hand-back on SIGTERM. The leases
//! themselves are in [`lease`](super::lease).

use super::{chat, lease};
use crate::Service;
use crate::chat::{Resumer, RunRefusal};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl Service {
    /// Resumes, in the background, every run the store says was running
    /// (the process that ran it died or was stopped). With a PostgreSQL
    /// store only those no live replica holds a lease of.
    ///
    /// Not a run stopped by a cancel or a budget (`interrupted`): it stays
    /// stopped until a client resumes it (a chat with `"resume": true`). A start
    /// that resumed those re-ran what a person had cancelled, at any later
    /// start of any replica, each holding one of the tenant's
    /// `max_concurrent_runs` while its approval waited for nobody (found by
    /// bench/fault-run: a tenant refused every new chat with 429).
    pub async fn resume_unfinished(&self) {
        let unfinished = if self.inner.stores.leases.is_shared() {
            self.inner.stores.leases.unowned().await.map_err(|e| e.to_string())
        } else {
            self.running_in_store().await
        };
        match unfinished {
            Ok(runs) => self.resume(runs, "resumed an unfinished run").await,
            Err(e) => tracing::error!("cannot list unfinished runs: {e}"),
        }
    }

    /// The (tenant, session) of every run the single-process store says was
    /// running when its process stopped, oldest first.
    async fn running_in_store(&self) -> Result<Vec<(String, String)>, String> {
        let runs = &self.inner.stores.runs;
        let mut running = Vec::new();
        for (tenant, session) in runs.unfinished().await.map_err(|e| e.to_string())? {
            match runs.load(&tenant, &session).await {
                Ok(Some(cp)) if cp.status == lovia_runner::RunStatus::Running => running.push((tenant, session)),
                Ok(_) => {}
                Err(e) => tracing::warn!(%tenant, %session, error = %e, "cannot read an unfinished run; not resumed"),
            }
        }
        Ok(running)
    }

    /// Takes over the runs that were running on a replica whose leases
    /// expired (it died) or that handed them back (it stopped). A run
    /// stopped by a cancel stays stopped. Nothing while draining.
    pub(crate) async fn take_over(&self) {
        if !self.inner.stores.leases.is_shared() || self.inner.draining.load(Ordering::Acquire) {
            return;
        }
        match self.inner.stores.leases.unowned().await {
            Ok(runs) => self.resume(runs, "took over a run another replica left").await,
            Err(e) => tracing::warn!(error = %e, "cannot look for runs to take over; retrying at the next poll"),
        }
    }

    async fn resume(&self, runs: Vec<(String, String)>, done: &str) {
        for (tenant_name, session) in runs {
            let Some(tenant) = self.inner.tenants.iter().find(|t| t.name == tenant_name) else { continue };
            if self.live(tenant, &session).is_some() {
                continue;
            }
            match self.start_run(tenant, &session, None, false, Resumer::Takeover, None).await {
                Ok(_) => tracing::info!(tenant = %tenant.name, %session, "{done}"),
                // Another replica took its lease first, or ended it meanwhile: nothing to do.
                Err(refusal) if refusal.taken_or_ended() => {}
                // The tenant is at its `max_concurrent_runs`, or its
                // workspaces at their file bound: the run waits, and the
                // next poll tries again.
                Err(refusal @ (RunRefusal::TooManyRuns | RunRefusal::WorkspaceFull(_))) => {
                    tracing::debug!(tenant = %tenant.name, %session, %refusal, "the run waits")
                }
                Err(refusal) => tracing::warn!(tenant = %tenant.name, %session, %refusal, "cannot resume the run now"),
            }
        }
    }

    /// With a shared store: renews this replica's leases every
    /// `lease_renew_ms` until the service is dropped, on an OS thread (with
    /// a one-thread runtime) and a database connection of their own, so
    /// neither busy workers of the service's runtime nor queued run starts
    /// delay a renewal. Each renewal moves the fence of
    /// every run it kept (`lease::fence_end`); a run whose lease it did not
    /// keep is stopped. A run whose renewals fail stops by its fence alone.
    pub(crate) fn keep_leases(&self) {
        if !self.inner.stores.leases.is_shared() {
            return;
        }
        let service = Arc::downgrade(&self.inner);
        let leases = self.inner.stores.leases.clone();
        let (every, lease) = (self.inner.limits.lease_renew, self.inner.limits.lease);
        let renewing = async move || loop {
            tokio::time::sleep(every).await;
            if service.strong_count() == 0 {
                return;
            }
            let Some(inner) = service.upgrade() else { return };
            let runs: Vec<((usize, String), Arc<chat::LiveRun>)> = {
                let live = inner.live.lock().unwrap_or_else(|p| p.into_inner());
                live.iter().map(|(k, r)| (k.clone(), r.clone())).collect()
            };
            let running: Vec<lease::RunKey> = runs
                .iter()
                .map(|((tenant, session), _)| (inner.tenants[*tenant].name.clone(), session.clone()))
                .collect();
            // Not held across the renewal's await: the service may go meanwhile.
            drop(inner);
            let began = Instant::now();
            let held = leases.renew(&running).await;
            let Some(inner) = service.upgrade() else { return };
            match held {
                Ok(held) => {
                    let fence = lease::fence_end(began, lease, every);
                    for ((tenant, session), run) in runs {
                        let name = &inner.tenants[tenant].name;
                        if held.contains(&(name.clone(), session.clone())) {
                            if let Some(f) = &run.fence {
                                f.extend_to(fence);
                            }
                        } else {
                            // Every run here was live before the renewal began
                            // (the snapshot came first), so its lease was asked for.
                            tracing::warn!(tenant = %name, %session, "the run's lease was lost; stopping it here");
                            run.lease_lost.notify_one();
                        }
                    }
                }
                // The runs' fences end on their own: nothing to do here.
                Err(e) => tracing::warn!(error = %e, "cannot renew the run leases"),
            }
            drop(inner);
        };
        let thread = move || match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            // The renewals' connection is made, and its task runs, on this runtime.
            Ok(runtime) => runtime.block_on(renewing()),
            Err(e) => {
                tracing::error!(error = %e, "cannot start the lease renewals' runtime; runs stop when their first lease ends")
            }
        };
        if let Err(e) = std::thread::Builder::new().name("lovia-lease-renew".into()).spawn(thread) {
            // Without renewals every run stops at its first fence: loud, and safe.
            tracing::error!(error = %e, "cannot start the lease renewal thread; runs stop when their first lease ends");
        }
    }

    /// Hands this replica's runs back (SIGTERM with a shared store): stops
    /// each where it is, without saving, then deletes their leases and
    /// notifies the other replicas, which take them over at once from their
    /// checkpoints. How many runs were handed back. With one process (SQLite)
    /// nothing happens: its runs resume at its next start.
    pub async fn hand_back(&self) -> usize {
        if !self.inner.stores.leases.is_shared() {
            return 0;
        }
        self.drain();
        let runs: Vec<Arc<chat::LiveRun>> =
            self.inner.live.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        for run in &runs {
            run.lease_lost.notify_one();
        }
        // Each run's task takes itself out of `live` once stopped; the
        // leases go only after, so no run goes on here beside its next owner.
        let deadline = Instant::now() + HAND_BACK_WAIT;
        while !self.inner.live.lock().unwrap_or_else(|p| p.into_inner()).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if let Err(e) = self.inner.stores.leases.release_all().await {
            tracing::warn!(error = %e, "cannot hand the runs back; their leases expire instead");
        }
        runs.len()
    }
}

/// How long [`Service::hand_back`] waits for its runs to stop: 2 s. A run
/// stops at its next await, so this is only reached by one whose task is
/// stuck; its lease is released anyway (the process is about to exit).
const HAND_BACK_WAIT: Duration = Duration::from_secs(2);
