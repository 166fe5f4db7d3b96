//! A replica that loses its database for a while (docs/replicas.md,
//! "Faults"): its store reached through a proxy in this test that can cut
//! every connection, as bench/fault-run's proxies do.

use super::fresh_database;
use crate::cli::spawn_serve_with;
use crate::serve::{Sse, json, request};
use lovia_tests::fixtures;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

/// A TCP proxy to the test's PostgreSQL server (on its Unix socket, or a
/// TCP address) that can cut every connection and refuse new ones.
struct CutProxy {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    cuts: watch::Sender<u64>,
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

impl CutProxy {
    async fn to(url: &str) -> CutProxy {
        let host = url.split_once('@').expect("a user in the URL").1.split('/').next().expect("a host").to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let cut = Arc::new(AtomicBool::new(false));
        let (cuts, _) = watch::channel(0u64);
        let (refusing, cuts_seen) = (cut.clone(), cuts.subscribe());
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else { return };
                if refusing.load(Ordering::SeqCst) {
                    continue;
                }
                let server: Box<dyn Stream> = match host.strip_prefix("%2F") {
                    Some(_) => {
                        let (dir, port) = host.rsplit_once(':').unwrap_or((host.as_str(), "5432"));
                        let socket = format!("{}/.s.PGSQL.{port}", dir.replace("%2F", "/"));
                        Box::new(tokio::net::UnixStream::connect(socket).await.expect("the server's socket"))
                    }
                    None => Box::new(tokio::net::TcpStream::connect(&host).await.expect("the server")),
                };
                let mut cuts = cuts_seen.clone();
                // Only a cut after this connection was made closes it.
                cuts.borrow_and_update();
                tokio::spawn(async move {
                    let (mut client, mut server) = (client, server);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cuts.changed() => {}
                    }
                });
            }
        });
        CutProxy { addr, cut, cuts }
    }

    /// `url` with its host replaced by this proxy.
    fn url(&self, url: &str) -> String {
        let (user, rest) = url.split_once('@').expect("a user");
        let path = rest.split_once('/').map(|(_, p)| p).unwrap_or("");
        format!("{user}@{}/{path}", self.addr)
    }

    /// Closes every connection and refuses new ones until [`CutProxy::heal`].
    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.cuts.send_modify(|n| *n += 1);
    }

    fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// A run stopped because its store failed, whose lease could not be
