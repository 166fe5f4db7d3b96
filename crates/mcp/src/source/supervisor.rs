//! Keeps one server's session alive: a session that died (the process
//! exited, the transport broke) is dropped, and the next request starts a
//! new one, after a backoff that grows with each restart in a row.

use super::config::{MAX_LIST_PAGES, MAX_MESSAGE_BYTES, MAX_TOOLS_PER_SERVER, McpServerConfig, START_TIMEOUT};
use super::connection::Connection;
use super::http_client;
use super::progress::ProgressRoutes;
use super::start_error::StartError;
use super::task_call::{self, Abandon, TaskFailed};
use super::task_support::TaskOnly;
use lovia_host::ProgressSink;
use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, JsonObject, ListToolsRequest,
    PaginatedRequestParams, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The wait before the second restart in a row; it doubles with each
/// further one. The first restart after a working session is immediate.
pub const RESTART_BACKOFF_FIRST: Duration = Duration::from_millis(250);
/// The longest wait between restarts. Fixed: 30 s.
pub const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Why a request to the server failed: the session broke, the server
/// answered with a protocol error, or its answer was not what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub(crate) struct RequestFailed {
    pub(crate) reason: String,
    /// The session broke (or never started) and the next request starts a
    /// new one. False when the server answered (a JSON-RPC error, or an
    /// answer of the wrong kind) and its session is kept.
    pub(crate) restarted: bool,
}

impl RequestFailed {
    /// The session broke or never started; it is restarted for the next request.
    fn broken(reason: impl Into<String>) -> Self {
        Self { reason: reason.into(), restarted: true }
    }

    /// The server answered, but not with what was asked.
    fn answered(reason: impl Into<String>) -> Self {
        Self { reason: reason.into(), restarted: false }
    }
}

impl From<StartError> for RequestFailed {
    fn from(e: StartError) -> Self {
        Self::broken(e.to_string())
    }
}

struct State {
    conn: Option<Connection>,
    /// Counts sessions, so that a failure drops only the session it came from.
    session: u64,
    /// Restarts since the last request that succeeded.
    restarts: u32,
    /// No restart before this instant.
    not_before: Option<Instant>,
}

/// One server's session, restarted on demand.
pub(crate) struct Supervisor {
    pub(crate) config: McpServerConfig,
    /// Raised by the server's `notifications/tools/list_changed`, and by a
    /// restart (the new process may list other tools).
    pub(crate) changed: Arc<AtomicBool>,
    /// The calls in flight that want the server's progress, across restarts.
    progress: Arc<ProgressRoutes>,
    /// The tools the server's last listing said run only as tasks, which
    /// are called as tasks (task_call.rs); across restarts.
    task_only: TaskOnly,
    state: tokio::sync::Mutex<State>,
}

impl Supervisor {
    pub(crate) fn new(config: McpServerConfig) -> Self {
        Self {
            config,
            changed: Arc::new(AtomicBool::new(false)),
            progress: Arc::default(),
            task_only: TaskOnly::default(),
            state: tokio::sync::Mutex::new(State { conn: None, session: 0, restarts: 0, not_before: None }),
        }
    }

    /// The live session's handle, starting a session when there is none
    /// (after the backoff when this is a restart).
    async fn peer(&self) -> Result<(Peer<RoleClient>, u64), RequestFailed> {
        let mut state = self.state.lock().await;
        if let Some(conn) = &state.conn {
            if !conn.is_closed() {
                return Ok((conn.peer(), state.session));
            }
            tracing::warn!(server = %self.config.name, "the MCP server's session ended; restarting it");
            state.conn = None;
            self.note_restart(&mut state);
        }
        if let Some(when) = state.not_before {
            tokio::time::sleep_until(when.into()).await;
        }
        match Connection::open(&self.config, self.changed.clone(), self.progress.clone(), self.task_only.clone()).await
        {
            Ok(conn) => {
                let peer = conn.peer();
                state.conn = Some(conn);
                state.session += 1;
                Ok((peer, state.session))
            }
            Err(e) => {
                self.note_restart(&mut state);
                Err(e.into())
            }
        }
    }

    /// Counts a restart and sets when the next one may happen.
    fn note_restart(&self, state: &mut State) {
        let delay = match state.restarts {
            0 => Duration::ZERO,
            n => RESTART_BACKOFF_FIRST.saturating_mul(1 << (n - 1).min(16)).min(RESTART_BACKOFF_MAX),
        };
        state.restarts = state.restarts.saturating_add(1);
        state.not_before = Some(Instant::now() + delay);
        // The restarted server may list other tools.
        self.changed.store(true, Ordering::SeqCst);
    }

    /// Drops the session after a transport failure, so that the next
    /// request restarts the server; true when the session ended on a
    /// message over the bound.
    async fn broken(&self, session: u64) -> bool {
        let mut state = self.state.lock().await;
        if state.session != session {
            return false;
        }
        let Some(conn) = state.conn.take() else { return false };
        self.note_restart(&mut state);
        conn.overflowed()
    }

    async fn succeeded(&self) {
        let mut state = self.state.lock().await;
        state.restarts = 0;
        state.not_before = None;
    }

    /// Starts the session now (at run start), so that a server that cannot
    /// start is an error before anything runs.
    pub(crate) async fn start(&self) -> Result<(), StartError> {
        let mut state = self.state.lock().await;
        if state.conn.is_none() {
            state.conn = Some(
                Connection::open(&self.config, self.changed.clone(), self.progress.clone(), self.task_only.clone())
                    .await?,
            );
            state.session += 1;
        }
        Ok(())
    }

