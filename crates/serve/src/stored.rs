//! Uploaded plugins, kept in the service's store (docs/replicas.md): the
//! component's bytes, digest, tenant and name, and the names of its tools.
//! Every replica loads them at start, and a PostgreSQL store tells the
//! others of an upload with `NOTIFY` on [`CHANNEL`] (notifications.rs
//! listens; the rows stay the truth: a poll every `poll_interval_ms`
//! catches a lost notification). A SQLite store has one process, so it only
//! needs the rows to survive a restart. The audit trail (audit.rs) is kept
//! beside the uploads; the shared call counts are shared_counts.rs's.
//!
//! The per-tenant bounds (`max_plugins`, `max_uploaded_bytes`) and the
//! tool-name check are taken in the insert's transaction, so two replicas
//! uploading for one tenant at once cannot both pass them.

use bytes::Bytes;
use lovia_host::BoxFuture;
use lovia_runner::{PgClient, PgError, PgPool, StoreUrl};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The channel a PostgreSQL store notifies on after an upload.
pub(crate) const CHANNEL: &str = "lovia_plugins";

/// Serialises uploads across replicas: ids then commit in the order they are
/// given, so a reader's "everything after id N" cursor never skips a row that
/// commits late. Uploads are rare; the lock is held for one short transaction.
const UPLOAD_LOCK: i64 = 7_420_612;

/// Why the store of uploaded plugins refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginStoreError {
    /// The database failed.
    #[error("plugin store {location}: {message}")]
    Database {
        /// The file or URL (without a password).
        location: String,
        /// What failed.
        message: String,
    },
    /// The PostgreSQL store failed.
    #[error("plugin store {location}: {source}")]
    Postgres {
        /// The URL without its password.
        location: String,
        /// The pool's or the server's error.
        source: lovia_runner::PgError,
    },
    /// The tenant keeps `max_plugins` uploads already.
    #[error("this tenant has uploaded {count} plugins; the limit is {limit} (max_plugins)")]
    TooMany {
        /// Its stored uploads.
        count: u64,
        /// `max_plugins`.
        limit: u32,
    },
    /// The upload would pass `max_uploaded_bytes`.
    #[error("this tenant's uploads would reach {after} bytes; the limit is {limit} bytes (max_uploaded_bytes)")]
    TooLarge {
        /// Its stored bytes with this upload.
        after: u64,
        /// `max_uploaded_bytes`.
        limit: u64,
    },
    /// Another stored upload of the tenant declares this tool.
    #[error("{}", lovia_host::exec::NameConflict { name: tool.clone(), from: lovia_host::ToolSource::Plugin, first: lovia_host::ToolSource::Plugin })]
    Conflict {
        /// The tool name.
        tool: String,
    },
}

/// An upload about to be stored.
pub(crate) struct NewPlugin {
    pub(crate) tenant: String,
    pub(crate) name: String,
    pub(crate) digest: String,
    pub(crate) bytes: Bytes,
    pub(crate) tools: Vec<String>,
}

/// A stored upload, without its bytes.
#[derive(Debug, Clone)]
pub(crate) struct StoredPlugin {
    pub(crate) id: i64,
    pub(crate) tenant: String,
    pub(crate) name: String,
}

/// A tenant's upload bounds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UploadLimits {
    pub(crate) max_plugins: u32,
    pub(crate) max_bytes: u64,
}

/// Where uploads are kept.
pub(crate) enum PluginStore {
    /// Only in this process ([`Service::with_store`](crate::Service::with_store),
    /// with a run store of the caller's).
    Memory(Mutex<Vec<(StoredPlugin, Bytes, Vec<String>)>>),
    /// Beside the run store's tables in its SQLite file.
    Sqlite { conn: Arc<Mutex<rusqlite::Connection>>, path: PathBuf },
    /// In PostgreSQL, shared by every replica (boxed: its connection config is large).
    Postgres(Box<Pg>),
}

