//! Connections: how many the service holds at once, in all, per peer
//! address and before they authenticate, and how long one may take to send
//! a request's head or sit idle.
//!
//! A connection is opened before anyone is authenticated, so these bounds
//! cannot be per tenant; they are what keeps a client that opens thousands
//! of connections, or trickles bytes to keep them open (slowloris), from
//! taking the connections every tenant needs:
//!
//! - a new connection's first byte must arrive within `first_byte_timeout`,
//!   and a request head, once its first byte arrived, must be whole within
//!   `head_timeout`, however steadily its bytes trickle in;
//! - connections that have not yet presented a valid API key hold at most
//!   `max_connections` less the authenticated reserve; when a new one would
//!   pass that (or no place is left at all), the oldest unauthenticated one
//!   that is waiting for a request head is closed to make room. A client
//!   that sends its head at once is answered; one that trickles is the one
//!   that waits longest and goes first. A connection that presented a valid
//!   key (the `/api` door marks it, through [`Connection`]) is never closed
//!   for room.
//!
//! Past a bound the connection is accepted and closed at once (a client sees
//! a reset, not a hang), and the refusal is counted in
//! `lovia_refused_total{reason=...}`: `connections` (per address),
//! `unauthenticated_connections` (closed for room) or `request_head_timeout`.
//!
//! axum's [`Listener`] is the hook: axum serves whatever it accepts, so the
//! limits live in `accept` and in the stream it returns. Hyper has a header
//! timeout, but axum's `serve` runs it without a timer, so the deadlines are
//! kept here, on the stream, where the idle bound also covers a silent
//! keep-alive connection between requests. Once a request's head has
//! arrived, silence until its response starts is the handler working, not
//! idleness. (The service speaks HTTP/1 only, so a head ends at `\r\n\r\n`.)

use crate::metrics::Metrics;
use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
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
    /// Connections held at once from one IPv6 /48, whatever /64s they come
    /// from: a client given a /48 (or a /56, which lies inside one) could
    /// otherwise hold `max_connections_per_ip` from each of its 65,536 /64s.
    /// Default: 128 (two /64s' worth).
    pub max_connections_per_ipv6_48: usize,
    /// A connection that neither sends nor receives a byte for this long is
    /// closed (a response being streamed, such as SSE with its keep-alive
    /// comments, is activity, and so is a request being answered). Default: 60 s.
    pub idle_timeout: Duration,
    /// A new connection whose first byte has not arrived this long after it
    /// was accepted is closed. Default: 10 s.
    pub first_byte_timeout: Duration,
    /// A request head (request line and headers) not whole this long after
    /// its first byte arrived is closed, however steadily it trickles.
    /// Default: 10 s.
    pub head_timeout: Duration,
    /// The percentage of `max_connections` that only connections which
    /// presented a valid API key may hold: unauthenticated ones hold the
    /// rest at most (at least one). Default: 25.
    pub authenticated_reserve_percent: u8,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            max_connections_per_ip: 64,
            max_connections_per_ipv6_48: 128,
            idle_timeout: Duration::from_secs(60),
            first_byte_timeout: Duration::from_secs(10),
            head_timeout: Duration::from_secs(10),
            authenticated_reserve_percent: 25,
        }
    }
}

impl ConnectionLimits {
    /// How many connections that have not presented a valid key may be held at once.
    fn unauthenticated_cap(&self) -> usize {
        let all = self.max_connections.max(1);
        let reserved = all * usize::from(self.authenticated_reserve_percent.min(100)) / 100;
        all.saturating_sub(reserved).max(1)
    }
}

/// The connections that have not presented a valid key, oldest first.
#[derive(Default)]
struct Unauthenticated {
    held: Mutex<BTreeMap<u64, Arc<ConnState>>>,
}

