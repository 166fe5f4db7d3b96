//! A tenant's quotas across replicas (docs/replicas.md, "Quotas"): its runs
//! in progress and its fuel per minute hold for the tenant as a whole, on
//! real `lovia serve` binaries sharing one PostgreSQL database.

use super::takeover::{chat_config_with, chat_replicas, pending};
use super::{config, fresh_database, kill_all, replicas};
use crate::serve::{Sse, json, request};
use lovia_tests::fixtures;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Starts the scripted refund chat `session` on `addr`; it waits for the
/// refund's approval.
async fn waiting_chat(addr: SocketAddr, session: &str) -> Sse {
    let body = format!(r#"{{"session_id": "{session}", "input": "Refund 90 dollars on A-1002"}}"#);
    let mut sse = Sse::post(addr, "/api/chat", "demo-key", &body).await;
    assert_eq!(sse.status, 200, "{session} on {addr}");
    sse.until("approval_required").await;
    sse
}

/// A new chat's status on `addr`, with its error when refused (the body
/// of a refusal is one JSON object; an admitted chat's stream is not read).
async fn start(addr: SocketAddr, session: &str) -> (u16, serde_json::Value) {
    let body = format!(r#"{{"session_id": "{session}", "input": "Refund 90 dollars on A-1002"}}"#);
    let sse = Sse::post(addr, "/api/chat", "demo-key", &body).await;
    if sse.status == 200 {
        return (200, serde_json::Value::Null);
    }
    let status = sse.status;
    let mut rest = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut sse.into_reader(), &mut rest).await.expect("body");
    (status, json(&rest)["error"].clone())
}

/// `max_concurrent_runs = 2` with three replicas: two runs on A and B, and
/// a third on C is refused exactly as a third on one replica would be. A is
/// killed: its run, taken over, counts once (still two, so C still refuses),
/// and once B's run ends C starts its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrent_runs_holds_across_replicas_and_a_taken_over_run_counts_once() {
    let Some(url) = fresh_database("runs") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = chat_config_with(dir.path(), "max_concurrent_runs = 2\n");
    let mut running = chat_replicas(&config, &url, 3).await;
    let (a, b, c) = (running[0].1, running[1].1, running[2].1);
    let on_a = waiting_chat(a, "s1").await;
    let _on_b = waiting_chat(b, "s2").await;
    let refused = (429, serde_json::json!("too many runs in progress for this tenant"));
    assert_eq!(start(c, "s3").await, refused, "a third run, on a replica running none");
    let (status, body) = request(c, "GET", "/metrics", None, "").await;
    assert_eq!(status, 200);
    assert!(body.contains(r#"lovia_refused_total{tenant="demo",reason="max_concurrent_runs"} 1"#), "{body}");

    let (mut owner, _) = running.remove(0);
    owner.start_kill().expect("SIGKILL");
    owner.wait().await.expect("reaped");
    drop(on_a);
    let killed = Instant::now();
    // s1 is asked again on B or C: two approvals wait on the survivors.
    loop {
        let asked = pending(b).await.len() + pending(c).await.len();
        if asked == 2 {
            break;
        }
        assert!(killed.elapsed() < Duration::from_secs(20), "s1 was not taken over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(start(c, "s3").await, refused, "the taken-over run counts, once");

    let approve = r#"{"session_id": "s2", "call_id": "call_refund", "decision": "approve"}"#;
    assert_eq!(request(b, "POST", "/api/chat/approve", Some("demo-key"), approve).await.0, 200);
    // s2's lease goes when it ends; then there is room for s3.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match start(c, "s3").await {
            (200, _) => break,
            other => assert_eq!(other, refused),
        }
        assert!(Instant::now() < deadline, "s3 never started after s2 ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    kill_all(running).await;
}

/// The tenant's fuel in the shared row of the current minute.
fn minute_fuel(url: &str) -> i64 {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
        let row = client
            .query_one(
                "SELECT fuel FROM lovia_call_minutes WHERE tenant = 'acme' AND minute = date_trunc('minute', now())",
                &[],
            )
            .expect("the minute's row");
        row.get(0)
    })
    .join()
    .expect("query thread")
}

/// The fuel the tenant burned on the replica at `addr` (its metrics).
async fn fuel_used(addr: SocketAddr) -> i64 {
    let (status, body) = request(addr, "GET", "/metrics", None, "").await;
    assert_eq!(status, 200, "{body}");
    let series = "lovia_fuel_used_total{tenant=\"acme\"} ";
    body.lines().find_map(|l| l.strip_prefix(series)).map_or(0, |n| n.trim().parse().expect("a count"))
}

/// `fuel_per_minute` holds for a tenant whose calls are spread over three
/// replicas: with 4,000,000 fuel a minute and 4 calls at once, each call
/// holds 1,000,000 in the shared minute while it runs. Eight cheap `echo`
/// calls all run (each gives its hold back, less what it burned, and the
/// row then holds exactly what the replicas' ledgers say was burned). Then
/// `spin_ms` calls, each burning all it holds: each replica alone would
/// admit four a minute (twelve in all); together they admit what is left
/// of the minute, and the others get 429 `fuel per minute quota exceeded`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuel_per_minute_holds_across_three_replicas() {
    let Some(url) = fresh_database("fuel") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = format!(
        "fuel_per_minute = 4000000\nmax_concurrent_calls = 4\n[[tenants.plugins]]\npath = \"{}\"\n",
        fixtures::DIAGNOSTICS
    );
    let config = config(dir.path(), "metrics_public = true\n", &plugin);
    let running = replicas(&config, &url, 3, &[("RUST_LOG", "warn")]).await;
    // The minute is the database's wall-clock minute: start early in one.
    let second = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() % 60;
    if second > 40 {
        tokio::time::sleep(Duration::from_secs(61 - second)).await;
    }
    let started = Instant::now();
    for i in 0..8 {
        let (status, body) =
            request(running[i % 3].1, "POST", "/api/tools/echo/call", Some("acme-key"), r#"{"text": "x"}"#).await;
        assert_eq!((status, json(&body)["is_error"].clone()), (200, false.into()), "{body}");
    }
    let mut burned = 0;
    for (_, addr) in &running {
        burned += fuel_used(*addr).await;
    }
    assert!(burned > 0, "echo burns some fuel");
    assert_eq!(minute_fuel(&url), burned, "the holds went back and the burn was charged once");
    // A call is admitted while the minute's fuel leaves room for its hold.
    let expected = (0..).take_while(|k| burned + k * 1_000_000 <= 3_000_000).count();
    let (mut ran, mut refused) = (0, 0);
    for i in 0..12 {
        let addr = running[i % 3].1;
        let (status, body) =
            request(addr, "POST", "/api/tools/spin_ms/call", Some("acme-key"), r#"{"ms": 20000}"#).await;
        match status {
            // Stopped by its fuel cap: it burned all it held.
            200 => {
                assert_eq!(json(&body)["is_error"], true, "{body}");
                ran += 1;
            }
            429 => {
                assert_eq!(json(&body)["error"], "fuel per minute quota exceeded", "{body}");
                refused += 1;
            }
            _ => panic!("{status} {body}"),
        }
    }
    println!(
        "8 echo calls burned {burned} fuel; then 12 spinning calls over 3 replicas: {ran} ran, {refused} refused, in {} ms",
        started.elapsed().as_millis()
    );
    assert!(started.elapsed() < Duration::from_secs(19), "the calls must fall in one minute");
    assert_eq!((ran, refused), (expected, 12 - expected));
    assert!(expected >= 3, "echo burned {burned}");
    kill_all(running).await;
}
