//! The run events a tenant keeps in PostgreSQL for readers on other
//! replicas are bounded per tenant (docs/replicas.md, "Run ownership"):
//! the events of its ended runs past the newest 16 go when it starts a run.

use super::fresh_database;
use crate::cli::spawn_serve_with;
use crate::serve::{Sse, json, request};
use lovia_tests::fixtures;
use std::path::Path;

/// The tenant's sessions with events in the table, by a direct query.
fn stored_sessions(url: &str) -> Vec<String> {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
        let rows = client
            .query("SELECT DISTINCT session FROM lovia_run_events WHERE tenant = 'acme' ORDER BY session", &[])
            .expect("query");
        rows.iter().map(|r| r.get(0)).collect()
    })
    .join()
    .expect("query thread")
}

/// Waits, up to 10 s, until the lease of `session` is gone from the table:
/// a run's stream ends before its events are flushed and its lease is let
/// go, and only then does it count as ended for the pruning.
async fn wait_for_release(url: &str, session: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (url, owned) = (url.to_owned(), session.to_owned());
        let held: i64 = std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
            let row = client
                .query_one("SELECT count(*) FROM lovia_run_leases WHERE tenant = 'acme' AND session = $1", &[&owned])
                .expect("query");
            row.get(0)
        })
        .join()
        .expect("query thread");
        if held == 0 {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the lease of {session} was not let go within 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// 20 chats of one tenant, one after the other, on a replica with a
/// PostgreSQL store: once they have ended, the table holds the events of
/// the newest 17 (the 16 ended runs kept when the last started, and the
/// last), and none of the first three, whose transcripts are still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_stored_events_keep_only_its_newest_ended_runs() {
    let Some(url) = fresh_database("events") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script.json");
    let call = serde_json::json!({"id": "call_echo", "name": "echo", "arguments": r#"{"text": "hi"}"#});
    std::fs::write(&script, serde_json::json!([{"tool_calls": [call]}, {"content": "done"}]).to_string())
        .expect("script");
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[[tenants]]\nname = \"acme\"\napi_keys = [\"{}\"]\nagent = {{ name = \"a\" }}\n\
             [[tenants.plugins]]\npath = \"{}\"\n",
            lovia_serve::hash_key("acme-key"),
            fixtures::DIAGNOSTICS,
        ),
    )
    .expect("config");
    let script = script.to_str().expect("utf-8");
    let env = [("LOVIA_PROVIDER", "scripted"), ("LOVIA_SCRIPT", script), ("RUST_LOG", "warn")];
    let (_replica, addr) = spawn_serve_with(&config, Path::new(&url), &env, &[]).await;
    for i in 0..20 {
        let body = format!(r#"{{"session_id": "s{i:02}", "input": "go"}}"#);
        let mut sse = Sse::post(addr, "/api/chat", "acme-key", &body).await;
        assert_eq!(sse.status, 200);
        let events = sse.rest().await;
        assert_eq!(events.last().map(|e| e.0.as_str()), Some("run_completed"), "{events:?}");
        // The next run prunes the ended ones: this one has ended once its lease is gone.
        wait_for_release(&url, &format!("s{i:02}")).await;
    }
    // The last run's events reach the table before its lease goes: they
    // are all there now.
    let stored = stored_sessions(&url);
    let newest: Vec<String> = (3..20).map(|i| format!("s{i:02}")).collect();
    assert_eq!(stored, newest, "the newest 16 ended runs and the last");
    for i in [0, 19] {
        let (status, body) = request(addr, "GET", &format!("/api/chat/s{i:02}"), Some("acme-key"), "").await;
        assert_eq!((status, json(&body)["status"].clone()), (200, "completed".into()), "{body}");
    }
}

/// A reader on B follows A's run; the run's lease and its events vanish
/// from the table (as when an ended run's events are dropped past the
/// tenant's bound before the reader has read its end). Woken by the
/// notification (the poll is a minute here), B's reader finds no lease and
/// no end: its stream ends with `error` `events_gone` instead of just
/// stopping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_reader_whose_run_ended_without_its_end_stored_is_told() {
    use crate::cli::SCRIPTED_REFUND;
    let Some(url) = fresh_database("events_gone") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = super::takeover::chat_config_with(dir.path(), "");
    let env: Vec<(&str, &str)> = SCRIPTED_REFUND.iter().copied().chain([("RUST_LOG", "warn")]).collect();
    let mut running = Vec::new();
    for _ in 0..2 {
        running.push(spawn_serve_with(&config, Path::new(&url), &env, &["--poll-interval-ms", "60000"]).await);
    }
    let (a, b) = (running[0].1, running[1].1);
    let start = r#"{"session_id": "s1", "input": "Refund 90 dollars on A-1002"}"#;
    let mut on_a = Sse::post(a, "/api/chat", "demo-key", start).await;
    let asked = on_a.until("approval_required").await;
    let mut on_b = Sse::post(b, "/api/chat", "demo-key", r#"{"session_id": "s1"}"#).await;
    assert_eq!(on_b.status, 200);
    assert_eq!(on_b.until("approval_required").await, asked, "B reads A's events");
    let admin = url.clone();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&admin, postgres::NoTls).expect("connect");
        client
            .batch_execute(
                "BEGIN;
                 DELETE FROM lovia_run_leases WHERE session = 's1';
                 DELETE FROM lovia_run_events WHERE session = 's1';
                 NOTIFY lovia_events;
                 COMMIT;",
            )
            .expect("drop the run's lease and events");
    })
    .join()
    .expect("admin thread");
    let rest = on_b.rest().await;
    let (name, data) = rest.last().expect("an event");
    assert_eq!(
        (name.as_str(), &data["type"], &data["fatal"]),
        ("error", &"events_gone".into(), &true.into()),
        "{rest:?}"
    );
    super::kill_all(running).await;
}
