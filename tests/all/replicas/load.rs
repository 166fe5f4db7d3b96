//! A load test of three replicas (docs/replicas.md, "Load"): 200 chats of
//! 10 calls each at once, spread over the three, one replica killed with
//! SIGKILL in the middle. Each call is a real side effect: the `fetch` tool
//! (the hostile fixture, granted this test's loopback origin) POSTs to a
//! counter in this process, which answers each request with a number of its
//! own. So the transcripts say which side effect answered each call, and
//! the counter says how many happened.

use super::fresh_database;
use super::takeover::{POLL_MS, RENEW_MS};
use crate::cli::spawn_serve_with;
use crate::serve::{Sse, json, request};
use lovia_tests::fixtures;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const CHATS: usize = 200;
const CALLS: usize = 10;
/// The lease of this test, in ms: longer than the takeover tests' 2,000,
/// so that a survivor whose renewals lag on a machine this loaded (three
/// replicas, PostgreSQL and 200 chats on 2 cores) is not fenced off its own
/// runs (docs/replicas.md, "Fencing"), which would run their calls again.
const LEASE_MS: u64 = 5_000;

/// The side effects' counter: an HTTP server answering each POST with
/// `effect <n>`, n counting from 1.
pub(super) async fn counter() -> (SocketAddr, Arc<AtomicU64>) {
    let count = Arc::new(AtomicU64::new(0));
    let counted = count.clone();
    let app = axum::Router::new().route(
        "/effect/{k}",
        // The body is read before the answer: hyper closes a connection whose
        // request body is unread, which can reset it before the client has
        // read the answer.
        axum::routing::post(move |_body: axum::body::Bytes| {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            async move { format!("effect {n}") }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("counter") });
    (addr, count)
}

/// The scripted model: call k of every chat (k = 0..10, one a turn) POSTs
/// to `/effect/k`, then the chat ends.
fn script(dir: &Path, counter: SocketAddr) -> std::path::PathBuf {
    let mut replies: Vec<serde_json::Value> = (0..CALLS)
        .map(|k| {
            let arguments = serde_json::json!({"url": format!("http://{counter}/effect/{k}"), "method": "POST", "body": "k"});
            serde_json::json!({"tool_calls": [{"id": format!("call_{k}"), "name": "fetch", "arguments": arguments.to_string()}]})
        })
        .collect();
    replies.push(serde_json::json!({"content": "done"}));
    let path = dir.join("script.json");
    std::fs::write(&path, serde_json::to_string(&replies).expect("json")).expect("script");
    path
}

/// The request that starts chat `session`.
fn body_of(session: &str) -> String {
    format!(r#"{{"session_id": "{session}", "input": "go"}}"#)
}

/// One chat: started on `addr`, read until its end; if its replica dies,
/// waited for on `survivor` until another replica has completed it. Its
/// time from start to completion.
async fn chat(addr: SocketAddr, survivor: SocketAddr, session: String) -> Duration {
    let started = Instant::now();
    let mut sse = Sse::post(addr, "/api/chat", "load-key", &body_of(&session)).await;
    assert_eq!(sse.status, 200, "{session}");
    while let Some((name, data)) = sse.next().await {
        if name == "run_completed" {
            return started.elapsed();
        }
        assert!(name != "error" || data["type"] == "handed_over", "{session}: {data}");
    }
    // The stream ended early: its replica was killed. Another takes the run
    // over within the lease and a poll. A chat whose replica died before it
    // saved the input is not there at all: as a client would, send it again.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut sent_again = false;
    loop {
        let (status, body) = request(survivor, "GET", &format!("/api/chat/{session}"), Some("load-key"), "").await;
        if status == 404 && !sent_again {
            sent_again = true;
            let mut sse = Sse::post(survivor, "/api/chat", "load-key", &body_of(&session)).await;
            assert_eq!(sse.status, 200, "{session} sent again");
            while sse.next().await.is_some() {}
            continue;
        }
        if status == 200 && json(&body)["status"] == "completed" {
            return started.elapsed();
        }
        assert!(Instant::now() < deadline, "{session} was not completed after the kill: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// 3 replicas, 200 chats × 10 calls at once spread over them, replica A
/// killed with SIGKILL once about half the calls have happened. Every chat
/// completes; in every transcript each of the 10 call ids is answered
/// exactly once, by a side effect no other answer names; the side effects
/// beyond the 2,000 answered (calls that ran on A and whose results died
/// with it) are at most one per chat A was running. Prints calls/s and the
/// chats' p50 and p99.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_answer_every_call_once_with_one_killed() {
    let Some(url) = fresh_database("load") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let (counter_addr, effects) = counter().await;
    let script = script(dir.path(), counter_addr);
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "max_connections_per_ip = 1024\n[[tenants]]\nname = \"load\"\napi_keys = [\"{}\"]\n\
             agent = {{ name = \"loader\", max_turns = 20 }}\n\
             max_concurrent_runs = {CHATS}\nmax_concurrent_calls = {CHATS}\ncalls_per_minute = 100000\n\
             [[tenants.plugins]]\npath = \"{}\"\ngrants = {{ http = [\"http://{counter_addr}\"] }}\n",
            lovia_serve::hash_key("load-key"),
            fixtures::HOSTILE,
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
    let script = script.to_str().expect("utf-8").to_owned();
    let env = [("LOVIA_PROVIDER", "scripted"), ("LOVIA_SCRIPT", script.as_str()), ("RUST_LOG", "error")];
    let mut running = Vec::new();
    for _ in 0..3 {
        running.push(spawn_serve_with(&config, Path::new(&url), &env, &flags).await);
    }
    let addrs: Vec<SocketAddr> = running.iter().map(|(_, a)| *a).collect();

    let started = Instant::now();
    let chats: Vec<_> = (0..CHATS)
        .map(|i| {
            // Chat i starts on replica i % 3; a survivor (B) is where it is awaited.
            tokio::spawn(chat(addrs[i % 3], addrs[1 + i % 2], format!("load-{i}")))
        })
        .collect();
    // The kill, once half the side effects have happened.
    while effects.load(Ordering::SeqCst) < (CHATS * CALLS / 2) as u64 {
        assert!(started.elapsed() < Duration::from_secs(120), "the chats made no progress");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (mut killed, _) = running.remove(0);
    killed.start_kill().expect("SIGKILL");
    killed.wait().await.expect("reaped");
    let killed_at = started.elapsed();
    let mut latencies = Vec::new();
    for chat in chats {
        latencies.push(chat.await.expect("a chat"));
    }
    let took = started.elapsed();

    // Every call id of every chat answered exactly once, each answer by a
    // side effect that answers nothing else.
    let mut answers: HashSet<u64> = HashSet::new();
    for i in 0..CHATS {
        let survivor = addrs[1 + i % 2];
        let (status, body) = request(survivor, "GET", &format!("/api/chat/load-{i}"), Some("load-key"), "").await;
        assert_eq!(status, 200, "{body}");
        let transcript = json(&body);
        assert_eq!(transcript["status"], "completed", "load-{i}");
        let messages = transcript["messages"].as_array().expect("messages");
        let mut ids: Vec<&str> = messages.iter().filter_map(|m| m["tool_call_id"].as_str()).collect();
        ids.sort();
        let expected: Vec<String> = (0..CALLS).map(|k| format!("call_{k}")).collect();
        assert_eq!(ids, expected, "load-{i}: each call answered exactly once");
        for m in messages.iter().filter(|m| m["tool_call_id"].is_string()) {
            let text = m["content"].as_str().unwrap_or_else(|| panic!("load-{i}: {m}"));
            let n: u64 = text
                .strip_prefix("200 effect ")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("load-{i}: {text}"));
            assert!(answers.insert(n), "load-{i}: effect {n} answers two calls");
        }
    }
    let happened = effects.load(Ordering::SeqCst);
    let answered = (CHATS * CALLS) as u64;
    assert_eq!(answers.len() as u64, answered);
    assert!(answers.iter().all(|&n| n <= happened), "an answer names no side effect");
    // A runs about a third of the chats, one call at a time each.
    let reran = happened - answered;
    assert!(reran <= (CHATS / 3 + 1) as u64, "{reran} side effects beyond the answered ones");

    latencies.sort();
    let p = |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).saturating_sub(1)];
    println!(
        "{CHATS} chats x {CALLS} calls over 3 replicas, one killed at {:.1} s: {:.1} s, {:.0} calls/s; chat p50 {:.2} s, p99 {:.2} s; {reran} calls ran again after the kill",
        killed_at.as_secs_f64(),
        took.as_secs_f64(),
        answered as f64 / took.as_secs_f64(),
        p(0.50).as_secs_f64(),
        p(0.99).as_secs_f64(),
    );
    super::kill_all(running).await;
}
