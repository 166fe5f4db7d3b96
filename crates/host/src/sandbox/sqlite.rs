//! The embedded persistent session store: SQLite in one file.
//!
//! Why SQLite: one file, crash-safe (WAL), inspectable with the `sqlite3`
//! tool, and the same engine the runner uses for runs and checkpoints.

use super::store::{SessionStore, StoreQuota};
use rusqlite::{Connection, OptionalExtension, params};
use std::path::Path;
use std::sync::Mutex;

/// Opening the store failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the session store {path}: {source}")]
pub struct StoreOpenError {
    /// The file.
    pub path: String,
    /// SQLite's error.
    pub source: rusqlite::Error,
}

/// A [`SessionStore`] in one SQLite file.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    quota: StoreQuota,
}

impl SqliteStore {
    /// Opens (or creates) the store at `path` with the default quota.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreOpenError> {
        Self::open_with_quota(path, StoreQuota::default())
    }

    /// Opens (or creates) the store at `path` with `quota`.
    pub fn open_with_quota(path: impl AsRef<Path>, quota: StoreQuota) -> Result<Self, StoreOpenError> {
        let path = path.as_ref();
        let err = |source| StoreOpenError { path: path.display().to_string(), source };
        let conn = Connection::open(path).map_err(err)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS session_kv (
                 ns TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
                 PRIMARY KEY (ns, key)
             ) WITHOUT ROWID;",
        )
        .map_err(err)?;
        Ok(Self { conn: Mutex::new(conn), quota })
    }

    fn with<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&conn)
    }
}

impl SessionStore for SqliteStore {
    fn get(&self, namespace: &str, key: &str) -> Option<Vec<u8>> {
        self.with(|c| {
            c.query_row("SELECT value FROM session_kv WHERE ns = ?1 AND key = ?2", params![namespace, key], |r| {
                r.get(0)
            })
            .optional()
        })
        .unwrap_or_else(|e| {
            tracing::error!(%e, "session store read failed");
            None
        })
    }

    fn set(&self, namespace: &str, key: &str, value: &[u8]) -> Result<(), String> {
        let quota = self.quota;
        self.with(|c| {
            let tx = c.unchecked_transaction()?;
            // Keys count in the total like values (in bytes: LENGTH of TEXT counts characters).
            let (keys, total): (i64, i64) = tx.query_row(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(key AS BLOB)) + LENGTH(value)), 0) FROM session_kv WHERE ns = ?1",
                params![namespace],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let old: Option<i64> = tx
                .query_row(
                    "SELECT LENGTH(value) FROM session_kv WHERE ns = ?1 AND key = ?2",
                    params![namespace, key],
                    |r| r.get(0),
                )
                .optional()?;
            let to_usize = |n: i64| usize::try_from(n).unwrap_or(usize::MAX);
            if let Err(message) = quota.check(key, to_usize(keys), to_usize(total), old.map(to_usize), value.len()) {
                return Ok(Err(message));
            }
            tx.execute(
                "INSERT INTO session_kv (ns, key, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value",
                params![namespace, key, value],
            )?;
            tx.commit()?;
            Ok(Ok(()))
        })
        .unwrap_or_else(|e| {
            tracing::error!(%e, "session store write failed");
            Err("the session store is unavailable".into())
        })
    }

    fn delete(&self, namespace: &str, key: &str) {
        if let Err(e) =
            self.with(|c| c.execute("DELETE FROM session_kv WHERE ns = ?1 AND key = ?2", params![namespace, key]))
        {
            tracing::error!(%e, "session store delete failed");
        }
    }

    fn keys(&self, namespace: &str, prefix: &str) -> Vec<String> {
        let quota = self.quota;
        if prefix.len() > quota.key_bytes {
            return Vec::new();
        }
        self.with(|c| {
            // The listing is bounded in SQL, not after: a store written before
            // keys were bounded may hold keys of megabytes, and none of them
            // should be read into memory for nothing. A key longer than the
            // whole listing's byte budget can never be returned; it is
            // skipped rather than allowed to hide every key after it.
            let mut stmt = c.prepare(
                "SELECT key FROM session_kv
                 WHERE ns = ?1 AND substr(key, 1, length(?2)) = ?2 AND LENGTH(CAST(key AS BLOB)) <= ?3
                 ORDER BY key LIMIT ?4",
            )?;
            let limit = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
            let rows = stmt
                .query_map(params![namespace, prefix, limit(quota.list_bytes), limit(quota.list_keys)], |r| {
                    r.get::<_, String>(0)
                })?;
            // Rows are read one at a time, and the reading stops at the budget.
            let mut keys = Vec::new();
            let mut bytes = 0usize;
            for row in rows {
                let key = row?;
                bytes = bytes.saturating_add(key.len());
                if bytes > quota.list_bytes {
                    break;
                }
                keys.push(key);
            }
            Ok(keys)
        })
        .unwrap_or_else(|e| {
            tracing::error!(%e, "session store listing failed");
            Vec::new()
        })
    }
}
