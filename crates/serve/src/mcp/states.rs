//! The 2026-07-28 approval round trip behind a load balancer: a request
//! state sealed by one replica must open on any other, once. With a
//! PostgreSQL store the sealing key is made once for the whole store (the
//! first replica's random key wins an `INSERT … ON CONFLICT DO NOTHING`,
//! and every replica reads the one that won) and redeemed states are rows
//! of `lovia_mcp_redeemed`, which the primary key makes single-use across
//! replicas. With SQLite (one process) the key and the redeemed states are
//! the process's own (lovia-mcp's defaults).
//!
//! Rows are bounded by the calls that make them: each is one admitted
//! `tools/call` (the tenant's `calls_per_minute`), kept for one
//! `approval_timeout_secs` after its redemption (at most an hour) by the
//! database's clock, then deleted at the next poll.

use lovia_host::BoxFuture;
use lovia_mcp::{RedeemedStates, StateKey};
use lovia_runner::{PgClient, PgPool};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

// The advisory lock serialises the creation, as the other stores' do.
const SCHEMA: &str = "BEGIN;
SELECT pg_advisory_xact_lock(7420611);
CREATE TABLE IF NOT EXISTS lovia_mcp_state_key (
    id INT PRIMARY KEY,
    key BYTEA NOT NULL
);
CREATE TABLE IF NOT EXISTS lovia_mcp_redeemed (
    nonce TEXT PRIMARY KEY,
    expires TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS lovia_mcp_redeemed_expires ON lovia_mcp_redeemed (expires);
COMMIT;";

/// The one row of `lovia_mcp_state_key`.
const KEY_ROW: i32 = 1;

/// The sealing key, the redeemed states and the tasks every replica of one
/// store shares.
pub(crate) struct SharedStates {
    pub(crate) key: StateKey,
    pub(crate) redeemed: Arc<PgRedeemed>,
    /// The tenants' `/mcp` tasks (tasks.rs).
    pub(crate) tasks: Arc<super::tasks::PgTasks>,
}

/// Redeemed request states in PostgreSQL.
pub(crate) struct PgRedeemed {
    pool: PgPool,
}

/// Why the shared states could not be opened: (the URL without its password, what failed).
pub(crate) type OpenError = (String, String);

impl SharedStates {
    /// The shared key and table in the PostgreSQL store of `pool`; `None`
    /// without one (each process then has its own).
    pub(crate) async fn open(pool: Option<&PgPool>) -> Result<Option<SharedStates>, OpenError> {
        let Some(pool) = pool else { return Ok(None) };
        let fail = |message: String| (pool.location().to_owned(), message);
        pool.run_schema(SCHEMA).await.map_err(|e| fail(e.to_string()))?;
        pool.run_schema(super::tasks::SCHEMA).await.map_err(|e| fail(e.to_string()))?;
        let mut mine = [0u8; 32];
        getrandom::fill(&mut mine).map_err(|e| fail(format!("no randomness for the MCP state key: {e}")))?;
        let redeemed = PgRedeemed { pool: pool.clone() };
        let key = redeemed
            .run(move |c| {
                Box::pin(async move {
                    c.execute(
                        "INSERT INTO lovia_mcp_state_key (id, key) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                        &[&KEY_ROW, &&mine[..]],
                    )
                    .await?;
                    c.query_one("SELECT key FROM lovia_mcp_state_key WHERE id = $1", &[&KEY_ROW])
                        .await
                        .map(|r| r.get::<_, Vec<u8>>(0))
                })
            })
            .await
            .map_err(fail)?;
        let tasks = Arc::new(super::tasks::PgTasks::new(pool.clone()));
        Ok(Some(SharedStates { key: StateKey::new(key), redeemed: Arc::new(redeemed), tasks }))
    }
}

impl PgRedeemed {
    async fn run<T: Send>(
        &self,
        f: impl for<'c> FnOnce(&'c mut PgClient) -> BoxFuture<'c, Result<T, tokio_postgres::Error>> + Send,
    ) -> Result<T, String> {
        self.pool.run(f).await.map_err(|message| format!("{}: {message}", self.pool.location()))
    }

    /// Deletes the redeemed states whose own state has expired.
    pub(crate) async fn forget_expired(&self) -> Result<(), String> {
        self.run(|c| {
            Box::pin(
                async move { c.execute("DELETE FROM lovia_mcp_redeemed WHERE expires < now()", &[]).await.map(drop) },
            )
        })
        .await
    }
}

impl RedeemedStates for PgRedeemed {
    fn redeem<'a>(&'a self, nonce: &'a str, expires: SystemTime) -> BoxFuture<'a, Result<bool, String>> {
        // Kept for as long from now by the database's clock, so that every
        // replica deletes it at the same moment whatever its own clock says.
        let keep = expires.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO).as_secs_f64();
        let nonce = nonce.to_owned();
        Box::pin(async move {
            self.run(move |c| {
                Box::pin(async move {
                    c.execute(
                        "INSERT INTO lovia_mcp_redeemed (nonce, expires)
                     VALUES ($1, now() + make_interval(secs => $2)) ON CONFLICT (nonce) DO NOTHING",
                        &[&nonce, &keep],
                    )
                    .await
                    .map(|inserted| inserted == 1)
                })
            })
            .await
        })
    }
}
