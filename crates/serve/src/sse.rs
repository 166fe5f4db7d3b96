//! The body of an SSE response: frames from a run's pump, and a guard that
//! tells the run when its reader left.

use bytes::Bytes;
use hyper::body::{Body, Frame};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// One SSE frame: `event: <name>` and one `data:` line of JSON.
pub(crate) fn frame(event: &str, data: &serde_json::Value) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// Streams the frames it receives until the sender is gone; runs
/// `on_drop` when the client disconnects (or the stream ends).
pub(crate) struct SseBody {
    rx: mpsc::UnboundedReceiver<Bytes>,
    on_drop: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl SseBody {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<Bytes>, on_drop: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self { rx, on_drop: Some(Box::new(on_drop)) }
    }
}

impl Drop for SseBody {
    fn drop(&mut self) {
        self.rx.close();
        if let Some(f) = self.on_drop.take() {
            f();
        }
    }
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|f| f.map(|b| Ok(Frame::data(b))))
    }
}
