//! The replicas' shared call counts: with a PostgreSQL store, a tenant's
//! calls and fuel of each wall-clock minute are one row of
//! `lovia_call_minutes`, which every replica counts in (quota.rs). With any
//! other store there is nothing to share: each process counts in memory.

use lovia_host::BoxFuture;
use lovia_runner::{PgClient, PgPool};

// The advisory lock serialises the creation, as the other stores' do.
const SCHEMA: &str = "BEGIN;
SELECT pg_advisory_xact_lock(7420611);
CREATE TABLE IF NOT EXISTS lovia_call_minutes (
    tenant TEXT NOT NULL,
    minute TIMESTAMPTZ NOT NULL,
    calls BIGINT NOT NULL,
    PRIMARY KEY (tenant, minute)
);
ALTER TABLE lovia_call_minutes ADD COLUMN IF NOT EXISTS fuel BIGINT NOT NULL DEFAULT 0;
COMMIT;";

/// Why the shared counts could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("shared call counts in {location}: {source}")]
#[non_exhaustive]
pub struct SharedCountError {
    /// The URL without its password.
    pub location: String,
    /// The pool's or the server's error.
    pub source: lovia_runner::PgError,
}

/// What the shared count said of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    /// Counted in this minute (seconds since the Unix epoch).
    Yes { minute: i64 },
    /// The minute's `calls_per_minute` are used up.
    PerMinute,
    /// The minute's `fuel_per_minute` is burned or held by calls running.
    Fuel,
}

/// The counts in PostgreSQL, on the service's pool.
pub(crate) struct SharedCounts {
    pool: PgPool,
}

/// `n` as a PostgreSQL `BIGINT`, saturating.
fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl SharedCounts {
    /// The counts' table in the store of `pool`, created if missing.
    pub(crate) async fn open(pool: &PgPool) -> Result<SharedCounts, SharedCountError> {
        let counts = SharedCounts { pool: pool.clone() };
        pool.run_schema(SCHEMA).await.map_err(|e| counts.fail(e))?;
        Ok(counts)
    }

    fn fail(&self, source: lovia_runner::PgError) -> SharedCountError {
        SharedCountError { location: self.pool.location().to_owned(), source }
    }

    async fn run<T: Send>(
        &self,
        f: impl for<'c> FnOnce(&'c mut PgClient) -> BoxFuture<'c, Result<T, tokio_postgres::Error>> + Send,
    ) -> Result<T, SharedCountError> {
        self.pool.run(f).await.map_err(|e| self.fail(e))
    }

    /// Counts a call of `tenant` in the current wall-clock minute (the
    /// database's clock, so every replica agrees on it) if fewer than `limit`
    /// were counted and, with `fuel` = (hold, per minute), holds `hold` of
    /// the minute's fuel for it if that leaves the minute within its fuel.
    pub(crate) async fn count_call(
        &self,
        tenant: &str,
        limit: u32,
        fuel: Option<(u64, u64)>,
    ) -> Result<Counted, SharedCountError> {
        let tenant = tenant.to_owned();
        let (hold, per_minute) = fuel.map_or((0, i64::MAX), |(h, m)| (to_i64(h.min(m)), to_i64(m)));
        self.run(move |c| {
            Box::pin(async move {
                // One statement, so two replicas counting at once serialise on the
                // row. `fuel` is what the minute's calls burned plus what those
                // still running hold.
                let row = c
                    .query_opt(
                        "INSERT INTO lovia_call_minutes AS m (tenant, minute, calls, fuel)
                         VALUES ($1, date_trunc('minute', now()), 1, $3)
                         ON CONFLICT (tenant, minute) DO UPDATE SET calls = m.calls + 1, fuel = m.fuel + $3
                         WHERE m.calls < $2 AND m.fuel <= $4 - $3
                         RETURNING extract(epoch FROM m.minute)::bigint",
                        &[&tenant, &i64::from(limit), &hold, &per_minute],
                    )
                    .await?;
                if let Some(row) = row {
                    return Ok(Counted::Yes { minute: row.get(0) });
                }
                // Refused (rare): which bound, for the answer.
                let calls: Option<i64> = c
                    .query_opt(
                        "SELECT calls FROM lovia_call_minutes WHERE tenant = $1 AND minute = date_trunc('minute', now())",
                        &[&tenant],
                    )
                    .await?
                    .map(|r| r.get(0));
                Ok(if calls.is_some_and(|n| n < i64::from(limit)) { Counted::Fuel } else { Counted::PerMinute })
            })
        })
        .await
    }

    /// Ends a call counted in `minute` (seconds since the Unix epoch) that
    /// held `held` fuel: the hold goes and `burned` (what the tenant burned
    /// since the last charge) is charged to that minute.
    pub(crate) async fn charge_fuel(
        &self,
        tenant: &str,
        minute: i64,
        held: u64,
        burned: u64,
    ) -> Result<(), SharedCountError> {
        let (tenant, held, burned) = (tenant.to_owned(), to_i64(held), to_i64(burned));
        self.run(move |c| {
            Box::pin(async move {
                c.execute(
                    "UPDATE lovia_call_minutes SET fuel = GREATEST(fuel - $3, 0) + $4
                     WHERE tenant = $1 AND minute = 'epoch'::timestamptz + $2::bigint * interval '1 second'",
                    &[&tenant, &minute, &held, &burned],
                )
                .await
                .map(drop)
            })
        })
        .await
    }

    /// Deletes the call counts of minutes before the last one.
    pub(crate) async fn forget_old_minutes(&self) -> Result<(), SharedCountError> {
        self.run(|c| {
            Box::pin(async move {
                c.execute(
                    "DELETE FROM lovia_call_minutes WHERE minute < date_trunc('minute', now()) - interval '1 minute'",
                    &[],
                )
                .await
                .map(drop)
            })
        })
        .await
    }
}
