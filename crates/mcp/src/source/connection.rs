//! One live session with an MCP server: the process started with exactly
//! the environment the configuration names (or the URL reached with the
//! configured headers), `initialize` done, a flag that
//! `notifications/tools/list_changed` raises, and the server's progress
//! notifications routed to their calls.

use super::bounded::BoundedLines;
use super::config::{McpServerConfig, START_TIMEOUT};
use super::http_client;
use super::process::ServerProcess;
use super::progress::ProgressRoutes;
use super::start_error::StartError;
use super::task_support::TaskOnly;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProtocolVersion};
use rmcp::service::{ClientInitializeError, NotificationContext, Peer, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The client side of a session: raises `changed` on a tool-list change
/// and hands progress to the call it is for.
#[derive(Clone)]
pub(crate) struct Listener {
    pub(crate) changed: Arc<AtomicBool>,
    pub(crate) progress: Arc<ProgressRoutes>,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.store(true, Ordering::SeqCst);
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.progress.deliver(&params);
    }

    fn get_info(&self) -> ClientConfig {
        // 2025-11-25 is the newest revision with a session, where a server
        // sends list changes unasked; lovia asks for no client features.
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("lovia", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

/// A running session. Dropping it ends the session and kills the process.
pub(crate) struct Connection {
    service: RunningService<RoleClient, Listener>,
    /// Raised when the server sent a message over the bound, which ended
    /// the session (stdio; over HTTP rmcp refuses the response instead).
    overflowed: Arc<AtomicBool>,
    /// The process of a `command` server, killed (a confined one with
    /// everything it started) when the session is dropped.
    _process: Option<ServerProcess>,
}

impl Connection {
    /// Starts `config`'s server; a tool-list change raises `changed`,
    /// progress goes to the route of its token, and the tools its listings
    /// say run only as tasks (which rmcp's typed listing drops) go to
    /// `task_only`, read off the raw messages (stdio, and HTTP answers that
    /// stream; not those a server sends as one JSON body).
    pub(crate) async fn open(
        config: &McpServerConfig,
        changed: Arc<AtomicBool>,
        progress: Arc<ProgressRoutes>,
        task_only: TaskOnly,
    ) -> Result<Self, StartError> {
        let listener = Listener { changed, progress };
        let server = || config.name.clone();
        let overflowed = Arc::new(AtomicBool::new(false));
        let handshake_failed = |reason: String| StartError::Handshake { server: server(), reason };
        let (serving, process) = match (&config.command, &config.url) {
            (Some(command), _) => {
                let (process, stdout, stdin) = ServerProcess::spawn(config, command)?;
                // Spawned here rather than by rmcp's `TokioChildProcess` so that
                // its output can be read through the bound (bounded.rs).
                let stdout = BoundedLines::new(stdout, overflowed.clone()).with_task_reader(task_only.clone());
                let serving = tokio::time::timeout(START_TIMEOUT, listener.serve((stdout, stdin))).await;
                (serving.map(|r| r.map_err(|e| e.to_string())), Some(process))
            }
            (None, Some(url)) => {
                let transport = http_client::transport(config, url, task_only)?;
                let serving = tokio::time::timeout(START_TIMEOUT, listener.serve(transport)).await;
                // Read by the model when a restart fails: never the URL.
                let reason = |e: ClientInitializeError| match e {
                    ClientInitializeError::TransportError { error, .. } => http_client::reason(error.error.as_ref()),
                    other => http_client::reason(&other),
                };
                (serving.map(|r| r.map_err(reason)), None)
            }
            (None, None) => return Err(handshake_failed("neither `command` nor `url` is set".into())),
        };
        let service = serving
            .map_err(|_| handshake_failed(format!("no answer to initialize within {} s", START_TIMEOUT.as_secs())))?
            .map_err(handshake_failed)?;
        Ok(Self { service, overflowed, _process: process })
    }

    /// The handle requests are sent through.
    pub(crate) fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    /// Whether the session has ended (the process died or closed stdout).
    pub(crate) fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }

    /// Whether the session ended on a message over the bound.
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::SeqCst)
    }
}
