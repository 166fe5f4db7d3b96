//! The tasks of a tenant's `/mcp` in PostgreSQL (`lovia_mcp_tasks`), so
//! that any replica answers `tasks/get`, `tasks/result`, `tasks/list` and
//! `tasks/cancel` for a task another replica runs: the replica that runs a
//! task renews its row every second and reads its status back, so a cancel
//! made on another replica stops the call within a second; a task whose
//! replica has not renewed it for [`STOPPED_AFTER_SECS`] (it died or
//! froze) reads as `failed`. With SQLite (one process) the tasks are in
//! the process's memory (lovia-mcp's default).
//!
//! Rows are bounded per tenant by `max_mcp_tasks` (the create counts them
//! under the tenant's advisory lock), and an ended task's row is deleted
//! once its ttl (at most an hour) and a minute after its end have passed,
//! at the tenant's next create.

use lovia_host::BoxFuture;
use lovia_mcp::{Created, TaskRow, TaskStatus, TaskStore, TaskStoreError};
use lovia_runner::{PgClient, PgPool};

/// The table; created with the other MCP tables (states.rs), under the
/// schema lock the other stores take.
pub(super) const SCHEMA: &str = "BEGIN;
SELECT pg_advisory_xact_lock(7420611);
CREATE TABLE IF NOT EXISTS lovia_mcp_tasks (
    tenant TEXT NOT NULL,
    task_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    status TEXT NOT NULL,
    message TEXT,
    result TEXT,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    ttl_ms BIGINT NOT NULL,
    poll_ms BIGINT NOT NULL,
    renewed TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, task_id)
);
COMMIT;";

/// How long a running task's row may go unrenewed before it reads as
/// failed: its replica renews it every second, so ten missed renewals.
pub(crate) const STOPPED_AFTER_SECS: f64 = 10.0;

/// The first key of the per-tenant advisory lock that task creates take
/// (beside the run starts' 7_420_612).
const TASK_CREATE_LOCK: i32 = 7_420_613;

/// The database's clock in ms since the Unix epoch, in SQL: what the
/// expiry compares the rows' times with (they are the replicas' clocks,
/// a task's `createdAt` and `lastUpdatedAt` both from the one that wrote).
const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// A row's columns without its result: what a poll or a list reads.
const HEAD: &str = "task_id, tool, status, message, created_ms, updated_ms, ttl_ms, poll_ms, NULL::text AS result";

/// A task whose replica stopped, as the error its `tasks/result` reads.
const STOPPED: &str = r#"{"code":-32603,"message":"the replica running the task stopped before the task ended"}"#;

/// The tasks of every tenant in PostgreSQL.
pub(crate) struct PgTasks {
    pool: PgPool,
}

fn failed(pool: &PgPool, e: impl std::fmt::Display) -> TaskStoreError {
    TaskStoreError::new(format!("{}: {e}", pool.location()))
}

fn row_of(r: &tokio_postgres::Row) -> Result<TaskRow, TaskStoreError> {
    let status: String = r.get("status");
    let status = TaskStatus::parse(&status)
        .ok_or_else(|| TaskStoreError::new(format!("a task's status {status:?} is unknown")))?;
    let ms = |name: &str| u64::try_from(r.get::<_, i64>(name)).unwrap_or_default();
    let mut row = TaskRow::new(r.get("task_id"), r.get("tool"), ms("created_ms"), ms("ttl_ms"), ms("poll_ms"));
    row.status = status;
    row.message = r.get("message");
    row.updated_ms = ms("updated_ms");
    row.result = r.get("result");
    Ok(row)
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// This replica's clock in ms since the Unix epoch, as the row's times are.
fn now() -> i64 {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl PgTasks {
    pub(crate) fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    fn read_one<'a>(
        &'a self,
        scope: &'a str,
        id: &'a str,
        with_result: bool,
    ) -> BoxFuture<'a, Result<Option<TaskRow>, TaskStoreError>> {
        let (tenant, id) = (scope.to_owned(), id.to_owned());
        Box::pin(async move {
            let row = self.run(move |c| Box::pin(async move { read(c, &tenant, &id, with_result).await })).await?;
            row.as_ref().map(row_of).transpose()
        })
    }

    async fn run<T: Send>(
        &self,
        f: impl for<'c> FnOnce(&'c mut PgClient) -> BoxFuture<'c, Result<T, tokio_postgres::Error>> + Send,
    ) -> Result<T, TaskStoreError> {
        self.pool.run(f).await.map_err(|e| failed(&self.pool, e))
    }
}

