//! The 2025-11-25 sessions of streamable HTTP, bounded. rmcp's
//! `LocalSessionManager` keeps each session (a task and its channels) in
//! memory until the client closes it (`DELETE`) or it is idle for
//! [`IDLE_SESSION`], and creates one for every `initialize`: without a
//! bound, a client could hold any number. This wraps it and refuses an
//! `initialize` past the bound; everything else is rmcp's.
//!
//! 2026-07-28 requests never reach a session manager: each is answered
//! statelessly. A session's transport declares the server's tasks on the
//! way out (tasks/wire.rs), which rmcp does not model.

use crate::tasks::wire::{TaskOffer, TaskWire};
use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, LocalSessionManagerError};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use std::sync::RwLock;
use std::time::Duration;

/// How long a session may stay idle before rmcp ends it: its default, 5 minutes.
pub const IDLE_SESSION: Duration =
    rmcp::transport::streamable_http_server::session::local::SessionConfig::DEFAULT_KEEP_ALIVE;

/// A new session was refused: the bound is reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{max} MCP sessions are open already, the most allowed; close one (DELETE /mcp with its Mcp-Session-Id) or wait until one has been idle for 5 minutes"
)]
#[non_exhaustive]
pub struct SessionLimitReached {
    /// The bound.
    pub max: usize,
}

impl SessionLimitReached {
    /// The refusal of a manager bounded at `max` (a host that refuses an
    /// `initialize` before it reaches the manager says the same).
    pub fn new(max: usize) -> Self {
        Self { max }
    }
}

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionsError {
    /// rmcp's own error (an unknown session, a closed one).
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    /// No room for a new session.
    #[error(transparent)]
    Full(#[from] SessionLimitReached),
}

/// rmcp's in-memory sessions, at most `max` at once.
#[derive(Debug)]
pub struct BoundedSessions {
    inner: LocalSessionManager,
    max: usize,
    /// Held from the count to the insertion, so two `initialize` requests at
    /// once cannot both take the last place.
    creating: tokio::sync::Mutex<()>,
    /// The tasks of the server whose sessions these are, when it has them on.
    tasks: RwLock<Option<TaskOffer>>,
}

impl std::fmt::Debug for TaskOffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskOffer")
    }
}

impl BoundedSessions {
    /// A manager that holds at most `max` sessions.
    pub fn new(max: usize) -> Self {
        Self {
            inner: LocalSessionManager::default(),
            max,
            creating: tokio::sync::Mutex::new(()),
            tasks: RwLock::default(),
        }
    }

    /// The server whose sessions these are offers tasks.
    pub(crate) fn offer_tasks(&self, offer: Option<TaskOffer>) {
        *self.tasks.write().unwrap_or_else(|p| p.into_inner()) = offer;
    }

    /// The sessions open now.
    pub async fn open(&self) -> usize {
        self.inner.sessions.read().await.len()
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.max
    }
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = TaskWire<<LocalSessionManager as SessionManager>::Transport>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _one = self.creating.lock().await;
        if self.open().await >= self.max {
            return Err(SessionLimitReached { max: self.max }.into());
        }
        let (id, transport) = SessionManager::create_session(&self.inner).await?;
        let offer = self.tasks.read().unwrap_or_else(|p| p.into_inner()).clone();
        Ok((id, TaskWire::new(transport, offer)))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(SessionManager::initialize_session(&self.inner, id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(SessionManager::has_session(&self.inner, id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(SessionManager::close_session(&self.inner, id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(SessionManager::create_stream(&self.inner, id, message).await?)
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        Ok(SessionManager::accept_message(&self.inner, id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(SessionManager::create_standalone_stream(&self.inner, id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(SessionManager::resume(&self.inner, id, last_event_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_past_the_bound_is_refused_until_one_closes() {
        let sessions = BoundedSessions::new(2);
        let (first, _t1) = sessions.create_session().await.expect("first");
        let (_second, _t2) = sessions.create_session().await.expect("second");
        assert_eq!(sessions.open().await, 2);
        match sessions.create_session().await {
            Err(SessionsError::Full(full)) => assert_eq!(full, SessionLimitReached::new(2)),
            other => panic!("a third session: {:?}", other.map(|(id, _)| id)),
        }
        sessions.close_session(&first).await.expect("close");
        assert!(sessions.create_session().await.is_ok(), "a closed session gives its place back");
    }
}
