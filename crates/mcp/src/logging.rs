//! A tool's log lines as MCP `notifications/message`, so that an MCP client
//! sees what the host's log and the console see. A client chooses the least
//! level it wants with `logging/setLevel` (2025-11-25 sessions: it holds for
//! the session) or a request's `_meta` `io.modelcontextprotocol/logLevel`
//! (2026-07-28: for that request). Until it asks, it is sent none: the
//! lines are the tool author's, and a client that did not ask for them does
//! not pay for them. The logger is the tool's name.
//!
//! MCP logging is deprecated by SEP-2577 for later revisions, and rmcp marks
//! its types so; the clients that reach for it today are 2025-11-25 ones.
#![expect(deprecated, reason = "MCP logging (SEP-2577) is what today's clients use; see the module's comment")]

use lovia_host::LogLevel;
use rmcp::RoleServer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::Peer;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// No level set: nothing is sent.
const OFF: u8 = u8::MAX;

/// The least level a client wants, as MCP orders them (debug lowest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Threshold(u8);

impl Threshold {
    /// The threshold a `logging/setLevel` or `_meta` level names.
    pub(crate) fn of(level: LoggingLevel) -> Self {
        Self(rank(level))
    }

    /// The notification for a tool's line, if it is at least this level.
    pub(crate) fn message(self, level: LogLevel, tool: &str, line: &str) -> Option<LoggingMessageNotificationParam> {
        let level = mcp_level(level);
        (rank(level) >= self.0)
            .then(|| LoggingMessageNotificationParam::new(level, Value::String(line.to_owned())).with_logger(tool))
    }
}

/// Sends a tool's line to `peer` when it is at least `threshold`; a client
/// gone away only loses the line.
pub(crate) async fn send(peer: &Peer<RoleServer>, threshold: Threshold, level: LogLevel, tool: &str, line: &str) {
    if let Some(note) = threshold.message(level, tool, line)
        && let Err(e) = peer.notify_logging_message(note).await
    {
        tracing::debug!(error = %e, "log notification not delivered");
    }
}

/// A session's level, shared by the clones that serve its requests.
#[derive(Debug, Clone)]
pub(crate) struct SessionLevel(Arc<AtomicU8>);

impl Default for SessionLevel {
    fn default() -> Self {
        Self(Arc::new(AtomicU8::new(OFF)))
    }
}

impl SessionLevel {
    pub(crate) fn set(&self, level: LoggingLevel) {
        self.0.store(rank(level), Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> Option<Threshold> {
        let rank = self.0.load(Ordering::Relaxed);
        (rank != OFF).then_some(Threshold(rank))
    }
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// A tool's level in MCP's terms: MCP has no trace, so trace is debug.
fn mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Trace | LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Warn => LoggingLevel::Warning,
        _ => LoggingLevel::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_below_the_threshold_are_not_sent() {
        let warning = Threshold::of(LoggingLevel::Warning);
        assert!(warning.message(LogLevel::Info, "t", "x").is_none());
        let sent = warning.message(LogLevel::Error, "lookup", "boom").expect("sent");
        assert_eq!(
            (sent.level, sent.logger.as_deref(), sent.data),
            (LoggingLevel::Error, Some("lookup"), "boom".into())
        );
        let debug = Threshold::of(LoggingLevel::Debug);
        assert_eq!(debug.message(LogLevel::Trace, "t", "x").map(|m| m.level), Some(LoggingLevel::Debug));
        let session = SessionLevel::default();
        assert_eq!(session.get(), None);
        session.set(LoggingLevel::Info);
        assert_eq!(session.get(), Some(Threshold::of(LoggingLevel::Info)));
    }
}
