//! Fencing (docs/replicas.md, "Fencing"): a replica stopped with SIGSTOP
//! while its call waits, past its lease, and resumed with SIGCONT after
//! another replica has taken the run over and run the call, does not
//! perform the call's side effect again, and does not overwrite the other
//! replica's checkpoint. The side effect is a real POST to a counter in this
//! process, made by a real component (the slow fixture's `hold_then_post`).

use super::load::counter;
use super::takeover::{LEASE_MS, POLL_MS, RENEW_MS};
use super::{fresh_database, kill_all};
use crate::cli::spawn_serve_with;
use crate::serve::{Sse, json, request};
use lovia_tests::fixtures;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Sends `signal` (`STOP`, `CONT`) to process `pid`.
pub(super) fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status();
    assert!(status.is_ok_and(|s| s.success()), "kill -{signal} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_resumed_after_its_lease_has_no_effect_and_writes_nothing() {
    let Some(url) = fresh_database("fencing") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let (counter_addr, effects) = counter().await;
    // The call waits 3 s, then POSTs: R1 is stopped during the wait.
    let arguments = serde_json::json!({"ms": 3000, "url": format!("http://{counter_addr}/effect/0")});
    let script = serde_json::json!([
        {"tool_calls": [{"id": "call_0", "name": "hold_then_post", "arguments": arguments.to_string()}]},
        {"content": "done"}
    ]);
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, script.to_string()).expect("script");
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[[tenants]]\nname = \"fence\"\napi_keys = [\"{}\"]\nagent = {{ name = \"fencer\" }}\n\
             [[tenants.plugins]]\npath = \"{}\"\ngrants = {{ http = [\"http://{counter_addr}\"] }}\n",
            lovia_serve::hash_key("fence-key"),
            fixtures::SLOW,
        ),
    )
    .expect("config");
    let flags = [
        "--run-lease-ms".to_owned(),
        LEASE_MS.to_string(),
        "--lease-renew-ms".to_owned(),
        RENEW_MS.to_string(),
        "--poll-interval-ms".to_owned(),
        POLL_MS.to_string(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let script_path = script_path.to_str().expect("utf-8").to_owned();
    let env = [("LOVIA_PROVIDER", "scripted"), ("LOVIA_SCRIPT", script_path.as_str()), ("RUST_LOG", "warn")];
    let r1 = spawn_serve_with(&config, Path::new(&url), &env, &flags).await;
    let r2 = spawn_serve_with(&config, Path::new(&url), &env, &flags).await;
    let (r1_addr, r2_addr) = (r1.1, r2.1);
    let r1_pid = r1.0.id().expect("R1's pid");

    // The chat starts on R1; once its call is running, R1 stops.
    let mut sse = Sse::post(r1_addr, "/api/chat", "fence-key", r#"{"session_id": "s", "input": "go"}"#).await;
    assert_eq!(sse.status, 200);
    loop {
        let (name, _) = sse.next().await.expect("R1's stream ended before the call");
        if name == "tool_call" {
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    signal(r1_pid, "STOP");
    let stopped = Instant::now();

    // R2 takes the run over after the lease and runs the call: one effect.
    let deadline = Instant::now() + Duration::from_secs(40);
    let transcript = loop {
        let (status, body) = request(r2_addr, "GET", "/api/chat/s", Some("fence-key"), "").await;
        if status == 200 && json(&body)["status"] == "completed" {
            break json(&body);
        }
        assert!(Instant::now() < deadline, "R2 did not complete the run: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(effects.load(Ordering::SeqCst), 1, "R2's call");
    assert!(stopped.elapsed() > Duration::from_millis(LEASE_MS), "R1 was stopped past its lease");

    // R1 resumes: its call's wait is over, and its POST would be a second effect.
    signal(r1_pid, "CONT");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(effects.load(Ordering::SeqCst), 1, "R1, resumed past its fence, posted again");

    // R2's checkpoint stands: completed, the call answered once by effect 1.
    let (status, body) = request(r2_addr, "GET", "/api/chat/s", Some("fence-key"), "").await;
    assert_eq!(status, 200, "{body}");
    let after = json(&body);
    assert_eq!(after["status"], "completed", "{body}");
    assert_eq!(after["messages"], transcript["messages"], "R1 rewrote the transcript");
    let answers: Vec<&str> = after["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["tool_call_id"] == "call_0")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(answers, ["200 effect 1"], "{body}");
    kill_all(vec![r1, r2]).await;
}

/// The database checks the lease as well as the clock: a checkpoint write
/// made with a lease token that is no longer the run's (another replica
/// took the run over, or the lease was released and taken again later,
/// even by the same replica) writes nothing and is `StoreError::Fenced`.
/// This closes the gap between the clock's check and the write, which the
/// SIGSTOP test above cannot hit on purpose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_write_with_a_lost_lease_is_refused_by_the_database() {
    use lovia_host::LeaseToken;
    use lovia_runner::{Checkpoint, PostgresRunStore, RunStore, StoreError};
    let Some(url) = fresh_database("epoch") else { return };
    // A real replica makes the schema: the run store's and the leases'.
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!("[[tenants]]\nname = \"t\"\napi_keys = [\"{}\"]\n", lovia_serve::hash_key("t-key")),
    )
    .expect("config");
    let replica = spawn_serve_with(&config, Path::new(&url), &[("RUST_LOG", "warn")], &[]).await;
    kill_all(vec![replica]).await;

    // The leases as a replica takes them (lovia serve's `take`), by SQL.
    let sql = url.clone();
    let lease = move |statement: String| -> i64 {
        let sql = sql.clone();
        std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&sql, postgres::NoTls).expect("connect");
            client.query_opt(&statement, &[]).expect("the lease statement").map_or(0, |row| row.get(0))
        })
        .join()
        .expect("sql thread")
    };
    let take_as = |owner: &str| -> String {
        format!(
            "INSERT INTO lovia_run_leases (tenant, session, owner, expires, epoch)
             VALUES ('t', 's', '{owner}', now() + interval '1 minute', nextval('lovia_run_lease_epochs'))
             ON CONFLICT (tenant, session) DO UPDATE SET owner = EXCLUDED.owner, epoch = EXCLUDED.epoch
             RETURNING epoch"
        )
    };
    let store = PostgresRunStore::open(&url).await.expect("store");
    let saved = |run: &str| Checkpoint::new(run, "agent");
    let run_id = async || store.load("t", "s").await.expect("load").expect("a checkpoint").run_id;

    let r1_first = LeaseToken::new("r1", lease(take_as("r1")));
    store.save_fenced("t", "s", &saved("r1-run"), &r1_first).await.expect("the holder writes");
    assert_eq!(run_id().await, "r1-run");

    // R2 takes the run over: R1's write, stale, is refused and changes nothing.
    let r2 = LeaseToken::new("r2", lease(take_as("r2")));
    let stale = store.save_fenced("t", "s", &saved("r1-late"), &r1_first).await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    assert_eq!(run_id().await, "r1-run");
    store.save_fenced("t", "s", &saved("r2-run"), &r2).await.expect("the new holder writes");
    assert_eq!(run_id().await, "r2-run");

    // R2 releases; R1 takes the run again later: its first taking's token
    // is still stale (a new epoch), only the new one writes.
    lease("DELETE FROM lovia_run_leases WHERE tenant = 't' AND session = 's' RETURNING 0::bigint".to_owned());
    let r1_again = LeaseToken::new("r1", lease(take_as("r1")));
    assert_ne!(r1_again, r1_first);
    let stale = store.save_fenced("t", "s", &saved("r1-late"), &r1_first).await;
    assert!(matches!(stale, Err(StoreError::Fenced { .. })), "{stale:?}");
    assert_eq!(run_id().await, "r2-run");
    store.save_fenced("t", "s", &saved("r1-again"), &r1_again).await.expect("the new taking writes");
    assert_eq!(run_id().await, "r1-again");
}
