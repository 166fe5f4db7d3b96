//! Kill and resume: a run whose process dies mid-turn resumes from its
//! store (SQLite, and PostgreSQL when a server is given). Completed calls
//! are not re-run, never-started calls run, and a pending approval is asked
//! again.

use super::{agent, call, tool_answers};
use lovia_host::exec::RunState;
use lovia_host::{Tool, ToolEvent, ToolOutput};
use lovia_runner::{
    Agent, ModelReply, PostgresRunStore, RunEvent, RunStatus, RunStore, Runner, ScriptedProvider, SqliteRunStore,
    new_id,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// A tool that counts its runs.
fn counter(name: &str, runs: Arc<AtomicU32>) -> Tool {
    Tool::builder(name)
        .invoke(move |_, _| {
            let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
            async move { Ok(ToolOutput::Text(format!("run {n}"))) }
        })
        .expect("tool")
}

async fn desk(counts: &Arc<AtomicU32>, lasts: &Arc<AtomicU32>) -> Agent {
    let mut desk = agent("desk").await;
    desk.tools = vec![counter("count", counts.clone()), counter("last", lasts.clone())];
    desk
}

fn session() -> RunState {
    RunState { session_id: Some("s-1".into()), tenant: Some("acme".into()), ..RunState::default() }
}

#[test]
fn a_run_killed_at_an_approval_resumes_from_sqlite_without_rerunning_completed_calls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("runs.db");
    killed_and_resumed(
        &|| {
            let path = path.clone();
            Box::pin(async move { Arc::new(SqliteRunStore::open(&path).expect("store")) as Arc<dyn RunStore> })
        },
        "acme",
    );
}

/// The same against PostgreSQL: the server `LOVIA_TEST_POSTGRES_URL` names
/// (`scripts/test` starts a throwaway one).
#[test]
fn a_run_killed_at_an_approval_resumes_from_postgres() {
    let Some(url) = lovia_tests::parts::postgres_url() else { return };
    // A tenant of its own, so that reruns against one database never meet.
    let tenant = new_id("tenant");
    killed_and_resumed(
        &|| {
            let url = url.clone();
            Box::pin(async move {
                Arc::new(PostgresRunStore::open(&url).await.expect("postgres store")) as Arc<dyn RunStore>
            })
        },
        &tenant,
    );
}

/// Opens the store under test, on the runtime that awaits it (a PostgreSQL
/// store's connections run there, and die with it as a process's would).
type Open<'a> = &'a dyn Fn() -> lovia_host::BoxFuture<'static, Arc<dyn RunStore>>;

fn killed_and_resumed(open: Open<'_>, tenant: &str) {
    let session =
        || RunState { session_id: Some("s-1".into()), tenant: Some(tenant.to_owned()), ..RunState::default() };
    let (counts, lasts) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let turn = [
        call("c1", "count", "{}"),
        call("c2", "echo", r#"{"text": "component"}"#),
        call("c3", "refund", r#"{"order_id": "A-1002", "amount_cents": 9000}"#),
        call("c4", "last", "{}"),
    ];

    // The first process: it dies (its runtime is dropped) while c3 waits for approval.
    {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let store = open().await;
            let model = Arc::new(ScriptedProvider::new([ModelReply::calls(turn.clone())]));
            let runner = Runner::new(desk(&counts, &lasts).await, model).with_store(store);
            let mut handle = runner.stream_with(Some("refund A-1002".into()), session());
            while let Some(event) = handle.next_event().await {
                if let RunEvent::Tool(ToolEvent::ApprovalRequired { call, ticket }) = event {
                    assert_eq!(call.id, "c3");
                    // Hold the ticket; once the parallel c1 and c2 are saved, die here.
                    let check = open().await;
                    let saved = std::time::Instant::now();
                    while check.load(tenant, "s-1").await.expect("load").is_some_and(|cp| cp.pending_calls.len() > 2) {
                        assert!(saved.elapsed() < std::time::Duration::from_secs(20), "c1 and c2 never completed");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                    std::mem::forget(ticket);
                    break;
                }
            }
        });
        drop(rt);
    }
    assert_eq!(counts.load(Ordering::SeqCst), 1);
    // The second process.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let store = open().await;
        let saved = store.load(tenant, "s-1").await.expect("load").expect("a checkpoint");
        assert_eq!(saved.status, RunStatus::Running);
        let pending: Vec<&str> = saved.pending_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(pending, ["c3", "c4"]);
        assert_eq!(saved.pending_approvals.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["c3"]);
        assert!(store.unfinished().await.expect("unfinished").contains(&(tenant.to_owned(), "s-1".to_owned())));

        // It resumes with no new input.
        let result = {
            let model = Arc::new(ScriptedProvider::new([ModelReply::text("Refunded.")]));
            let runner = Runner::new(desk(&counts, &lasts).await, model.clone()).with_store(store.clone());
            let mut handle = runner.stream_with(None, session());
            let mut asked = Vec::new();
            while let Some(event) = handle.next_event().await {
                if let RunEvent::Tool(ToolEvent::ApprovalRequired { call, ticket }) = event {
                    asked.push(call.id.clone());
                    assert!(ticket.approve());
                }
            }
            assert_eq!(asked, ["c3"], "the pending approval is asked again");
            // The model's one request sees all four calls answered.
            let seen = tool_answers(&model.requests()[0].messages);
            assert_eq!(seen.len(), 4, "{seen:?}");
            handle.result().await.expect("resumed run")
        };
        assert_eq!(result.output, "Refunded.");
        assert_eq!(counts.load(Ordering::SeqCst), 1, "a completed call is not re-run");
        assert_eq!(lasts.load(Ordering::SeqCst), 1, "a never-started call runs once");
        let answers = tool_answers(&result.messages);
        assert!(answers.contains(&("c1".into(), "run 1".into())));
        assert!(answers.contains(&("c2".into(), "component".into())));
        assert!(answers.contains(&("c3".into(), "Refunded 9000 cents on A-1002".into())));
        assert_eq!(store.load(tenant, "s-1").await.expect("load").expect("saved").status, RunStatus::Completed);
        assert!(!store.unfinished().await.expect("unfinished").iter().any(|(t, _)| t == tenant));
        assert!(store.delete(tenant, "s-1").await.expect("delete"));
        assert_eq!(store.load(tenant, "s-1").await.expect("load"), None);
    });
}

