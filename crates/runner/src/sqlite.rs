//! The embedded run store: one SQLite file, WAL. A session is one row for
//! the checkpoint's head and one row per transcript message, so a save
//! writes the head and the messages added since the last save, never the
//! whole transcript again.

use super::checkpoint::{Checkpoint, RunStatus, RunStore, SessionInfo, SessionPage, StoreError};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// The schema this build writes; a file with a newer one is refused.
const SCHEMA_VERSION: i64 = 2;

/// A [`RunStore`] in one SQLite file. Each call runs on tokio's blocking
/// pool (rusqlite is synchronous), so a disk that stalls never holds a
/// worker of the runtime.
///
/// ```
/// use lovia_runner::{Checkpoint, RunStore, SqliteRunStore};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let dir = tempfile::tempdir().unwrap();
/// let store = SqliteRunStore::open(dir.path().join("runs.db")).unwrap();
/// store.save("acme", "s1", &Checkpoint::new("run_1", "support")).await.unwrap();
/// assert_eq!(store.unfinished().await.unwrap(), [("acme".to_string(), "s1".to_string())]);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct SqliteRunStore {
    db: Arc<Db>,
}

/// The file and its one connection, which the blocking pool's threads take in turn.
#[derive(Debug)]
struct Db {
    path: PathBuf,
    conn: Mutex<Connection>,
    /// Bytes of checkpoint data written so far (heads and messages).
    written: AtomicU64,
}

impl SqliteRunStore {
    /// Opens (or creates) the store at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_owned();
        let err =
            |e: rusqlite::Error| StoreError::Database { location: path.display().to_string(), message: e.to_string() };
        let conn = Connection::open(&path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(err)?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(err)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::Database {
                location: path.display().to_string(),
                message: format!("schema version {version} is newer than this build's {SCHEMA_VERSION}"),
            });
        }
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS runs (
                tenant TEXT NOT NULL,
                session TEXT NOT NULL,
                status TEXT NOT NULL,
                updated_ms INTEGER NOT NULL,
                checkpoint TEXT NOT NULL,
                PRIMARY KEY (tenant, session)
            );
            CREATE TABLE IF NOT EXISTS run_messages (
                tenant TEXT NOT NULL,
                session TEXT NOT NULL,
                seq INTEGER NOT NULL,
                message TEXT NOT NULL,
                PRIMARY KEY (tenant, session, seq)
            ) WITHOUT ROWID;
            PRAGMA user_version = 2;",
        )
        .map_err(err)?;
        add_created_column(&conn).map_err(err)?;
        Ok(Self { db: Arc::new(Db { conn: Mutex::new(conn), path, written: AtomicU64::new(0) }) })
    }

    /// Bytes of checkpoint data this store has written since it was opened:
    /// what a save costs, which does not grow with the transcript.
    pub fn bytes_written(&self) -> u64 {
        self.db.written.load(Ordering::Relaxed)
    }

    /// Runs `f` on the blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Db) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db)).await.unwrap_or_else(|e| Err(self.db.err(e)))
    }
}

impl Db {
    fn err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Database { location: self.path.display().to_string(), message: e.to_string() }
    }
}

/// The session list orders by creation: a `created_ms` column and its
/// index, added to a file made before it existed (whose sessions count as
/// created when they were last saved). Guarded by the column's presence
/// rather than the schema version, so that it composes with the other
/// additions to this file; a build without the column leaves it NULL on
/// the rows it inserts, and listings read those as their update time.
fn add_created_column(conn: &Connection) -> rusqlite::Result<()> {
    let present: bool =
        conn.query_row("SELECT COUNT(*) > 0 FROM pragma_table_info('runs') WHERE name = 'created_ms'", [], |r| {
            r.get(0)
        })?;
    if !present {
        conn.execute_batch(
            "BEGIN;
             ALTER TABLE runs ADD COLUMN created_ms INTEGER;
             UPDATE runs SET created_ms = updated_ms;
             COMMIT;",
        )?;
    }
    conn.execute_batch("CREATE INDEX IF NOT EXISTS runs_by_created ON runs (tenant, created_ms DESC, session DESC);")
}

#[async_trait::async_trait]
impl RunStore for SqliteRunStore {
    async fn load(&self, tenant: &str, session: &str) -> Result<Option<Checkpoint>, StoreError> {
        let (t, s) = (tenant.to_owned(), session.to_owned());
        self.blocking(move |db| db.load(&t, &s)).await
    }

    async fn save(&self, tenant: &str, session: &str, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let (t, s, cp) = (tenant.to_owned(), session.to_owned(), checkpoint.clone());
        self.blocking(move |db| db.save(&t, &s, &cp)).await
    }

    async fn unfinished(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.blocking(Db::unfinished).await
    }

    async fn delete(&self, tenant: &str, session: &str) -> Result<bool, StoreError> {
        let (t, s) = (tenant.to_owned(), session.to_owned());
        self.blocking(move |db| db.delete(&t, &s)).await
    }

    async fn list(&self, tenant: &str, page: &SessionPage) -> Result<Vec<SessionInfo>, StoreError> {
        let (t, page) = (tenant.to_owned(), page.clone());
        self.blocking(move |db| db.list(&t, &page)).await
    }
}

