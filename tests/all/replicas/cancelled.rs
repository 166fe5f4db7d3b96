//! A run a client cancelled stays stopped when a replica (or the single
//! process) starts, until a client resumes it (docs/replicas.md, "Run
//! ownership"). bench/fault-run found starts resuming every cancelled run
//! of every tenant: each held a run slot while its approval waited for
//! nobody, until the tenant's chats were refused with 429.

use super::fresh_database;
use super::takeover::{chat_config_with, chat_replicas, pending};
use crate::cli::{SCRIPTED_REFUND, spawn_serve_with};
use crate::serve::{Sse, json, request};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// Starts chat `s1` on `addr`, waits for its refund's approval, cancels the
/// run and checks that it is `interrupted`.
async fn cancelled_at_its_approval(addr: SocketAddr) {
    let body = r#"{"session_id": "s1", "input": "Refund 90 dollars on A-1002"}"#;
    let mut sse = Sse::post(addr, "/api/chat", "demo-key", body).await;
    assert_eq!(sse.status, 200);
    sse.until("approval_required").await;
    let (status, body) = request(addr, "POST", "/api/chat/cancel", Some("demo-key"), r#"{"session_id": "s1"}"#).await;
    assert_eq!(status, 200, "{body}");
    sse.rest().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while run_status(addr).await != "interrupted" {
        assert!(Instant::now() < deadline, "the cancelled run never read as interrupted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn run_status(addr: SocketAddr) -> String {
    let (status, body) = request(addr, "GET", "/api/chat/s1", Some("demo-key"), "").await;
    assert_eq!(status, 200, "{body}");
    json(&body)["status"].as_str().expect("a status").to_owned()
}

/// For 3 s (six polls of the takeover), nothing at `addrs` resumes `s1`.
async fn stays_stopped(addrs: &[SocketAddr]) {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        for addr in addrs {
            assert_eq!(pending(*addr).await, Vec::<String>::new(), "{addr} asked the cancelled run's approval again");
            assert_eq!(run_status(*addr).await, "interrupted");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A client attaching without input follows the session: a cancelled run
/// is not resumed by it but answered 409, and stays stopped. bench/fault-run
/// found a workload that reattached to follow a run it had cancelled
/// resume it, and the run made its payments.
async fn attached_and_not_resumed(addr: SocketAddr) {
    // While the ended run is still live on its replica (its events flushed,
    // its lease let go) an attach follows it: its events so far, not a
    // resume. Then the stopped run answers 409.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (status, body) = loop {
        let (status, body) = request(addr, "POST", "/api/chat", Some("demo-key"), r#"{"session_id": "s1"}"#).await;
        if status != 200 {
            break (status, body);
        }
        assert!(!body.contains(r#""resumed":true"#), "{addr} resumed the cancelled run: {body}");
        assert!(Instant::now() < deadline, "{addr} still streams the ended run");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (status, json(&body)["error"].as_str()),
        (
            409,
            Some(
                "the session's run was stopped (cancelled, or out of budget); send \"resume\": true without input \
                 to resume it, or input to start a new run"
            )
        ),
        "{body}"
    );
    assert_eq!(run_status(addr).await, "interrupted");
    assert_eq!(pending(addr).await, Vec::<String>::new(), "{addr} asked the cancelled run's approval again");
}

/// A client resumes the run with `"resume": true`: it goes on from its
/// checkpoint (the cancel denied the refund) to its end.
async fn resumed_on_request(addr: SocketAddr) {
    let mut sse = Sse::post(addr, "/api/chat", "demo-key", r#"{"session_id": "s1", "resume": true}"#).await;
    assert_eq!(sse.status, 200);
    let events = sse.rest().await;
    assert_eq!(
        (events[0].0.as_str(), &events[0].1["resumed"]),
        ("run_started", &serde_json::json!(true)),
        "{events:?}"
    );
    assert_eq!(events.last().map(|e| e.0.as_str()), Some("run_completed"), "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_stays_stopped_when_another_replica_starts() {
    let Some(url) = fresh_database("cancelled") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = chat_config_with(dir.path(), "");
    let mut running = chat_replicas(&config, &url, 1).await;
    cancelled_at_its_approval(running[0].1).await;
    running.extend(chat_replicas(&config, &url, 1).await);
    let addrs: Vec<SocketAddr> = running.iter().map(|r| r.1).collect();
    stays_stopped(&addrs).await;
    resumed_on_request(addrs[1]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_attach_follows_a_cancelled_run_and_does_not_resume_it() {
    let Some(url) = fresh_database("plain_attach") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = chat_config_with(dir.path(), "");
    let running = chat_replicas(&config, &url, 2).await;
    cancelled_at_its_approval(running[0].1).await;
    for (_, addr) in &running {
        attached_and_not_resumed(*addr).await;
    }
    stays_stopped(&[running[0].1, running[1].1]).await;
    resumed_on_request(running[1].1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_stays_stopped_when_the_single_process_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = chat_config_with(dir.path(), "");
    let store = dir.path().join("lovia.db");
    let env = [("LOVIA_PROVIDER", "scripted"), ("LOVIA_SCRIPT", SCRIPTED_REFUND[1].1), ("RUST_LOG", "warn")];
    let (mut first, addr) = spawn_serve_with(&config, Path::new(&store), &env, &[]).await;
    cancelled_at_its_approval(addr).await;
    first.start_kill().expect("SIGKILL");
    first.wait().await.expect("reaped");
    let (_second, addr) = spawn_serve_with(&config, Path::new(&store), &env, &[]).await;
    stays_stopped(&[addr]).await;
    attached_and_not_resumed(addr).await;
    resumed_on_request(addr).await;
}
