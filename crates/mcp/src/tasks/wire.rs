//! The 2025-11-25 form of tasks on the wire, which rmcp 3.11 does not model
//! (it has the 2026-07-28 extension only): its `tools/call` params drop an
//! unknown `task`, its `Tool` has no `execution` and its capabilities no
//! `tasks`, and it parses `tasks/get` and `tasks/cancel` as the 2026-07-28
//! requests, which it refuses to a client that did not declare that
//! extension. So, around rmcp and no deeper:
//!
//! - coming in, a `tools/call` that asks for a task and the four `tasks/*`
//!   requests are renamed ([`lift`]), so that rmcp hands them to the
//!   server's custom requests with their params whole (server.rs answers
//!   them); over stdio a reader does it line by line ([`LiftTasks`]), over
//!   HTTP the guard in front of rmcp does it to a session's POST body;
//! - going out, a session's transport ([`TaskWire`]) adds `tasks` to the
//!   capabilities of a 2025-11-25 `initialize` result, and `execution` to
//!   the tools of its `tools/list` results that run as tasks.
//!
//! Nothing else is touched: a line without `"task` passes as it came.

use crate::live::Live;
use rmcp::RoleServer;
use rmcp::model::{CustomResult, JsonRpcMessage, ProtocolVersion, ServerJsonRpcMessage, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// The prefix of the renamed methods: not a method any client sends.
const PREFIX: &str = "lovia/task ";

/// A `tools/call` that asks for a task, renamed.
pub(crate) const TASK_CALL: &str = "lovia/task tools/call";
/// `tasks/get`, renamed.
pub(crate) const GET: &str = "lovia/task tasks/get";
/// `tasks/result`, renamed.
pub(crate) const RESULT: &str = "lovia/task tasks/result";
/// `tasks/list`, renamed.
pub(crate) const LIST: &str = "lovia/task tasks/list";
/// `tasks/cancel`, renamed.
pub(crate) const CANCEL: &str = "lovia/task tasks/cancel";

/// The capability a server with tasks declares (2025-11-25): it lists and
/// cancels tasks, and runs `tools/call` as one.
pub(crate) fn capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// The message as rmcp should read it, when it is one of the renamed ones;
/// `None` leaves it as it is. A message that claims a renamed method
/// itself is left alone: it reaches the same handler, which checks its
/// params as it does any other's.
pub(crate) fn lift(message: &[u8]) -> Option<Vec<u8>> {
    if !message.windows(5).any(|w| w == b"\"task") {
        return None;
    }
    let mut value: Value = serde_json::from_slice(message).ok()?;
    // A 2026-07-28 request names its revision in `_meta`: its tasks are
    // rmcp's own (SEP-2663), and it passes as it came.
    if value.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion").is_some() {
        return None;
    }
    let object = value.as_object_mut()?;
    let renamed = match object.get("method")?.as_str()? {
        "tools/call" if object.get("params").and_then(|p| p.get("task")).is_some() => TASK_CALL,
        "tasks/get" => GET,
        "tasks/result" => RESULT,
        "tasks/list" => LIST,
        "tasks/cancel" => CANCEL,
        _ => return None,
    };
    object.insert("method".into(), renamed.into());
    serde_json::to_vec(&value).ok()
}

/// Whether a custom request's method is one [`lift`] made.
pub(crate) fn is_lifted(method: &str) -> bool {
    method.starts_with(PREFIX)
}

/// The method as the client sent it.
pub(crate) fn original(method: &str) -> &str {
    method.strip_prefix(PREFIX).unwrap_or(method)
}

/// What a session's outgoing side needs: the catalog (which tools run as
/// tasks), when the server has tasks on.
#[derive(Clone)]
pub(crate) struct TaskOffer {
    pub(crate) live: Arc<Live>,
}

impl TaskOffer {
    /// The message with tasks declared, for a 2025-11-25 session.
    fn declare(&self, message: &mut ServerJsonRpcMessage, legacy: &mut bool) {
        let JsonRpcMessage::Response(response) = message else { return };
        let value = match &response.result {
            ServerResult::InitializeResult(init) => {
                *legacy = init.protocol_version < ProtocolVersion::V_2026_07_28;
                if !*legacy {
                    return;
                }
                let Ok(mut value) = serde_json::to_value(init) else { return };
                if let Some(capabilities) = value.get_mut("capabilities").and_then(Value::as_object_mut) {
                    capabilities.insert("tasks".into(), capability());
                }
                value
            }
            ServerResult::ListToolsResult(list) if *legacy => {
                let Ok(mut value) = serde_json::to_value(list) else { return };
                let catalog = self.live.current();
                for tool in value.get_mut("tools").and_then(Value::as_array_mut).into_iter().flatten() {
                    let runs_as_task =
                        tool.get("name").and_then(Value::as_str).is_some_and(|n| catalog.task_tools.contains(n));
                    if let (true, Some(tool)) = (runs_as_task, tool.as_object_mut()) {
                        tool.insert("execution".into(), json!({"taskSupport": "optional"}));
                    }
                }
                value
            }
            _ => return,
        };
        response.result = ServerResult::CustomResult(CustomResult::new(value));
    }
}