const SQLITE_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS uploaded_plugins (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    digest TEXT NOT NULL,
    size INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    uploaded_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS uploaded_plugin_tools (
    tenant TEXT NOT NULL,
    tool TEXT NOT NULL,
    plugin INTEGER NOT NULL,
    PRIMARY KEY (tenant, tool)
) WITHOUT ROWID;
-- The audit trail (audit.rs).
CREATE TABLE IF NOT EXISTS audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms INTEGER NOT NULL,
    tenant TEXT NOT NULL,
    action TEXT NOT NULL,
    source TEXT NOT NULL,
    digest TEXT,
    signer TEXT,
    outcome TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_log_tenant ON audit_log (tenant, id);";

// The advisory lock serialises the creation, as the run store's does.
const POSTGRES_SCHEMA: &str = "BEGIN;
SELECT pg_advisory_xact_lock(7420611);
CREATE TABLE IF NOT EXISTS lovia_plugins (
    id BIGSERIAL PRIMARY KEY,
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    digest TEXT NOT NULL,
    size BIGINT NOT NULL,
    bytes BYTEA NOT NULL,
    uploaded TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS lovia_plugin_tools (
    tenant TEXT NOT NULL,
    tool TEXT NOT NULL,
    plugin BIGINT NOT NULL REFERENCES lovia_plugins (id),
    PRIMARY KEY (tenant, tool)
);
-- The audit trail (audit.rs).
CREATE TABLE IF NOT EXISTS lovia_audit (
    id BIGSERIAL PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    tenant TEXT NOT NULL,
    action TEXT NOT NULL,
    source TEXT NOT NULL,
    digest TEXT,
    signer TEXT,
    outcome TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS lovia_audit_tenant ON lovia_audit (tenant, id);
COMMIT;";

impl PluginStore {
    /// Opens the uploads' tables beside the run store at `url`; a
    /// PostgreSQL store's on the connections of `pool`.
    pub(crate) async fn open(url: &StoreUrl, pool: Option<&PgPool>) -> Result<PluginStore, PluginStoreError> {
        match (url, pool) {
            (StoreUrl::Postgres(_), Some(pool)) => Ok(PluginStore::Postgres(Box::new(Pg::open(pool.clone()).await?))),
            (StoreUrl::Postgres(raw), None) => {
                let pool = PgPool::connect(raw, 1)
                    .await
                    .map_err(|source| PluginStoreError::Postgres { location: url.to_string(), source })?;
                Ok(PluginStore::Postgres(Box::new(Pg::open(pool).await?)))
            }
            (StoreUrl::Sqlite(path), _) => {
                let err = |e: rusqlite::Error| PluginStoreError::Database {
                    location: path.display().to_string(),
                    message: e.to_string(),
                };
                let conn = rusqlite::Connection::open(path).map_err(err)?;
                // The run store writes to the same file from its own connection.
                conn.busy_timeout(Duration::from_secs(5)).map_err(err)?;
                conn.execute_batch(SQLITE_SCHEMA).map_err(err)?;
                Ok(PluginStore::Sqlite { conn: Arc::new(Mutex::new(conn)), path: path.clone() })
            }
            (other, _) => Err(PluginStoreError::Database {
                location: other.to_string(),
                message: "uploads can be kept only in SQLite or PostgreSQL".into(),
            }),
        }
    }

    /// The tenant's stored uploads: (count, bytes).
    pub(crate) async fn usage(&self, tenant: &str) -> Result<(u64, u64), PluginStoreError> {
        let tenant = tenant.to_owned();
        match self {
            PluginStore::Memory(rows) => {
                let rows = rows.lock().unwrap_or_else(|e| e.into_inner());
                let mine = rows.iter().filter(|(p, ..)| p.tenant == tenant);
                Ok(mine.fold((0, 0), |(n, b), (_, bytes, _)| (n + 1, b + bytes.len() as u64)))
            }
            PluginStore::Sqlite { conn, path } => {
                let conn = conn.clone();
                sqlite(path, move || {
                    let conn = conn.lock().unwrap_or_else(|e| e.into_inner());
                    conn.query_row(
                        "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM uploaded_plugins WHERE tenant = ?1",
                        [&tenant],
                        |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
                    )
                })
                .await
            }
            PluginStore::Postgres(pg) => {
                pg.run(move |c| {
                    Box::pin(async move {
                        let row = c
                            .query_one(
                                "SELECT COUNT(*), COALESCE(SUM(size), 0)::BIGINT FROM lovia_plugins WHERE tenant = $1",
                                &[&tenant],
                            )
                            .await?;
                        Ok((row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64))
                    })
                })
                .await
            }
        }
    }

    /// Stores `plugin` if the tenant's bounds allow it and no stored upload
    /// of the tenant declares one of its tools; its id.
    pub(crate) async fn insert(&self, plugin: NewPlugin, limits: UploadLimits) -> Result<i64, PluginStoreError> {
        let size = plugin.bytes.len() as u64;
        let check = move |count: u64, bytes: u64| -> Result<(), PluginStoreError> {
            if count >= u64::from(limits.max_plugins) {
                return Err(PluginStoreError::TooMany { count, limit: limits.max_plugins });
            }
            let after = bytes.saturating_add(size);
            if after > limits.max_bytes {
                return Err(PluginStoreError::TooLarge { after, limit: limits.max_bytes });
            }
            Ok(())
        };
        match self {
            PluginStore::Memory(rows) => {
                let mut rows = rows.lock().unwrap_or_else(|e| e.into_inner());
                let mine: Vec<_> = rows.iter().filter(|(p, ..)| p.tenant == plugin.tenant).collect();
                check(mine.len() as u64, mine.iter().map(|(_, b, _)| b.len() as u64).sum())?;
                if let Some(tool) = plugin.tools.iter().find(|t| mine.iter().any(|(_, _, tools)| tools.contains(t))) {
                    return Err(PluginStoreError::Conflict { tool: tool.clone() });
                }
                let id = rows.last().map_or(1, |(p, ..)| p.id + 1);
                let stored = StoredPlugin { id, tenant: plugin.tenant, name: plugin.name };
                rows.push((stored, plugin.bytes, plugin.tools));
                Ok(id)
            }
            PluginStore::Sqlite { conn, path } => {
                let conn = conn.clone();
                let location = path.display().to_string();
                let run = move || -> Result<i64, PluginStoreError> {
                    let db = |e: rusqlite::Error| PluginStoreError::Database {
                        location: location.clone(),
                        message: e.to_string(),
                    };
                    let mut conn = conn.lock().unwrap_or_else(|e| e.into_inner());
                    // IMMEDIATE: the write lock is taken before the checks read.
                    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(db)?;
                    let (count, bytes): (i64, i64) = tx
                        .query_row(
                            "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM uploaded_plugins WHERE tenant = ?1",
                            [&plugin.tenant],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                        .map_err(db)?;
                    check(count as u64, bytes as u64)?;
                    for tool in &plugin.tools {
                        let taken: bool = tx
                            .query_row(
                                "SELECT EXISTS (SELECT 1 FROM uploaded_plugin_tools WHERE tenant = ?1 AND tool = ?2)",
                                [&plugin.tenant, tool],
                                |r| r.get(0),
                            )
                            .map_err(db)?;
                        if taken {
                            return Err(PluginStoreError::Conflict { tool: tool.clone() });
                        }
                    }
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as i64);
                    tx.execute(
                        "INSERT INTO uploaded_plugins (tenant, name, digest, size, bytes, uploaded_ms)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                        rusqlite::params![
                            plugin.tenant,
                            plugin.name,
                            plugin.digest,
                            size as i64,
                            &plugin.bytes[..],
                            now
                        ],
                    )
                    .map_err(db)?;
                    let id = tx.last_insert_rowid();
                    for tool in &plugin.tools {
                        tx.execute(
                            "INSERT INTO uploaded_plugin_tools (tenant, tool, plugin) VALUES (?1, ?2, ?3)",
                            rusqlite::params![plugin.tenant, tool, id],
                        )
                        .map_err(db)?;
                    }
                    tx.commit().map_err(db)?;
                    Ok(id)
                };
                blocking(run).await
            }
            PluginStore::Postgres(pg) => {
                let location = pg.pool.location().to_owned();
                let mut c = pg.pool.get().await.map_err(|e| pg.fail(e))?;
                async move {
                    let tx = c.transaction().await.map_err(|e| pg_error(&location, e))?;
                    let db = |e: tokio_postgres::Error| pg_error(&location, e);
                    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&UPLOAD_LOCK]).await.map_err(db)?;
                    let row = tx
                        .query_one(
                            "SELECT COUNT(*), COALESCE(SUM(size), 0)::BIGINT FROM lovia_plugins WHERE tenant = $1",
                            &[&plugin.tenant],
                        )
                        .await
                        .map_err(db)?;
                    check(row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64)?;
                    let taken = tx
                        .query_opt(
                            "SELECT tool FROM lovia_plugin_tools WHERE tenant = $1 AND tool = ANY($2) LIMIT 1",
                            &[&plugin.tenant, &plugin.tools],
                        )
                        .await
                        .map_err(db)?;
                    if let Some(row) = taken {
                        return Err(PluginStoreError::Conflict { tool: row.get(0) });
                    }
                    let id: i64 = tx
                        .query_one(
                            "INSERT INTO lovia_plugins (tenant, name, digest, size, bytes)
                             VALUES ($1, $2, $3, $4, $5) RETURNING id",
                            &[&plugin.tenant, &plugin.name, &plugin.digest, &(size as i64), &&plugin.bytes[..]],
                        )
                        .await
                        .map_err(db)?
                        .get(0);
                    for tool in &plugin.tools {
                        tx.execute(
                            "INSERT INTO lovia_plugin_tools (tenant, tool, plugin) VALUES ($1, $2, $3)",
                            &[&plugin.tenant, tool, &id],
                        )
                        .await
                        .map_err(db)?;
                    }
                    // Delivered at commit, to every replica listening.
                    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &id.to_string()]).await.map_err(db)?;
                    tx.commit().await.map_err(db)?;
                    Ok(id)
                }
                .await
            }
        }
    }

    /// The stored uploads with an id above `after`, in id order.
    pub(crate) async fn after(&self, after: i64) -> Result<Vec<StoredPlugin>, PluginStoreError> {
        match self {
            PluginStore::Memory(rows) => {
                let rows = rows.lock().unwrap_or_else(|e| e.into_inner());
                Ok(rows.iter().filter(|(p, ..)| p.id > after).map(|(p, ..)| p.clone()).collect())
            }
            PluginStore::Sqlite { conn, path } => {
                let conn = conn.clone();
                sqlite(path, move || {
                    let conn = conn.lock().unwrap_or_else(|e| e.into_inner());
                    let mut stmt =
                        conn.prepare("SELECT id, tenant, name FROM uploaded_plugins WHERE id > ?1 ORDER BY id")?;
                    let rows = stmt.query_map([after], |r| {
                        Ok(StoredPlugin { id: r.get(0)?, tenant: r.get(1)?, name: r.get(2)? })
                    })?;
                    rows.collect()
                })
                .await
            }
            PluginStore::Postgres(pg) => {
                pg.run(move |c| {
                    Box::pin(async move {
                        let rows = c
                            .query("SELECT id, tenant, name FROM lovia_plugins WHERE id > $1 ORDER BY id", &[&after])
                            .await?;
                        Ok(rows
                            .iter()
                            .map(|r| StoredPlugin { id: r.get(0), tenant: r.get(1), name: r.get(2) })
                            .collect())
                    })
                })
                .await
            }
        }
    }

    /// The bytes of upload `id`, read one at a time so that loading every
    /// tenant's uploads never holds more than one component in memory.
    pub(crate) async fn bytes(&self, id: i64) -> Result<Option<Bytes>, PluginStoreError> {
        match self {
            PluginStore::Memory(rows) => {
                let rows = rows.lock().unwrap_or_else(|e| e.into_inner());
                Ok(rows.iter().find(|(p, ..)| p.id == id).map(|(_, b, _)| b.clone()))
            }
            PluginStore::Sqlite { conn, path } => {
                let conn = conn.clone();
                sqlite(path, move || {
                    use rusqlite::OptionalExtension;
                    let conn = conn.lock().unwrap_or_else(|e| e.into_inner());
                    conn.query_row("SELECT bytes FROM uploaded_plugins WHERE id = ?1", [id], |r| r.get::<_, Vec<u8>>(0))
                        .optional()
                        .map(|b| b.map(Bytes::from))
                })
                .await
            }
            PluginStore::Postgres(pg) => {
                pg.run(move |c| {
                    Box::pin(async move {
                        let row = c.query_opt("SELECT bytes FROM lovia_plugins WHERE id = $1", &[&id]).await?;
                        Ok(row.map(|r| Bytes::from(r.get::<_, Vec<u8>>(0))))
                    })
                })
                .await
            }
        }
    }

    /// Whether the store answers (for `/readyz`).
    pub(crate) async fn ping(&self) -> Result<(), PluginStoreError> {
        match self {
            PluginStore::Memory(_) => Ok(()),
            PluginStore::Sqlite { conn, path } => {
                let conn = conn.clone();
                sqlite(path, move || {
                    let conn = conn.lock().unwrap_or_else(|e| e.into_inner());
                    conn.query_row("SELECT 1", [], |_| Ok(()))
                })
                .await
            }
            PluginStore::Postgres(pg) => {
                pg.run(|c| Box::pin(async move { c.simple_query("SELECT 1").await.map(drop) })).await
            }
        }
    }
}

