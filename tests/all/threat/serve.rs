//! Issue 12, the service's front door, uploads, sessions and the plugin
//! store: each attack runs for real (raw HTTP over loopback sockets, real
//! guest components), the attacker's exact error is asserted, and where the
//! attack is a denial of service a neighbour's call still answers.

use crate::serve::{json, request, start_with, tenant};
use lovia_host::plugin::config::PluginConfig;
use lovia_host::{CallContext, CallRequest, SessionStore, SqliteStore, StoreQuota};
use lovia_serve::{ServeConfig, hash_key};
use lovia_tests::{fixtures, host};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Generous: these are answers that come without waiting for anything.
const PROMPTLY: Duration = Duration::from_secs(10);

/// Sends the head of a request whose body is `length` bytes, then `sent`
/// bytes of that body, and leaves the connection open.
async fn start_upload(addr: SocketAddr, key: Option<&str>, length: usize, sent: usize) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let auth = key.map(|k| format!("Authorization: Bearer {k}\r\n")).unwrap_or_default();
    let head = format!(
        "POST /api/plugins HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/wasm\r\nContent-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream.write_all(&vec![0u8; sent]).await.expect("write the start of the body");
    stream
}

/// Reads one response's status and JSON `error` (the body is
/// `Content-Length` framed, so this does not wait for the connection to close).
async fn read_answer(stream: &mut TcpStream) -> (u16, String) {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await.expect("read");
        assert!(n > 0, "the connection closed before an answer: {}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw).into_owned();
        let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
        let length: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().to_owned()))
            .and_then(|v| v.parse().ok())
            .expect("content-length");
        if body.len() >= length {
            let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
            return (status, json(&body[..length])["error"].as_str().unwrap_or_default().to_owned());
        }
    }
}

/// A neighbour's direct call, with how long it took.
async fn neighbour_echo(addr: SocketAddr, key: &str) -> (u16, serde_json::Value, Duration) {
    let t = Instant::now();
    let (status, body) = request(addr, "POST", "/api/tools/echo/call", Some(key), r#"{"text": "still here"}"#).await;
    (status, json(&body), t.elapsed())
}

fn assert_neighbour_answers(answer: (u16, serde_json::Value, Duration)) {
    let (status, body, took) = answer;
    assert_eq!((status, body), (200, serde_json::json!({"output": "still here", "is_error": false})));
    assert!(took < PROMPTLY, "the neighbour waited {took:?}");
}

/// Item 7: eight anonymous 30 MiB uploads each get their 401 after 64 KiB of
/// their body were sent: the service answers from the headers, without
/// waiting for (or reading) the 30 MiB. A tenant's call answers meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_uploads_get_their_401_before_the_body_is_sent() {
    let addr = start_with(ServeConfig::new(vec![tenant("calm", "calm-key", &[fixtures::DIAGNOSTICS])])).await;
    let started = Instant::now();
    let mut attackers = Vec::new();
    for i in 0..8 {
        let key = if i % 2 == 0 { None } else { Some("wrong-key") };
        attackers.push(start_upload(addr, key, 30 << 20, 64 << 10).await);
    }
    for stream in &mut attackers {
        // Had the service waited for the body, this would never come: the
        // client sends nothing more.
        let answer = tokio::time::timeout(PROMPTLY, read_answer(stream)).await.expect("a 401 without the body");
        assert_eq!(answer, (401, "missing or unknown API key".to_owned()));
    }
    println!(
        "8 anonymous uploads of 30 MiB, 64 KiB of each sent: all 401 in {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    // The attackers' connections are still open; the tenant is served.
    assert_neighbour_answers(neighbour_echo(addr, "calm-key").await);
    drop(attackers);
}

/// Item 7: bodies read at once are bounded. One tenant starts eight 30 MiB
/// uploads and sends only their heads: the first reserves 30 MiB of its
/// 40 MiB budget and the seven others are refused at once, unread. Another
/// tenant's upload, which the service-wide budget (here 40 MiB) cannot take
/// beside the first, gets 503; a body that does not arrive in time is a 408
/// and gives its reservation back. A neighbour's call answers throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_in_flight_are_bounded_per_tenant_and_service() {
    let mut config = ServeConfig::new(vec![
        tenant("greedy", "greedy-key", &[]),
        tenant("second", "second-key", &[]),
        tenant("calm", "calm-key", &[fixtures::DIAGNOSTICS]),
    ]);
    config.max_body_bytes_in_flight = 40 << 20;
    config.body_read_timeout_secs = 3;
    config.metrics_public = true;
    let addr = start_with(config).await;

    let mut first = start_upload(addr, Some("greedy-key"), 30 << 20, 0).await;
    // The first upload's reservation is taken once its head is read.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..7 {
        let mut more = start_upload(addr, Some("greedy-key"), 30 << 20, 0).await;
        let answer = tokio::time::timeout(PROMPTLY, read_answer(&mut more)).await.expect("refused unread");
        assert_eq!(answer, (429, "too many request bytes in flight for this tenant".to_owned()));
    }
    let mut other = start_upload(addr, Some("second-key"), 30 << 20, 0).await;
    let answer = tokio::time::timeout(PROMPTLY, read_answer(&mut other)).await.expect("refused unread");
    assert_eq!(answer, (503, "the service is reading too many request bodies; retry shortly".to_owned()));
    // Small bodies still fit beside the reservation.
    assert_neighbour_answers(neighbour_echo(addr, "calm-key").await);

    // The first upload never sends its body: 408 after 3 s, and its 30 MiB are free again.
    let t = Instant::now();
    let answer = tokio::time::timeout(PROMPTLY, read_answer(&mut first)).await.expect("408");
    assert_eq!(answer, (408, "the request body did not arrive within 3 s".to_owned()));
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    let mut again = start_upload(addr, Some("second-key"), 16, 16).await;
    let answer = tokio::time::timeout(PROMPTLY, read_answer(&mut again)).await.expect("answered");
    assert_eq!(answer.0, 400, "read and refused as a component, not for room: {answer:?}");

    let (_, metrics) = request(addr, "GET", "/metrics", None, "").await;
    for line in [
        "lovia_refused_total{tenant=\"greedy\",reason=\"max_body_bytes_in_flight\"} 7",
        "lovia_refused_total{tenant=\"second\",reason=\"service_body_bytes_in_flight\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} not in\n{metrics}");
    }
}