/// Marks the tenant's tasks (or the one task `id`) whose replica stopped
/// renewing them as failed.
async fn fail_stopped<C: tokio_postgres::GenericClient + Sync>(
    c: &C,
    tenant: &str,
    id: Option<&str>,
) -> Result<u64, tokio_postgres::Error> {
    c.execute(
        &format!(
            "UPDATE lovia_mcp_tasks SET status = 'failed', message = 'the replica running the task stopped',
                    result = $2, updated_ms = greatest(updated_ms, {NOW_MS})
              WHERE tenant = $1 AND ($4::text IS NULL OR task_id = $4)
                AND status IN ('working', 'input_required')
                AND renewed < now() - make_interval(secs => $3)"
        ),
        &[&tenant, &STOPPED, &STOPPED_AFTER_SECS, &id],
    )
    .await
}

/// The task, without its result unless `with_result`, once a stopped
/// replica's task is marked failed: a running row renewed within
/// [`STOPPED_AFTER_SECS`] is read as it is, with one indexed read.
async fn read(
    c: &PgClient,
    tenant: &str,
    id: &str,
    with_result: bool,
) -> Result<Option<tokio_postgres::Row>, tokio_postgres::Error> {
    let columns = if with_result { "*" } else { HEAD };
    let select = format!(
        "SELECT {columns}, status IN ('working', 'input_required')
                AND renewed < now() - make_interval(secs => $3) AS stopped
           FROM lovia_mcp_tasks WHERE tenant = $1 AND task_id = $2"
    );
    let row = c.query_opt(&select, &[&tenant, &id, &STOPPED_AFTER_SECS]).await?;
    if row.as_ref().is_some_and(|r| r.get::<_, bool>("stopped")) {
        fail_stopped::<tokio_postgres::Client>(c, tenant, Some(id)).await?;
        return c.query_opt(&select, &[&tenant, &id, &STOPPED_AFTER_SECS]).await;
    }
    Ok(row)
}

