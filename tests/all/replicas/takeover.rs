//! Runs moving between replicas (docs/replicas.md, "Run ownership"): real
//! `lovia serve` binaries on one PostgreSQL database, with short leases so
//! that a takeover happens within seconds.

use super::{fresh_database, kill_all};
use crate::cli::{SCRIPTED_REFUND, spawn_serve_with};
use crate::serve::{IdSse, Sse, json, request};
use lovia_tests::fixtures;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::process::Child;

/// The lease and poll times of these tests, in ms: a takeover waits at
/// most the lease plus one poll.
pub(super) const LEASE_MS: u64 = 2_000;
pub(super) const RENEW_MS: u64 = 500;
pub(super) const POLL_MS: u64 = 500;

/// A config with tenant `demo` (key `demo-key`), the orders plugin (its
/// `refund` of more than 5000 cents needs approval) and public metrics,
/// which count each tool's calls per replica.
fn chat_config(dir: &Path) -> PathBuf {
    chat_config_with(dir, "")
}

/// [`chat_config`] with `extra` among the tenant's settings.
pub(super) fn chat_config_with(dir: &Path, extra: &str) -> PathBuf {
    config_with_agent(dir, r#"{ name = "support" }"#, extra)
}

/// [`chat_config_with`] whose tenant's agent table is `agent`.
fn config_with_agent(dir: &Path, agent: &str, extra: &str) -> PathBuf {
    config_with_plugin(dir, agent, extra, fixtures::ORDERS)
}

/// The config of these tests with the tenant's agent table `agent`, `extra`
/// among its settings and the plugin at `plugin`.
pub(super) fn config_with_plugin(dir: &Path, agent: &str, extra: &str, plugin: &str) -> PathBuf {
    let path = dir.join("serve.toml");
    std::fs::write(
        &path,
        format!(
            "metrics_public = true\n[[tenants]]\nname = \"demo\"\napi_keys = [\"{}\"]\nagent = {agent}\n\
             {extra}[[tenants.plugins]]\npath = \"{}\"\n",
            lovia_serve::hash_key("demo-key"),
            plugin,
        ),
    )
    .expect("config");
    path
}

/// `n` replicas playing the scripted refund chat, with the short lease,
/// renewal and poll of these tests.
pub(super) async fn chat_replicas(config: &Path, url: &str, n: usize) -> Vec<(Child, SocketAddr)> {
    replicas_playing(config, url, n, SCRIPTED_REFUND[1].1).await
}

/// `n` replicas whose scripted model plays `script`, with the short lease,
/// renewal and poll of these tests.
async fn replicas_playing(config: &Path, url: &str, n: usize, script: &str) -> Vec<(Child, SocketAddr)> {
    let flags = [
        "--run-lease-ms",
        &LEASE_MS.to_string(),
        "--lease-renew-ms",
        &RENEW_MS.to_string(),
        "--poll-interval-ms",
        &POLL_MS.to_string(),
    ]
    .map(|s| s.to_owned());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let env = [("LOVIA_PROVIDER", "scripted"), ("LOVIA_SCRIPT", script), ("RUST_LOG", "warn")];
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(spawn_serve_with(config, Path::new(url), &env, &flags).await);
    }
    out
}

/// The call ids `GET /api/approvals` on `addr` shows pending.
pub(super) async fn pending(addr: SocketAddr) -> Vec<String> {
    let (status, body) = request(addr, "GET", "/api/approvals", Some("demo-key"), "").await;
    assert_eq!(status, 200, "{body}");
    let body = json(&body);
    body["approvals"]
        .as_array()
        .expect("approvals")
        .iter()
        .map(|a| a["call_id"].as_str().expect("id").to_owned())
        .collect()
}

