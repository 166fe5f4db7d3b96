//! Streamable HTTP: the tower service to mount at `/mcp`, with its `Host`
//! and `Origin` allowlist, the head checks of `guard`, and its bounded
//! sessions (`sessions`).

mod guard;

use crate::{BoundedSessions, McpServer};
pub use guard::Guarded;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;

/// The tower service [`McpServer::http_service`] returns: rmcp's streamable
/// HTTP behind lovia's checks of the request head.
pub type McpHttpService = Guarded<StreamableHttpService<McpServer, BoundedSessions>>;

impl McpServer {
    /// A tower service answering streamable HTTP (mount it at `/mcp`).
    /// `allowed_hosts` is the `Host` allowlist against DNS rebinding
    /// [default in [`HttpOptions`]: loopback names only]; an empty list
    /// accepts any `Host`. The same list decides the rest of the head: a
    /// browser `Origin` must be `http` or `https` on an allowed host (403
    /// otherwise; a request without `Origin` is not from a page), a second
    /// `Host` header is 400, and an absolute-form target must name an
    /// allowed host (403). Its 2025-11-25 sessions are kept in this
    /// process's memory, at most [`HttpOptions::max_sessions`].
    pub fn http_service(self, options: HttpOptions) -> McpHttpService {
        // A 2026-07-28 call whose first message is its result is answered as
        // one JSON body instead of an SSE stream; one that sends progress or
        // asks first still streams, so nothing is lost (rmcp falls back).
        let config = StreamableHttpServerConfig::default()
            .with_json_response(true)
            .with_sse_keep_alive(Some(options.sse_keep_alive))
            .with_allowed_hosts(options.allowed_hosts.clone())
            .with_cancellation_token(options.shutdown);
        // With no Host allowlist (a service behind its own keys) any Origin
        // passes too; otherwise an Origin must name an allowed host.
        let config = if options.allowed_hosts.is_empty() {
            config
        } else {
            config.with_allowed_origins(guard::origins(&options.allowed_hosts)).enforce_origin_validation()
        };
        let sessions = options.sessions.unwrap_or_else(|| Arc::new(BoundedSessions::new(options.max_sessions)));
        sessions.offer_tasks(self.task_offer());
        Guarded {
            inner: StreamableHttpService::new(move || Ok(self.for_session()), sessions, config),
            allowed_hosts: options.allowed_hosts.into(),
        }
    }
}

/// Options of [`McpServer::http_service`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Hosts (`name` or `name:port`) accepted in the `Host` header.
    /// Default: `localhost`, `127.0.0.1`, `::1`, so a web page cannot reach
    /// a local server through DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// Cancelled to end every session and refuse new requests. Default: a
    /// fresh token nobody cancels.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// The most 2025-11-25 sessions open at once; an `initialize` past it is
    /// refused ([`SessionLimitReached`](crate::SessionLimitReached)) until one is closed (`DELETE`) or
    /// idle for [`IDLE_SESSION`](crate::IDLE_SESSION) (5 minutes). 2026-07-28 requests
    /// hold no session. Default: [`DEFAULT_MAX_SESSIONS`].
    pub max_sessions: usize,
    /// The session manager to use instead of a new one with
    /// [`max_sessions`](Self::max_sessions): a host that keeps it can count
    /// the sessions. Default: none.
    pub sessions: Option<Arc<BoundedSessions>>,
    /// Silence on an SSE stream (a call that streams progress or waits for
    /// an approval, a `GET` stream) before a keep-alive comment, so that a
    /// proxy or an idle-connection limit does not cut it. Default:
    /// [`DEFAULT_SSE_KEEP_ALIVE`], 15 s.
    pub sse_keep_alive: std::time::Duration,
}

/// The default of [`HttpOptions::sse_keep_alive`]: 15 s, as
/// `sse_keep_alive_secs` in `lovia serve`.
pub const DEFAULT_SSE_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// The default of [`HttpOptions::max_sessions`]: 1,000 sessions.
pub const DEFAULT_MAX_SESSIONS: usize = 1_000;

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            shutdown: tokio_util::sync::CancellationToken::new(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            sessions: None,
            sse_keep_alive: DEFAULT_SSE_KEEP_ALIVE,
        }
    }
}
