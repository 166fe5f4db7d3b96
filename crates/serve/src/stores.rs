//! The service's stores, opened together from one store URL: the run store
//! (sessions, transcripts, checkpoints), the uploads beside it (with the
//! audit trail and the shared call counts), the run leases and the MCP
//! request states, and with PostgreSQL the replicas' shared call counts.
//! With PostgreSQL they share one pool of connections ([`PgPool`]); with
//! SQLite the run store and the uploads share the file.

use super::{lease, mcp, shared_counts, stored};
use crate::error::ServeError;
use lovia_runner::{PG_POOL_CONNECTIONS, PgPool, PostgresRunStore, RunStore, StoreError, StoreUrl};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Every store of the service, as one handle.
pub(crate) struct Stores {
    /// Sessions, transcripts and checkpoints.
    pub(crate) runs: Arc<dyn RunStore>,
    /// Uploaded plugins, the audit trail and the shared call counts.
    pub(crate) plugins: Arc<stored::PluginStore>,
    /// Which runs this replica may run (`lease`).
    pub(crate) leases: Arc<lease::RunLeases>,
    /// With a shared store: the MCP request states' key and redeemed states.
    pub(crate) mcp_states: Option<Arc<mcp::states::SharedStates>>,
    /// With a shared store: each tenant's calls and fuel per minute, across replicas.
    pub(crate) counts: Option<Arc<shared_counts::SharedCounts>>,
    /// With a shared store: the connections every store above uses.
    pub(crate) pool: Option<PgPool>,
}

impl Stores {
    /// Opens the stores at `url`, creating their tables if they are
    /// missing; a run's lease lasts `lease` after its last renewal.
    pub(crate) async fn open(url: &StoreUrl, lease: Duration) -> Result<Stores, ServeError> {
        let pool = match url {
            StoreUrl::Postgres(raw) => Some(
                PgPool::connect(raw, PG_POOL_CONNECTIONS)
                    .await
                    .map_err(|e| StoreError::Database { location: url.to_string(), message: e.to_string() })?,
            ),
            _ => None,
        };
        let runs: Arc<dyn RunStore> = match &pool {
            Some(pool) => Arc::new(PostgresRunStore::with_pool(pool.clone()).await?),
            None => url.open().await?,
        };
        let plugins = stored::PluginStore::open(url, pool.as_ref()).await?;
        // After the run store: the lease schema indexes its table.
        let leases = lease::RunLeases::open(pool.as_ref(), lease).await?;
        let mcp_states = mcp::states::SharedStates::open(pool.as_ref())
            .await
            .map_err(|(location, message)| ServeError::McpStates { location, message })?;
        let counts = match &pool {
            Some(pool) => Some(Arc::new(shared_counts::SharedCounts::open(pool).await?)),
            None => None,
        };
        Ok(Stores {
            runs,
            plugins: Arc::new(plugins),
            leases: Arc::new(leases),
            mcp_states: mcp_states.map(Arc::new),
            counts,
            pool,
        })
    }

    /// The caller's run store, with uploads in this process's memory and
    /// every run this process's own.
    pub(crate) fn beside(runs: Arc<dyn RunStore>) -> Stores {
        Stores {
            runs,
            plugins: Arc::new(stored::PluginStore::Memory(Mutex::default())),
            leases: Arc::new(lease::RunLeases::Local),
            mcp_states: None,
            counts: None,
            pool: None,
        }
    }
}