/// Item 9: `/metrics` names every tenant and its tools. By default nobody
/// reads it; with a `metrics_token` only that token does (not a tenant's
/// key); `metrics_public = true` is the explicit opt-out.
#[tokio::test]
async fn metrics_need_their_token_unless_made_public() {
    let calm = || tenant("calm", "calm-key", &[fixtures::DIAGNOSTICS]);
    let mut closed = ServeConfig::new(vec![calm()]);
    closed.metrics_public = false;
    let addr = start_with(closed).await;
    let (status, body) = request(addr, "GET", "/metrics", None, "").await;
    assert_eq!(
        (status, json(&body)["error"].as_str()),
        (403, Some("metrics are not enabled: set metrics_token (or metrics_public = true) in the service config"))
    );

    let mut guarded = ServeConfig::new(vec![calm()]);
    guarded.metrics_public = false;
    guarded.metrics_token = Some(hash_key("scraper-token"));
    let addr = start_with(guarded).await;
    assert_neighbour_answers(neighbour_echo(addr, "calm-key").await);
    for key in [None, Some("calm-key"), Some("wrong")] {
        let (status, body) = request(addr, "GET", "/metrics", key, "").await;
        assert_eq!((status, json(&body)["error"].as_str()), (401, Some("missing or wrong metrics token")), "{key:?}");
    }
    let (status, metrics) = request(addr, "GET", "/metrics", Some("scraper-token"), "").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("lovia_calls_total{tenant=\"calm\",tool=\"echo\"} 1"), "{metrics}");

    // A token that is also a tenant's key, or a token beside metrics_public, is refused.
    let mut shared = ServeConfig::new(vec![calm()]);
    shared.metrics_token = Some(hash_key("calm-key"));
    assert_eq!(
        shared.resolve(std::path::Path::new(".")).expect_err("refused").to_string(),
        "metrics_token must not be a tenant's API key: the metrics show every tenant"
    );
    // Public metrics never make every tenant's audit trail public: that
    // needs the token, which may stand beside metrics_public for it.
    let mut public = ServeConfig::new(vec![calm()]);
    public.metrics_public = true;
    let addr = start_with(public).await;
    assert_eq!(request(addr, "GET", "/metrics", None, "").await.0, 200);
    let (status, body) = request(addr, "GET", "/audit", None, "").await;
    assert_eq!(status, 403, "{body}");
    assert!(
        json(&body)["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("the operator's audit route is not enabled: set metrics_token"),
        "{body}"
    );
    let mut both = ServeConfig::new(vec![calm()]);
    both.metrics_token = Some(hash_key("scraper-token"));
    both.metrics_public = true;
    let addr = start_with(both).await;
    assert_eq!(request(addr, "GET", "/metrics", None, "").await.0, 200);
    assert_eq!(request(addr, "GET", "/audit", None, "").await.0, 401);
    assert_eq!(request(addr, "GET", "/audit", Some("scraper-token"), "").await.0, 200);
}

