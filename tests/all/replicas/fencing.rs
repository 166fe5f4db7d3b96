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
fn signal(pid: u32, signal: &str) {
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
