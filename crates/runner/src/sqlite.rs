//! The embedded run store: one SQLite file, WAL, one row per session.

use super::checkpoint::{Checkpoint, RunStore, StoreError};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// The schema this build writes; a file with a newer one is refused.
const SCHEMA_VERSION: i64 = 1;

/// A [`RunStore`] in one SQLite file.
///
/// ```
/// use lovia_host::runner::{Checkpoint, RunStore, SqliteRunStore};
/// let dir = tempfile::tempdir().unwrap();
/// let store = SqliteRunStore::open(dir.path().join("runs.db")).unwrap();
/// store.save("acme", "s1", &Checkpoint::new("run_1", "support")).unwrap();
/// assert_eq!(store.unfinished().unwrap(), [("acme".to_string(), "s1".to_string())]);
/// ```
#[derive(Debug)]
pub struct SqliteRunStore {
    path: PathBuf,
    conn: Mutex<Connection>,
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
            PRAGMA user_version = 1;",
        )
        .map_err(err)?;
        Ok(Self { conn: Mutex::new(conn), path })
    }

    fn err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Database { location: self.path.display().to_string(), message: e.to_string() }
    }
}

impl RunStore for SqliteRunStore {
    fn load(&self, tenant: &str, session: &str) -> Result<Option<Checkpoint>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let text: Option<String> = conn
            .query_row(
                "SELECT checkpoint FROM runs WHERE tenant = ?1 AND session = ?2",
                params![tenant, session],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        text.map(|t| {
            serde_json::from_str(&t)
                .map_err(|e| StoreError::Corrupt { session: session.to_owned(), message: e.to_string() })
        })
        .transpose()
    }

    fn save(&self, tenant: &str, session: &str, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let text = serde_json::to_string(checkpoint).map_err(|e| self.err(e))?;
        let status = serde_json::to_value(checkpoint.status).map_err(|e| self.err(e))?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.execute(
            "INSERT INTO runs (tenant, session, status, updated_ms, checkpoint) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (tenant, session) DO UPDATE SET status = ?3, updated_ms = ?4, checkpoint = ?5",
            params![tenant, session, status.as_str().unwrap_or_default(), now, text],
        )
        .map_err(|e| self.err(e))?;
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
        let n = conn
            .execute("DELETE FROM runs WHERE tenant = ?1 AND session = ?2", params![tenant, session])
            .map_err(|e| self.err(e))?;
        Ok(n > 0)
    }
}
