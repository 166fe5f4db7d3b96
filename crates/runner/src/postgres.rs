//! The run store in PostgreSQL, for services that keep state outside the
//! host. Like the SQLite store, a session is a head row and one row per
//! transcript message, and a save appends only the new messages. Its
//! connections come from a [`PgPool`], which `lovia serve` shares with its
//! other stores.

use super::checkpoint::{Checkpoint, RunStatus, RunStore, SessionInfo, SessionPage, StoreError};
use super::pg_pool::{PG_POOL_CONNECTIONS, PgClient, PgError, PgPool};
use lovia_host::BoxFuture;

/// A [`RunStore`] in a PostgreSQL database given by URL, e.g.
/// `postgres://lovia@db.internal/lovia`. TLS is not supported: use a local
/// socket or a trusted network.
#[derive(Debug, Clone)]
pub struct PostgresRunStore {
    pool: PgPool,
}

// The advisory lock serialises the creation: two services starting at once
// would otherwise race on CREATE TABLE IF NOT EXISTS. The session list
// orders by `created_ms`, added (by its presence, not a version number) to a
// database made before it; a build without it leaves it NULL on the rows it
// inserts, and listings read those as their update time.
const SCHEMA: &str = "BEGIN;
SELECT pg_advisory_xact_lock(7420611);
CREATE TABLE IF NOT EXISTS lovia_runs (
    tenant TEXT NOT NULL,
    session TEXT NOT NULL,
    status TEXT NOT NULL,
    updated TIMESTAMPTZ NOT NULL DEFAULT now(),
    checkpoint TEXT NOT NULL,
    PRIMARY KEY (tenant, session)
);
CREATE TABLE IF NOT EXISTS lovia_run_messages (
    tenant TEXT NOT NULL,
    session TEXT NOT NULL,
    seq BIGINT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (tenant, session, seq)
);
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                   AND table_name = 'lovia_runs' AND column_name = 'created_ms') THEN
        ALTER TABLE lovia_runs ADD COLUMN created_ms BIGINT;
        UPDATE lovia_runs SET created_ms = (extract(epoch FROM updated) * 1000)::bigint;
    END IF;
END $$;
CREATE INDEX IF NOT EXISTS lovia_runs_by_created ON lovia_runs (tenant, created_ms DESC, session DESC);
COMMIT;";

impl PostgresRunStore {
    /// Connects to `url` with a pool of its own ([`PG_POOL_CONNECTIONS`]
    /// connections at most) and creates the tables if they are missing.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let fail =
            |e: PgError| StoreError::Database { location: super::store_url::redact(url), message: e.to_string() };
        let pool = PgPool::connect(url, PG_POOL_CONNECTIONS).await.map_err(fail)?;
        Self::with_pool(pool).await
    }

    /// The store on connections of `pool`, creating the tables if they are missing.
    pub async fn with_pool(pool: PgPool) -> Result<Self, StoreError> {
        pool.run_schema(SCHEMA)
            .await
            .map_err(|e| StoreError::Database { location: pool.location().to_owned(), message: e.to_string() })?;
        Ok(Self { pool })
    }

    /// Runs `f` on a pooled connection.
    async fn run<T: Send>(
        &self,
        f: impl for<'c> FnOnce(&'c mut PgClient) -> BoxFuture<'c, Result<T, tokio_postgres::Error>> + Send,
    ) -> Result<T, StoreError> {
        self.pool
            .run(f)
            .await
            .map_err(|e| StoreError::Database { location: self.pool.location().to_owned(), message: e.to_string() })
    }
}

