//! The guest's stdout and stderr: a bounded ring in memory. A guest may
//! print as much as it likes; the host keeps the last `capacity` bytes and
//! counts what it dropped. Nothing is parsed out of them: a panic's message
//! reaches the host through `context.panicked` (sandbox/trap.rs).

use bytes::Bytes;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// A ring buffer the guest writes into; clones share it.
#[derive(Clone)]
pub(crate) struct OutputRing {
    inner: Arc<Mutex<Ring>>,
}

struct Ring {
    capacity: usize,
    bytes: VecDeque<u8>,
    dropped: u64,
}

impl OutputRing {
    /// A ring that keeps the last `capacity` bytes.
    pub(crate) fn new(capacity: usize) -> Self {
        Self { inner: Arc::new(Mutex::new(Ring { capacity, bytes: VecDeque::new(), dropped: 0 })) }
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        // A poisoned lock only means a writer panicked mid-append; the bytes are still bytes.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes kept (the last `capacity` written).
    #[cfg(test)]
    pub(crate) fn contents(&self) -> Vec<u8> {
        self.lock().bytes.iter().copied().collect()
    }

    /// How many earlier bytes were overwritten.
    #[cfg(test)]
    pub(crate) fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    fn append(&self, data: &[u8]) {
        let mut ring = self.lock();
        let capacity = ring.capacity;
        // Only the tail of an oversized write can survive.
        let data = if data.len() > capacity {
            ring.dropped += (data.len() - capacity) as u64;
            &data[data.len() - capacity..]
        } else {
            data
        };
        let overflow = (ring.bytes.len() + data.len()).saturating_sub(capacity);
        ring.bytes.drain(..overflow);
        ring.dropped += overflow as u64;
        ring.bytes.extend(data);
    }
}

/// The most one `write` may carry; the ring accepts any amount, this only
/// keeps single host-side copies small.
const WRITE_PERMIT: usize = 64 * 1024;

#[async_trait::async_trait]
impl OutputStream for OutputRing {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_PERMIT)
    }
}

#[async_trait::async_trait]
impl Pollable for OutputRing {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for OutputRing {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for OutputRing {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for OutputRing {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::OutputRing;

    #[test]
    fn the_ring_keeps_the_last_bytes_and_counts_the_rest() {
        let ring = OutputRing::new(8);
        ring.append(b"hello ");
        ring.append(b"world");
        assert_eq!(ring.contents(), b"lo world");
        assert_eq!(ring.dropped(), 3);
        ring.append(b"0123456789abc");
        assert_eq!(ring.contents(), b"56789abc");
        assert_eq!(ring.dropped(), 16);
    }
}