/// A rusqlite call on the blocking pool.
pub(crate) async fn sqlite<T: Send + 'static>(
    path: &std::path::Path,
    f: impl FnOnce() -> Result<T, rusqlite::Error> + Send + 'static,
) -> Result<T, PluginStoreError> {
    let location = path.display().to_string();
    blocking(move || f().map_err(|e| PluginStoreError::Database { location, message: e.to_string() })).await
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, PluginStoreError> + Send + 'static,
) -> Result<T, PluginStoreError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(PluginStoreError::Database { location: "uploads".into(), message: format!("the store task failed: {e}") })
    })
}

/// The uploads' tables in PostgreSQL, on the service's [`PgPool`].
pub(crate) struct Pg {
    pool: PgPool,
}

impl Pg {
    async fn open(pool: PgPool) -> Result<Pg, PluginStoreError> {
        pool.run_schema(POSTGRES_SCHEMA)
            .await
            .map_err(|source| PluginStoreError::Postgres { location: pool.location().to_owned(), source })?;
        Ok(Pg { pool })
    }

    fn fail(&self, source: PgError) -> PluginStoreError {
        PluginStoreError::Postgres { location: self.pool.location().to_owned(), source }
    }

    pub(crate) async fn run<T: Send>(
        &self,
        f: impl for<'c> FnOnce(&'c mut PgClient) -> BoxFuture<'c, Result<T, tokio_postgres::Error>> + Send,
    ) -> Result<T, PluginStoreError> {
        self.pool.run(f).await.map_err(|e| self.fail(e))
    }
}

fn pg_error(location: &str, e: tokio_postgres::Error) -> PluginStoreError {
    PluginStoreError::Postgres { location: location.to_owned(), source: PgError::Server(e) }
}