impl Unauthenticated {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<ConnState>>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Closes the oldest one that is waiting for a request head (not one
    /// being answered); false if there is none.
    fn evict_oldest_waiting(&self) -> bool {
        let mut held = self.lock();
        let Some(id) = held.iter().find(|(_, c)| !c.answering.load(Ordering::Acquire)).map(|(id, _)| *id) else {
            return false;
        };
        if let Some(conn) = held.remove(&id) {
            conn.evicted.store(true, Ordering::Release);
            if let Some(waker) = conn.waker.lock().unwrap_or_else(|p| p.into_inner()).take() {
                waker.wake();
            }
        }
        true
    }
}

/// What the stream and the requests on it share about one connection.
struct ConnState {
    id: u64,
    /// A request's head has arrived and its response has not started.
    answering: AtomicBool,
    /// Closed to make room: the stream fails its next wait for a head.
    evicted: AtomicBool,
    /// The stream's task, woken when it is evicted.
    waker: Mutex<Option<Waker>>,
    unauthenticated: Arc<Unauthenticated>,
}

/// One accepted connection as its requests see it (axum's connect info:
/// serve [`crate::Service::app`], which carries it), so that the door can
/// tell the listener the connection presented a valid key.
#[derive(Clone)]
pub struct Connection {
    state: Arc<ConnState>,
}

impl Connection {
    /// The connection presented a valid API key: it no longer counts
    /// against the unauthenticated connections, and is never closed for room.
    pub(crate) fn authenticated(&self) {
        self.state.unauthenticated.lock().remove(&self.state.id);
    }
}

impl Connected<IncomingStream<'_, LimitedListener>> for Connection {
    fn connect_info(stream: IncomingStream<'_, LimitedListener>) -> Self {
        Connection { state: stream.io().state.clone() }
    }
}

/// A [`TcpListener`] that holds to [`ConnectionLimits`]; give it to
/// `axum::serve` in place of the listener.
pub struct LimitedListener {
    inner: TcpListener,
    limits: ConnectionLimits,
    all: Arc<Semaphore>,
    per_ip: Arc<Mutex<HashMap<Peer, usize>>>,
    unauthenticated: Arc<Unauthenticated>,
    next_id: AtomicU64,
    metrics: Arc<Metrics>,
}

impl LimitedListener {
    pub(crate) fn new(inner: TcpListener, limits: ConnectionLimits, metrics: Arc<Metrics>) -> Self {
        Self {
            inner,
            all: Arc::new(Semaphore::new(limits.max_connections.max(1))),
            limits,
            per_ip: Arc::default(),
            unauthenticated: Arc::default(),
            next_id: AtomicU64::new(0),
            metrics,
        }
    }

    /// One of the peer's connection places, if it has one left.
    fn claim(&self, ip: IpAddr) -> Option<PeerSlot> {
        claim(&self.per_ip, ip, &self.limits)
    }

    /// Makes room for one more unauthenticated connection by closing the
    /// oldest one waiting for a head, counted as a refusal.
    fn evict(&self) -> bool {
        let evicted = self.unauthenticated.evict_oldest_waiting();
        if evicted {
            self.metrics.refuse("-", "unauthenticated_connections");
            tracing::debug!("an unauthenticated connection waiting for a request head was closed to make room");
        }
        evicted
    }
}

/// What connections are counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Peer {
    /// An IPv4 address, or an IPv6 /64 (its address with the low 64 bits cleared).
    Address(IpAddr),
    /// An IPv6 /48 (the address with the low 80 bits cleared).
    Ipv6Slash48(Ipv6Addr),
}

/// Whom a connection counts against: its IPv4 address (an IPv4-mapped IPv6
/// address is its IPv4 form); or the /64 of an IPv6 address, as one client
/// is commonly given a whole /64, and its /48, as one may be given that.
fn peer_keys(ip: IpAddr) -> [Option<Peer>; 2] {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            [
                Some(Peer::Address(IpAddr::V6(Ipv6Addr::from(bits & !(u128::from(u64::MAX)))))),
                Some(Peer::Ipv6Slash48(Ipv6Addr::from(bits & !((1u128 << 80) - 1)))),
            ]
        }
        v4 => [Some(Peer::Address(v4)), None],
    }
}

/// One of the peer's connection places in `held`, if it has one left:
/// under its address's (or /64's) bound and, for IPv6, its /48's.
fn claim(held: &Arc<Mutex<HashMap<Peer, usize>>>, ip: IpAddr, limits: &ConnectionLimits) -> Option<PeerSlot> {
    let keys = peer_keys(ip);
    let mut peers = held.lock().unwrap_or_else(|p| p.into_inner());
    let full = keys.iter().flatten().any(|key| {
        let bound = match key {
            Peer::Address(_) => limits.max_connections_per_ip,
            Peer::Ipv6Slash48(_) => limits.max_connections_per_ipv6_48,
        };
        peers.get(key).copied().unwrap_or(0) >= bound.max(1)
    });
    if full {
        return None;
    }
    for key in keys.iter().flatten() {
        *peers.entry(*key).or_insert(0) += 1;
    }
    Some(PeerSlot { keys, peers: held.clone() })
}

/// A peer's places, given back when its connection closes.
struct PeerSlot {
    keys: [Option<Peer>; 2],
    peers: Arc<Mutex<HashMap<Peer, usize>>>,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        for key in self.keys.iter().flatten() {
            if let Some(held) = peers.get_mut(key) {
                *held -= 1;
                if *held == 0 {
                    peers.remove(key);
                }
            }
        }
    }
}