/// A raw HTTP/1.1 POST of `body` bytes: (status, JSON body).
pub(crate) async fn post_bytes(addr: SocketAddr, path: &str, key: &str, body: &[u8]) -> (u16, serde_json::Value) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.write_all(body).await.expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status line");
    (status, json(text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default()))
}

/// Item 2: a tenant's uploads are bounded in number (`max_plugins`) and in
/// bytes (`max_uploaded_bytes`), refused before they are compiled; a
/// neighbour's calls answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_bounded_per_tenant_in_number_and_bytes() {
    let orders = std::fs::read(fixtures::ORDERS).expect("orders.wasm");
    let docs = std::fs::read(fixtures::DOCS).expect("docs.wasm");
    let notes = std::fs::read(fixtures::NOTES).expect("notes.wasm");
    let mut counted = tenant("counted", "counted-key", &[]);
    counted.max_plugins = 2;
    let mut weighed = tenant("weighed", "weighed-key", &[]);
    weighed.max_uploaded_bytes = orders.len() as u64 + 10;
    let mut config = ServeConfig::new(vec![counted, weighed, tenant("calm", "calm-key", &[fixtures::DIAGNOSTICS])]);
    config.metrics_public = true;
    let addr = start_with(config).await;

    assert_eq!(post_bytes(addr, "/api/plugins", "counted-key", &orders).await.0, 201);
    assert_eq!(post_bytes(addr, "/api/plugins", "counted-key", &docs).await.0, 201);
    let (status, body) = post_bytes(addr, "/api/plugins", "counted-key", &notes).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("this tenant has uploaded 2 plugins; the limit is 2 (max_plugins)"))
    );

    assert_eq!(post_bytes(addr, "/api/plugins", "weighed-key", &orders).await.0, 201);
    let (status, body) = post_bytes(addr, "/api/plugins", "weighed-key", &docs).await;
    let want = format!(
        "this tenant's uploads would reach {} bytes; the limit is {} bytes (max_uploaded_bytes)",
        orders.len() + docs.len(),
        orders.len() + 10
    );
    assert_eq!((status, body["error"].as_str()), (403, Some(want.as_str())));
    // A refused upload added nothing.
    let (_, tools) = request(addr, "GET", "/api/tools", Some("weighed-key"), "").await;
    assert!(!tools.contains("search_docs"), "{tools}");
    assert_neighbour_answers(neighbour_echo(addr, "calm-key").await);
    let (_, metrics) = request(addr, "GET", "/metrics", None, "").await;
    for line in [
        "lovia_refused_total{tenant=\"counted\",reason=\"max_plugins\"} 1",
        "lovia_refused_total{tenant=\"weighed\",reason=\"max_uploaded_bytes\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} not in\n{metrics}");
    }
}

