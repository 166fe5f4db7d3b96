//! Connections: how many the service holds at once, in all and per peer
//! address, and how long one may sit idle.
//!
//! A connection is opened before anyone is authenticated, so these bounds
//! cannot be per tenant; they are what keeps a client that opens thousands
//! of connections, or trickles bytes to keep them open (slowloris), from
//! taking the connections every tenant needs. Past a bound the connection
//! is accepted and closed at once (a client sees a reset, not a hang), and
//! the refusal is counted in `lovia_refused_total{reason="connections"}`.
//!
//! axum's [`Listener`] is the hook: axum serves whatever it accepts, so the
//! limits live in `accept` and in the stream it returns. Hyper has a header
//! timeout, but axum's `serve` runs it without a timer, so the idle bound is
//! kept here, on the stream, where it also covers a silent keep-alive
//! connection between requests. Once a request's head has arrived, silence
//! until its response starts is the handler working, not idleness.

use crate::metrics::Metrics;
use axum::serve::Listener;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// The bounds on connections. Every field documents its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionLimits {
    /// Connections held at once, in all. Default: 1,024.
    pub max_connections: usize,
    /// Connections held at once from one peer IP address (an IPv6 peer by
    /// its /64). Default: 64. Behind
    /// a reverse proxy every client shares the proxy's address: raise it to
    /// `max_connections` there and bound clients at the proxy.
    pub max_connections_per_ip: usize,
    /// A connection that neither sends nor receives a byte for this long is
    /// closed (a response being streamed, such as SSE with its keep-alive
    /// comments, is activity, and so is a request being answered). Default: 60 s.
    pub idle_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self { max_connections: 1024, max_connections_per_ip: 64, idle_timeout: Duration::from_secs(60) }
    }
}

/// A [`TcpListener`] that holds to [`ConnectionLimits`]; give it to
/// `axum::serve` in place of the listener.
pub struct LimitedListener {
    inner: TcpListener,
    limits: ConnectionLimits,
    all: Arc<Semaphore>,
    per_ip: Arc<Mutex<HashMap<IpAddr, usize>>>,
    metrics: Arc<Metrics>,
}

impl LimitedListener {
    pub(crate) fn new(inner: TcpListener, limits: ConnectionLimits, metrics: Arc<Metrics>) -> Self {
        Self {
            inner,
            all: Arc::new(Semaphore::new(limits.max_connections.max(1))),
            limits,
            per_ip: Arc::default(),
            metrics,
        }
    }

    /// One of the peer's connection places, if it has one left.
    fn claim(&self, ip: IpAddr) -> Option<PeerSlot> {
        let mut peers = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        let held = peers.entry(ip).or_insert(0);
        if *held >= self.limits.max_connections_per_ip.max(1) {
            return None;
        }
        *held += 1;
        Some(PeerSlot { ip, peers: self.per_ip.clone() })
    }
}

/// Who a connection counts against: its IPv4 address (an IPv4-mapped IPv6
/// address is its IPv4 form), or the /64 of an IPv6 address, as one client
/// is commonly given a whole /64.
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u64::MAX as u128))),
        v4 => v4,
    }
}

/// A peer's place, given back when its connection closes.
struct PeerSlot {
    ip: IpAddr,
    peers: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = peers.get_mut(&self.ip) {
            *held -= 1;
            if *held == 0 {
                peers.remove(&self.ip);
            }
        }
    }
}

