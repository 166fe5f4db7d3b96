//! Server-sent events through axum's [`Sse`], with keep-alive comments so
//! that proxies and load balancers do not cut a stream that waits (for an
//! approval, say) with nothing to send.
//!
//! Each reader of a run has a bounded queue of [`READER_QUEUE`] events. A
//! reader that falls that far behind is disconnected rather than buffered
//! without bound: its stream ends, and it can reconnect (`POST /api/chat`
//! without `input`, with `Last-Event-ID` set to the last event id it got),
//! which replays the run's kept events after it (`chat::RUN_REPLAY_EVENTS`),
//! and read the whole transcript with `GET /api/chat/{session_id}`.

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;

/// Events queued for one reader before it counts as too slow and is disconnected.
pub(crate) const READER_QUEUE: usize = 1024;

/// One SSE event: `event: <name>` and one `data:` line of JSON.
pub(crate) fn frame(event: &str, data: &serde_json::Value) -> Event {
    Event::default().event(event).data(data.to_string())
}

/// A reader's stream: the events it receives until the run's sender is gone
/// (or dropped it for falling behind); runs `on_drop` when the client
/// disconnects or the stream ends.
pub(crate) struct Reader {
    rx: mpsc::Receiver<Event>,
    on_drop: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Reader {
    /// A reader and the sender that feeds it.
    pub(crate) fn new(on_drop: impl FnOnce() + Send + Sync + 'static) -> (mpsc::Sender<Event>, Self) {
        let (tx, rx) = mpsc::channel(READER_QUEUE);
        (tx, Self { rx, on_drop: Some(Box::new(on_drop)) })
    }

    /// The SSE response, with a keep-alive comment after `keep_alive` of silence.
    pub(crate) fn into_response(self, keep_alive: Duration) -> Response {
        Sse::new(self).keep_alive(KeepAlive::new().interval(keep_alive)).into_response()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.rx.close();
        if let Some(f) = self.on_drop.take() {
            f();
        }
    }
}

impl futures_core::Stream for Reader {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx).map(|e| e.map(Ok))
    }
}

#[cfg(test)]
impl Reader {
    /// The events queued for this reader so far.
    pub(crate) fn queued(&mut self) -> usize {
        let mut n = 0;
        while self.rx.try_recv().is_ok() {
            n += 1;
        }
        n
    }
}

/// Milliseconds since the Unix epoch (0 before it: a clock that wrong
/// shows odd times, it does not fail a request).
pub(crate) fn unix_ms(at: std::time::SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