/// Item 2: `x-lovia-session` keys warm instances; an id outside the rule a
/// chat's `session_id` follows (too long, a path, spaces, bytes that are not
/// text) is a 400 that names the rule, and the call does not run.
#[tokio::test]
async fn a_session_header_outside_the_rule_is_refused() {
    let addr = start_with(ServeConfig::new(vec![tenant("acme", "acme-key", &[fixtures::DIAGNOSTICS])])).await;
    let call = |session: Vec<u8>| async move {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let body = r#"{"text": "hi"}"#;
        let mut head = format!(
            "POST /api/tools/echo/call HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer acme-key\r\nContent-Length: {}\r\nConnection: close\r\nx-lovia-session: ",
            body.len()
        )
        .into_bytes();
        head.extend_from_slice(&session);
        head.extend_from_slice(b"\r\n\r\n");
        head.extend_from_slice(body.as_bytes());
        stream.write_all(&head).await.expect("write");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.expect("read");
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status: u16 = text.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
        (status, json(text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default()))
    };
    for bad in [vec![b'a'; 129], b"../../etc".to_vec(), b"a b".to_vec(), b"caf\xc3\xa9".to_vec(), vec![0xff, b'x']] {
        let (status, body) = call(bad.clone()).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("x-lovia-session must be 1-128 letters, digits, _ . or -")),
            "{}",
            String::from_utf8_lossy(&bad)
        );
    }
    let (status, body) = call(vec![b'a'; 128]).await;
    assert_eq!((status, body["output"].as_str()), (200, Some("hi")), "{body}");
}

fn in_session(session: &str) -> CallContext {
    CallContext { session_id: Some(session.into()), tenant: Some("acme".into()), ..CallContext::default() }
}

fn with_store(store: &Arc<dyn SessionStore>, ctx: CallContext, tool: &str, args: &str) -> CallRequest {
    CallRequest { context: ctx, session_store: Some(store.clone()), ..CallRequest::new(tool, args) }
}

