//! The run stores write a checkpoint incrementally: the head and the
//! messages added since the last save, never the whole transcript again.

use lovia_runner::{Agent, Checkpoint, Message, ModelReply, RunStatus, RunStore, SqliteRunStore, StoreError};
use std::sync::Arc;

fn message(i: usize) -> Message {
    if i.is_multiple_of(2) {
        Message::User { content: format!("question {i:04}: how are order {i:04} and its refund doing?") }
    } else {
        Message::Assistant {
            content: Some(format!("answer {i:04}: order {i:04} shipped, no refund yet.")),
            tool_calls: vec![],
        }
    }
}

/// Saves a transcript growing to `n` messages, one save per message, and
/// returns the bytes each save wrote (when the store counts them).
async fn grow(store: &dyn RunStore, session: &str, n: usize, written: impl Fn() -> u64) -> Vec<u64> {
    let mut checkpoint = Checkpoint::new("run_1", "support");
    let mut per_save = Vec::new();
    for i in 0..n {
        checkpoint.messages.push(message(i));
        checkpoint.turn = u32::try_from(i).expect("turn");
        let before = written();
        store.save("acme", session, &checkpoint).await.expect("save");
        per_save.push(written() - before);
    }
    checkpoint.status = RunStatus::Completed;
    store.save("acme", session, &checkpoint).await.expect("save");
    assert_eq!(store.load("acme", session).await.expect("load"), Some(checkpoint), "what was saved loads back whole");
    per_save
}

#[tokio::test]
async fn a_sqlite_checkpoint_writes_what_changed_not_the_transcript() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteRunStore::open(dir.path().join("runs.db")).expect("open");
    let per_save = grow(&store, "s1", 500, || store.bytes_written()).await;
    let (first, last) = (per_save[10], per_save[499]);
    println!("bytes written per checkpoint: save 10 {first}, save 500 {last}; total {}", per_save.iter().sum::<u64>());
    // Every save writes one message and the head, whose size does not depend
    // on the transcript: the 500th costs what the 10th did, within a few bytes
    // of digits.
    assert!(last <= first + 16, "save 500 wrote {last} bytes, save 10 wrote {first}");

    // A shorter transcript replaces the stored tail.
    let mut cut = store.load("acme", "s1").await.expect("load").expect("session");
    cut.messages.truncate(3);
    store.save("acme", "s1", &cut).await.expect("save");
    assert_eq!(store.load("acme", "s1").await.expect("load").expect("session").messages.len(), 3);
    assert!(store.delete("acme", "s1").await.expect("delete"));
    assert_eq!(store.load("acme", "s1").await.expect("load"), None);
}

#[tokio::test]
async fn a_postgres_checkpoint_appends_and_loads_back() {
    let Some(url) = lovia_tests::parts::postgres_url() else { return };
    let store = lovia_runner::PostgresRunStore::open(&url).await.expect("connect");
    let session = format!("grow_{}", lovia_runner::new_id("s"));
    grow(&store, &session, 120, || 0).await;
    let mut cut = store.load("acme", &session).await.expect("load").expect("session");
    cut.messages.truncate(5);
    store.save("acme", &session, &cut).await.expect("save");
    assert_eq!(store.load("acme", &session).await.expect("load").expect("session").messages.len(), 5);
    assert!(store.delete("acme", &session).await.expect("delete"));
}