impl PostgresRunStore {
    /// [`RunStore::save`], and with `lease` only while the lease row of
    /// `lovia serve` (`lovia_run_leases`) still names its owner and epoch.
    async fn write(
        &self,
        tenant: &str,
        session: &str,
        checkpoint: &Checkpoint,
        lease: Option<lovia_host::LeaseToken>,
    ) -> Result<(), StoreError> {
        let fail = |e: serde_json::Error| StoreError::Database {
            location: self.pool.location().to_owned(),
            message: e.to_string(),
        };
        let head = checkpoint.head_json().map_err(fail)?;
        let status = serde_json::to_value(checkpoint.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        // Serialising every message costs CPU, not writes: only those past
        // the stored count are sent. The serialisation happens here, off
        // the connection thread.
        let messages =
            checkpoint.messages.iter().map(serde_json::to_string).collect::<Result<Vec<_>, _>>().map_err(fail)?;
        let (t, s) = (tenant.to_owned(), session.to_owned());
        let written = self
            .run(move |c| {
                Box::pin(async move {
                    let tx = c.transaction().await?;
                    // The lease row is locked until the commit, so a takeover that
                    // comes now waits for this write, and one that came before makes
                    // this write find another owner or epoch, and write nothing.
                    if let Some(lease) = &lease {
                        let held = tx
                            .query_opt(
                                "SELECT 1 FROM lovia_run_leases
                      WHERE tenant = $1 AND session = $2 AND owner = $3 AND epoch = $4 FOR SHARE",
                                &[&t, &s, &lease.owner, &lease.epoch],
                            )
                            .await?;
                        if held.is_none() {
                            return Ok(false);
                        }
                    }
                    let stored: i64 = tx
                .query_one(
                    "SELECT COALESCE(MAX(seq) + 1, 0) FROM lovia_run_messages WHERE tenant = $1 AND session = $2",
                    &[&t, &s],
                ).await?
                .get(0);
                    let len = i64::try_from(messages.len()).unwrap_or(i64::MAX);
                    if stored > len {
                        tx.execute(
                            "DELETE FROM lovia_run_messages WHERE tenant = $1 AND session = $2 AND seq >= $3",
                            &[&t, &s, &len],
                        )
                        .await?;
                    }
                    let insert = tx
                        .prepare(
                            "INSERT INTO lovia_run_messages (tenant, session, seq, message) VALUES ($1, $2, $3, $4)",
                        )
                        .await?;
                    for (seq, message) in messages.iter().enumerate().skip(stored.clamp(0, len) as usize) {
                        tx.execute(&insert, &[&t, &s, &(seq as i64), message]).await?;
                    }
                    tx.execute(
                        "INSERT INTO lovia_runs (tenant, session, status, checkpoint, created_ms)
                 VALUES ($1, $2, $3, $4, (extract(epoch FROM now()) * 1000)::bigint)
                 ON CONFLICT (tenant, session) DO UPDATE SET status = $3, checkpoint = $4, updated = now()",
                        &[&t, &s, &status, &head],
                    )
                    .await?;
                    tx.commit().await?;
                    Ok(true)
                })
            })
            .await;
        if written? { Ok(()) } else { Err(StoreError::Fenced { session: session.to_owned() }) }
    }
}

#[async_trait::async_trait]
impl RunStore for PostgresRunStore {
    async fn load(&self, tenant: &str, session: &str) -> Result<Option<Checkpoint>, StoreError> {
        let (t, s) = (tenant.to_owned(), session.to_owned());
        let found: Option<(String, Vec<String>)> = self
            .run(move |c| {
                Box::pin(async move {
                    let Some(row) = c
                        .query_opt("SELECT checkpoint FROM lovia_runs WHERE tenant = $1 AND session = $2", &[&t, &s])
                        .await?
                    else {
                        return Ok(None);
                    };
                    let messages = c
                        .query(
                            "SELECT message FROM lovia_run_messages WHERE tenant = $1 AND session = $2 ORDER BY seq",
                            &[&t, &s],
                        )
                        .await?;
                    Ok(Some((row.get(0), messages.iter().map(|r| r.get(0)).collect())))
                })
            })
            .await?;
        let Some((head, rows)) = found else { return Ok(None) };
        let corrupt =
            |e: serde_json::Error| StoreError::Corrupt { session: session.to_owned(), message: e.to_string() };
        let messages = rows.iter().map(|m| serde_json::from_str(m)).collect::<Result<Vec<_>, _>>().map_err(corrupt)?;
        Checkpoint::from_parts(&head, messages).map(Some).map_err(corrupt)
    }

    async fn save(&self, tenant: &str, session: &str, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        self.write(tenant, session, checkpoint, None).await
    }

    async fn save_fenced(
        &self,
        tenant: &str,
        session: &str,
        checkpoint: &Checkpoint,
        lease: &lovia_host::LeaseToken,
    ) -> Result<(), StoreError> {
        self.write(tenant, session, checkpoint, Some(lease.clone())).await
    }

    async fn unfinished(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.run(|c| {
            Box::pin(async move {
                let rows = c
                    .query(
                        "SELECT tenant, session FROM lovia_runs WHERE status IN ('running', 'interrupted') ORDER BY updated",
                        &[],
                    )
                    .await?;
                Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
            })
        })
        .await
    }

    async fn delete(&self, tenant: &str, session: &str) -> Result<bool, StoreError> {
        let (t, s) = (tenant.to_owned(), session.to_owned());
        self.run(move |c| {
            Box::pin(async move {
                c.execute("DELETE FROM lovia_run_messages WHERE tenant = $1 AND session = $2", &[&t, &s]).await?;
                Ok(c.execute("DELETE FROM lovia_runs WHERE tenant = $1 AND session = $2", &[&t, &s]).await? > 0)
            })
        })
        .await
    }

    async fn list(&self, tenant: &str, page: &SessionPage) -> Result<Vec<SessionInfo>, StoreError> {
        let t = tenant.to_owned();
        let (before_ms, before_session) = match &page.before {
            Some(c) => (Some(c.created_ms), Some(c.session.clone())),
            None => (None, None),
        };
        let limit = i64::try_from(page.bounded_limit()).unwrap_or(1);
        type Row = (String, String, i64, i64, Option<String>);
        let rows: Vec<Row> = self
            .run(move |c| {
                Box::pin(async move {
                    let rows = c.query(
                "SELECT session, status, created, (extract(epoch FROM updated) * 1000)::bigint, first FROM (
                    SELECT r.session, r.status, r.updated,
                           COALESCE(r.created_ms, (extract(epoch FROM r.updated) * 1000)::bigint) AS created,
                           (SELECT m.message FROM lovia_run_messages m
                             WHERE m.tenant = r.tenant AND m.session = r.session AND m.seq = 0) AS first
                      FROM lovia_runs r WHERE r.tenant = $1) s
                  WHERE $2::bigint IS NULL OR (created, session) < ($2::bigint, $3::text)
                  ORDER BY created DESC, session DESC
                  LIMIT $4",
                &[&t, &before_ms, &before_session, &limit],
            ).await?;
                    Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))).collect())
                })
            })
            .await?;
        rows.into_iter()
            .map(|(session, status, created_ms, updated_ms, first)| match RunStatus::parse(&status) {
                Some(status) => Ok(SessionInfo {
                    input: SessionInfo::preview(first.as_deref()),
                    session,
                    status,
                    created_ms,
                    updated_ms,
                }),
                None => Err(StoreError::Corrupt { session, message: format!("unknown status '{status}'") }),
            })
            .collect()
    }
}