/// The replica of `running` that asks `call_id`'s approval again after its
/// run's owner was killed at `killed`, and how long that took; fails past
/// the lease plus one poll, with margin.
async fn taken_over(running: &[(Child, SocketAddr)], call_id: &str, killed: Instant) -> (SocketAddr, Duration) {
    let limit = Duration::from_millis(LEASE_MS + POLL_MS) + Duration::from_secs(8);
    loop {
        let mut found = None;
        for (_, addr) in running {
            if pending(*addr).await == [call_id] {
                found = Some(*addr);
            }
        }
        if let Some(addr) = found {
            return (addr, killed.elapsed());
        }
        assert!(killed.elapsed() < limit, "no replica asked {call_id} again within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many calls of `tool` the replica at `addr` has run (its metrics).
async fn calls_run(addr: SocketAddr, tool: &str) -> u64 {
    let (status, body) = request(addr, "GET", "/metrics", None, "").await;
    assert_eq!(status, 200, "{body}");
    let series = format!("lovia_calls_total{{tenant=\"demo\",tool=\"{tool}\"}} ");
    body.lines().find_map(|l| l.strip_prefix(&series)).map_or(0, |n| n.trim().parse().expect("a count"))
}

/// The owner of a run is killed with SIGKILL while a call waits for its
/// approval: another replica takes the run over once the lease has expired
/// (within the lease plus one poll, with margin), asks the approval again
/// (`GET /api/approvals` there shows it), and approving it there completes
/// the run. The completed `lookup_order` is not run again (the surviving
/// replicas' call counts show no run of it), and every call id is answered
/// exactly once in the transcript, which all the survivors serve alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_owners_run_is_taken_over_and_completes_without_rerunning_calls() {
    let Some(url) = fresh_database("takeover") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = chat_config(dir.path());
    let mut running = chat_replicas(&config, &url, 3).await;
    let a = running[0].1;
    let body = r#"{"session_id": "s1", "input": "Refund 90 dollars on A-1002"}"#;
    let mut sse = Sse::post(a, "/api/chat", "demo-key", body).await;
    assert_eq!(sse.status, 200);
    // The two calls run side by side: the lookup completes while the
    // refund waits for its approval.
    let mut seen = sse.until("approval_required").await;
    if !seen.iter().any(|(n, d)| n == "tool_result" && d["id"] == "call_lookup") {
        seen.extend(sse.until("tool_result").await);
    }
    assert!(seen.iter().any(|(n, d)| n == "tool_result" && d["id"] == "call_lookup"), "{seen:?}");
    assert_eq!(calls_run(a, "lookup_order").await, 1, "A ran the lookup");
    assert_eq!(pending(a).await, ["call_refund"]);
    // The lookup's result is in the checkpoint before A dies.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = request(a, "GET", "/api/chat/s1", Some("demo-key"), "").await;
        let saved =
            json(&body)["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["tool_call_id"] == "call_lookup"));
        if saved {
            break;
        }
        assert!(Instant::now() < deadline, "the lookup's result was never saved: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // While A lives, B does not run A's run: it only reads it.
    let mut on_b = Sse::post(running[1].1, "/api/chat", "demo-key", r#"{"session_id": "s1"}"#).await;
    let read = on_b.until("approval_required").await;
    assert_eq!(read[..], seen[..read.len()], "B reads A's events");
    assert_eq!(pending(running[1].1).await, Vec::<String>::new(), "and asks nothing itself");

    let (mut owner, _) = running.remove(0);
    owner.start_kill().expect("SIGKILL");
    owner.wait().await.expect("reaped");
    drop(sse);
    let (taker, took) = taken_over(&running, "call_refund", Instant::now()).await;
    println!(
        "SIGKILL of the owner to the approval asked again on another replica: {} ms (lease {LEASE_MS} ms, poll {POLL_MS} ms)",
        took.as_millis()
    );
    for (_, addr) in &running {
        assert_eq!(pending(*addr).await.len(), usize::from(*addr == taker), "exactly one owner");
    }
    // B's reader, attached before the kill, goes on with the new owner's events.
    let again = on_b.until("approval_required").await;
    assert_eq!(again.last().expect("asked").1["id"], "call_refund", "{again:?}");

    let mut sse = Sse::post(taker, "/api/chat", "demo-key", r#"{"session_id": "s1"}"#).await;
    assert_eq!(sse.status, 200);
    let asked = sse.until("approval_required").await;
    assert_eq!(asked.last().expect("asked").1["id"], "call_refund");
    let approve = r#"{"session_id": "s1", "call_id": "call_refund", "decision": "approve"}"#;
    let (status, body) = request(taker, "POST", "/api/chat/approve", Some("demo-key"), approve).await;
    assert_eq!(status, 200, "{body}");
    let rest = sse.rest().await;
    let (name, data) = rest.last().expect("the end");
    assert_eq!(name, "run_completed", "{rest:?}");
    assert_eq!(data["output"], "I looked up A-1002 and refunded $90.00 for the damaged item.");
    assert_eq!(on_b.rest().await.last().map(|e| e.0.clone()), Some("run_completed".to_owned()));

    // No completed call ran again; the approved one ran once.
    let mut lookups = 0;
    let mut refunds = 0;
    for (_, addr) in &running {
        lookups += calls_run(*addr, "lookup_order").await;
        refunds += calls_run(*addr, "refund").await;
    }
    assert_eq!((lookups, refunds), (0, 1), "the survivors ran only the refund");
    let mut transcripts = Vec::new();
    for (_, addr) in &running {
        let (status, body) = request(*addr, "GET", "/api/chat/s1", Some("demo-key"), "").await;
        assert_eq!(status, 200, "{body}");
        transcripts.push(json(&body));
    }
    let messages = transcripts[0]["messages"].as_array().expect("messages").clone();
    let mut answered: Vec<&str> = messages.iter().filter_map(|m| m["tool_call_id"].as_str()).collect();
    answered.sort();
    assert_eq!(answered, ["call_lookup", "call_refund"], "each call answered exactly once: {messages:?}");
    assert_eq!(transcripts[0]["status"], "completed");
    assert!(transcripts.iter().all(|t| *t == transcripts[0]), "the survivors serve one transcript");
    kill_all(running).await;
}

/// A chat's stream on `addr` (the demo tenant), after `last_id` when given.
async fn open(addr: SocketAddr, body: &str, last_id: Option<u64>) -> IdSse {
    let (status, events) = IdSse::post(addr, "demo-key", body, last_id.map(|id| id.to_string()).as_deref()).await;
    assert_eq!(status, 200);
    events
}

/// A chat started on replica A is read on B (from the start, and again
/// after a reader there leaves and comes back through C with its
/// `Last-Event-ID`), approved through C, and completes: every reader gets
/// the same events with the same ids, with no gap and no duplicate, and the
/// transcript is the same from every replica. A second run on A is
/// cancelled through B. The poll is a minute here, so only notifications
/// can carry the events and the orders in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_started_on_a_is_read_on_b_and_approved_on_c() {
    let Some(url) = fresh_database("relay") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = chat_config(dir.path());
    let env: Vec<(&str, &str)> = SCRIPTED_REFUND.iter().copied().chain([("RUST_LOG", "warn")]).collect();
    let mut running = Vec::new();
    for _ in 0..3 {
        running.push(spawn_serve_with(&config, Path::new(&url), &env, &["--poll-interval-ms", "60000"]).await);
    }
    let (a, b, c) = (running[0].1, running[1].1, running[2].1);
    let start = r#"{"session_id": "s1", "input": "Refund 90 dollars on A-1002"}"#;
    let attach = r#"{"session_id": "s1"}"#;
    let mut on_a = open(a, start, None).await;
    let asked = on_a.until("approval_required").await;

    // Read on B: the same events, ids and all.
    let mut on_b = open(b, attach, None).await;
    assert_eq!(on_b.take(asked.len()).await, asked, "B replays A's events");
    // A reader that leaves after two events and comes back through C.
    let mut leaving = open(b, attach, None).await;
    let first_two = leaving.take(2).await;
    drop(leaving);
    let cursor = first_two[1].0.expect("an id");
    let mut on_c = open(c, attach, Some(cursor)).await;
    assert_eq!(on_c.take(asked.len() - 2).await, asked[2..], "C goes on after the cursor");
    // A new chat on a session another replica runs is refused.
    let (status, body) = request(b, "POST", "/api/chat", Some("demo-key"), start).await;
    assert_eq!(status, 409, "{body}");

    // Orders: one for no pending call, one for a session nobody runs, the real one.
    let wrong = r#"{"session_id": "s1", "call_id": "call_nope", "decision": "approve"}"#;
    let (status, body) = request(c, "POST", "/api/chat/approve", Some("demo-key"), wrong).await;
    assert_eq!(status, 404, "{body}");
    let nobody = r#"{"session_id": "s9", "call_id": "call_refund", "decision": "approve"}"#;
    assert_eq!(request(c, "POST", "/api/chat/approve", Some("demo-key"), nobody).await.0, 404);
    let approve = r#"{"session_id": "s1", "call_id": "call_refund", "decision": "approve"}"#;
    let sent = Instant::now();
    let (status, body) = request(c, "POST", "/api/chat/approve", Some("demo-key"), approve).await;
    println!("approve on C for A's run answered in {} ms", sent.elapsed().as_millis());
    assert_eq!((status, json(&body)), (200, serde_json::json!({"ok": true})));

    let rest_a = on_a.rest().await;
    assert_eq!(rest_a.last().expect("the end").1, "run_completed", "{rest_a:?}");
    let refund = rest_a.iter().find(|(_, n, d)| n == "tool_result" && d["id"] == "call_refund").expect("refunded");
    assert_eq!(refund.2["is_error"], false, "{refund:?}");
    let followed = Instant::now();
    assert_eq!(on_b.rest().await, rest_a, "B follows to the end");
    assert_eq!(on_c.rest().await, rest_a, "C follows to the end");
    println!("B and C had the last event {} ms after A", followed.elapsed().as_millis());
    let all: Vec<u64> = asked.iter().chain(&rest_a).map(|e| e.0.expect("an id")).collect();
    assert_eq!(all, (all[0]..all[0] + all.len() as u64).collect::<Vec<_>>(), "ids without a gap");

    let mut transcripts = Vec::new();
    for addr in [a, b, c] {
        let (status, body) = request(addr, "GET", "/api/chat/s1", Some("demo-key"), "").await;
        assert_eq!(status, 200, "{body}");
        transcripts.push(json(&body));
    }
    assert_eq!(transcripts[0]["status"], "completed");
    assert!(transcripts.iter().all(|t| *t == transcripts[0]), "{transcripts:?}");

    // A second run on A, cancelled through B.
    let mut on_a = open(a, r#"{"session_id": "s2", "input": "Refund 90 dollars"}"#, None).await;
    on_a.until("approval_required").await;
    let (status, body) = request(b, "POST", "/api/chat/cancel", Some("demo-key"), r#"{"session_id": "s2"}"#).await;
    assert_eq!(status, 200, "{body}");
    let rest = on_a.rest().await;
    assert!(!rest.iter().any(|(_, n, _)| n == "run_completed"), "cancelled: {rest:?}");
    kill_all(running).await;
}

/// SIGTERM hands the runs back: the stopping replica releases its leases
/// at once and notifies the others, so one takes the run over well before
/// the lease (30 s here) would have expired, and the approval is asked there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_the_runs_back_at_once() {
    let Some(url) = fresh_database("handback") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = chat_config(dir.path());
    let env: Vec<(&str, &str)> = SCRIPTED_REFUND.iter().copied().chain([("RUST_LOG", "warn")]).collect();
    let flags = ["--run-lease-ms", "30000", "--poll-interval-ms", "60000", "--drain-secs", "10"];
    let mut running = Vec::new();
    for _ in 0..2 {
        running.push(spawn_serve_with(&config, Path::new(&url), &env, &flags).await);
    }
    let mut sse =
        Sse::post(running[0].1, "/api/chat", "demo-key", r#"{"session_id": "s1", "input": "Refund 90 dollars"}"#).await;
    sse.until("approval_required").await;
    let (mut owner, _) = running.remove(0);
    let pid = owner.id().expect("pid").to_string();
    let signalled = Instant::now();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
    // The stream on A ends, saying why, rather than hold the drain.
    let rest = sse.rest().await;
    assert_eq!(rest.last().map(|(n, d)| (n.as_str(), d["type"].clone())), Some(("error", "handed_over".into())));
    let b = running[0].1;
    while pending(b).await != ["call_refund"] {
        assert!(signalled.elapsed() < Duration::from_secs(10), "B did not take the run over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("SIGTERM on A to the approval asked again on B: {} ms (lease 30 s)", signalled.elapsed().as_millis());
    let status = tokio::time::timeout(Duration::from_secs(15), owner.wait()).await.expect("exits").expect("status");
    assert!(status.success(), "{status:?}");
    println!("SIGTERM to exit with a run handed back: {} ms", signalled.elapsed().as_millis());
    let approve = r#"{"session_id": "s1", "call_id": "call_refund", "decision": "approve"}"#;
    assert_eq!(request(b, "POST", "/api/chat/approve", Some("demo-key"), approve).await.0, 200);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = request(b, "GET", "/api/chat/s1", Some("demo-key"), "").await;
        if json(&body)["status"] == "completed" {
            break;
        }
        assert!(Instant::now() < deadline, "the run did not complete on B: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    kill_all(running).await;
}

/// The takeover time at the default intervals (`run_lease_ms` 10,000,
/// `lease_renew_ms` 3,000, `poll_interval_ms` 2,000): SIGKILL of the owner
/// of a run waiting for an approval, to the approval asked again on the
/// other replica. Ignored by default (it takes about 12 s); docs/replicas.md
/// has its figure and command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: about 12 s at the default intervals"]
async fn takeover_time_at_the_default_intervals() {
    let Some(url) = fresh_database("takeover_defaults") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = chat_config(dir.path());
    let env: Vec<(&str, &str)> = SCRIPTED_REFUND.iter().copied().chain([("RUST_LOG", "warn")]).collect();
    let mut running = Vec::new();
    for _ in 0..2 {
        running.push(spawn_serve_with(&config, Path::new(&url), &env, &[]).await);
    }
    let body = r#"{"session_id": "s1", "input": "Refund 90 dollars on A-1002"}"#;
    let mut sse = Sse::post(running[0].1, "/api/chat", "demo-key", body).await;
    sse.until("approval_required").await;
    let (mut owner, _) = running.remove(0);
    owner.start_kill().expect("SIGKILL");
    owner.wait().await.expect("reaped");
    let killed = Instant::now();
    let b = running[0].1;
    while pending(b).await != ["call_refund"] {
        assert!(killed.elapsed() < Duration::from_secs(30), "B did not take the run over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = killed.elapsed();
    println!(
        "at the default intervals, SIGKILL of the owner to the approval asked again on B: {} ms",
        took.as_millis()
    );
    // At most the lease (10 s) plus a poll (2 s); at least the lease less a renewal (7 s).
    assert!(took >= Duration::from_secs(6) && took < Duration::from_secs(20), "{took:?}");
    kill_all(running).await;
}

/// A program's completed nested calls survive its owner's death (issue 50):
/// the owner is killed with SIGKILL while the program's refund waits for
/// its approval; the replica that takes the run over runs the program again
/// from its start, answers its lookup from the checkpoint's journal instead
/// of running it (the survivors' call counts show no lookup), asks the
/// refund's approval again, and approving it there completes the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_owners_program_resumes_without_rerunning_its_completed_calls() {
    let Some(url) = fresh_database("takeover_program") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let program = r#"
        const order = await tools.lookup_order({ order_id: "A-1002" });
        return await tools.refund({ order_id: order.id, amount_cents: 9000, reason: "damaged" });
    "#;
    let script = dir.path().join("script.json");
    let replies = serde_json::json!([
        {"tool_calls": [{"id": "p1", "name": "run_code", "arguments": serde_json::json!({"code": program}).to_string()}]},
        {"content": "Refunded."}
    ]);
    std::fs::write(&script, replies.to_string()).expect("script");
    let config = config_with_agent(dir.path(), r#"{ name = "support", code_mode = true }"#, "");
    let mut running = replicas_playing(&config, &url, 3, &script.display().to_string()).await;
    let a = running[0].1;
    let body = r#"{"session_id": "s1", "input": "Refund 90 dollars on A-1002"}"#;
    let mut sse = Sse::post(a, "/api/chat", "demo-key", body).await;
    assert_eq!(sse.status, 200);
    let seen = sse.until("approval_required").await;
    assert_eq!(seen.last().expect("asked").1["id"], "p1/2", "{seen:?}");
    assert_eq!(calls_run(a, "lookup_order").await, 1, "A ran the lookup");
    let (mut owner, _) = running.remove(0);
    owner.start_kill().expect("SIGKILL");
    owner.wait().await.expect("reaped");
    drop(sse);

    let (taker, _) = taken_over(&running, "p1/2", Instant::now()).await;
    let mut sse = Sse::post(taker, "/api/chat", "demo-key", r#"{"session_id": "s1"}"#).await;
    let approve = r#"{"session_id": "s1", "call_id": "p1/2", "decision": "approve"}"#;
    let (status, body) = request(taker, "POST", "/api/chat/approve", Some("demo-key"), approve).await;
    assert_eq!(status, 200, "{body}");
    let rest = sse.rest().await;
    assert_eq!(rest.last().expect("the end").0, "run_completed", "{rest:?}");
    let mut lookups = 0;
    let mut refunds = 0;
    for (_, addr) in &running {
        lookups += calls_run(*addr, "lookup_order").await;
        refunds += calls_run(*addr, "refund").await;
    }
    assert_eq!((lookups, refunds), (0, 1), "the survivors ran only the refund");
    let (_, body) = request(taker, "GET", "/api/chat/s1", Some("demo-key"), "").await;
    let messages = json(&body)["messages"].as_array().cloned().unwrap_or_default();
    let program_result: Vec<&str> =
        messages.iter().filter(|m| m["tool_call_id"] == "p1").filter_map(|m| m["content"].as_str()).collect();
    assert_eq!(program_result, ["Refunded 9000 cents on A-1002 (damaged)"], "{messages:?}");
    kill_all(running).await;
}
