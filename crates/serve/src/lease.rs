//! Who runs a run, when several replicas share a PostgreSQL store
//! (docs/replicas.md, "Run ownership"). The replica running a run holds a
//! row of `lovia_run_leases` whose `expires` (by the database's clock, so
//! replicas never compare their own clocks) it pushes forward every
//! `lease_renew_ms`. A lease is taken in one statement that succeeds only
//! when no other replica holds an unexpired one, so two live replicas never
//! run one run; a replica that died stops renewing, and once its leases
//! expire another replica takes its runs over from their checkpoints.
//! The leases are also the tenant's runs in progress across replicas: a
//! run starts only while its tenant holds fewer unexpired leases than its
//! `max_concurrent_runs`.
//!
//! A SQLite store (or the caller's store of [`Service::with_store`](crate::Service::with_store))
//! serves one process: every run is that process's, and nothing is stored.

use lovia_host::BoxFuture;
use lovia_runner::{PgClient, PgPool};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// The channel a replica notifies when it hands runs back (on SIGTERM), so
/// the others look for runs to take over at once instead of at their poll.
pub(crate) const RUNS_CHANNEL: &str = "lovia_runs";

/// Runs a replica takes over in one look: 256. The rest wait for its next
/// poll or another replica; the tenant's `max_concurrent_runs` bounds how
/// many it actually starts.
const TAKEOVER_BATCH: i64 = 256;

/// Why a lease could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// The database failed.
    #[error("run leases in {location}: {source}")]
    Database {
        /// The URL without its password.
        location: String,
        /// The pool's or the server's error.
        source: lovia_runner::PgError,
    },
}

/// Where the fence of a run whose lease was taken or renewed by a statement
/// sent at `began` ends: at the lease's end less half a renewal period.
/// The lease ends `lease` after the database ran the statement, which was
/// after `began`, so the fence ends before the lease by at least the
/// margin; the margin covers the time between a fence check and the
/// effect it lets through, and the next renewal comes a whole margin
/// before the fence ends (`run_lease_ms` is at least twice
/// `lease_renew_ms`).
pub(crate) fn fence_end(began: Instant, lease: Duration, renew: Duration) -> Instant {
    began + lease.saturating_sub(renew / 2)
}

/// The first key of the per-tenant advisory lock that run starts take
/// (the second is the tenant's `hashtext`). The two-key lock space is
/// separate from the one-key space of the schema lock.
const RUN_START_LOCK: i32 = 7_420_612;

/// What [`RunLeases::take`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Taken {
    /// The lease is this replica's now; with shared leases, the token the
    /// run's checkpoint writes must match (`None`: local, nothing to match).
    Yes(Option<lovia_host::LeaseToken>),
    /// Another replica holds an unexpired lease of the run.
    HeldElsewhere,
    /// The tenant has `max_concurrent_runs` other runs with unexpired leases.
    TooMany,
}

/// A (tenant name, session id).
pub(crate) type RunKey = (String, String);

/// Where leases are kept.
pub(crate) enum RunLeases {
    /// One process: every run is its own.
    Local,
    /// In PostgreSQL, shared by every replica (boxed: the connection is large).
    Postgres(Box<PgLeases>),
}

/// The leases of one replica in PostgreSQL.
pub(crate) struct PgLeases {
    pool: PgPool,
    /// A connection of its own for renewals, so that a renewal never waits
    /// behind run starts, takeovers or event reads on `pool`'s.
    renewals: PgPool,
    /// This process's id: random, so a restarted process never mistakes the
    /// leases of its previous life for its own.
    owner: String,
    /// How long a lease lasts after its last renewal.
    lease: Duration,
}