/// released either (the database was gone), is taken over from its
/// checkpoint once the database is back and the lease has expired: the
/// call that was in flight runs again and the run completes. bench/fault-run
/// found the opposite: the replica went on renewing every lease it owned,
/// that of the stopped run too, so no replica ever resumed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stopped_by_its_store_is_taken_over_once_the_store_is_back() {
    let Some(url) = fresh_database("store_loss") else { return };
    let proxy = CutProxy::to(&url).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = super::takeover::config_with_plugin(dir.path(), r#"{ name = "support" }"#, "", fixtures::DIAGNOSTICS);
    // One call that takes 1.5 s, long enough to lose the database under it.
    let script = dir.path().join("script.json");
    let call = r#"{"id": "call_sleep", "name": "sleep_ms", "arguments": "{\"ms\": 1500}"}"#;
    std::fs::write(&script, format!(r#"[{{"tool_calls": [{call}]}}, {{"text": "slept"}}]"#)).expect("script");
    // A lease long beside the cut, so that the renewals come back within
    // it once the database does: only a lease nobody renews ends.
    let flags = ["--run-lease-ms", "20000", "--lease-renew-ms", "500", "--poll-interval-ms", "500"];
    let env =
        [("LOVIA_PROVIDER", "scripted"), ("LOVIA_SCRIPT", script.to_str().expect("a path")), ("RUST_LOG", "warn")];
    let (_replica, addr) = spawn_serve_with(&config, std::path::Path::new(&proxy.url(&url)), &env, &flags).await;
    let mut sse = Sse::post(addr, "/api/chat", "demo-key", r#"{"session_id": "s1", "input": "sleep"}"#).await;
    assert_eq!(sse.status, 200);
    sse.until("tool_call").await;

    // The database goes while the call sleeps: the checkpoint after it
    // cannot be written, nor the lease released.
    proxy.cut();
    let rest = sse.rest().await;
    let (name, data) = rest.last().expect("an event");
    assert_eq!((name.as_str(), data["type"].as_str()), ("error", Some("store")), "{rest:?}");

    // The run's end flushes its events (at most 5 s) and then tries to
    // release its lease: both while the database is still gone.
    tokio::time::sleep(Duration::from_secs(6)).await;
    proxy.heal();
    let healed = Instant::now();
    // The rest of the lease, a poll, the call again, and a margin.
    let limit = Duration::from_millis(20_000 + 500 + 1_500) + Duration::from_secs(8);
    loop {
        let (status, body) = request(addr, "GET", "/api/chat/s1", Some("demo-key"), "").await;
        if status == 200 && json(&body)["status"] == "completed" {
            break;
        }
        assert!(healed.elapsed() < limit, "the stopped run was not resumed and completed within {limit:?}: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("store back to the stopped run completed elsewhere: {} ms", healed.elapsed().as_millis());
}

/// An approval posted to a replica that does not own the run is stored as
/// an order; when that replica then loses the database while it waits for
/// the owner's outcome, it answers 202 `queued` (the order stands, and the
/// owner applies it), not 503: bench/fault-run saw a client told "the run
/// store is unreachable" for an approval the owner had applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_stored_before_the_database_went_is_answered_queued() {
    let Some(url) = fresh_database("order_loss") else { return };
    let proxy = CutProxy::to(&url).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = super::takeover::chat_config_with(dir.path(), "");
    let mut running = super::takeover::chat_replicas(&config, &url, 1).await;
    running.extend(super::takeover::chat_replicas(&config, &proxy.url(&url), 1).await);
    let (owner, other) = (running[0].1, running[1].1);
    let body = r#"{"session_id": "s1", "input": "Refund 90 dollars on A-1002"}"#;
    let mut sse = Sse::post(owner, "/api/chat", "demo-key", body).await;
    assert_eq!(sse.status, 200);
    sse.until("approval_required").await;

    // The owner is frozen, so the order waits; meanwhile the other replica
    // loses its database.
    let pid = running[0].0.id().expect("a pid");
    super::fencing::signal(pid, "STOP");
    let approve = r#"{"session_id": "s1", "call_id": "call_refund", "decision": "approve"}"#;
    let posted =
        tokio::spawn(async move { request(other, "POST", "/api/chat/approve", Some("demo-key"), approve).await });
    // Cut once the order is stored (read past the proxy).
    let direct = url.clone();
    std::thread::spawn(move || {
        let mut db = postgres::Client::connect(&direct, postgres::NoTls).expect("connect");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let n: i64 = db.query_one("SELECT count(*) FROM lovia_run_orders", &[]).expect("count").get(0);
            if n > 0 {
                break;
            }
            assert!(Instant::now() < deadline, "the order was never stored");
            std::thread::sleep(Duration::from_millis(10));
        }
    })
    .join()
    .expect("the order is stored");
    proxy.cut();
    let (status, body) = posted.await.expect("the request");
    super::fencing::signal(pid, "CONT");
    assert_eq!((status, json(&body)), (202, serde_json::json!({"ok": true, "queued": true})), "{body}");

    // The owner applies the stored order: the refund runs, the run ends.
    let rest = sse.rest().await;
    assert_eq!(rest.last().map(|e| e.0.as_str()), Some("run_completed"), "{rest:?}");
    proxy.heal();
}

/// A cancel is stored before it is answered, and it holds across a
/// takeover (docs/replicas.md, "Faults"). The run's owner, cut off from its
/// database, cannot store it and answers 503, not 200: bench/fault-run saw
/// a cancel answered 200 lost with the run's end write, and the run's next
/// owner ask its approval again and run on. Sent again to another replica,
/// the cancel is stored and answered; once the owner's lease has expired,
/// the replica that takes the run over ends it without asking anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_is_stored_before_it_is_answered_and_ends_the_run_on_its_next_owner() {
    let Some(url) = fresh_database("cancel_stored") else { return };
    let proxy = CutProxy::to(&url).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = super::takeover::chat_config_with(dir.path(), "");
    let mut running = super::takeover::chat_replicas(&config, &proxy.url(&url), 1).await;
    running.extend(super::takeover::chat_replicas(&config, &url, 1).await);
    let (owner, other) = (running[0].1, running[1].1);
    let body = r#"{"session_id": "s1", "input": "Refund 90 dollars on A-1002"}"#;
    let mut sse = Sse::post(owner, "/api/chat", "demo-key", body).await;
    assert_eq!(sse.status, 200);
    sse.until("approval_required").await;

    proxy.cut();
    let cancel = r#"{"session_id": "s1"}"#;
    let (status, body) = request(owner, "POST", "/api/chat/cancel", Some("demo-key"), cancel).await;
    assert_eq!(status, 503, "a cancel the owner could not store: {body}");
    let (status, body) = request(other, "POST", "/api/chat/cancel", Some("demo-key"), cancel).await;
    // 202 while the order waits for the cut-off owner, or for the next
    // one; 200 when the next owner applied it within the wait.
    assert!(matches!(status, 200 | 202), "{status} {body}");

    // The owner's lease expires (its renewals cannot reach the database):
    // the other replica takes the run over and ends it as cancelled.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = request(other, "GET", "/api/chat/s1", Some("demo-key"), "").await;
        if status == 200 && json(&body)["status"] == "interrupted" {
            break;
        }
        assert!(Instant::now() < deadline, "the cancelled run was not ended by its next owner: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proxy.heal();
    // Its stored events: the next owner's run started, resumed, and asked
    // for no approval.
    let direct = url.clone();
    let events: Vec<(String, serde_json::Value)> = std::thread::spawn(move || {
        let mut db = postgres::Client::connect(&direct, postgres::NoTls).expect("connect");
        db.query("SELECT name, data FROM lovia_run_events WHERE session = 's1' ORDER BY seq", &[])
            .expect("the events")
            .iter()
            .map(|r| (r.get(0), serde_json::from_str(r.get::<_, &str>(1)).expect("JSON")))
            .collect()
    })
    .join()
    .expect("the events are read");
    let resumed = events
        .iter()
        .position(|(name, data)| name == "run_started" && data["resumed"] == serde_json::json!(true))
        .unwrap_or_else(|| panic!("no resumed run: {events:?}"));
    let after: Vec<&str> = events[resumed..].iter().map(|(name, _)| name.as_str()).collect();
    assert!(!after.contains(&"approval_required"), "the next owner asked the approval again: {after:?}");
    assert!(!after.contains(&"run_completed"), "{after:?}");
    // And it stays ended: nothing resumes it again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for addr in [owner, other] {
        assert_eq!(super::takeover::pending(addr).await, Vec::<String>::new(), "{addr}");
        let (_, body) = request(addr, "GET", "/api/chat/s1", Some("demo-key"), "").await;
        assert_eq!(json(&body)["status"], "interrupted", "{addr}: {body}");
        // The refund never ran, and the session says it has no result; nor
        // has the lookup, whose result the cut-off owner could not save.
        let session = json(&body);
        let pending: Vec<&str> = session["pending_calls"]
            .as_array()
            .expect("pending calls")
            .iter()
            .map(|c| c["id"].as_str().expect("an id"))
            .collect();
        assert_eq!(pending, ["call_lookup", "call_refund"], "{addr}: {body}");
    }
}