    /// Every tool the server lists, as raw JSON objects, at most
    /// [`MAX_TOOLS_PER_SERVER`] (+1, so that the caller can say the list
    /// was cut) over at most [`MAX_LIST_PAGES`] pages.
    pub(crate) async fn list(&self) -> Result<Vec<Value>, RequestFailed> {
        // Cleared first: a change announced while listing lists again next time.
        self.changed.store(false, Ordering::SeqCst);
        let (peer, session) = self.peer().await?;
        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_LIST_PAGES {
            let params = PaginatedRequestParams::default().with_cursor(cursor.take());
            let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
            let answer = tokio::time::timeout(START_TIMEOUT, peer.send_request(request)).await;
            let answer = match answer {
                Err(_) => return Err(RequestFailed::broken("tools/list was not answered in time")),
                Ok(Err(e)) => return Err(self.failed(session, e).await),
                Ok(Ok(answer)) => answer,
            };
            // A listing rmcp cannot type (a tool without an input schema)
            // arrives raw; lovia reads both the same way and normalises.
            let page = match answer {
                ServerResult::ListToolsResult(page) => serde_json::to_value(page).unwrap_or_default(),
                ServerResult::CustomResult(raw) => raw.0,
                _ => return Err(RequestFailed::answered("the answer to tools/list is not a tool list")),
            };
            if let Some(items) = page.get("tools").and_then(Value::as_array) {
                tools.extend(
                    items.iter().take(MAX_TOOLS_PER_SERVER + 1 - tools.len().min(MAX_TOOLS_PER_SERVER + 1)).cloned(),
                );
            }
            cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
            if cursor.is_none() || tools.len() > MAX_TOOLS_PER_SERVER {
                break;
            }
        }
        self.succeeded().await;
        Ok(tools)
    }

    /// Calls the server's tool `raw_name` with `arguments`; with a
    /// `progress` sink, the request carries a token of its own and the
    /// server's progress for it goes there while the call runs.
    pub(crate) async fn call(
        &self,
        raw_name: &str,
        arguments: JsonObject,
        progress: Option<ProgressSink>,
    ) -> Result<CallToolResult, RequestFailed> {
        let (span, meta) = crate::trace::client_call(&self.config.name, raw_name, self.config.url.is_some());
        let answer = span.within(self.send_call(raw_name, arguments, progress, meta)).await;
        match &answer {
            Ok(result) if result.is_error == Some(true) => span.fail("tool_error", "the server's tool failed"),
            Ok(_) => {}
            Err(e) => span.fail("request_failed", e.to_string()),
        }
        answer
    }

    async fn send_call(
        &self,
        raw_name: &str,
        arguments: JsonObject,
        progress: Option<ProgressSink>,
        meta: Option<JsonObject>,
    ) -> Result<CallToolResult, RequestFailed> {
        let (peer, session) = self.peer().await?;
        if self.task_only.contains(raw_name) {
            let sink = progress.map(|sink| (&self.progress, sink));
            return match task_call::call_as_task(&peer, raw_name, arguments, meta, sink).await {
                Ok(result) => {
                    self.succeeded().await;
                    Ok(result)
                }
                Err(TaskFailed::Request(e)) => Err(self.failed(session, e).await),
                Err(TaskFailed::Answered(reason)) => Err(RequestFailed::answered(reason)),
            };
        }
        let mut params = CallToolRequestParams::new(raw_name.to_owned()).with_arguments(arguments);
        if let Some(meta) = meta {
            params.meta = Some(meta.into());
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // rmcp gives every request a progress token of its own; the route to
        // this call's sink is open from before the server can answer (the
        // request is only queued here) to after its answer. Dropping it
        // stops the routing.
        let handle = peer.send_request_with_option(request, PeerRequestOptions::no_options()).await;
        let route = match (&handle, progress) {
            (Ok(handle), Some(sink)) => Some(self.progress.route(handle.progress_token.clone(), sink)),
            _ => None,
        };
        // A call lovia gives up on (its timeout, a cancel) is cancelled at
        // the server too (`notifications/cancelled`).
        let mut abandon = handle.as_ref().ok().map(|h| Abandon::request(peer.clone(), h.id.clone()));
        let answer = match handle {
            Ok(handle) => handle.await_response().await,
            Err(e) => Err(e),
        };
        if let Some(abandon) = &mut abandon {
            abandon.disarm();
        }
        if route.is_some() {
            // rmcp hands each notification to a task of its own, spawned
            // before it reads the response that follows: yielding lets the
            // progress the server sent before its answer reach the call
            // before the route closes (docs/mcp.md).
            for _ in 0..2 {
                tokio::task::yield_now().await;
            }
        }
        drop(route);
        match answer {
            Ok(ServerResult::CallToolResult(result)) => {
                self.succeeded().await;
                Ok(result)
            }
            Ok(_) => Err(RequestFailed::answered("the server's answer is not a tool result")),
            Err(e) => Err(self.failed(session, e).await),
        }
    }

    /// The reason of a failed request; a broken session is dropped.
    async fn failed(&self, session: u64, e: ServiceError) -> RequestFailed {
        match &e {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                let overflowed = self.broken(session).await;
                RequestFailed::broken(match &e {
                    _ if overflowed => format!("the server sent a message over {MAX_MESSAGE_BYTES} bytes"),
                    ServiceError::TransportSend(sent) if self.config.url.is_some() => {
                        format!("the request to the server failed: {}", http_client::reason(sent.error.as_ref()))
                    }
                    _ if self.config.url.is_some() => "the connection to the server closed".to_owned(),
                    _ => "the server's session ended (the process exited or closed its output)".to_owned(),
                })
            }
            ServiceError::McpError(data) => {
                RequestFailed::answered(format!("the server answered with error {}: {}", data.code.0, data.message))
            }
            // A timeout or a cancellation: the session is not dropped either.
            other => RequestFailed::answered(other.to_string()),
        }
    }
}