/// What every store's `list` must do: only the tenant's own sessions, newest
/// first by creation (an update does not move one), in pages that neither
/// skip nor repeat one, with its status and the start of its input, and never
/// more than `SESSION_PAGE_MAX` at once.
async fn lists_a_tenants_sessions_in_pages(store: &dyn RunStore, tenant: &str, other: &str) {
    use lovia_runner::{SESSION_PAGE_MAX, SessionPage};
    for i in 0..7 {
        let mut checkpoint = Checkpoint::new(format!("run_{i}"), "support");
        checkpoint.messages.push(Message::User { content: format!("question {i} {}", "x".repeat(300)) });
        if i % 2 == 1 {
            checkpoint.status = RunStatus::Completed;
        }
        store.save(tenant, &format!("s{i}"), &checkpoint).await.expect("save");
        // Distinct creation times, so that newest-first is the order of the loop.
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    store.save(other, "theirs", &Checkpoint::new("run_x", "support")).await.expect("save");
    // Saving an old session again does not move it up the list.
    let mut s0 = store.load(tenant, "s0").await.expect("load").expect("s0");
    s0.status = RunStatus::Failed;
    store.save(tenant, "s0", &s0).await.expect("save");

    let mut seen = Vec::new();
    let mut page = SessionPage::first(3);
    let mut pages = 0;
    loop {
        let found = store.list(tenant, &page).await.expect("list");
        assert!(found.len() <= 3, "{found:?}");
        pages += 1;
        seen.extend(found.iter().cloned());
        if found.len() < 3 {
            break;
        }
        page = SessionPage::after(3, found.last().expect("a last").cursor());
    }
    assert_eq!(pages, 3, "7 sessions in pages of 3");
    let ids: Vec<&str> = seen.iter().map(|s| s.session.as_str()).collect();
    assert_eq!(ids, ["s6", "s5", "s4", "s3", "s2", "s1", "s0"], "newest first, each once");
    assert_eq!(seen[0].status, RunStatus::Running);
    assert_eq!(seen[1].status, RunStatus::Completed);
    assert_eq!(seen[6].status, RunStatus::Failed, "the last save's status");
    assert!(seen[6].updated_ms >= seen[6].created_ms);
    let input = seen[0].input.as_deref().expect("an input preview");
    assert!(input.starts_with("question 6 ") && input.chars().count() == lovia_runner::SESSION_INPUT_PREVIEW_CHARS);

    let theirs = store.list(other, &SessionPage::default()).await.expect("list");
    assert_eq!(theirs.iter().map(|s| s.session.as_str()).collect::<Vec<_>>(), ["theirs"], "only the tenant's own");
    assert_eq!(theirs[0].input, None, "no first message, no preview");
    assert!(store.list("nobody", &SessionPage::default()).await.expect("list").is_empty());

    // A page is bounded whatever the caller asks.
    for i in 0..SESSION_PAGE_MAX {
        store.save(other, &format!("many_{i:03}"), &Checkpoint::new("run_m", "support")).await.expect("save");
    }
    let all = store.list(other, &SessionPage::first(usize::MAX)).await.expect("list");
    assert_eq!(all.len(), SESSION_PAGE_MAX, "at most SESSION_PAGE_MAX");
    assert_eq!(store.list(other, &SessionPage::first(0)).await.expect("list").len(), 1, "0 counts as 1");
    assert_eq!(
        store.list(other, &SessionPage::default()).await.expect("list").len(),
        lovia_runner::SESSION_PAGE_DEFAULT
    );
}

#[tokio::test]
async fn the_memory_store_lists_a_tenants_sessions_in_pages() {
    lists_a_tenants_sessions_in_pages(&lovia_runner::MemoryRunStore::default(), "acme", "globex").await;
}

#[tokio::test]
async fn the_sqlite_store_lists_a_tenants_sessions_in_pages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteRunStore::open(dir.path().join("runs.db")).expect("open");
    lists_a_tenants_sessions_in_pages(&store, "acme", "globex").await;
}

#[tokio::test]
async fn the_postgres_store_lists_a_tenants_sessions_in_pages() {
    let Some(url) = lovia_tests::parts::postgres_url() else { return };
    let store = lovia_runner::PostgresRunStore::open(&url).await.expect("connect");
    // The database outlives the test: tenants of their own.
    let (tenant, other) = (lovia_runner::new_id("acme"), lovia_runner::new_id("globex"));
    lists_a_tenants_sessions_in_pages(&store, &tenant, &other).await;
}

/// A file made before sessions had a creation time gets the column, and its
/// sessions count as created when they were last saved.
#[tokio::test]
async fn a_sqlite_file_without_creation_times_is_migrated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("old.db");
    {
        let conn = rusqlite::Connection::open(&path).expect("open");
        conn.execute_batch(
            "CREATE TABLE runs (tenant TEXT NOT NULL, session TEXT NOT NULL, status TEXT NOT NULL,
                 updated_ms INTEGER NOT NULL, checkpoint TEXT NOT NULL, PRIMARY KEY (tenant, session));
             PRAGMA user_version = 2;",
        )
        .expect("old schema");
        let mut old = Checkpoint::new("run_old", "support");
        old.status = RunStatus::Completed;
        let head = serde_json::to_string(&old).expect("head");
        conn.execute("INSERT INTO runs VALUES ('acme', 'old', 'completed', 1000, ?1)", rusqlite::params![head])
            .expect("old row");
    }
    let store = SqliteRunStore::open(&path).expect("open and migrate");
    store.save("acme", "new", &Checkpoint::new("run_new", "support")).await.expect("save");
    let found = store.list("acme", &lovia_runner::SessionPage::default()).await.expect("list");
    let ids: Vec<(&str, i64)> = found.iter().map(|s| (s.session.as_str(), s.created_ms)).collect();
    assert_eq!(ids[1], ("old", 1000), "{ids:?}");
    assert_eq!(ids[0].0, "new");
    assert_eq!(found[1].status, RunStatus::Completed);
    drop(store);
    SqliteRunStore::open(&path).expect("a second open finds the column and adds nothing");
}