impl Listener for LimitedListener {
    type Io = LimitedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            // Past the bound, clients queue in the kernel's backlog rather
            // than in memory here: with no place free, one is accepted and
            // waits for one. If an unauthenticated connection waiting for a
            // head holds a place, it makes room instead: the service is
            // full of slow clients, not of work.
            let free = self.all.clone().try_acquire_owned().ok();
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
            let Some(peer) = self.claim(addr.ip()) else {
                self.metrics.refuse("-", "connections");
                tracing::debug!(peer = %addr.ip(), "connection refused: too many from this address");
                drop(stream);
                continue;
            };
            let permit = match free {
                Some(permit) => permit,
                // One may have come free while waiting for the connection.
                None => match self.all.clone().try_acquire_owned() {
                    Ok(permit) => permit,
                    Err(_) => {
                        self.evict();
                        let Ok(permit) = self.all.clone().acquire_owned().await else { continue };
                        permit
                    }
                },
            };
            if self.unauthenticated.lock().len() >= self.limits.unauthenticated_cap() && !self.evict() {
                // Every unauthenticated place is held by a request being
                // answered: this one waits for none of them.
                self.metrics.refuse("-", "unauthenticated_connections");
                tracing::debug!(peer = %addr.ip(), "connection refused: too many unauthenticated connections");
                drop(stream);
                continue;
            }
            let _ = stream.set_nodelay(true);
            let state = Arc::new(ConnState {
                id: self.next_id.fetch_add(1, Ordering::Relaxed),
                answering: AtomicBool::new(false),
                evicted: AtomicBool::new(false),
                waker: Mutex::default(),
                unauthenticated: self.unauthenticated.clone(),
            });
            self.unauthenticated.lock().insert(state.id, state.clone());
            let now = Instant::now();
            let first_byte = now + self.limits.first_byte_timeout;
            let stream = LimitedStream {
                inner: stream,
                idle: self.limits.idle_timeout,
                head_timeout: self.limits.head_timeout,
                last_active: now,
                head_due: Some(first_byte),
                head_started: false,
                deadline: Box::pin(tokio::time::sleep_until(first_byte.min(now + self.limits.idle_timeout))),
                last: [0; 3],
                state,
                metrics: self.metrics.clone(),
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
    head_timeout: Duration,
    /// When a byte last went either way. Recorded on every read and write
    /// (a clock read); the timer below is moved only when it fires early,
    /// not on every read and write.
    last_active: Instant,
    /// When the head being waited for must be whole: the first byte's
    /// deadline on a new connection, then `head_timeout` after a head's
    /// first byte. None while a request is answered and between requests
    /// (then the idle bound applies).
    head_due: Option<Instant>,
    /// A byte of the next head has arrived.
    head_started: bool,
    deadline: Pin<Box<Sleep>>,
    /// The last bytes read, to find a head's end (`\r\n\r\n`) across reads.
    last: [u8; 3],
    /// Whether a request is being answered (then silence is the handler
    /// working, and a body that stalls is the body read timeout's business),
    /// and whether the connection was closed for room.
    state: Arc<ConnState>,
    metrics: Arc<Metrics>,
    _peer: PeerSlot,
    _permit: OwnedSemaphorePermit,
}

impl Drop for LimitedStream {
    fn drop(&mut self) {
        self.state.unauthenticated.lock().remove(&self.state.id);
    }
}

impl LimitedStream {
    fn answering(&self) -> bool {
        self.state.answering.load(Ordering::Acquire)
    }

    /// Notes bytes just read: activity, the start of a head (its deadline
    /// starts), and whether they complete one.
    fn read(&mut self, read: &[u8]) {
        let now = Instant::now();
        self.last_active = now;
        if self.answering() {
            return;
        }
        if !self.head_started {
            self.head_started = true;
            let due = now + self.head_timeout;
            self.head_due = Some(due);
            if due < self.deadline.deadline() {
                self.deadline.as_mut().reset(due);
            }
        }
        if ends_a_head(&mut self.last, read) {
            self.state.answering.store(true, Ordering::Release);
            self.head_due = None;
            self.head_started = false;
            self.last = [0; 3];
        }
    }

    /// Notes a write's result: a response has started, and that is
    /// activity. An interim response (`100 Continue`, which hyper writes on
    /// its own before the body is read) starts none: the request's body is
    /// still to come, and is not the next request's head.
    fn wrote(&mut self, first: &[u8], result: &Poll<io::Result<usize>>) {
        if matches!(result, Poll::Ready(Ok(n)) if *n > 0) {
            if !first.starts_with(b"HTTP/1.1 1") {
                self.state.answering.store(false, Ordering::Release);
            }
            self.last_active = Instant::now();
        }
    }

