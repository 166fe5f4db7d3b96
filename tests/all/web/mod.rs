//! The web tools (issue 27; docs/web.md) through the real executor against
//! real HTTP servers on loopback: `read_page` with its paging, fence and
//! egress rules under hostile pages, and `web_search` over the SearXNG and
//! Brave APIs.

mod cli;
mod page;
mod search;

use lovia_host::{ExecSettings, Executor, RunState, Tool, ToolSource, Toolset};
use lovia_tests::turn::{Turn, call, run};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the site answers a request with.
pub(crate) enum Reply {
    /// A response with this status, `Content-Type` and body.
    Page(u16, &'static str, String),
    /// `302` to this location.
    Redirect(String),
    /// Closes the connection without a response.
    Drop,
    /// `200 text/plain` claiming this many bytes and sending them until the
    /// client stops reading.
    Endless(u64),
}

type Route = dyn Fn(usize, &str, &str) -> Reply + Send + Sync;

/// A real HTTP/1.1 server on 127.0.0.1 that answers by a closure of (the
/// number of the request, its path, its head) and records what reached it.
pub(crate) struct Site {
    pub(crate) addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
    sent: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Site {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Site {
    pub(crate) async fn start(route: impl Fn(usize, &str, &str) -> Reply + Send + Sync + 'static) -> Site {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let sent = Arc::new(AtomicU64::new(0));
        let route: Arc<Route> = Arc::new(route);
        let (log, counter) = (requests.clone(), sent.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else { return };
                let (route, log, counter) = (route.clone(), log.clone(), counter.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 65_536 {
                        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    let n = {
                        let mut log = log.lock().expect("lock");
                        log.push(head.clone());
                        log.len()
                    };
                    let reply = match route(n, &path, &head) {
                        Reply::Drop => return,
                        Reply::Redirect(location) => {
                            format!(
                                "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            )
                        }
                        Reply::Page(status, media, body) => format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: {media}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        ),
                        Reply::Endless(total) => {
                            let head = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {total}\r\n\r\n"
                            );
                            if stream.write_all(head.as_bytes()).await.is_err() {
                                return;
                            }
                            let chunk = vec![b'a'; 64 * 1024];
                            let mut left = total;
                            while left > 0 {
                                let n = left.min(chunk.len() as u64);
                                if stream.write_all(&chunk[..n as usize]).await.is_err() {
                                    return;
                                }
                                counter.fetch_add(n, Ordering::SeqCst);
                                left -= n;
                            }
                            return;
                        }
                    };
                    let _ = stream.write_all(reply.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Site { addr, requests, sent, task }
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The heads of the requests that reached it.
    pub(crate) fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("lock").clone()
    }

    /// Body bytes an `Endless` reply wrote into the socket.
    pub(crate) fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }
}

/// An executor over `tools`.
pub(crate) fn executor(tools: Vec<Tool>) -> Executor {
    Executor::new(Toolset::new().with(ToolSource::AgentTools, tools).expect("unique names"), ExecSettings::default())
}

/// One call of `name`.
pub(crate) async fn call_one(exec: &Executor, name: &str, args: serde_json::Value) -> Turn {
    run(exec, vec![call("c", name, &args.to_string())], &RunState::default(), |_| Some(true)).await
}
