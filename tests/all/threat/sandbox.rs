//! Sandbox integrity and hygiene: fuel across parallel calls, the compiled
//! artifact cache, userinfo in outbound URLs, special addresses in their
//! IPv6 translated forms, and `wasi:sockets`. (The memory limit over several
//! memories of one instance needs a component with two memories, built
//! from WAT inside lovia-host's unit tests: `sandbox::limits::tests`.)

use lovia_host::plugin::config::PluginConfig;
use lovia_host::sandbox::Grants;
use lovia_host::{CallContext, CallLimits, CallOutcome, CallRequest, Failure, Host, HostConfig, HttpOrigin, Plugin};
use lovia_tests::fixtures;
use lovia_tests::http::Server;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn tenant(name: &str) -> CallContext {
    CallContext { tenant: Some(name.into()), ..CallContext::default() }
}

fn metered_host(call_fuel: Option<u64>) -> Host {
    Host::new(
        HostConfig::default()
            .with_fuel_metering(true)
            .with_limits(CallLimits::default().with_fuel(call_fuel))
            .with_pool_slots(16),
    )
    .expect("host")
}

/// Item 6: eight parallel spinning calls of one tenant used to burn eight
/// times its budget, each seeing the whole budget as left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_spinning_calls_cannot_overspend_their_tenants_fuel() {
    const BUDGET: u64 = 20_000_000;
    const PER_CALL: u64 = 5_000_000;
    let host = metered_host(Some(PER_CALL));
    host.tenant_fuel().limit_per_period("acme", BUDGET, Duration::from_secs(60));
    let hostile = host.load_file(fixtures::HOSTILE).await.expect("load");
    let diag = host.load_file(fixtures::DIAGNOSTICS).await.expect("load");
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let hostile = hostile.clone();
        calls.spawn(async move {
            hostile.invoke(&CallRequest { context: tenant("acme"), ..CallRequest::new("loop_forever", "{}") }).await
        });
    }
    // A neighbour tenant's call while they spin.
    let started = Instant::now();
    let neighbour =
        diag.invoke(&CallRequest { context: tenant("globex"), ..CallRequest::new("echo", r#"{"text": "hi"}"#) }).await;
    let neighbour_took = started.elapsed();
    while let Some(outcome) = calls.join_next().await {
        assert_eq!(outcome.expect("joined"), CallOutcome::Failed(Failure::CpuBudget));
    }
    let used = host.tenant_fuel().used("acme");
    println!(
        "8 parallel spinning calls burned {used} fuel of a {BUDGET} budget; the neighbour answered in {neighbour_took:?}"
    );
    // Exactly the budget: four calls held 5M each, the other four got none.
    assert_eq!(used, BUDGET, "the calls together burned the budget, no more");
    assert_eq!(host.tenant_fuel_remaining(Some("acme")), Some(0));
    assert_eq!(neighbour, CallOutcome::Text("hi".into()));
    assert!(neighbour_took < Duration::from_secs(10), "{neighbour_took:?}");
}

/// Item 6, the refund: a call that times out or is dropped (cancelled)
/// gives back the fuel it held and did not burn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuel_held_by_a_timed_out_or_dropped_call_is_refunded() {
    const BUDGET: u64 = 1 << 50;
    let host = metered_host(None);
    host.tenant_fuel().limit_per_period("acme", BUDGET, Duration::from_secs(600));
    let hostile = host.load_file(fixtures::HOSTILE).await.expect("load");
    let spin = CallRequest { context: tenant("acme"), ..CallRequest::new("loop_forever", "{}") };
    // Without a per-call cap a call holds all that is left: a parallel one gets nothing.
    let timed = CallRequest { timeout: Some(Duration::from_millis(300)), ..spin.clone() };
    let (first, second) = tokio::join!(hostile.invoke(&timed), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        hostile.invoke(&spin).await
    });
    assert_eq!(first, CallOutcome::Failed(Failure::TimedOut { ms: 300 }));
    assert_eq!(second, CallOutcome::Failed(Failure::CpuBudget), "the first call held the whole budget");
    let used = host.tenant_fuel().used("acme");
    assert!(used > 0);
    assert_eq!(
        host.tenant_fuel_remaining(Some("acme")),
        Some(BUDGET - used),
        "the unburnt fuel came back after the timeout"
    );

    let dropped = tokio::time::timeout(Duration::from_millis(200), hostile.invoke(&spin)).await;
    assert!(dropped.is_err(), "the call was still running when dropped");
    let used = host.tenant_fuel().used("acme");
    assert_eq!(host.tenant_fuel_remaining(Some("acme")), Some(BUDGET - used), "and after the call was dropped");
}

fn cache_host(dir: &Path) -> Result<Host, lovia_host::HostError> {
    Host::new(HostConfig::default().with_cache_dir(Some(dir.to_owned())).with_pool_slots(4))
}

