//! `lovia serve`: real HTTP over loopback sockets (and the router through
//! `oneshot`). Every `/api` route needs a tenant's key, and a tenant sees
//! and touches only its own tools, sessions and approvals.

mod always;
mod chat;
mod code_mode;
pub(crate) mod mcp;
mod mcp_sources;
mod questions;
mod tools;
mod web;
mod workspace;

use lovia_serve::{PluginEntry, ServeConfig, Service, TenantConfig, hash_key};
use lovia_tests::host;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub(crate) fn plugin(path: &str) -> PluginEntry {
    PluginEntry::new(path)
}

pub(crate) fn tenant(name: &str, key: &str, plugins: &[&str]) -> TenantConfig {
    let mut t = TenantConfig::new(name, vec![hash_key(key)]);
    t.plugins = plugins.iter().map(|p| plugin(p)).collect();
    t
}

/// Starts the service on a free loopback port, with its session store in a
/// fresh temporary directory.
pub(crate) async fn start(tenants: Vec<TenantConfig>) -> SocketAddr {
    let mut config = ServeConfig::new(tenants);
    // These tests read /metrics without a token (tests/all/threat/serve.rs
    // tests the token).
    config.metrics_public = true;
    start_with(config).await
}

/// Starts the service of `config` on a free loopback port; without a store
/// path, the store goes in a fresh temporary directory.
pub(crate) async fn start_with(config: ServeConfig) -> SocketAddr {
    start_on(&host(), config).await
}

/// [`start_with`] on `host` rather than the shared test host.
pub(crate) async fn start_on(host: &lovia_host::Host, mut config: ServeConfig) -> SocketAddr {
    let dir = tempfile::tempdir().expect("tempdir");
    config.listen = "127.0.0.1:0".parse().expect("addr");
    config.store.get_or_insert_with(|| dir.path().join("sessions.db").into());
    config.resolve(std::path::Path::new(".")).expect("valid config");
    let service = Service::new(host, &config).await.expect("service");
    let listener = tokio::net::TcpListener::bind(config.listen).await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        // The store's directory lives as long as the server.
        let _dir = dir;
        axum::serve(service.listener(listener), service.app()).await.expect("serve")
    });
    addr
}

/// One HTTP/1.1 request on a fresh connection: (status, body).
pub(crate) async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: &str,
) -> (u16, String) {
    request_with(addr, method, path, key, "", body).await
}

