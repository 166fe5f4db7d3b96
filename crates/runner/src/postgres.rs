//! The run store in PostgreSQL, for services that keep state outside the
//! host. Like the SQLite store, a session is a head row and one row per
//! transcript message, and a save appends only the new messages. The client
//! lives on its own thread (the `postgres` crate runs its own runtime, which
//! must not nest inside the service's), and each call waits for its answer
//! there, as a SQLite call waits for the disk.

use super::checkpoint::{Checkpoint, RunStatus, RunStore, SessionInfo, SessionPage, StoreError};
use super::pg_thread::{PgThread, pg_message as message};
use super::store_url::redact;
use std::sync::Arc;
use std::sync::mpsc;

/// A [`RunStore`] in a PostgreSQL database given by URL, e.g.
/// `postgres://lovia@db.internal/lovia`. TLS is not supported: use a local
/// socket or a trusted network.
#[derive(Debug)]
pub struct PostgresRunStore {
    connection: PgThread,
    /// The URL without its password, for errors.
    location: Arc<str>,
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
    /// Connects to `url` and creates the table if it is missing.
    pub fn open(url: &str) -> Result<Self, StoreError> {
        let location: Arc<str> = redact(url).into();
        let err = {
            let location = location.clone();
            move |e: &dyn std::fmt::Display| StoreError::Database {
                location: location.to_string(),
                message: e.to_string(),
            }
        };
        let config: postgres::Config = url.parse().map_err(|e: postgres::Error| err(&e))?;
        let connection = PgThread::start(config, SCHEMA, "lovia-postgres").map_err(|e| err(&e))?;
        Ok(Self { connection, location })
    }

    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut postgres::Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = mpsc::channel();
        let gone = || StoreError::Database {
            location: self.location.to_string(),
            message: "the connection thread stopped".into(),
        };
        if !self.connection.send(move |client| {
            let _ = reply.send(f(client).map_err(|e| message(&e)));
        }) {
            return Err(gone());
        }
        match answer.recv() {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(message)) => Err(StoreError::Database { location: self.location.to_string(), message }),
            Err(_) => Err(gone()),
        }
    }
}

impl PostgresRunStore {
    /// [`RunStore::save`], and with `lease` only while the lease row of
    /// `lovia serve` (`lovia_run_leases`) still names its owner and epoch.
    fn write(
        &self,
        tenant: &str,
        session: &str,
        checkpoint: &Checkpoint,
        lease: Option<lovia_host::LeaseToken>,
    ) -> Result<(), StoreError> {
        let fail =
            |e: serde_json::Error| StoreError::Database { location: self.location.to_string(), message: e.to_string() };
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
        let written = self.run(move |c| {
            let mut tx = c.transaction()?;
            // The lease row is locked until the commit, so a takeover that
            // comes now waits for this write, and one that came before makes
            // this write find another owner or epoch, and write nothing.
            if let Some(lease) = &lease {
                let held = tx.query_opt(
                    "SELECT 1 FROM lovia_run_leases
                      WHERE tenant = $1 AND session = $2 AND owner = $3 AND epoch = $4 FOR SHARE",
                    &[&t, &s, &lease.owner, &lease.epoch],
                )?;
                if held.is_none() {
                    return Ok(false);
                }
            }
            let stored: i64 = tx
                .query_one(
                    "SELECT COALESCE(MAX(seq) + 1, 0) FROM lovia_run_messages WHERE tenant = $1 AND session = $2",
                    &[&t, &s],
                )?
                .get(0);
            let len = i64::try_from(messages.len()).unwrap_or(i64::MAX);
            if stored > len {
                tx.execute(
                    "DELETE FROM lovia_run_messages WHERE tenant = $1 AND session = $2 AND seq >= $3",
                    &[&t, &s, &len],
                )?;
            }
            let insert =
                tx.prepare("INSERT INTO lovia_run_messages (tenant, session, seq, message) VALUES ($1, $2, $3, $4)")?;
            for (seq, message) in messages.iter().enumerate().skip(stored.clamp(0, len) as usize) {
                tx.execute(&insert, &[&t, &s, &(seq as i64), message])?;
            }
            tx.execute(
                "INSERT INTO lovia_runs (tenant, session, status, checkpoint, created_ms)
                 VALUES ($1, $2, $3, $4, (extract(epoch FROM now()) * 1000)::bigint)
                 ON CONFLICT (tenant, session) DO UPDATE SET status = $3, checkpoint = $4, updated = now()",
                &[&t, &s, &status, &head],
            )?;
            tx.commit()?;
            Ok(true)
        });
        if written? { Ok(()) } else { Err(StoreError::Fenced { session: session.to_owned() }) }
    }
}

impl RunStore for PostgresRunStore {
    fn load(&self, tenant: &str, session: &str) -> Result<Option<Checkpoint>, StoreError> {
        let (t, s) = (tenant.to_owned(), session.to_owned());
        let found: Option<(String, Vec<String>)> = self.run(move |c| {
            let Some(row) =
                c.query_opt("SELECT checkpoint FROM lovia_runs WHERE tenant = $1 AND session = $2", &[&t, &s])?
            else {
                return Ok(None);
            };
            let messages = c.query(
                "SELECT message FROM lovia_run_messages WHERE tenant = $1 AND session = $2 ORDER BY seq",
                &[&t, &s],
            )?;
            Ok(Some((row.get(0), messages.iter().map(|r| r.get(0)).collect())))
        })?;
        let Some((head, rows)) = found else { return Ok(None) };
        let corrupt =
            |e: serde_json::Error| StoreError::Corrupt { session: session.to_owned(), message: e.to_string() };
        let messages = rows.iter().map(|m| serde_json::from_str(m)).collect::<Result<Vec<_>, _>>().map_err(corrupt)?;
        Checkpoint::from_parts(&head, messages).map(Some).map_err(corrupt)
    }

    fn save(&self, tenant: &str, session: &str, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        self.write(tenant, session, checkpoint, None)
    }

    fn save_fenced(
        &self,
        tenant: &str,
        session: &str,
        checkpoint: &Checkpoint,
        lease: &lovia_host::LeaseToken,
    ) -> Result<(), StoreError> {
        self.write(tenant, session, checkpoint, Some(lease.clone()))
    }

    fn unfinished(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.run(|c| {
            let rows = c.query(
                "SELECT tenant, session FROM lovia_runs WHERE status IN ('running', 'interrupted') ORDER BY updated",
                &[],
            )?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    fn delete(&self, tenant: &str, session: &str) -> Result<bool, StoreError> {
        let (t, s) = (tenant.to_owned(), session.to_owned());
        self.run(move |c| {
            c.execute("DELETE FROM lovia_run_messages WHERE tenant = $1 AND session = $2", &[&t, &s])?;
            Ok(c.execute("DELETE FROM lovia_runs WHERE tenant = $1 AND session = $2", &[&t, &s])? > 0)
        })
    }

    fn list(&self, tenant: &str, page: &SessionPage) -> Result<Vec<SessionInfo>, StoreError> {
        let t = tenant.to_owned();
        let (before_ms, before_session) = match &page.before {
            Some(c) => (Some(c.created_ms), Some(c.session.clone())),
            None => (None, None),
        };
        let limit = i64::try_from(page.bounded_limit()).unwrap_or(1);
        type Row = (String, String, i64, i64, Option<String>);
        let rows: Vec<Row> = self.run(move |c| {
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
            )?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))).collect())
        })?;
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