fn only(dir: &Path, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.into_iter().next().expect("one")
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("metadata").permissions().mode() & 0o777
}

/// Item 11: a cached artifact is native code. One changed byte, or another
/// component's (genuine) artifact under this one's name, must be
/// recompiled, never deserialised.
#[tokio::test]
async fn a_tampered_or_swapped_cached_artifact_is_recompiled_not_run() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("cache");
    let host = cache_host(&dir).expect("host");
    assert_eq!(mode(&dir), 0o700, "created private");
    assert_eq!(mode(&dir.join("artifact.key")), 0o600, "the key too");
    let docs = host.load_file(fixtures::DOCS).await.expect("load");
    let artifact = only(&dir, ".cwasm");
    assert_eq!(mode(&artifact), 0o600);

    // One flipped byte in the middle of the native code.
    let mut bytes = std::fs::read(&artifact).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&artifact, &bytes).expect("tamper");
    let again = cache_host(&dir).expect("host").load_file(fixtures::DOCS).await.expect("recompiled");
    assert_ne!(std::fs::read(&artifact).expect("read"), bytes, "the tampered artifact was replaced");
    let out = again.invoke(&CallRequest::new("search_docs", r#"{"query": "limits"}"#)).await;
    assert_eq!(out.model_output(), r#"["Limits"]"#);

    // A genuine artifact of another component, moved to this one's name.
    let other_dir = root.path().join("other");
    cache_host(&other_dir).expect("host").load_file(fixtures::DIAGNOSTICS).await.expect("load");
    std::fs::copy(only(&other_dir, ".cwasm"), &artifact).expect("swap");
    std::fs::copy(other_dir.join("artifact.key"), dir.join("artifact.key")).expect("even with its key");
    let swapped = cache_host(&dir).expect("host").load_file(fixtures::DOCS).await.expect("recompiled");
    assert_eq!(swapped.digest(), docs.digest());
    let out = swapped.invoke(&CallRequest::new("search_docs", r#"{"query": "limits"}"#)).await;
    assert_eq!(out.model_output(), r#"["Limits"]"#, "the docs plugin runs, not the diagnostics one");
}

/// A verified artifact and a hashed component are not read again while
/// their files keep the stamp (inode, size, times) recorded once they had
/// settled; any change to a file's bytes changes its stamp, so the file is
/// checked in full again: a tampered artifact is still recompiled, and
/// another component at the same path is loaded as itself.
#[tokio::test]
async fn a_file_changed_after_its_stamp_was_recorded_is_checked_in_full_again() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("cache");
    let plugin = root.path().join("plugin.wasm");
    std::fs::copy(fixtures::DOCS, &plugin).expect("copy");
    let settle = || std::thread::sleep(Duration::from_millis(2_200));
    let search = |p: &Plugin| {
        let p = p.clone();
        async move { p.invoke(&CallRequest::new("search_docs", r#"{"query": "limits"}"#)).await.model_output() }
    };
    settle();
    let docs = cache_host(&dir).expect("host").load_file(&plugin).await.expect("compiled");
    let sources = std::fs::read_dir(&dir)
        .expect("dir")
        .filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().starts_with("source-")));
    assert_eq!(sources.count(), 1, "the settled component's digest is remembered");
    settle();
    // Verified in full (the artifact is fresh), and its stamp recorded.
    cache_host(&dir).expect("host").load_file(&plugin).await.expect("cached");
    // Now from the stamps alone.
    let stamped = cache_host(&dir).expect("host").load_file(&plugin).await.expect("cached");
    assert_eq!(stamped.digest(), docs.digest());
    assert_eq!(search(&stamped).await, r#"["Limits"]"#);

    // One flipped byte, written in place at the same size.
    let artifact = only(&dir, ".cwasm");
    let mut bytes = std::fs::read(&artifact).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&artifact, &bytes).expect("tamper");
    let again = cache_host(&dir).expect("host").load_file(&plugin).await.expect("recompiled");
    assert_ne!(std::fs::read(&artifact).expect("read"), bytes, "the tampered artifact was replaced");
    assert_eq!(search(&again).await, r#"["Limits"]"#);

    // Another component at the same path is hashed, not taken for the first.
    std::fs::copy(fixtures::DIAGNOSTICS, &plugin).expect("replace");
    let other = cache_host(&dir).expect("host").load_file(&plugin).await.expect("loaded");
    assert_ne!(other.digest(), docs.digest());
    assert!(other.tool("echo").is_some() && other.tool("search_docs").is_none());
}

/// Item 11: a cache directory others can write, or that someone else owns,
/// is refused with the path and the reason.
#[tokio::test]
async fn a_cache_directory_others_can_write_or_own_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("cache");
    cache_host(&dir).expect("host");

    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let err = cache_host(&dir).expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "refusing the cache directory {}: its mode 777 lets group or others write to it (chmod 700 it)",
            dir.display()
        )
    );
    assert!(matches!(err, lovia_host::HostError::CacheInsecure { .. }));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");

    let key = dir.join("artifact.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let err = cache_host(&dir).expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "refusing the cache directory {}: its mode 644 lets group or others read or write the artifact key (chmod 600 it)",
            key.display()
        )
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");

    // Owned by another user (the tests run as root in CI, which may chown).
    let uid = my_uid();
    std::os::unix::fs::chown(&dir, Some(uid + 1), None).expect("chown (the tests run as root)");
    let err = cache_host(&dir).expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "refusing the cache directory {}: it is owned by uid {}, not by this process's uid {uid}",
            dir.display(),
            uid + 1
        )
    );
}

fn my_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    // A file this process just created is owned by its effective uid.
    let probe = tempfile::NamedTempFile::new().expect("probe");
    std::fs::metadata(probe.path()).expect("metadata").uid()
}