// The advisory lock serialises the creation, as the other stores' do. The
// partial index serves the takeover poll, which looks only at unfinished runs.
const SCHEMA: &str = "BEGIN;
SELECT pg_advisory_xact_lock(7420611);
CREATE TABLE IF NOT EXISTS lovia_run_leases (
    tenant TEXT NOT NULL,
    session TEXT NOT NULL,
    owner TEXT NOT NULL,
    expires TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant, session)
);
-- Each taking of a lease gets the next epoch; a checkpoint write matches
-- its owner and epoch (lovia_host::LeaseToken). Added to tables made before it.
CREATE SEQUENCE IF NOT EXISTS lovia_run_lease_epochs;
ALTER TABLE lovia_run_leases ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS lovia_run_leases_by_owner ON lovia_run_leases (owner);
CREATE TABLE IF NOT EXISTS lovia_run_orders (
    id BIGSERIAL PRIMARY KEY,
    tenant TEXT NOT NULL,
    session TEXT NOT NULL,
    call_id TEXT,
    decision TEXT NOT NULL,
    outcome TEXT,
    created TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- An ask_human answer; added after the table first shipped.
ALTER TABLE lovia_run_orders ADD COLUMN IF NOT EXISTS answer TEXT;
CREATE TABLE IF NOT EXISTS lovia_run_events (
    tenant TEXT NOT NULL,
    session TEXT NOT NULL,
    seq BIGINT NOT NULL,
    name TEXT NOT NULL,
    data TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, session, seq)
);
CREATE INDEX IF NOT EXISTS lovia_run_orders_open ON lovia_run_orders (tenant, session) WHERE outcome IS NULL;
-- A cancel, stored before the client is answered: the next replica to
-- take the session's run ends it instead of running it on.
CREATE TABLE IF NOT EXISTS lovia_run_cancels (
    tenant TEXT NOT NULL,
    session TEXT NOT NULL,
    created TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, session)
);
CREATE INDEX IF NOT EXISTS lovia_runs_unfinished ON lovia_runs (updated)
    WHERE status IN ('running', 'interrupted');
COMMIT;";

impl RunLeases {
    /// The leases for the store at `url`: in PostgreSQL for a `postgres://`
    /// URL (the run store's tables must exist: open it first), else local.
    /// `pool` is the store's when it is PostgreSQL.
    pub(crate) async fn open(pool: Option<&PgPool>, lease: Duration) -> Result<RunLeases, LeaseError> {
        let Some(pool) = pool else { return Ok(RunLeases::Local) };
        let fail = |source| LeaseError::Database { location: pool.location().to_owned(), source };
        pool.run_schema(SCHEMA).await.map_err(fail)?;
        let renewals = pool.separate(1).map_err(fail)?;
        let owner = lovia_runner::new_id("replica");
        Ok(RunLeases::Postgres(Box::new(PgLeases { pool: pool.clone(), renewals, owner, lease })))
    }

    /// The PostgreSQL leases, if runs are shared.
    pub(crate) fn shared(&self) -> Option<&PgLeases> {
        match self {
            RunLeases::Postgres(pg) => Some(pg),
            RunLeases::Local => None,
        }
    }

