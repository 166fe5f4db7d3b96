//! A real HTTP server on a loopback socket that records what reached it, so
//! tests can assert that a refused request never left the host.

use axum::body::Bytes;
use axum::extract::{Request, State};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `GET`, `POST`, …
    pub method: String,
    /// Path and query.
    pub path: String,
    /// The Host header.
    pub host: String,
    /// The body as text.
    pub body: String,
    /// Every header, by lower-case name.
    pub headers: Vec<(String, String)>,
}

/// A running server. It answers every request with `200` and the text
/// `<METHOD> <path> <body>`, and stops when dropped.
pub struct Server {
    /// Where it listens (127.0.0.1, a free port).
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Starts a server on 127.0.0.1 with a port the OS picks.
    pub async fn start() -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new().fallback(answer).with_state(seen.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        });
        Server { addr, seen, task }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests that reached the server so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(State(seen): State<Arc<Mutex<Vec<Seen>>>>, request: Request) -> String {
    let (parts, body) = request.into_parts();
    let body: Bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
    let entry = Seen {
        method: parts.method.to_string(),
        path: parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_owned(),
        host: parts.headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("").to_owned(),
        body: String::from_utf8_lossy(&body).into_owned(),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect(),
    };
    let reply = format!("{} {} {}", entry.method, entry.path, entry.body);
    seen.lock().expect("lock").push(entry);
    reply
}