/// [`request`] with more header lines (each ending in `\r\n`).
pub(crate) async fn request_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    key: Option<&str>,
    headers: &str,
    body: &str,
) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let auth = key.map(|k| format!("Authorization: Bearer {k}\r\n")).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}{headers}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.write_all(body.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status line");
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// The result text of the `tool_result` event of call `id` among `events`.
pub(crate) fn tool_result(events: &[(String, serde_json::Value)], id: &str) -> String {
    events
        .iter()
        .find(|(n, d)| n == "tool_result" && d["id"] == id)
        .and_then(|(_, d)| d["result"].as_str())
        .unwrap_or_else(|| panic!("no result for {id}: {events:?}"))
        .to_owned()
}

pub(crate) fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// A reader of an SSE response on its own connection (HTTP/1.0, so the
/// body is plain bytes until the server closes).
pub(crate) struct Sse {
    reader: tokio::io::BufReader<tokio::net::TcpStream>,
    /// The response status.
    pub(crate) status: u16,
}

impl Sse {
    /// POSTs `body` to `path` and reads the response head.
    pub(crate) async fn post(addr: SocketAddr, path: &str, key: &str, body: &str) -> Sse {
        Self::post_with(addr, path, key, body, "").await
    }

    /// [`Sse::post`] with more header lines (each ending in `\r\n`).
    pub(crate) async fn post_with(addr: SocketAddr, path: &str, key: &str, body: &str, headers: &str) -> Sse {
        use tokio::io::AsyncBufReadExt;
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let head = format!(
            "POST {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.expect("write");
        let mut reader = tokio::io::BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).await.expect("status line");
        let status = line.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
        loop {
            line.clear();
            reader.read_line(&mut line).await.expect("header");
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        Sse { reader, status }
    }

    /// The stream after the headers, for a reader of its own.
    pub(crate) fn into_reader(self) -> tokio::io::BufReader<tokio::net::TcpStream> {
        self.reader
    }

    /// The next event as (name, data); `None` when the stream ends. Fails
    /// the test after 30 s without one.
    pub(crate) async fn next(&mut self) -> Option<(String, serde_json::Value)> {
        use tokio::io::AsyncBufReadExt;
        let read = async {
            let (mut event, mut data) = (String::new(), String::new());
            loop {
                let mut line = String::new();
                if self.reader.read_line(&mut line).await.expect("read") == 0 {
                    return None;
                }
                let line = line.trim_end_matches(['\r', '\n']);
                if line.is_empty() {
                    if !event.is_empty() {
                        return Some((event, serde_json::from_str(&data).expect("JSON data")));
                    }
                    continue;
                }
                if let Some(v) = line.strip_prefix("event: ") {
                    event = v.to_owned();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = v.to_owned();
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), read).await.expect("an event within 30 s")
    }

    /// The raw lines read during `window`: the stream must stay open that long.
    pub(crate) async fn lines_for(&mut self, window: std::time::Duration) -> Vec<String> {
        use tokio::io::AsyncBufReadExt;
        let mut lines = Vec::new();
        let deadline = tokio::time::Instant::now() + window;
        loop {
            let mut line = String::new();
            match tokio::time::timeout_at(deadline, self.reader.read_line(&mut line)).await {
                Err(_) => return lines,
                Ok(read) => {
                    assert!(read.expect("read") > 0, "the stream ended early: {lines:?}");
                    lines.push(line.trim_end_matches(['\r', '\n']).to_owned());
                }
            }
        }
    }

    /// Events until (and including) the first named `name`.
    pub(crate) async fn until(&mut self, name: &str) -> Vec<(String, serde_json::Value)> {
        let mut seen = Vec::new();
        while let Some(event) = self.next().await {
            let done = event.0 == name;
            seen.push(event);
            if done {
                return seen;
            }
        }
        panic!("the stream ended before {name}: {seen:?}")
    }

    /// Every event until the stream ends.
    pub(crate) async fn rest(&mut self) -> Vec<(String, serde_json::Value)> {
        let mut seen = Vec::new();
        while let Some(event) = self.next().await {
            seen.push(event);
        }
        seen
    }
}

/// One event of a chat's stream with its SSE id: (id, name, data); a notice
/// such as `replay_truncated` has no id.
pub(crate) type Seen = (Option<u64>, String, serde_json::Value);

/// A chat's SSE stream read with its event ids (replay, `Last-Event-ID`).
pub(crate) struct IdSse(tokio::io::BufReader<tokio::net::TcpStream>);

impl IdSse {
    /// POSTs `body` to `/api/chat`, with `Last-Event-ID: last` when given;
    /// returns the status and the stream.
    pub(crate) async fn post(addr: SocketAddr, key: &str, body: &str, last: Option<&str>) -> (u16, Self) {
        let last = last.map(|l| format!("Last-Event-ID: {l}\r\n")).unwrap_or_default();
        let sse = Sse::post_with(addr, "/api/chat", key, body, &last).await;
        (sse.status, Self(sse.into_reader()))
    }

    /// The next event; `None` when the stream ends. Fails after 30 s.
    pub(crate) async fn next(&mut self) -> Option<Seen> {
        use tokio::io::AsyncBufReadExt;
        let read = async {
            let (mut id, mut name, mut data) = (None, String::new(), String::new());
            loop {
                let mut line = String::new();
                if self.0.read_line(&mut line).await.expect("read") == 0 {
                    return None;
                }
                let line = line.trim_end_matches(['\r', '\n']);
                if line.is_empty() {
                    if !name.is_empty() {
                        return Some((id, name, json(&data)));
                    }
                    continue;
                }
                if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.parse().expect("a numeric id"));
                } else if let Some(v) = line.strip_prefix("event: ") {
                    name = v.to_owned();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = v.to_owned();
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), read).await.expect("an event within 30 s")
    }

    /// The next `n` events; fails if the stream ends first.
    pub(crate) async fn take(&mut self, n: usize) -> Vec<Seen> {
        let mut seen = Vec::new();
        while seen.len() < n {
            seen.push(self.next().await.expect("the stream ended early"));
        }
        seen
    }

    /// The events up to and including the first named `name`.
    pub(crate) async fn until(&mut self, name: &str) -> Vec<Seen> {
        let mut seen = Vec::new();
        while let Some(event) = self.next().await {
            let done = event.1 == name;
            seen.push(event);
            if done {
                return seen;
            }
        }
        panic!("the stream ended before {name}: {seen:?}")
    }

    /// Every event until the stream ends.
    pub(crate) async fn rest(&mut self) -> Vec<Seen> {
        let mut seen = Vec::new();
        while let Some(event) = self.next().await {
            seen.push(event);
        }
        seen
    }
}