    /// Whether runs are shared between processes.
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self, RunLeases::Postgres(_))
    }

    /// Takes the lease of a run for this replica, if no other replica holds
    /// an unexpired one and the tenant has fewer than `max_runs` other runs
    /// with unexpired leases (its `max_concurrent_runs`, across replicas).
    /// A run given new input (`fresh`) forgets the session's stored cancel
    /// in the same transaction: it was of the run before.
    pub(crate) async fn take(
        &self,
        tenant: &str,
        session: &str,
        max_runs: u32,
        fresh: bool,
    ) -> Result<Taken, LeaseError> {
        let RunLeases::Postgres(pg) = self else { return Ok(Taken::Yes(None)) };
        let (t, s, owner, ms) = (tenant.to_owned(), session.to_owned(), pg.owner.clone(), pg.lease_ms());
        pg.run(move |c| Box::pin(async move {
            let tx = c.transaction().await?;
            // The tenant's run starts serialise on its lock (a transaction
            // lock: released at commit, or when a dead connection ends), so
            // the count below sees every lease committed before it and none
            // can be added between the count and the insert. Only run starts
            // take it: renewals and releases never wait for it.
            tx.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", &[&RUN_START_LOCK, &t]).await?;
            let row = tx.query_one(
                "SELECT COUNT(*) FILTER (WHERE session <> $2),
                        COALESCE(bool_or(session = $2 AND owner <> $3), false)
                   FROM lovia_run_leases WHERE tenant = $1 AND expires >= now()",
                &[&t, &s, &owner],
            ).await?;
            let (others, held_elsewhere): (i64, bool) = (row.get(0), row.get(1));
            if held_elsewhere {
                return Ok(Taken::HeldElsewhere);
            }
            // A run taken over keeps its row (the same key): it counts once.
            if others >= i64::from(max_runs) {
                return Ok(Taken::TooMany);
            }
            // A sequence, not a counter in the row: a released lease's row is
            // deleted, and a later taking must not reuse an earlier epoch.
            let epoch: i64 = tx
                .query_one(
                    "INSERT INTO lovia_run_leases (tenant, session, owner, expires, epoch)
                     VALUES ($1, $2, $3, now() + $4::bigint * interval '1 millisecond', nextval('lovia_run_lease_epochs'))
                     ON CONFLICT (tenant, session) DO UPDATE
                        SET owner = EXCLUDED.owner, expires = EXCLUDED.expires, epoch = EXCLUDED.epoch
                     RETURNING epoch",
                    &[&t, &s, &owner, &ms],
                ).await?
                .get(0);
            if fresh {
                tx.execute("DELETE FROM lovia_run_cancels WHERE tenant = $1 AND session = $2", &[&t, &s]).await?;
            }
            tx.commit().await?;
            Ok(Taken::Yes(Some(lovia_host::LeaseToken::new(owner, epoch))))
        }))
        .await
    }

    /// Pushes the expiry of this replica's leases of `running` (the runs it
    /// runs now) forward; the runs it still holds. A run of this replica
    /// missing from them has lost its lease and must stop. On the renewals'
    /// own connection.
    ///
    /// Only the runs it runs: a lease whose run ended here but whose release
    /// failed (the database was restarting) must expire, so that a takeover
    /// resumes the run from its checkpoint. Renewing every lease of the
    /// owner kept such a run from every replica for as long as this one
    /// lived (found by bench/fault-run: a PostgreSQL restart left runs
    /// `running` for good).
    pub(crate) async fn renew(&self, running: &[RunKey]) -> Result<HashSet<RunKey>, LeaseError> {
        let RunLeases::Postgres(pg) = self else { return Ok(HashSet::new()) };
        let (owner, ms) = (pg.owner.clone(), pg.lease_ms());
        let tenants: Vec<String> = running.iter().map(|(t, _)| t.clone()).collect();
        let sessions: Vec<String> = running.iter().map(|(_, s)| s.clone()).collect();
        pg.run_on(&pg.renewals, move |c| {
            Box::pin(async move {
                let rows = c
                    .query(
                        "UPDATE lovia_run_leases SET expires = now() + $2::bigint * interval '1 millisecond'
                 WHERE owner = $1 AND expires >= now()
                   AND (tenant, session) IN (SELECT * FROM unnest($3::text[], $4::text[]))
                 RETURNING tenant, session",
                        &[&owner, &ms, &tenants, &sessions],
                    )
                    .await?;
                Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
            })
        })
        .await
    }

    /// Gives up this replica's lease of a run (it ended).
    pub(crate) async fn release(&self, tenant: &str, session: &str) -> Result<(), LeaseError> {
        let RunLeases::Postgres(pg) = self else { return Ok(()) };
        let (t, s, owner) = (tenant.to_owned(), session.to_owned(), pg.owner.clone());
        pg.run(move |c| {
            Box::pin(async move {
                c.execute(
                    "DELETE FROM lovia_run_leases WHERE tenant = $1 AND session = $2 AND owner = $3",
                    &[&t, &s, &owner],
                )
                .await
                .map(drop)
            })
        })
        .await
    }

    /// Gives up every lease of this replica and tells the others, which take
    /// the runs over at once; how many there were.
    pub(crate) async fn release_all(&self) -> Result<u64, LeaseError> {
        let RunLeases::Postgres(pg) = self else { return Ok(0) };
        let owner = pg.owner.clone();
        pg.run(move |c| {
            Box::pin(async move {
                let tx = c.transaction().await?;
                let n = tx.execute("DELETE FROM lovia_run_leases WHERE owner = $1", &[&owner]).await?;
                // Delivered at commit.
                tx.execute("SELECT pg_notify($1, $2)", &[&RUNS_CHANNEL, &owner]).await?;
                tx.commit().await?;
                Ok(n)
            })
        })
        .await
    }

    /// Stores a client's cancel of the session's run before it is answered
    /// (docs/replicas.md, "Faults"): the run's owner may die, or lose its
    /// database, before it writes that the run ended, and the replica that
    /// takes the run next must end it rather than run it on. Only for a run
    /// stored as running or whose lease a replica holds (one starting, not
    /// yet stored), so a tenant has no more stored cancels than such runs,
    /// whatever session ids it sends. Nothing with one process, whose
    /// cancel lives in the run's end alone.
    pub(crate) async fn store_cancel(&self, tenant: &str, session: &str) -> Result<(), LeaseError> {
        let RunLeases::Postgres(pg) = self else { return Ok(()) };
        let (t, s) = (tenant.to_owned(), session.to_owned());
        pg.run(move |c| {
            Box::pin(async move {
                c.execute(
                    "INSERT INTO lovia_run_cancels (tenant, session)
                     SELECT $1, $2 WHERE EXISTS
                        (SELECT 1 FROM lovia_runs WHERE tenant = $1 AND session = $2 AND status = 'running')
                        OR EXISTS (SELECT 1 FROM lovia_run_leases WHERE tenant = $1 AND session = $2)
                     ON CONFLICT (tenant, session) DO UPDATE SET created = now()",
                    &[&t, &s],
                )
                .await
                .map(drop)
            })
        })
        .await
    }

    /// Whether a cancel of the session's run is stored.
    pub(crate) async fn cancel_stored(&self, tenant: &str, session: &str) -> Result<bool, LeaseError> {
        let RunLeases::Postgres(pg) = self else { return Ok(false) };
        let (t, s) = (tenant.to_owned(), session.to_owned());
        pg.run(move |c| {
            Box::pin(async move {
                let row = c
                    .query_opt("SELECT 1 FROM lovia_run_cancels WHERE tenant = $1 AND session = $2", &[&t, &s])
                    .await?;
                Ok(row.is_some())
            })
        })
        .await
    }

    /// Forgets the session's stored cancel: the run it stopped is stored as
    /// stopped, and a client resumes it now.
    pub(crate) async fn forget_cancel(&self, tenant: &str, session: &str) -> Result<(), LeaseError> {
        let RunLeases::Postgres(pg) = self else { return Ok(()) };
        let (t, s) = (tenant.to_owned(), session.to_owned());
        pg.run(move |c| {
            Box::pin(async move {
                c.execute("DELETE FROM lovia_run_cancels WHERE tenant = $1 AND session = $2", &[&t, &s]).await.map(drop)
            })
        })
        .await
    }

    /// Whether the store holds the session's run as running while no live
    /// replica holds its lease: a cancel stored now is applied by the
    /// replica that takes it over.
    pub(crate) async fn running_unowned(&self, tenant: &str, session: &str) -> Result<bool, LeaseError> {
        let RunLeases::Postgres(pg) = self else { return Ok(false) };
        let (t, s) = (tenant.to_owned(), session.to_owned());
        pg.run(move |c| {
            Box::pin(async move {
                let row = c
                    .query_opt(
                        "SELECT 1 FROM lovia_runs r
                         LEFT JOIN lovia_run_leases l ON l.tenant = r.tenant AND l.session = r.session
                         WHERE r.tenant = $1 AND r.session = $2 AND r.status = 'running'
                           AND (l.owner IS NULL OR l.expires < now())",
                        &[&t, &s],
                    )
                    .await?;
                Ok(row.is_some())
            })
        })
        .await
    }

    /// Runs that were running and that no live replica holds: their lease
    /// is absent or expired. Not those stopped by a cancel or a budget
    /// (`interrupted`): they stay stopped until a client resumes them. At
    /// most [`TAKEOVER_BATCH`], the longest waiting first.
    pub(crate) async fn unowned(&self) -> Result<Vec<RunKey>, LeaseError> {
        let RunLeases::Postgres(pg) = self else { return Ok(Vec::new()) };
        pg.run(move |c| {
            Box::pin(async move {
                // The `IN` matches the partial index `lovia_runs_unfinished`.
                let rows = c
                    .query(
                        "SELECT r.tenant, r.session FROM lovia_runs r
                 LEFT JOIN lovia_run_leases l ON l.tenant = r.tenant AND l.session = r.session
                 WHERE r.status IN ('running', 'interrupted') AND r.status = 'running'
                   AND (l.owner IS NULL OR l.expires < now())
                 ORDER BY r.updated LIMIT $1",
                        &[&TAKEOVER_BATCH],
                    )
                    .await?;
                Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
            })
        })
        .await
    }
}

impl PgLeases {
    /// This replica's id.
    pub(crate) fn owner(&self) -> &str {
        &self.owner
    }

    fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }

    /// Runs `f` on a pooled connection.
    pub(crate) async fn run<T: Send>(
        &self,
        f: impl for<'c> FnOnce(&'c mut PgClient) -> BoxFuture<'c, Result<T, tokio_postgres::Error>> + Send,
    ) -> Result<T, LeaseError> {
        self.run_on(&self.pool, f).await
    }

    /// Runs `f` on a connection of `pool`.
    async fn run_on<T: Send>(
        &self,
        pool: &PgPool,
        f: impl for<'c> FnOnce(&'c mut PgClient) -> BoxFuture<'c, Result<T, tokio_postgres::Error>> + Send,
    ) -> Result<T, LeaseError> {
        pool.run(f).await.map_err(|source| LeaseError::Database { location: pool.location().to_owned(), source })
    }
}
