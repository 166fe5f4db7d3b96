//! Following the uploads in the store: this replica's own and, with a
//! shared store, those of the others, each compiled and added to its tenant
//! once ([`UploadSync`]).

use crate::COMPILE_SLOTS;
use crate::Service;
use crate::Tenant;
use crate::stored::PluginStoreError;
use crate::{lease, notifications, relay, stored, upload};
use lovia_host::exec::NameConflict;
use lovia_host::{Tool, ToolSource, Toolset};
use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// Where this process is in the store's uploads.
pub(crate) struct UploadSync {
    /// The ids of the stored uploads this process has added to its tenants.
    pub(crate) installed: Mutex<HashSet<i64>>,
    /// The highest upload id read from the store so far.
    pub(crate) read: AtomicI64,
    /// One read of new uploads at a time (the start, a notification, a poll).
    pub(crate) syncing: tokio::sync::Mutex<()>,
    /// Why the last read of new uploads failed, until one succeeds.
    pub(crate) failed: Mutex<Option<String>>,
    /// Shared by every tenant's uploads ([`COMPILE_SLOTS`]).
    pub(crate) compile_slots: Arc<Semaphore>,
}

impl Default for UploadSync {
    fn default() -> Self {
        Self {
            installed: Mutex::default(),
            read: AtomicI64::new(0),
            syncing: tokio::sync::Mutex::new(()),
            failed: Mutex::default(),
            compile_slots: Arc::new(Semaphore::new(COMPILE_SLOTS)),
        }
    }
}

impl Service {
    /// Reads the uploads stored since the last read and adds each to its
    /// tenant. One that no longer loads (a tenant gone from the config, a
    /// component this build refuses, a tool name now configured) is logged
    /// and skipped, so one tenant's upload cannot stop a replica from
    /// starting; a store failure is returned and the next read retries.
    pub(crate) async fn read_uploads(&self) -> Result<(), PluginStoreError> {
        let _one = self.inner.uploads.syncing.lock().await;
        let rows = self.inner.stores.plugins.after(self.inner.uploads.read.load(Ordering::Acquire)).await?;
        for row in rows {
            let known = self.inner.uploads.installed.lock().unwrap_or_else(|e| e.into_inner()).contains(&row.id);
            let tenant = self.inner.tenants.iter().find(|t| t.name == row.tenant);
            if let (false, Some(tenant)) = (known, tenant) {
                if let Some(bytes) = self.inner.stores.plugins.bytes(row.id).await? {
                    // The policy of now holds for what was stored under an older one.
                    if let Err(reason) = tenant.uploads.policy.admit(&bytes) {
                        tracing::warn!(tenant = %row.tenant, plugin = %row.name, id = row.id, error = %reason, "stored upload skipped");
                        self.inner.uploads.read.fetch_max(row.id, Ordering::AcqRel);
                        continue;
                    }
                    let origin = format!("upload by {}", tenant.name);
                    let host = self.inner.host.clone();
                    let (compiled, _) = upload::compile_in_a_slot(
                        host,
                        &self.inner.uploads.compile_slots,
                        None,
                        bytes,
                        origin,
                        tenant.fuel_cap,
                    )
                    .await;
                    match compiled.map(|plugin| self.install(tenant, row.id, &plugin)) {
                        Ok(Ok(_)) => {
                            tracing::info!(tenant = %row.tenant, plugin = %row.name, id = row.id, "stored upload loaded")
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(tenant = %row.tenant, plugin = %row.name, id = row.id, error = %e, "stored upload skipped")
                        }
                        Err(e) => {
                            tracing::warn!(tenant = %row.tenant, plugin = %row.name, id = row.id, error = %e, "stored upload does not load")
                        }
                    }
                }
            } else if tenant.is_none() {
                tracing::warn!(tenant = %row.tenant, plugin = %row.name, id = row.id, "stored upload of a tenant not in the config");
            }
            self.inner.uploads.read.fetch_max(row.id, Ordering::AcqRel);
        }
        Ok(())
    }

    /// With a shared store: reads new uploads and takes over runs left by
    /// other replicas on each notification and every `poll_interval_ms`,
    /// until the service is dropped.
    pub(crate) fn follow_uploads(&self) {
        let Some(pool) = &self.inner.stores.pool else { return };
        let wake = Arc::new(tokio::sync::Notify::new());
        notifications::watch(
            pool,
            self.inner.limits.poll_interval,
            Arc::downgrade(&wake),
            (stored::CHANNEL, lease::RUNS_CHANNEL, relay::EVENTS_CHANNEL),
            Arc::downgrade(&self.inner.events_seen),
        );
        let service = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                wake.notified().await;
                let Some(inner) = service.upgrade() else { return };
                let service = Service { inner };
                // Orders first: a client waits for their outcome.
                service.apply_orders().await;
                let read = service.read_uploads().await;
                // The same wake-up (a poll, or a replica handing its runs back)
                // looks for runs whose owner is gone.
                service.take_over().await;
                // The minute counts of the shared quota are needed for one minute.
                if let Some(counts) = &service.inner.stores.counts
                    && let Err(e) = counts.forget_old_minutes().await
                {
                    tracing::warn!(error = %e, "cannot delete old call counts");
                }
                if let Some(states) = &service.inner.stores.mcp_states
                    && let Err(e) = states.redeemed.forget_expired().await
                {
                    tracing::warn!(error = %e, "cannot delete expired MCP request states");
                }
                if let Err(e) = relay::forget_old_events(&service.inner.stores.leases).await {
                    tracing::warn!(error = %e, "cannot delete old run events");
                }
                let mut failed = service.inner.uploads.failed.lock().unwrap_or_else(|e| e.into_inner());
                *failed = read.err().map(|e| {
                    tracing::warn!(error = %e, "cannot read the stored uploads; retrying at the next poll");
                    e.to_string()
                });
            }
        });
    }

    /// Adds the tools of stored upload `id` to `tenant`, once: the upload's
    /// own replica and its notification both get here.
    pub(crate) fn install(&self, tenant: &Tenant, id: i64, plugin: &lovia_host::Plugin) -> Result<(), NameConflict> {
        let mut installed = self.inner.uploads.installed.lock().unwrap_or_else(|e| e.into_inner());
        if installed.contains(&id) {
            return Ok(());
        }
        let mut current = tenant.executor.write().unwrap_or_else(|e| e.into_inner());
        let mut set: Toolset = current.tools().clone();
        set.add(ToolSource::Plugin, Tool::from_plugin(plugin))?;
        // Under the same locks, so two uploads reach /mcp in the order they were installed.
        tenant.replace_tools(&mut current, set);
        installed.insert(id);
        Ok(())
    }
}
