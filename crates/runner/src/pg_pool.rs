//! One pool of PostgreSQL connections for every store of a process: the run
//! store here, and in `lovia serve` the uploads, the quotas, the leases, the
//! relayed events and the MCP request states. `deadpool-postgres` over
//! `tokio-postgres` rather than `sqlx`: the stores' SQL was already written
//! for `tokio-postgres` (the old blocking `postgres` crate wraps it), so each
//! query moved over unchanged with an `.await`, and the build gains two small
//! crates instead of sqlx's macros and drivers.

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use std::sync::Arc;
use std::time::Duration;

pub use deadpool_postgres::Object as PgClient;

/// Connections a pool opens at most, by default: 8. A store call holds one
/// for one short transaction; more calls wait their turn, in order.
pub const PG_POOL_CONNECTIONS: usize = 8;

/// How long opening one connection may take before the call that needed it
/// fails: 10 s (a server that is down answers at once; one that is
/// unreachable would otherwise hold the call for the system's TCP timeout).
pub const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How many times [`PgPool::run_schema`] runs a schema again after
/// PostgreSQL aborted it to break a deadlock: 5.
pub const SCHEMA_DEADLOCK_RETRIES: u32 = 5;

/// A pool of connections to one PostgreSQL database. Cheap to clone: clones
/// share the connections. A connection that dropped is replaced on the next
/// call.
#[derive(Clone)]
pub struct PgPool {
    pool: Pool,
    config: tokio_postgres::Config,
    /// The URL without its password, for errors.
    location: Arc<str>,
}

impl std::fmt::Debug for PgPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgPool").field("location", &self.location).field("status", &self.pool.status()).finish()
    }
}

impl PgPool {
    /// A pool of at most `max_size` connections to `url` (TLS is not
    /// supported: use a local socket or a trusted network), with one
    /// connection made now so that a wrong URL fails here. The error is the
    /// server's ([`PgError::Server`]) or why the URL is not one.
    pub async fn connect(url: &str, max_size: usize) -> Result<PgPool, PgError> {
        let config: tokio_postgres::Config = url.parse().map_err(PgError::Url)?;
        let pool = PgPool::with_config(config, super::store_url::redact(url).into(), max_size)?;
        drop(pool.get().await?);
        Ok(pool)
    }

    fn with_config(config: tokio_postgres::Config, location: Arc<str>, max_size: usize) -> Result<PgPool, PgError> {
        let manager = Manager::from_config(
            config.clone(),
            tokio_postgres::NoTls,
            // `Fast` reuses a connection unless it is closed: a statement on
            // a connection that died since fails once, and the next call
            // gets a new connection.
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(max_size.max(1))
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(PG_CONNECT_TIMEOUT))
            .build()
            .map_err(PgError::Build)?;
        Ok(PgPool { pool, config, location })
    }

    /// Another pool of at most `max_size` connections to the same database,
    /// for work that must never wait behind this pool's (lease renewals).
    pub fn separate(&self, max_size: usize) -> Result<PgPool, PgError> {
        PgPool::with_config(self.config.clone(), self.location.clone(), max_size)
    }

    /// A connection; it goes back to the pool when dropped.
    pub async fn get(&self) -> Result<PgClient, PgError> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(e) => PgError::Server(e),
            other => PgError::Pool(other),
        })
    }

    /// Runs `f` on a pooled connection; the error is the server's
    /// ([`PgError::Server`]) or why no connection could be had.
    pub async fn run<T: Send>(
        &self,
        f: impl for<'c> FnOnce(&'c mut PgClient) -> lovia_host::BoxFuture<'c, Result<T, tokio_postgres::Error>> + Send,
    ) -> Result<T, PgError> {
        let mut client = self.get().await?;
        f(&mut client).await.map_err(PgError::Server)
    }

    /// Runs `schema` (statements that must be safe to run again, each
    /// store's `CREATE … IF NOT EXISTS`, in one transaction) on one
    /// connection.
    ///
    /// A schema's DDL takes strong locks (`ALTER TABLE … ADD COLUMN IF NOT
    /// EXISTS` an exclusive one even when the column is there), so against
    /// the statements of replicas already running it can deadlock, and
    /// PostgreSQL aborts one side. Aborted, the transaction is undone
    /// whole, so it is rolled back and run again, up to
    /// [`SCHEMA_DEADLOCK_RETRIES`] times: a replica restarted under load
    /// exited with `deadlock detected` (found by bench/fault-run).
    pub async fn run_schema(&self, schema: &str) -> Result<(), PgError> {
        let mut tries = 0;
        loop {
            let client = self.get().await?;
            match client.batch_execute(schema).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    // The batch's transaction is left aborted on the connection.
                    let _ = client.batch_execute("ROLLBACK").await;
                    let deadlock = e.code() == Some(&tokio_postgres::error::SqlState::T_R_DEADLOCK_DETECTED);
                    if !deadlock || tries == SCHEMA_DEADLOCK_RETRIES {
                        return Err(PgError::Server(e));
                    }
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(50 * u64::from(tries))).await;
                }
            }
        }
    }

    /// The connection settings, for a connection of its own outside the
    /// pool (one that `LISTEN`s).
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// The URL without its password.
    pub fn location(&self) -> &str {
        &self.location
    }
}

/// Why a pooled PostgreSQL call failed. A server's error reads as the
/// server's own message ([`pg_message`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The URL is not a PostgreSQL connection string.
    #[error("not a PostgreSQL URL: {0}")]
    Url(#[source] tokio_postgres::Error),
    /// The pool's settings were refused.
    #[error("cannot build the connection pool: {0}")]
    Build(#[source] deadpool_postgres::BuildError),
    /// No connection could be had: none was made within
    /// [`PG_CONNECT_TIMEOUT`], or the pool is closed.
    #[error("no database connection: {0}")]
    Pool(#[source] deadpool_postgres::PoolError),
    /// The server refused the connection or a statement, or the connection broke.
    #[error("{}", pg_message(.0))]
    Server(#[source] tokio_postgres::Error),
}

/// The server's own message when there is one (`tokio_postgres::Error`
/// alone prints only `db error`), else the error and its cause.
pub fn pg_message(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}