impl TaskStore for PgTasks {
    fn create<'a>(
        &'a self,
        scope: &'a str,
        row: &'a TaskRow,
        max: usize,
    ) -> BoxFuture<'a, Result<Created, TaskStoreError>> {
        let (tenant, row) = (scope.to_owned(), row.clone());
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        Box::pin(self.run(move |c| {
            Box::pin(async move {
                let tx = c.transaction().await?;
                // The tenant's creates serialise on its lock, so the count
                // below sees every row committed before it.
                tx.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", &[&TASK_CREATE_LOCK, &tenant]).await?;
                // A dead replica's tasks end first, so they make room.
                fail_stopped::<tokio_postgres::Transaction<'_>>(&tx, &tenant, None).await?;
                tx.execute(
                    &format!(
                        "DELETE FROM lovia_mcp_tasks WHERE tenant = $1 AND status IN ('completed', 'failed', 'cancelled')
                            AND {NOW_MS} > created_ms + ttl_ms AND {NOW_MS} > updated_ms + $2"
                    ),
                    &[&tenant, &signed(lovia_mcp::KEPT_AFTER_END_MS)],
                )
                .await?;
                let kept: i64 =
                    tx.query_one("SELECT count(*) FROM lovia_mcp_tasks WHERE tenant = $1", &[&tenant]).await?.get(0);
                if kept >= max {
                    let made_room = max > 0
                        && tx
                            .execute(
                                "DELETE FROM lovia_mcp_tasks WHERE (tenant, task_id) IN (
                                   SELECT tenant, task_id FROM lovia_mcp_tasks
                                    WHERE tenant = $1 AND status IN ('completed', 'failed', 'cancelled')
                                    ORDER BY updated_ms, task_id LIMIT 1)",
                                &[&tenant],
                            )
                            .await?
                            == 1;
                    if !made_room {
                        return Ok(Created::Full);
                    }
                }
                tx.execute(
                    "INSERT INTO lovia_mcp_tasks (tenant, task_id, tool, status, created_ms, updated_ms, ttl_ms, poll_ms)
                     VALUES ($1, $2, $3, $4, $5, $5, $6, $7)",
                    &[
                        &tenant,
                        &row.id,
                        &row.tool,
                        &row.status.as_str(),
                        &signed(row.created_ms),
                        &signed(row.ttl_ms),
                        &signed(row.poll_ms),
                    ],
                )
                .await?;
                tx.commit().await?;
                Ok(Created::Yes)
            })
        }))
    }

    fn get<'a>(&'a self, scope: &'a str, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRow>, TaskStoreError>> {
        self.read_one(scope, id, false)
    }

    fn get_with_result<'a>(
        &'a self,
        scope: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<TaskRow>, TaskStoreError>> {
        self.read_one(scope, id, true)
    }

    fn list<'a>(
        &'a self,
        scope: &'a str,
        after: Option<(u64, String)>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRow>, TaskStoreError>> {
        let tenant = scope.to_owned();
        let (after_ms, after_id) = match after {
            Some((ms, id)) => (Some(signed(ms)), Some(id)),
            None => (None, None),
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Box::pin(async move {
            let rows = self
                .run(move |c| {
                    Box::pin(async move {
                        fail_stopped::<tokio_postgres::Client>(c, &tenant, None).await?;
                        c.query(
                            &format!(
                                "SELECT {HEAD} FROM lovia_mcp_tasks
                                  WHERE tenant = $1 AND ($2::bigint IS NULL OR (created_ms, task_id) < ($2, $3))
                                  ORDER BY created_ms DESC, task_id DESC LIMIT $4"
                            ),
                            &[&tenant, &after_ms, &after_id, &limit],
                        )
                        .await
                    })
                })
                .await?;
            rows.iter().map(row_of).collect()
        })
    }

    fn set_status<'a>(
        &'a self,
        scope: &'a str,
        id: &'a str,
        status: TaskStatus,
        message: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, TaskStoreError>> {
        let (tenant, id, message) = (scope.to_owned(), id.to_owned(), message.map(str::to_owned));
        Box::pin(self.run(move |c| {
            Box::pin(async move {
                c.execute(
                    "UPDATE lovia_mcp_tasks SET status = $3, message = $4, updated_ms = greatest(updated_ms, $5),
                                renewed = now()
                          WHERE tenant = $1 AND task_id = $2 AND status IN ('working', 'input_required')",
                    &[&tenant, &id, &status.as_str(), &message, &now()],
                )
                .await
                .map(|n| n == 1)
            })
        }))
    }

    fn finish<'a>(
        &'a self,
        scope: &'a str,
        id: &'a str,
        status: TaskStatus,
        message: Option<&'a str>,
        result: &'a str,
    ) -> BoxFuture<'a, Result<bool, TaskStoreError>> {
        let (tenant, id, message, result) =
            (scope.to_owned(), id.to_owned(), message.map(str::to_owned), result.to_owned());
        Box::pin(self.run(move |c| {
            Box::pin(async move {
                c.execute(
                    "UPDATE lovia_mcp_tasks SET status = $3, message = $4, result = $5,
                                updated_ms = greatest(updated_ms, $6)
                          WHERE tenant = $1 AND task_id = $2 AND status IN ('working', 'input_required')",
                    &[&tenant, &id, &status.as_str(), &message, &result, &now()],
                )
                .await
                .map(|n| n == 1)
            })
        }))
    }

    fn renew<'a>(&'a self, scope: &'a str, id: &'a str) -> BoxFuture<'a, Result<Option<TaskStatus>, TaskStoreError>> {
        let (tenant, id) = (scope.to_owned(), id.to_owned());
        Box::pin(async move {
            let status: Option<String> = self
                .run(move |c| {
                    Box::pin(async move {
                        // A running task's row is renewed; an ended one's
                        // status is read as it is.
                        c.query_opt(
                            "UPDATE lovia_mcp_tasks
                                SET renewed = CASE WHEN status IN ('working', 'input_required') THEN now() ELSE renewed END
                              WHERE tenant = $1 AND task_id = $2 RETURNING status",
                            &[&tenant, &id],
                        )
                        .await
                        .map(|r| r.map(|r| r.get(0)))
                    })
                })
                .await?;
            Ok(status.as_deref().and_then(TaskStatus::parse))
        })
    }
}