/// Two stores (two connections) on one SQLite file, as a service and a
/// second reader or writer of the same file have, save their own sessions at
/// once: every save waits its turn under the busy timeout, and none fails
/// with "database is locked" (a deferred transaction that read before
/// another connection wrote could not upgrade to a write, and failed at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connections_saving_to_one_sqlite_file_never_fail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("runs.db");
    let stores: Vec<SqliteRunStore> = (0..2).map(|_| SqliteRunStore::open(&path).expect("store")).collect();
    let mut saving = tokio::task::JoinSet::new();
    for (n, store) in stores.into_iter().enumerate() {
        saving.spawn(async move {
            let session = format!("s-{n}");
            let mut checkpoint = Checkpoint::new("run_1", "support");
            for i in 0..300 {
                checkpoint.messages.push(message(i));
                store
                    .save("acme", &session, &checkpoint)
                    .await
                    .unwrap_or_else(|e| panic!("save {i} of {session}: {e}"));
                assert!(store.load("acme", &session).await.expect("load").is_some());
            }
        });
    }
    while let Some(done) = saving.join_next().await {
        done.expect("a saving task");
    }
}

/// A store whose database drops the first write of a finished run, as a
/// pooled connection the database dropped in a restart fails once.
struct DropsTheEnd {
    inner: lovia_runner::MemoryRunStore,
    dropped: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl RunStore for DropsTheEnd {
    async fn load(&self, tenant: &str, session: &str) -> Result<Option<Checkpoint>, StoreError> {
        self.inner.load(tenant, session).await
    }
    async fn save(&self, tenant: &str, session: &str, cp: &Checkpoint) -> Result<(), StoreError> {
        let ended = cp.status != RunStatus::Running;
        if ended && !self.dropped.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Database {
                location: "test".into(),
                message: "error communicating with the server: Connection reset by peer".into(),
            });
        }
        self.inner.save(tenant, session, cp).await
    }
    async fn unfinished(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.inner.unfinished().await
    }
    async fn delete(&self, tenant: &str, session: &str) -> Result<bool, StoreError> {
        self.inner.delete(tenant, session).await
    }
    async fn list(
        &self,
        tenant: &str,
        page: &lovia_runner::SessionPage,
    ) -> Result<Vec<lovia_runner::SessionInfo>, StoreError> {
        self.inner.list(tenant, page).await
    }
}

/// How a run ended is written again when its first write fails in the
/// database: a cancelled run whose end was lost read as running, and the
/// next takeover ran on what a person had cancelled (bench/fault-run).
#[tokio::test]
async fn a_runs_end_is_written_again_after_the_database_dropped_it() {
    let store = Arc::new(DropsTheEnd { inner: Default::default(), dropped: Default::default() });
    let (runner, _) = super::runner(Agent::new("a"), vec![ModelReply::text("done")]).await;
    let runner = runner.with_store(store.clone());
    let state = lovia_host::RunState { session_id: Some("s1".into()), ..lovia_host::RunState::default() };
    let result = runner.run_with(Some("go"), state).await.expect("the run completes");
    assert_eq!(result.output, "done");
    assert!(store.dropped.load(std::sync::atomic::Ordering::SeqCst), "the first write of the end was dropped");
    let cp = store.load("", "s1").await.expect("load").expect("a checkpoint");
    assert_eq!(cp.status, RunStatus::Completed);
    assert_eq!(store.unfinished().await.expect("unfinished"), Vec::<(String, String)>::new());
}

/// A schema that PostgreSQL aborts to break a deadlock with another
/// connection's statements is rolled back and run again
/// (`PgPool::run_schema`): a replica restarted under load exited with
/// "deadlock detected" when its `ALTER TABLE … ADD COLUMN IF NOT EXISTS`
/// met the running replicas' queries (bench/fault-run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_aborted_by_a_deadlock_is_run_again() {
    let Some(url) = lovia_tests::parts::postgres_url() else { return };
    let (a, b) = (format!("deadlock_a_{}", std::process::id()), format!("deadlock_b_{}", std::process::id()));
    let pool = lovia_runner::PgPool::connect(&url, 2).await.expect("connect");
    let other = pool.get().await.expect("a connection");
    other
        .batch_execute(&format!("CREATE TABLE IF NOT EXISTS {a} (x int); CREATE TABLE IF NOT EXISTS {b} (x int)"))
        .await
        .expect("tables");
    // The other side holds `b` and will want `a`; the schema takes `a`, then
    // wants `b`: a cycle, which PostgreSQL breaks by aborting the side whose
    // wait began first, the schema.
    other.batch_execute(&format!("BEGIN; LOCK TABLE {b} IN ACCESS SHARE MODE")).await.expect("hold b");
    let schema =
        format!("BEGIN; LOCK TABLE {a} IN ACCESS EXCLUSIVE MODE; LOCK TABLE {b} IN ACCESS EXCLUSIVE MODE; COMMIT;");
    let running = tokio::spawn({
        let pool = pool.clone();
        async move { pool.run_schema(&schema).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // Waits for `a` until PostgreSQL aborts the schema (after its 1 s
    // deadlock_timeout), then gets it and lets `b` go.
    other.batch_execute(&format!("LOCK TABLE {a} IN ACCESS SHARE MODE; COMMIT")).await.expect("the other side goes on");
    running.await.expect("the task").expect("the schema ran again after the deadlock");
    other.batch_execute(&format!("DROP TABLE {a}; DROP TABLE {b}")).await.expect("drop");
}