impl Listener for LimitedListener {
    type Io = LimitedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            // Wait for a place before accepting: past the bound, clients
            // queue in the kernel's backlog rather than in memory here.
            let Ok(permit) = self.all.clone().acquire_owned().await else { continue };
            let (stream, addr) = match self.inner.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: axum's own
                    // listener also waits a moment rather than spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Some(peer) = self.claim(peer_key(addr.ip())) else {
                self.metrics.refuse("-", "connections");
                tracing::debug!(peer = %addr.ip(), "connection refused: too many from this address");
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let idle = self.limits.idle_timeout;
            let stream = LimitedStream {
                inner: stream,
                idle,
                last_active: Instant::now(),
                deadline: Box::pin(tokio::time::sleep(idle)),
                answering: false,
                last: [0; 3],
                _peer: peer,
                _permit: permit,
            };
            return (stream, addr);
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// An accepted connection: closed when idle too long; its places are given
/// back when it is dropped.
pub struct LimitedStream {
    inner: TcpStream,
    idle: Duration,
    /// When a byte last went either way. Recorded on every read and write
    /// (a clock read); the timer below is moved only when it fires early,
    /// not on every read and write.
    last_active: Instant,
    deadline: Pin<Box<Sleep>>,
    /// A request's head has arrived and its response has not started: the
    /// handler is working (a long call, a compile, a wait for a slot), and
    /// silence is not idleness. A body that stalls meanwhile is the body
    /// read timeout's business.
    answering: bool,
    /// The last bytes read, to find a head's end (`\r\n\r\n`) across reads.
    last: [u8; 3],
    _peer: PeerSlot,
    _permit: OwnedSemaphorePermit,
}

impl LimitedStream {
    /// Notes bytes just read: activity, and whether they complete a request head.
    fn read(&mut self, read: &[u8]) {
        self.last_active = Instant::now();
        if ends_a_head(&mut self.last, read) {
            self.answering = true;
        }
    }

    /// Notes a write's result: a response has started, and that is activity.
    fn wrote(&mut self, result: &Poll<io::Result<usize>>) {
        if matches!(result, Poll::Ready(Ok(n)) if *n > 0) {
            self.answering = false;
            self.last_active = Instant::now();
        }
    }

    /// Whether the connection has been silent for `idle`; until then the
    /// timer is set to fire when it would be.
    fn idle_out(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return false;
            }
            let due = self.last_active + self.idle;
            if Instant::now() >= due {
                return true;
            }
            self.deadline.as_mut().reset(due);
        }
    }
}

/// Whether `read`, following the bytes in `last`, contains the end of a
/// request head (`\r\n\r\n`, which may straddle reads); `last` becomes the
/// last three bytes seen. Allocates nothing: it runs on every read.
fn ends_a_head(last: &mut [u8; 3], read: &[u8]) -> bool {
    let mut seam = [0u8; 6];
    seam[..3].copy_from_slice(last);
    let head = read.len().min(3);
    seam[3..3 + head].copy_from_slice(&read[..head]);
    let found = seam[..3 + head].windows(4).any(|w| w == b"\r\n\r\n") || read.windows(4).any(|w| w == b"\r\n\r\n");
    let kept = read.len().min(3);
    last.rotate_left(kept);
    last[3 - kept..].copy_from_slice(&read[read.len() - kept..]);
    found
}

impl AsyncRead for LimitedStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.read(&buf.filled()[before..]);
                }
                Poll::Ready(result)
            }
            Poll::Pending if this.answering => Poll::Pending,
            Poll::Pending if this.idle_out(cx) => {
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "connection idle")))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, data);
        this.wrote(&result);
        result
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.wrote(&result);
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_head_is_seen_across_reads() {
        let end = |chunks: &[&[u8]]| {
            let mut last = [0u8; 3];
            chunks.iter().fold(false, |seen, chunk| ends_a_head(&mut last, chunk) | seen)
        };
        assert!(end(&[b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"]));
        assert!(end(&[b"GET / HTTP/1.1\r\n", b"\r", b"\n"]), "split over three reads");
        assert!(end(&[b"Host: x\r\n\r", b"\n"]));
        assert!(!end(&[b"GET / HTTP/1.1\r\n", b"Host: x\r\n"]));
    }

    #[test]
    fn a_peer_is_its_ipv4_address_or_its_ipv6_slash_64() {
        let key = |s: &str| peer_key(s.parse().expect("ip"));
        assert_eq!(key("192.0.2.7"), key("::ffff:192.0.2.7"), "mapped is the IPv4 form");
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"), "one /64");
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("2001:db8:1:2::1"), "2001:db8:1:2::".parse::<IpAddr>().expect("ip"));
    }
}
