//! A model API on a loopback socket: it answers each request with the next
//! canned response (JSON or an SSE stream, in the vendors' recorded shapes)
//! and records what it was sent, so provider tests check both directions of
//! the real wire format.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// One canned response.
#[derive(Debug, Clone)]
pub struct Canned {
    /// The status.
    pub status: u16,
    /// `application/json` or `text/event-stream`.
    pub content_type: &'static str,
    /// Extra headers.
    pub headers: Vec<(&'static str, String)>,
    /// The body.
    pub body: String,
}

impl Canned {
    /// A 200 JSON response.
    pub fn json(value: serde_json::Value) -> Canned {
        Canned { status: 200, content_type: "application/json", headers: Vec::new(), body: value.to_string() }
    }

    /// A 200 SSE stream of `events`: (event name or "", data).
    pub fn sse(events: &[(&str, serde_json::Value)]) -> Canned {
        let mut body = String::new();
        for (name, data) in events {
            if !name.is_empty() {
                body += &format!("event: {name}\n");
            }
            let data = data.as_str().map_or_else(|| data.to_string(), str::to_owned);
            body += &format!("data: {data}\n\n");
        }
        Canned { status: 200, content_type: "text/event-stream", headers: Vec::new(), body }
    }

    /// An error status with an OpenAI-style error body.
    pub fn error(status: u16, message: &str) -> Canned {
        Canned {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body: serde_json::json!({"error": {"message": message, "type": "test"}}).to_string(),
        }
    }
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Received {
    /// The path.
    pub path: String,
    /// The headers.
    pub headers: HeaderMap,
    /// The body as JSON.
    pub body: serde_json::Value,
}

#[derive(Default)]
struct Script {
    responses: VecDeque<Canned>,
    received: Vec<Received>,
}

/// A running model API; stops when dropped.
pub struct ModelApi {
    /// Where it listens.
    pub addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    task: tokio::task::JoinHandle<()>,
}

impl ModelApi {
    /// Starts a server that answers with `responses` in order, then 500.
    pub async fn start(responses: Vec<Canned>) -> ModelApi {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("addr");
        let script = Arc::new(Mutex::new(Script { responses: responses.into(), received: Vec::new() }));
        let app = axum::Router::new().fallback(answer).with_state(script.clone());
        let task = tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
        ModelApi { addr, script, task }
    }

    /// `http://127.0.0.1:PORT` plus `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The requests received so far.
    pub fn received(&self) -> Vec<Received> {
        self.script.lock().expect("lock").received.clone()
    }
}

impl Drop for ModelApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(State(script): State<Arc<Mutex<Script>>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 24).await.unwrap_or_default();
    let body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    let next = {
        let mut s = script.lock().expect("lock");
        s.received.push(Received { path: parts.uri.path().to_owned(), headers: parts.headers, body });
        s.responses.pop_front()
    };
    let Some(canned) = next else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the script is over").into_response();
    };
    let mut response = Response::builder().status(canned.status).header("content-type", canned.content_type);
    for (name, value) in canned.headers {
        response = response.header(name, value);
    }
    response.body(Body::from(canned.body)).expect("response")
}