    /// Why the connection is to be closed now, if it is: silent for
    /// `idle`, or a head past its deadline. Until then the timer is set to
    /// fire when it would be.
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<&'static str> {
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return None;
            }
            let now = Instant::now();
            if self.head_due.is_some_and(|due| now >= due) {
                return Some(if self.head_started {
                    "request head too slow"
                } else {
                    "no request within the first byte timeout"
                });
            }
            let idle_due = self.last_active + self.idle;
            if now >= idle_due {
                return Some("connection idle");
            }
            self.deadline.as_mut().reset(self.head_due.map_or(idle_due, |due| due.min(idle_due)));
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
        if this.state.evicted.load(Ordering::Acquire) && !this.answering() {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionAborted, "closed to make room")));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.read(&buf.filled()[before..]);
                }
                Poll::Ready(result)
            }
            Poll::Pending if this.answering() => Poll::Pending,
            Poll::Pending => {
                if let Some(why) = this.expired(cx) {
                    if why != "connection idle" {
                        this.metrics.refuse("-", "request_head_timeout");
                    }
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, why)));
                }
                // To be woken if it is closed for room; checked again after
                // registering, as an eviction may have come in between.
                let mut waker = this.state.waker.lock().unwrap_or_else(|p| p.into_inner());
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
                drop(waker);
                if this.state.evicted.load(Ordering::Acquire) {
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionAborted, "closed to make room")));
                }
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, data);
        this.wrote(data, &result);
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
        this.wrote(bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &b[..]), &result);
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
    fn the_authenticated_reserve_leaves_unauthenticated_connections_the_rest() {
        let cap = |max_connections, authenticated_reserve_percent| {
            ConnectionLimits { max_connections, authenticated_reserve_percent, ..ConnectionLimits::default() }
                .unauthenticated_cap()
        };
        assert_eq!(cap(1024, 25), 768);
        assert_eq!(cap(8, 25), 6);
        assert_eq!(cap(1, 90), 1, "at least one, or no one could present a key");
        assert_eq!(cap(10, 0), 10);
    }

    #[test]
    fn a_peer_is_its_ipv4_address_or_its_ipv6_slash_64_and_slash_48() {
        let key = |s: &str| peer_keys(s.parse().expect("ip"));
        assert_eq!(key("192.0.2.7"), key("::ffff:192.0.2.7"), "mapped is the IPv4 form");
        assert_eq!(key("192.0.2.7")[1], None, "IPv4 has no /48");
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"), "one /64");
        assert_ne!(key("2001:db8:1:2::1")[0], key("2001:db8:1:3::1")[0]);
        assert_eq!(key("2001:db8:1:2::1")[1], key("2001:db8:1:3::1")[1], "one /48");
        assert_ne!(key("2001:db8:1:2::1")[1], key("2001:db8:2:2::1")[1]);
        assert_eq!(key("2001:db8:1:2::1")[0], Some(Peer::Address("2001:db8:1:2::".parse().expect("ip"))));
        assert_eq!(key("2001:db8:1:2::1")[1], Some(Peer::Ipv6Slash48("2001:db8:1::".parse().expect("ip"))));
        // A /64 and a /48 with the same bits are different peers.
        assert_ne!(key("2001:db8:1::1")[0], key("2001:db8:1::1")[1]);
    }

    /// A client rotating /64s inside one /48 is held to the /48's bound,
    /// and each place comes back when its connection closes.
    #[test]
    fn rotating_ipv6_slash_64s_meets_the_slash_48_bound() {
        let limits = ConnectionLimits {
            max_connections_per_ip: 2,
            max_connections_per_ipv6_48: 3,
            ..ConnectionLimits::default()
        };
        let per_ip: Arc<Mutex<HashMap<Peer, usize>>> = Arc::default();
        let claim = |ip: &str| claim(&per_ip, ip.parse().expect("ip"), &limits);
        let a = claim("2001:db8:1:1::1").expect("first");
        let _b = claim("2001:db8:1:1::2").expect("second of the /64");
        assert!(claim("2001:db8:1:1::3").is_none(), "the /64 is full");
        let _c = claim("2001:db8:1:2::1").expect("another /64, third of the /48");
        assert!(claim("2001:db8:1:3::1").is_none(), "the /48 is full");
        assert!(claim("2001:db8:2:3::1").is_some(), "another /48");
        drop(a);
        assert!(claim("2001:db8:1:3::1").is_some(), "a place came back");
    }
}