#[tokio::test]
async fn a_session_continues_its_transcript_in_the_next_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SqliteRunStore::open(dir.path().join("runs.db")).expect("store"));
    let model = Arc::new(ScriptedProvider::new([ModelReply::text("Hello."), ModelReply::text("Still here.")]));
    let runner = Runner::new(Agent::new("chat"), model.clone()).with_store(store);
    runner.run_with(Some("hi"), session()).await.expect("first");
    let second = runner.run_with(Some("again"), session()).await.expect("second");
    assert_eq!(second.messages.len(), 4, "{:?}", second.messages);
    assert_eq!(model.requests()[1].messages.len(), 3);
}

/// A run whose fence ends (its lease may be another replica's by now)
/// writes nothing more: the checkpoint stays as it was before, for the
/// next owner to resume, instead of recording this run's call result or
/// marking it stopped. Here the tool itself ends the fence as it runs.
#[tokio::test]
async fn a_run_past_its_fence_writes_no_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store: Arc<dyn RunStore> = Arc::new(SqliteRunStore::open(dir.path().join("runs.db")).expect("store"));
    let fence = lovia_host::Fence::until(std::time::Instant::now() + std::time::Duration::from_secs(60));
    let ending = fence.clone();
    let mut desk = agent("desk").await;
    desk.tools = vec![
        Tool::builder("stall")
            .invoke(move |_, _| {
                ending.revoke();
                async { Ok(ToolOutput::Text("stalled past the lease".into())) }
            })
            .expect("tool"),
    ];
    let model = Arc::new(ScriptedProvider::new([ModelReply::calls([call("c1", "stall", "{}")])]));
    let runner = Runner::new(desk, model).with_store(store.clone());
    let mut state = session();
    state.cancel = state.cancel.clone().with_fence(fence);
    let outcome = runner.run_with(Some("go"), state).await;
    assert!(outcome.is_err(), "the run cannot end normally past its fence");
    let saved = store.load("acme", "s-1").await.expect("load").expect("a checkpoint");
    assert_eq!(saved.status, RunStatus::Running, "not marked stopped: the next owner resumes it");
    assert_eq!(saved.pending_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["c1"]);
    assert!(tool_answers(&saved.messages).is_empty(), "no result of this run was written: {:?}", saved.messages);
}