/// Item 4: a different component that calls itself `notes` reads nothing of
/// what the real notes plugin saved, in the same tenant and session: the
/// store is keyed on what the host assigns (the digest by default), not on
/// the declared name. Two components share only when the operator gives both
/// the same `store_namespace`, and the same component loaded again keeps
/// its notes.
#[tokio::test]
async fn a_component_that_calls_itself_notes_reads_none_of_the_notes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(dir.path().join("kv.sqlite")).expect("open"));
    let notes = host().load_file_with(fixtures::NOTES, PluginConfig::default()).await.expect("notes");
    let impostor = host().load_file_with(fixtures::NOTES_IMPOSTOR, PluginConfig::default()).await.expect("impostor");
    assert_eq!((notes.info().name.as_str(), impostor.info().name.as_str()), ("notes", "notes"));
    assert_ne!(notes.store_namespace(), impostor.store_namespace());
    assert_eq!(notes.store_namespace(), notes.digest());

    let saved = notes
        .invoke(&with_store(&store, in_session("s1"), "save_note", r#"{"title": "plan", "body": "ship it"}"#))
        .await;
    assert_eq!(saved.model_output(), "Saved note 'plan' in session s1");
    let stolen = impostor.invoke(&with_store(&store, in_session("s1"), "steal_notes", "{}")).await;
    assert_eq!(json(&stolen.model_output()), serde_json::json!([]), "the impostor sees an empty store");

    // The same component, loaded again (as after a restart), reads its note.
    let again = host().load_file_with(fixtures::NOTES, PluginConfig::default()).await.expect("notes again");
    let read = again.invoke(&with_store(&store, in_session("s1"), "read_note", r#"{"title": "plan"}"#)).await;
    assert_eq!(read.model_output(), "ship it");

    // Sharing is the operator's explicit choice.
    let shared = || PluginConfig::default().with_store_namespace(Some("notes".into()));
    let notes = host().load_file_with(fixtures::NOTES, shared()).await.expect("notes");
    let friend = host().load_file_with(fixtures::NOTES_IMPOSTOR, shared()).await.expect("friend");
    notes.invoke(&with_store(&store, in_session("s1"), "save_note", r#"{"title": "todo", "body": "share"}"#)).await;
    let seen = friend.invoke(&with_store(&store, in_session("s1"), "steal_notes", "{}")).await;
    assert_eq!(json(&seen.model_output()), serde_json::json!(["note/todo=share"]));

    let bad = PluginConfig::default().with_store_namespace(Some("acme/notes".into()));
    let err = host().load_file_with(fixtures::NOTES, bad).await.expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "{}: store_namespace \"acme/notes\" must be 1-128 letters, digits, _ . or - (a plugin's store namespace cannot hold / or %)",
            fixtures::NOTES
        )
    );
}

/// Item 5: the attack that made an 84 MB database of 40 keys of 2 MiB (empty
/// values) is refused at the first key; keys count in the session's total;
/// `keys()` returns at most 1,000 keys and 1 MiB, and a guest pages through
/// the rest by prefix. A neighbour session's notes answer meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_keys_are_capped_counted_and_listed_within_bounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kv.sqlite");
    let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&path).expect("open"));
    let hog = host().load_file(fixtures::NOTES_IMPOSTOR).await.expect("hog");
    let notes = lovia_tests::load(fixtures::NOTES).await;
    let fill = |count: u32, key_bytes: u32| {
        format!(r#"{{"prefix": "k", "count": {count}, "key_bytes": {key_bytes}, "value_bytes": 0}}"#)
    };

    let attack = hog.invoke(&with_store(&store, in_session("s1"), "fill", &fill(40, 2 << 20))).await;
    assert_eq!(
        attack.model_output(),
        "stored 0 of 40; then: key of 2097152 bytes exceeds the store's limit of 1024 bytes per key"
    );
    let neighbour = Instant::now();
    let saved =
        notes.invoke(&with_store(&store, in_session("s2"), "save_note", r#"{"title": "a", "body": "b"}"#)).await;
    assert_eq!(saved.model_output(), "Saved note 'a' in session s2");
    assert!(neighbour.elapsed() < PROMPTLY);
    let file_bytes: u64 = ["", "-wal"]
        .iter()
        .filter_map(|suffix| std::fs::metadata(format!("{}{suffix}", path.display())).ok())
        .map(|m| m.len())
        .sum();
    println!("after 40 attempted keys of 2 MiB: the store's files hold {file_bytes} bytes");
    assert!(file_bytes < 1 << 20, "{file_bytes}");

    // Key bytes count in the total: four 1000-byte keys with empty values fill 4096 bytes.
    let mut small = StoreQuota::default();
    small.total_bytes = 4096;
    let small: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open_with_quota(dir.path().join("small.sqlite"), small).expect("open"));
    let filled = hog.invoke(&with_store(&small, in_session("s1"), "fill", &fill(10, 1000))).await;
    assert_eq!(
        filled.model_output(),
        "stored 4 of 10; then: the session's data would reach 5000 bytes; the limit is 4096 bytes"
    );

    // keys() is bounded: 1,500 keys under a raised key quota list as the first 1,000.
    let mut many = StoreQuota::default();
    many.keys = 5_000;
    let many: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open_with_quota(dir.path().join("many.sqlite"), many).expect("open"));
    let filled = hog.invoke(&with_store(&many, in_session("s1"), "fill", &fill(1_500, 16))).await;
    assert_eq!(filled.model_output(), "stored 1500 of 1500");
    let listed = hog.invoke(&with_store(&many, in_session("s1"), "list_keys", r#"{"prefix": ""}"#)).await;
    assert_eq!(listed.model_output(), r#"1000 keys, 16000 bytes, first "k000000kkkkkkkkk", last "k000999kkkkkkkkk""#);
    let page = hog.invoke(&with_store(&many, in_session("s1"), "list_keys", r#"{"prefix": "k001"}"#)).await;
    assert_eq!(page.model_output(), r#"500 keys, 8000 bytes, first "k001000kkkkkkkkk", last "k001499kkkkkkkkk""#);

    // Keys written under a larger key limit (an operator's, or an old
    // store's) list only within 1 MiB: a 2 MiB key is skipped, not returned.
    let mut wide = StoreQuota::default();
    wide.key_bytes = 4 << 20;
    let wide: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open_with_quota(dir.path().join("wide.sqlite"), wide).expect("open"));
    let filled = hog.invoke(&with_store(&wide, in_session("s1"), "fill", &fill(3, 2 << 20))).await;
    assert_eq!(filled.model_output(), "stored 3 of 3");
    let one = r#"{"prefix": "z", "count": 1, "key_bytes": 1, "value_bytes": 1}"#;
    let filled = hog.invoke(&with_store(&wide, in_session("s1"), "fill", one)).await;
    assert_eq!(filled.model_output(), "stored 1 of 1");
    let listed = hog.invoke(&with_store(&wide, in_session("s1"), "list_keys", r#"{"prefix": ""}"#)).await;
    assert_eq!(listed.model_output(), r#"1 keys, 7 bytes, first "z000000", last "z000000""#);
}

/// Connections: a peer address holds at most `max_connections_per_ip`
/// (more are closed on accept, while another address is still served), and
/// a connection silent for `idle_connection_secs` is closed, freeing its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_bounded_per_peer_and_idle_ones_closed() {
    let mut config = ServeConfig::new(vec![tenant("b", "b-key", &[fixtures::DIAGNOSTICS])]);
    config.max_connections_per_ip = 4;
    config.sse_keep_alive_secs = 1;
    config.idle_connection_secs = 2;
    let addr = start_with(config).await;
    // Four silent connections from 127.0.0.1 take that address's places.
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(addr).await.expect("connect"));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A fifth from the same address is closed without an answer.
    let mut fifth = TcpStream::connect(addr).await.expect("the kernel accepts it");
    let _ = fifth.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(PROMPTLY, fifth.read_to_end(&mut answer)).await.expect("closed promptly");
    assert!(
        read.is_err() || answer.is_empty(),
        "the fifth connection was served: {}",
        String::from_utf8_lossy(&answer)
    );
    // Another address (all of 127/8 is loopback) is served meanwhile.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind("127.0.0.2:0".parse().expect("addr")).expect("bind 127.0.0.2");
    let mut other = socket.connect(addr).await.expect("connect from 127.0.0.2");
    other.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.expect("write");
    let mut answer = String::new();
    other.read_to_string(&mut answer).await.expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // The silent ones are closed after about two seconds, and their places come back.
    let start = Instant::now();
    for stream in &mut idle {
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(PROMPTLY, stream.read_to_end(&mut rest)).await;
        assert!(closed.is_ok(), "an idle connection was still open after {:?}", start.elapsed());
    }
    assert!(start.elapsed() >= Duration::from_secs(1), "closed too early: {:?}", start.elapsed());
    let (status, _) = request(addr, "GET", "/healthz", None, "").await;
    assert_eq!(status, 200, "127.0.0.1 is served again");
}

/// The idle bound counts silence between requests, not the time a request
/// is being answered: a call that takes longer than `idle_connection_secs`
/// still gets its answer on the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_answered_slowly_is_not_an_idle_connection() {
    let mut config = ServeConfig::new(vec![tenant("b", "b-key", &[fixtures::DIAGNOSTICS])]);
    config.sse_keep_alive_secs = 1;
    config.idle_connection_secs = 2;
    let addr = start_with(config).await;
    let start = Instant::now();
    let (status, body) = request(addr, "POST", "/api/tools/sleep_ms/call", Some("b-key"), r#"{"ms": 3500}"#).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["is_error"], false, "{body}");
    assert!(start.elapsed() >= Duration::from_millis(3500), "answered after {:?}", start.elapsed());
}

/// A slowloris connection from `from` that trickles a request head one byte
/// every 200 ms and never ends it, until the service closes it; resolves to
/// when it was closed (the first read that ends or fails).
fn trickle(addr: SocketAddr, from: &str) -> tokio::task::JoinHandle<Instant> {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(format!("{from}:0").parse().expect("addr")).expect("bind");
    tokio::spawn(async move {
        let mut stream = socket.connect(addr).await.expect("connect");
        let head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
        let mut sent = 0usize;
        let mut buf = [0u8; 64];
        loop {
            let byte = head.get(sent).copied().unwrap_or(b'a');
            if stream.write_all(&[byte]).await.is_err() {
                return Instant::now();
            }
            sent += 1;
            if let Ok(read) = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await {
                // An answer or the end of the connection: either way the
                // trickled head was not waited for any longer.
                assert!(!matches!(read, Ok(n) if n > 0), "a trickled head was answered");
                return Instant::now();
            }
        }
    })
}

/// One request on an open keep-alive connection: its status.
async fn keep_alive_request(stream: &mut TcpStream, key: &str) -> u16 {
    let head =
        format!("GET /api/tools HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Length: 0\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("write");
    read_answer(stream).await.0
}

/// Issue 26 item 4, slowloris: heads trickled one byte at a time, from
/// enough connections to hold every place, are closed at
/// `request_head_secs` although their bytes never stop (the idle bound never
/// fires); meanwhile an authenticated client is answered at once, on a new
/// connection (the oldest trickler waiting for its head makes room) and on
/// its keep-alive connection opened before the attack (a connection that
/// presented a valid key is never closed for room).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickled_request_heads_are_cut_at_their_deadline_while_tenants_are_served() {
    let mut config = ServeConfig::new(vec![tenant("b", "b-key", &[fixtures::DIAGNOSTICS])]);
    config.max_connections = 8;
    config.request_head_secs = 3;
    config.first_byte_secs = 3;
    let addr = start_with(config).await;
    // The tenant's keep-alive connection, authenticated before the attack.
    let mut kept = TcpStream::connect(addr).await.expect("connect");
    assert_eq!(keep_alive_request(&mut kept, "b-key").await, 200);
    // Twelve trickling connections from one other address: more than the
    // eight places.
    let start = Instant::now();
    let tricklers: Vec<_> = (0..12).map(|_| trickle(addr, "127.0.0.3")).collect();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // A new connection of the tenant is answered at once.
    let asked = Instant::now();
    let (status, body) =
        tokio::time::timeout(Duration::from_secs(1), request(addr, "GET", "/api/tools", Some("b-key"), ""))
            .await
            .expect("the tenant's new connection was answered within 1 s while the heads trickled");
    assert_eq!(status, 200, "{body}");
    println!("tenant answered in {:?} while heads trickled", asked.elapsed());
    // And its keep-alive connection was kept.
    let again = tokio::time::timeout(Duration::from_secs(1), keep_alive_request(&mut kept, "b-key")).await;
    assert_eq!(again.expect("the keep-alive connection answered within 1 s"), 200);
    // Every trickler is closed by the head deadline (3 s after its first
    // byte) plus a margin, and those the service held were closed at it.
    let mut closed = Vec::new();
    for trickler in tricklers {
        let at = tokio::time::timeout(PROMPTLY, trickler).await.expect("a trickler still open").expect("trickler");
        closed.push(at.duration_since(start));
    }
    closed.sort();
    println!("tricklers closed after {closed:?}");
    let last = *closed.last().expect("tricklers");
    assert!(last >= Duration::from_millis(2800), "no trickler was held to its deadline: {closed:?}");
    assert!(last < Duration::from_millis(4500), "a trickler outlived its head deadline: {closed:?}");
}

/// A component that imports an interface lovia does not provide
/// (`acme:nope/thing`, an empty instance) and exports nothing: refused on
/// its import list, before the compile.
fn component_with_a_foreign_import() -> Vec<u8> {
    let name = b"acme:nope/thing";
    let mut bytes = vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
    // Type section: one instance type with no declarations.
    bytes.extend_from_slice(&[0x07, 0x03, 0x01, 0x42, 0x00]);
    // Import section: that name, as an instance of type 0.
    let mut import = vec![0x01, 0x00, name.len() as u8];
    import.extend_from_slice(name);
    import.extend_from_slice(&[0x05, 0x00]);
    bytes.push(0x0a);
    bytes.push(import.len() as u8);
    bytes.extend_from_slice(&import);
    bytes
}

/// A valid component that is no plugin: it imports and exports nothing,
/// so it compiles and is then refused.
fn component_that_is_no_plugin() -> Vec<u8> {
    vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]
}

/// Issue 26 item 3: an upload the host refuses after compiling it (it
/// implements no plugin world) leaves no compiled artifact in the host's cache and is
/// counted against its tenant (`lovia_refused_total{reason="upload_rejected"}`);
/// an accepted upload's artifact is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upload_leaves_no_artifact_and_is_counted_against_its_tenant() {
    let cache = tempfile::tempdir().expect("cache dir");
    let host = lovia_host::Host::new(lovia_host::HostConfig::default().with_cache_dir(Some(cache.path().to_owned())))
        .expect("host");
    let mut config = ServeConfig::new(vec![tenant("up", "up-key", &[])]);
    config.metrics_public = true;
    let addr = crate::serve::start_on(&host, config).await;
    let artifacts = || {
        std::fs::read_dir(cache.path())
            .expect("cache dir")
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
            .count()
    };

    let (status, body) = post_bytes(addr, "/api/plugins", "up-key", &component_that_is_no_plugin()).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| e.starts_with("upload by up does not implement the lovia:tools")),
        "{body}"
    );
    assert_eq!(artifacts(), 0, "a refused upload left a compiled artifact");
    // An import lovia lacks is refused on the component's import list,
    // before any compile, and counted the same way.
    let (status, body) = post_bytes(addr, "/api/plugins", "up-key", &component_with_a_foreign_import()).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "upload by up imports acme:nope/thing, which lovia does not provide", "{body}");
    assert_eq!(artifacts(), 0, "a refused upload left a compiled artifact");
    let (_, metrics) = request(addr, "GET", "/metrics", None, "").await;
    let line = "lovia_refused_total{tenant=\"up\",reason=\"upload_rejected\"} 2";
    assert!(metrics.lines().any(|l| l == line), "{line} not in\n{metrics}");

    let orders = std::fs::read(fixtures::ORDERS).expect("orders.wasm");
    let (status, body) = post_bytes(addr, "/api/plugins", "up-key", &orders).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(artifacts(), 1, "an accepted upload's artifact is kept");
}

/// Issue 26 item 3: with a compile worker, a compile past its timeout is
/// killed and the component refused (no worker is left behind), a generous
/// timeout compiles in the worker for the host's own engine, and a tenant
/// whose uploads keep failing after a compile gets 429 before the next
/// compile (`max_rejected_uploads_per_hour`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiles_have_a_deadline_and_failed_uploads_are_bounded() {
    use lovia_host::compile_worker::CompileWorker;
    let with_worker = |timeout: Duration| {
        lovia_host::Host::new(lovia_host::HostConfig::default().with_compile_worker(Some(CompileWorker::new(
            env!("CARGO_BIN_EXE_lovia"),
            ["compile-worker"],
            timeout,
        ))))
        .expect("host")
    };
    let serve = |host: lovia_host::Host, rejections: u32| async move {
        let mut up = tenant("up", "up-key", &[fixtures::DIAGNOSTICS]);
        up.max_rejected_uploads_per_hour = rejections;
        let mut config = ServeConfig::new(vec![up]);
        config.metrics_public = true;
        crate::serve::start_on(&host, config).await
    };
    // This process's children that are compile workers (zombies included).
    let workers = || {
        let me = std::process::id().to_string();
        std::fs::read_dir("/proc")
            .expect("/proc")
            .filter_map(Result::ok)
            .filter(|e| {
                let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
                let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                parent == Some(me.as_str()) && cmdline.windows(15).any(|w| w == b"compile-worker\0")
            })
            .count()
    };

    // A generous timeout: the configured plugin was compiled by the worker
    // at start, and its artifact runs in this host's engine.
    let addr = serve(with_worker(Duration::from_secs(120)), 20).await;
    let (status, body) =
        request(addr, "POST", "/api/tools/echo/call", Some("up-key"), r#"{"text": "compiled apart"}"#).await;
    assert_eq!((status, body.as_str()), (200, r#"{"output":"compiled apart","is_error":false}"#));

    // 1 ms: no compile fits; the child is killed and the component refused.
    let tight = with_worker(Duration::from_millis(1));
    let err = tight.load_file(fixtures::ORDERS).await.expect_err("refused");
    assert!(matches!(err, lovia_host::LoadError::CompileTimeout { .. }), "{err}");
    assert_eq!(err.to_string(), format!("{}: compiling it took longer than 0.001 s; refused", fixtures::ORDERS));
    assert_eq!(workers(), 0, "a killed worker is reaped");

    // Refusals after a compile, bounded: two, then 429 before the third.
    let addr = serve(with_worker(Duration::from_secs(120)), 2).await;
    for _ in 0..2 {
        let (status, body) = post_bytes(addr, "/api/plugins", "up-key", &component_that_is_no_plugin()).await;
        assert_eq!(status, 400, "{body}");
    }
    let orders = std::fs::read(fixtures::ORDERS).expect("orders.wasm");
    let (status, body) = post_bytes(addr, "/api/plugins", "up-key", &orders).await;
    assert_eq!(status, 429, "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| e.starts_with(
            "this tenant's uploads were refused 2 times in the last hour after a compile (max_rejected_uploads_per_hour); retry in "
        )),
        "{body}"
    );
    let (_, metrics) = request(addr, "GET", "/metrics", None, "").await;
    let line = "lovia_refused_total{tenant=\"up\",reason=\"max_rejected_uploads_per_hour\"} 1";
    assert!(metrics.lines().any(|l| l == line), "{line} not in\n{metrics}");
}