async fn with_http(origins: &[&str]) -> Plugin {
    let http = origins.iter().map(|o| o.parse::<HttpOrigin>().expect("origin")).collect();
    let grants = Grants { http, ..Default::default() };
    lovia_tests::host()
        .load_file_with(fixtures::HOSTILE, PluginConfig::default().with_grants(grants))
        .await
        .expect("load")
}

async fn call(plugin: &Plugin, tool: &str, args: serde_json::Value) -> String {
    plugin.invoke(&CallRequest::new(tool, args.to_string())).await.model_output()
}

/// Item 12: `evil@127.0.0.1:PORT` passed the allowlist (which read the host
/// after the `@`) and went on the wire as the Host header.
#[tokio::test]
async fn userinfo_in_the_authority_or_host_header_never_leaves() {
    let server = Server::start().await;
    let plugin = with_http(&[&server.origin()]).await;
    let authority = server.addr.to_string();
    let plain = call(&plugin, "raw_fetch", json!({ "authority": authority, "path": "/ok" })).await;
    assert_eq!(plain, "200 GET /ok ", "the raw tool reaches the granted origin");
    let evil = format!("evil@{authority}");
    let out = call(&plugin, "raw_fetch", json!({ "authority": evil, "path": "/steal" })).await;
    assert_eq!(out, "Tool error: ErrorCode::HttpRequestUriInvalid");
    let out = call(&plugin, "raw_fetch", json!({ "authority": authority, "path": "/h", "host_header": evil })).await;
    assert_eq!(out, "Tool error: header refused: HeaderError::Forbidden", "a guest may not set Host itself");
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].host, authority);
}

/// Item 13: IPv6 forms that translate to loopback (SIIT's
/// `::ffff:0:a.b.c.d`), local-use NAT64 and 6to4 slipped past the
/// special-address check of a wildcard grant.
#[tokio::test]
async fn a_wildcard_grant_never_reaches_loopback_through_translated_ipv6_forms() {
    let server = Server::start().await;
    let port = server.addr.port();
    let plugin = with_http(&["http://*:*"]).await;
    for host in
        ["[::ffff:0:7f00:1]", "[::ffff:0:a9fe:a9fe]", "[64:ff9b:1::7f00:1]", "[2002:7f00:1::1]", "[64:ff9b::7f00:1]"]
    {
        let url = format!("http://{host}:{port}/");
        assert_eq!(
            call(&plugin, "fetch", json!({ "url": url })).await,
            format!(
                "Tool error: HTTP request to {url} denied: the address is loopback, private, link-local or metadata"
            ),
        );
    }
    assert!(server.seen().is_empty(), "{:?}", server.seen());
}

/// Item 16: `wasi:sockets` is linked (Rust's std imports it), so a guest
/// must get nothing from it: no connection, datagram, listener or lookup,
/// even with an HTTP grant for the very address.
#[tokio::test]
async fn no_guest_can_open_connect_or_bind_a_socket() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.expect("bind udp");
    let plugin = with_http(&[&format!("http://{addr}")]).await;
    let tcp_out = call(&plugin, "open_sockets", json!({ "addr": addr.to_string() })).await;
    let udp_out = call(&plugin, "open_sockets", json!({ "addr": udp.local_addr().expect("addr").to_string() })).await;
    // `os error 2` is WASI's errno `acces`; a refused name lookup reaches
    // std as getaddrinfo's EAI_FAIL.
    let denied = "tcp: Permission denied (os error 2); udp: Permission denied (os error 2); \
                  listen: Permission denied (os error 2); dns: failed to lookup address information: Non-recoverable error";
    assert_eq!(tcp_out, denied);
    assert_eq!(udp_out, denied);
    let accepted = tokio::time::timeout(Duration::from_millis(300), listener.accept()).await;
    assert!(accepted.is_err(), "nothing connected: {accepted:?}");
    let mut buf = [0u8; 16];
    let received = tokio::time::timeout(Duration::from_millis(300), udp.recv_from(&mut buf)).await;
    assert!(received.is_err(), "no datagram arrived: {received:?}");
}
