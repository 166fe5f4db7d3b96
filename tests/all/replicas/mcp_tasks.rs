//! A tenant's `/mcp` tasks live in the run store (`lovia_mcp_tasks`): a
//! task made on one replica is read, listed and cancelled from a session
//! of another, a task whose replica dies reads as failed there, and a
//! tenant keeps at most `max_mcp_tasks` running ones. The client is the
//! official TypeScript SDK's task client (tests/mcp-fs/task_client.mjs).

use super::fresh_database;
use super::takeover::config_with_plugin;
use crate::cli::spawn_serve_with;
use crate::mcp::tasks::{run_client, task_client};
use lovia_tests::fixtures;
use std::path::Path;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_made_on_one_replica_is_read_and_cancelled_on_another() {
    let Some(script) = task_client() else { return };
    let Some(url) = fresh_database("mcp_tasks") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let config =
        config_with_plugin(dir.path(), r#"{ name = "support" }"#, "max_mcp_tasks = 3\n", fixtures::DIAGNOSTICS);
    let env = [("RUST_LOG", "warn")];
    let (_a, a) = spawn_serve_with(&config, Path::new(&url), &env, &[]).await;
    let (_b, b) = spawn_serve_with(&config, Path::new(&url), &env, &[]).await;
    let (a, b) = (format!("http://{a}/mcp"), format!("http://{b}/mcp"));
    let key = [("LOVIA_KEY", "demo-key")];
    let out = tokio::task::spawn_blocking({
        let (script, a, b) = (script.clone(), a.clone(), b.clone());
        move || run_client(&script, &["replicas".into(), a, b], &key)
    })
    .await
    .expect("the client ran");
    assert_eq!(out["madeOnA"], "working", "{out}");
    assert_eq!(out["resultOnB"], "slept 1500 ms", "{out}");
    assert_eq!(out["listedOnB"], true, "{out}");
    assert_eq!(out["cancelledOnB"], "cancelled", "{out}");
    assert_eq!(out["seenOnA"], "cancelled", "{out}");
    // The bound holds across replicas: three running tasks, then a refusal.
    let out =
        tokio::task::spawn_blocking(move || run_client(&script, &["bound".into(), "http".into(), b, "3".into()], &key))
            .await
            .expect("the client ran");
    assert_eq!(out["kept"], 3, "{out}");
    assert_eq!(out["refused"]["code"], -32600, "{out}");
    assert!(out["refused"]["message"].as_str().is_some_and(|m| m.contains("3 tasks are kept already")), "{out}");
    assert_eq!(out["afterCancels"], "working", "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_replica_died_reads_as_failed_on_another() {
    let Some(script) = task_client() else { return };
    let Some(url) = fresh_database("mcp_task_orphan") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config_with_plugin(dir.path(), r#"{ name = "support" }"#, "", fixtures::DIAGNOSTICS);
    let env = [("RUST_LOG", "warn")];
    let (mut a, a_addr) = spawn_serve_with(&config, Path::new(&url), &env, &[]).await;
    let (_b, b_addr) = spawn_serve_with(&config, Path::new(&url), &env, &[]).await;
    let key = [("LOVIA_KEY", "demo-key")];
    let made = tokio::task::spawn_blocking({
        let script = script.clone();
        move || run_client(&script, &["make".into(), format!("http://{a_addr}/mcp")], &key)
    })
    .await
    .expect("the client ran");
    assert_eq!(made["status"], "working", "{made}");
    let id = made["taskId"].as_str().expect("an id").to_owned();
    a.start_kill().expect("SIGKILL");
    a.wait().await.expect("reaped");
    let killed = std::time::Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        run_client(&script, &["await".into(), format!("http://{b_addr}/mcp"), id], &key)
    })
    .await
    .expect("the client ran");
    assert_eq!(out["status"], "failed", "{out}");
    assert_eq!(out["statusMessage"], "the replica running the task stopped", "{out}");
    assert!(
        out["result"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the replica running the task stopped before the task ended")),
        "{out}"
    );
    // Ten missed renewals of one a second, and the poll.
    assert!(killed.elapsed() < std::time::Duration::from_secs(20), "{:?}", killed.elapsed());
}