/// A server transport that declares the server's tasks on the way out, to
/// a 2025-11-25 client (`capabilities.tasks`, each long tool's
/// `execution`), which rmcp does not model: the transport of `lovia mcp`'s
/// stdio and of each [`BoundedSessions`](crate::BoundedSessions) session.
pub struct TaskWire<T> {
    inner: T,
    offer: Option<TaskOffer>,
    /// Set once a 2025-11-25 `initialize` result went out.
    legacy: bool,
}

impl<T> TaskWire<T> {
    /// `inner`, declaring tasks when `offer` is some.
    pub(crate) fn new(inner: T, offer: Option<TaskOffer>) -> Self {
        Self { inner, offer, legacy: false }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for TaskWire<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let Some(offer) = &self.offer {
            offer.declare(&mut item, &mut self.legacy);
        }
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// The longest line [`LiftTasks`] looks into; a longer one passes as it
/// came (rmcp's own limit, 16 MiB, refuses it).
const MAX_LIFTED_LINE: usize = 16 << 20;

/// Reads newline-delimited JSON-RPC (stdio) and hands each line on through
/// [`lift`]. Written out rather than a line codec, so that it stays an
/// `AsyncRead` in front of rmcp's own transport and that transport (its
/// codec, its limits, its errors) is unchanged.
pub(crate) struct LiftTasks<R> {
    inner: R,
    /// Read and not yet a whole line.
    pending: Vec<u8>,
    /// Ready to hand on, from `at`.
    ready: Vec<u8>,
    at: usize,
    eof: bool,
}

impl<R> LiftTasks<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self { inner, pending: Vec::new(), ready: Vec::new(), at: 0, eof: false }
    }

    /// Moves the next whole line (or, at the end or past the limit, what is
    /// left) from `pending` to `ready`; false when there is none yet.
    fn next_ready(&mut self) -> bool {
        let line_end = self.pending.iter().position(|&b| b == b'\n');
        let take = match line_end {
            Some(end) => end + 1,
            None if self.eof || self.pending.len() > MAX_LIFTED_LINE => self.pending.len(),
            None => return false,
        };
        if take == 0 {
            return false;
        }
        let line: Vec<u8> = self.pending.drain(..take).collect();
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        self.ready = match (line_end, lift(body)) {
            (Some(_), Some(mut lifted)) => {
                lifted.push(b'\n');
                lifted
            }
            _ => line,
        };
        self.at = 0;
        true
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LiftTasks<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.at < this.ready.len() {
                let n = (this.ready.len() - this.at).min(buf.remaining());
                buf.put_slice(&this.ready[this.at..this.at + n]);
                this.at += n;
                return Poll::Ready(Ok(()));
            }
            if this.next_ready() {
                continue;
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if read.filled().is_empty() => this.eof = true,
                Poll::Ready(Ok(())) => this.pending.extend_from_slice(read.filled()),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[test]
    fn only_task_requests_are_renamed() {
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{"ttl":5}}}"#;
        let lifted: Value = serde_json::from_slice(&lift(call).expect("renamed")).expect("JSON");
        assert_eq!(lifted["method"], TASK_CALL);
        assert_eq!(lifted["params"]["task"]["ttl"], 5);
        for (method, renamed) in
            [("tasks/get", GET), ("tasks/result", RESULT), ("tasks/list", LIST), ("tasks/cancel", CANCEL)]
        {
            let text = format!(r#"{{"jsonrpc":"2.0","id":2,"method":"{method}","params":{{"taskId":"t"}}}}"#);
            let lifted: Value = serde_json::from_slice(&lift(text.as_bytes()).expect("renamed")).expect("JSON");
            assert_eq!(lifted["method"], renamed);
            assert!(is_lifted(renamed));
        }
        // A plain call, one whose arguments merely name a task, and what is not JSON pass as they came.
        assert_eq!(lift(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#), None);
        assert_eq!(lift(br#"{"method":"tools/call","params":{"arguments":{"task":1}}}"#), None);
        assert_eq!(lift(br#"{"method":"tasks/get""#), None);
        let newer = br#"{"method":"tasks/get","params":{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert_eq!(lift(newer), None, "a 2026-07-28 request is rmcp's");
        assert!(!is_lifted("tools/call"));
    }

    #[tokio::test]
    async fn lines_are_lifted_whole_however_they_arrive() {
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tasks/list"}"#;
        let plain = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
        let input = format!("{call}\n{plain}\n{call}");
        // One byte at a time: a line split across reads.
        let (mut client, server) = tokio::io::duplex(1);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            client.write_all(input.as_bytes()).await.expect("write");
        });
        let mut out = String::new();
        LiftTasks::new(server).read_to_string(&mut out).await.expect("read");
        writer.await.expect("writer");
        let lines: Vec<&str> = out.split('\n').collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(lines[0].contains(LIST), "{out}");
        assert_eq!(lines[1], plain);
        // The last line has no newline yet: passed on as it came at the end.
        assert_eq!(lines[2], call);
    }
}