/// The agent of the program tests: `count`, `wait` and `run_code` over them.
async fn programmer(counts: &Arc<AtomicU32>, wait: Tool) -> Agent {
    static ENGINE: std::sync::OnceLock<Arc<lovia_code::CodeEngine>> = std::sync::OnceLock::new();
    let engine = ENGINE
        .get_or_init(|| Arc::new(lovia_code::CodeEngine::new(&lovia_tests::host()).expect("the engine compiles")))
        .clone();
    let tools = vec![counter("count", counts.clone()), wait];
    let code = lovia_code::run_code(engine, &tools, lovia_code::CodeLimits::default()).expect("run_code");
    let mut desk = Agent::new("desk");
    desk.tools = tools.into_iter().chain([code]).collect();
    desk
}

/// A program whose host dies between two of its calls (a replica killed
/// during a takeover's turn) is resumed from the store by another process:
/// the call it completed is answered from the checkpoint's journal, not
/// made again, and the program goes on from there.
#[test]
fn a_program_killed_between_its_calls_resumes_without_repeating_the_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("runs.db");
    let open = || Arc::new(SqliteRunStore::open(&path).expect("store")) as Arc<dyn RunStore>;
    let counts = Arc::new(AtomicU32::new(0));
    let code = "const a = await tools.count({}); const b = await tools.wait({}); return [a, b];";
    let turn = [call("p", "run_code", &serde_json::json!({ "code": code }).to_string())];

    // The first process: `wait` never returns; it dies once `count` is journaled.
    {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let stuck = Tool::builder("wait")
                .invoke(|_, _| async { std::future::pending::<Result<ToolOutput, lovia_host::Failure>>().await })
                .expect("tool");
            let model = Arc::new(ScriptedProvider::new([ModelReply::calls(turn.clone())]));
            let runner = Runner::new(programmer(&counts, stuck).await, model).with_store(open());
            let _handle = runner.stream_with(Some("go".into()), session());
            let (store, since) = (open(), std::time::Instant::now());
            while store.load("acme", "s-1").await.expect("load").is_none_or(|cp| cp.journal.is_empty()) {
                assert!(since.elapsed() < std::time::Duration::from_secs(30), "count was never journaled");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        });
        drop(rt);
    }
    assert_eq!(counts.load(Ordering::SeqCst), 1);

    // The second process resumes the run.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let store = open();
        let saved = store.load("acme", "s-1").await.expect("load").expect("a checkpoint");
        let journaled: Vec<(&str, &str, &str)> =
            saved.journal.iter().map(|j| (j.id.as_str(), j.name.as_str(), j.output.as_str())).collect();
        assert_eq!(journaled, [("p/1", "count", "run 1")]);
        let waits = Tool::builder("wait").invoke(|_, _| async { Ok(ToolOutput::Text("waited".into())) }).expect("tool");
        let model = Arc::new(ScriptedProvider::new([ModelReply::text("Done.")]));
        let runner = Runner::new(programmer(&counts, waits).await, model).with_store(store.clone());
        let result = runner.run_with(None, session()).await.expect("resumed run");
        assert_eq!(counts.load(Ordering::SeqCst), 1, "the completed call is not made again");
        let answers = tool_answers(&result.messages);
        assert_eq!(answers, [("p".to_owned(), r#"["run 1","waited"]"#.to_owned())]);
        let after = store.load("acme", "s-1").await.expect("load").expect("saved");
        assert_eq!(after.status, RunStatus::Completed);
        assert!(after.journal.is_empty(), "a completed call's journal goes with it: {:?}", after.journal);
    });
}

/// A turn's programs journal at most `MAX_JOURNAL_BYTES` of results: the
/// program whose next result would pass it is stopped, saying why, instead
/// of going on with calls a resume could repeat.
#[tokio::test]
async fn a_program_past_the_journal_bound_is_stopped() {
    let big = Tool::builder("big").invoke(|_, _| async { Ok(ToolOutput::Text("x".repeat(150_000))) }).expect("tool");
    let counts = Arc::new(AtomicU32::new(0));
    let code = "for (let i = 0; i < 10; i++) { await tools.big({}); await tools.count({}); } return 'all';";
    let turn = [call("p", "run_code", &serde_json::json!({ "code": code }).to_string())];
    let model = Arc::new(ScriptedProvider::new([ModelReply::calls(turn.to_vec()), ModelReply::text("Done.")]));
    let runner = Runner::new(programmer(&counts, big).await, model);
    let result = runner.run_with(Some("go"), session()).await.expect("run");
    let answers = tool_answers(&result.messages);
    assert!(answers[0].1.contains("the results of its calls passed 1,048,576 bytes"), "{:?}", answers);
    // Six rounds fit (about 900 KB); the seventh `big` passes the bound, and no `count` runs after it.
    assert_eq!(counts.load(Ordering::SeqCst), 6);
}