/// The store's calls, run on the blocking pool.
impl Db {
    fn load(&self, tenant: &str, session: &str) -> Result<Option<Checkpoint>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let head: Option<String> = conn
            .query_row(
                "SELECT checkpoint FROM runs WHERE tenant = ?1 AND session = ?2",
                params![tenant, session],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some(head) = head else { return Ok(None) };
        let corrupt =
            |e: serde_json::Error| StoreError::Corrupt { session: session.to_owned(), message: e.to_string() };
        let mut stmt = conn
            .prepare_cached("SELECT message FROM run_messages WHERE tenant = ?1 AND session = ?2 ORDER BY seq")
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map(params![tenant, session], |r| r.get::<_, String>(0)).map_err(|e| self.err(e))?;
        let mut messages = Vec::new();
        for row in rows {
            messages.push(serde_json::from_str(&row.map_err(|e| self.err(e))?).map_err(corrupt)?);
        }
        Checkpoint::from_parts(&head, messages).map(Some).map_err(corrupt)
    }

    fn save(&self, tenant: &str, session: &str, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let head = checkpoint.head_json().map_err(|e| self.err(e))?;
        let status = serde_json::to_value(checkpoint.status).map_err(|e| self.err(e))?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        // IMMEDIATE: the write lock is taken at BEGIN, waiting out another
        // connection's write under the busy timeout. A deferred transaction
        // reads first and then upgrades, and in WAL mode an upgrade after
        // another connection wrote fails at once (SQLITE_BUSY_SNAPSHOT), with
        // no wait: a checkpoint lost that way failed its run.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(|e| self.err(e))?;
        let stored: i64 = tx
            .query_row(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM run_messages WHERE tenant = ?1 AND session = ?2",
                params![tenant, session],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        let len = i64::try_from(checkpoint.messages.len()).unwrap_or(i64::MAX);
        // The transcript only grows; a shorter one (a session rewritten by
        // hand) replaces the stored tail.
        if stored > len {
            tx.execute(
                "DELETE FROM run_messages WHERE tenant = ?1 AND session = ?2 AND seq >= ?3",
                params![tenant, session, len],
            )
            .map_err(|e| self.err(e))?;
        }
        let mut written = head.len();
        {
            let mut insert = tx
                .prepare_cached("INSERT INTO run_messages (tenant, session, seq, message) VALUES (?1, ?2, ?3, ?4)")
                .map_err(|e| self.err(e))?;
            for (seq, message) in checkpoint.messages.iter().enumerate().skip(stored.min(len) as usize) {
                let text = serde_json::to_string(message).map_err(|e| self.err(e))?;
                written += text.len();
                insert.execute(params![tenant, session, seq as i64, text]).map_err(|e| self.err(e))?;
            }
        }
        tx.execute(
            "INSERT INTO runs (tenant, session, status, updated_ms, checkpoint, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?4)
             ON CONFLICT (tenant, session) DO UPDATE SET status = ?3, updated_ms = ?4, checkpoint = ?5",
            params![tenant, session, status.as_str().unwrap_or_default(), now, head],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        self.written.fetch_add(written as u64, Ordering::Relaxed);
        Ok(())
    }

    fn unfinished(&self) -> Result<Vec<(String, String)>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn
            .prepare("SELECT tenant, session FROM runs WHERE status IN ('running', 'interrupted') ORDER BY updated_ms")
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    fn delete(&self, tenant: &str, session: &str) -> Result<bool, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.execute("DELETE FROM run_messages WHERE tenant = ?1 AND session = ?2", params![tenant, session])
            .map_err(|e| self.err(e))?;
        let n = conn
            .execute("DELETE FROM runs WHERE tenant = ?1 AND session = ?2", params![tenant, session])
            .map_err(|e| self.err(e))?;
        Ok(n > 0)
    }

    fn list(&self, tenant: &str, page: &SessionPage) -> Result<Vec<SessionInfo>, StoreError> {
        let (before_ms, before_session) = match &page.before {
            Some(c) => (Some(c.created_ms), Some(c.session.as_str())),
            None => (None, None),
        };
        let limit = i64::try_from(page.bounded_limit()).unwrap_or(1);
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn
            .prepare_cached(
                "SELECT r.session, r.status, COALESCE(r.created_ms, r.updated_ms) AS created, r.updated_ms,
                        (SELECT m.message FROM run_messages m
                          WHERE m.tenant = r.tenant AND m.session = r.session AND m.seq = 0)
                   FROM runs r
                  WHERE r.tenant = ?1 AND (?2 IS NULL OR (COALESCE(r.created_ms, r.updated_ms), r.session) < (?2, ?3))
                  ORDER BY created DESC, r.session DESC
                  LIMIT ?4",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![tenant, before_ms, before_session, limit], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, Option<String>>(4)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut list = Vec::new();
        for row in rows {
            let (session, status, created_ms, updated_ms, first) = row.map_err(|e| self.err(e))?;
            let Some(status) = RunStatus::parse(&status) else {
                return Err(StoreError::Corrupt { session, message: format!("unknown status '{status}'") });
            };
            list.push(SessionInfo {
                input: SessionInfo::preview(first.as_deref()),
                session,
                status,
                created_ms,
                updated_ms,
            });
        }
        Ok(list)
    }
}
