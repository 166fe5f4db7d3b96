//! Outbound HTTP through `wasi:http`: an allowlist of origins, checked
//! again after DNS resolution, with the connection pinned to the address
//! that was checked (no second lookup an attacker could rebind).
//!
//! Default: no origin is granted, so every request is refused with
//! `HTTP-request-denied` before any lookup or connection.

use super::escape_controls;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::Duration;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error as WasiHttpError, RequestOptions, WasiBody, WasiHttpHooks};

/// How long to wait for DNS and the TCP (and TLS) handshake when the guest
/// sets no connect timeout. The call's own deadline bounds everything anyway.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// One granted origin, written `scheme://host[:port]`.
///
/// - `scheme` is `http` or `https`;
/// - `host` is a name or an IP literal (`[::1]` for IPv6), `*.example.com`
///   for any subdomain of `example.com`, or `*` for any host;
/// - `port` defaults to the scheme's (80, 443); `:*` allows any port.
///
/// Loopback, private, link-local, metadata and other special addresses are
/// refused after DNS resolution unless the host is written out exactly
/// (no `*`): `http://127.0.0.1:8080` or `http://localhost:8080` reach the
/// loopback interface, `https://*` never does.
///
/// ```
/// use lovia_host::HttpOrigin;
/// let origin: HttpOrigin = "https://*.example.com".parse().unwrap();
/// assert_eq!(origin.to_string(), "https://*.example.com");
/// assert!("ftp://example.com".parse::<HttpOrigin>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HttpOrigin {
    https: bool,
    host: HostPattern,
    /// `None`: any port.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// This host only (lower case; IPv6 without brackets).
    Exact(String),
    /// Any strict subdomain of this domain.
    Subdomains(String),
    /// Any host.
    Any,
}

/// Why an origin pattern was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid HTTP origin {pattern:?}: {reason}")]
pub struct InvalidOrigin {
    /// The pattern as written.
    pub pattern: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl std::str::FromStr for HttpOrigin {
    type Err = InvalidOrigin;

    fn from_str(pattern: &str) -> Result<Self, InvalidOrigin> {
        let err = |reason| InvalidOrigin { pattern: pattern.to_owned(), reason };
        let (https, rest) = if let Some(rest) = pattern.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = pattern.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(err("expected http:// or https:// followed by a host"));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#', '@']) {
            return Err(err("an origin is scheme://host[:port], without path, query or user"));
        }
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(|| err("unclosed [ in an IPv6 host"))?;
            host.parse::<Ipv6Addr>().map_err(|_| err("not an IPv6 address between [ and ]"))?;
            match after {
                "" => (host, None),
                _ => (host, Some(after.strip_prefix(':').ok_or_else(|| err("expected :port after ]"))?)),
            }
        } else {
            match rest.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        let port = match port {
            None => Some(if https { 443 } else { 80 }),
            Some("*") => None,
            Some(p) => {
                Some(p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| err("the port must be 1-65535 or *"))?)
            }
        };
        let host = host.to_ascii_lowercase();
        let host = if host == "*" {
            HostPattern::Any
        } else if let Some(domain) = host.strip_prefix("*.") {
            if domain.is_empty() || domain.contains('*') {
                return Err(err("a wildcard host is * or *.domain"));
            }
            HostPattern::Subdomains(domain.to_owned())
        } else if host.is_empty() {
            return Err(err("the host is empty"));
        } else if host.contains('*') {
            return Err(err("a wildcard host is * or *.domain"));
        } else {
            HostPattern::Exact(host)
        };
        Ok(HttpOrigin { https, host, port })
    }
}

impl TryFrom<String> for HttpOrigin {
    type Error = InvalidOrigin;
    fn try_from(s: String) -> Result<Self, InvalidOrigin> {
        s.parse()
    }
}

impl From<HttpOrigin> for String {
    fn from(o: HttpOrigin) -> String {
        o.to_string()
    }
}

impl fmt::Display for HttpOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        match &self.host {
            HostPattern::Exact(h) if h.contains(':') => write!(f, "{scheme}://[{h}]")?,
            HostPattern::Exact(h) => write!(f, "{scheme}://{h}")?,
            HostPattern::Subdomains(d) => write!(f, "{scheme}://*.{d}")?,
            HostPattern::Any => write!(f, "{scheme}://*")?,
        }
        match self.port {
            None => write!(f, ":*"),
            Some(p) if p == if self.https { 443 } else { 80 } => Ok(()),
            Some(p) => write!(f, ":{p}"),
        }
    }
}

impl HttpOrigin {
    fn matches(&self, target: &Target) -> bool {
        self.https == target.https
            && self.port.is_none_or(|p| p == target.port)
            && match &self.host {
                HostPattern::Exact(h) => *h == target.host,
                HostPattern::Subdomains(d) => {
                    target.host.strip_suffix(d.as_str()).is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.'))
                }
                HostPattern::Any => true,
            }
    }

    /// Whether a request to `scheme://host:port` falls under this origin.
    /// `host` is compared in lower case, an IPv6 literal without brackets.
    ///
    /// ```
    /// use lovia_host::HttpOrigin;
    /// let origin: HttpOrigin = "https://*.example.com".parse().unwrap();
    /// assert!(origin.permits("https", "docs.example.com", 443));
    /// assert!(!origin.permits("https", "example.com", 443));
    /// assert!(!origin.permits("http", "docs.example.com", 80));
    /// ```
    pub fn permits(&self, scheme: &str, host: &str, port: u16) -> bool {
        let https = match scheme {
            "https" => true,
            "http" => false,
            _ => return false,
        };
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        self.matches(&Target { https, host, port })
    }

    /// Whether the host is written out exactly (no `*`), which is what
    /// lets it reach loopback, private and other special addresses.
    pub fn is_exact(&self) -> bool {
        matches!(self.host, HostPattern::Exact(_))
    }

    /// The host, when written out exactly: lower case, an IPv6 literal
    /// without brackets.
    pub fn exact_host(&self) -> Option<&str> {
        match &self.host {
            HostPattern::Exact(h) => Some(h),
            _ => None,
        }
    }
}

/// Where a request goes.
struct Target {
    https: bool,
    /// Lower case, IPv6 without brackets.
    host: String,
    port: u16,
}

impl Target {
    fn of(uri: &http::Uri) -> Option<Target> {
        let https = match uri.scheme_str()? {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Some(Target { https, host, port })
    }
}

/// Whether `ip` is an address a plugin must not reach through a wildcard
/// grant: every range of IANA's special-purpose address registries for
/// both families (loopback, private, shared, link-local where cloud
/// metadata lives, documentation, benchmarking, protocol assignments,
/// translation prefixes, …), multicast, and IPv6 forms that embed an IPv4
/// address, which are judged by the embedded address.
pub fn is_special_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_special_v4(v4),
        IpAddr::V6(v6) => is_special_v6(v6),
    }
}

/// The IPv4 special-purpose registry
/// (<https://www.iana.org/assignments/iana-ipv4-special-registry>, as of
/// 2025), every entry whatever its "globally reachable" column says: none is
/// a destination a tool needs through a wildcard grant. Then multicast
/// (<https://www.iana.org/assignments/multicast-addresses>).
const SPECIAL_V4: &[(Ipv4Addr, u8, &str)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8, "this network (RFC 791)"),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private use (RFC 1918)"),
    (Ipv4Addr::new(100, 64, 0, 0), 10, "shared address space (RFC 6598)"),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback (RFC 1122)"),
    (Ipv4Addr::new(169, 254, 0, 0), 16, "link local, cloud metadata (RFC 3927)"),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "private use (RFC 1918)"),
    (
        Ipv4Addr::new(192, 0, 0, 0),
        24,
        "IETF protocol assignments, DS-Lite, PCP/TURN anycast, NAT64 discovery (RFC 6890)",
    ),
    (Ipv4Addr::new(192, 0, 2, 0), 24, "documentation TEST-NET-1 (RFC 5737)"),
    (Ipv4Addr::new(192, 31, 196, 0), 24, "AS112-v4 (RFC 7535)"),
    (Ipv4Addr::new(192, 52, 193, 0), 24, "AMT (RFC 7450)"),
    (Ipv4Addr::new(192, 88, 99, 0), 24, "deprecated 6to4 relay anycast (RFC 7526)"),
    (Ipv4Addr::new(192, 168, 0, 0), 16, "private use (RFC 1918)"),
    (Ipv4Addr::new(192, 175, 48, 0), 24, "direct delegation AS112 service (RFC 7534)"),
    (Ipv4Addr::new(198, 18, 0, 0), 15, "benchmarking (RFC 2544)"),
    (Ipv4Addr::new(198, 51, 100, 0), 24, "documentation TEST-NET-2 (RFC 5737)"),
    (Ipv4Addr::new(203, 0, 113, 0), 24, "documentation TEST-NET-3 (RFC 5737)"),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "multicast (RFC 5771)"),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "reserved, and limited broadcast 255.255.255.255 (RFC 1112, RFC 919)"),
];

/// The IPv6 special-purpose registry
/// (<https://www.iana.org/assignments/iana-ipv6-special-registry>, as of
/// 2025), every entry, plus multicast, the deprecated site-local and
/// IPv4-compatible forms (RFC 4291 §2.5.5.1, §2.5.7). The prefixes that
/// embed an IPv4 address (IPv4-mapped `::ffff:0:0/96`, SIIT's
/// IPv4-translated `::ffff:0:0:0/96`, NAT64's `64:ff9b::/96`) are not here:
/// [`embedded_v4`] judges them by that address.
const SPECIAL_V6: &[(Ipv6Addr, u8, &str)] = &[
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0), 96, "unspecified, loopback, deprecated IPv4-compatible (RFC 4291)"),
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48, "local-use IPv4/IPv6 translation (RFC 8215)"),
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64, "discard-only (RFC 6666)"),
    (Ipv6Addr::new(0x100, 0, 0, 1, 0, 0, 0, 0), 64, "dummy IPv6 prefix (RFC 9780)"),
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        23,
        "IETF protocol assignments: Teredo, PCP/TURN/DNS-SD anycast, benchmarking, AMT, AS112, ORCHID, drone ID (RFC 2928)",
    ),
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32, "documentation (RFC 3849)"),
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16, "6to4, reaches any IPv4 address through a relay (RFC 3056)"),
    (Ipv6Addr::new(0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0), 48, "direct delegation AS112 service (RFC 7534)"),
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20, "documentation (RFC 9637)"),
    (Ipv6Addr::new(0x5f00, 0, 0, 0, 0, 0, 0, 0), 16, "segment routing SIDs (RFC 9602)"),
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7, "unique local, incl. fd00:ec2::254 metadata (RFC 4193)"),
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10, "link-local unicast (RFC 4291)"),
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10, "deprecated site-local (RFC 3879)"),
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8, "multicast (RFC 4291)"),
];

fn in_prefix(ip: u128, prefix: u128, len: u8, bits: u32) -> bool {
    let len = u32::from(len).min(bits);
    if len == 0 {
        return true;
    }
    let mask = u128::MAX << (128 - len);
    let shift = 128 - bits;
    ((ip << shift) & mask) == ((prefix << shift) & mask)
}

fn is_special_v4(ip: Ipv4Addr) -> bool {
    let bits = u128::from(u32::from(ip));
    SPECIAL_V4.iter().any(|(net, len, _)| in_prefix(bits, u128::from(u32::from(*net)), *len, 32))
}

/// The IPv4 address an IPv6 address stands for, in the forms that reach it:
/// IPv4-mapped `::ffff:a.b.c.d` (RFC 4291), SIIT's IPv4-translated
/// `::ffff:0:a.b.c.d` (RFC 2765) and NAT64's well-known `64:ff9b::a.b.c.d`
/// (RFC 6052).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let mapped = s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff;
    let translated = s[..4] == [0, 0, 0, 0] && s[4] == 0xffff && s[5] == 0;
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    (mapped || translated || nat64).then(|| Ipv4Addr::from(ip.to_bits() as u32))
}

fn is_special_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = embedded_v4(ip) {
        return is_special_v4(v4);
    }
    let bits = ip.to_bits();
    SPECIAL_V6.iter().any(|(net, len, _)| in_prefix(bits, net.to_bits(), *len, 128))
}

/// The `wasi:http` hooks of one call: which origins it may reach, and who
/// is asking (for the log line of a refusal).
pub(crate) struct HttpHooks {
    pub(crate) origins: Arc<[HttpOrigin]>,
    /// The granted origins whose requests carry the call's trace context
    /// (`Grants::http_trace_context`).
    pub(crate) trace_origins: Arc<[HttpOrigin]>,
    pub(crate) plugin: Arc<str>,
    pub(crate) tool: Arc<str>,
    pub(crate) call_id: Arc<str>,
    /// The run's token: a run past its fence sends nothing (its lease may
    /// be another replica's, which may be sending the same request).
    pub(crate) cancel: crate::call::CancelToken,
}

type IoFuture = Box<dyn Future<Output = Result<(), WasiHttpError>> + Send>;
type SendResult = Result<(http::Response<WasiBody>, IoFuture), WasiHttpError>;

impl WasiHttpHooks for HttpHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: IoFuture,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        let origins = self.origins.clone();
        let (plugin, tool, call) = (self.plugin.clone(), self.tool.clone(), self.call_id.clone());
        let cancel = self.cancel.clone();
        // The call's trace context, read here, while the guest's call is the
        // current one (docs/telemetry.md); sent only to an origin granted it.
        let trace = (!self.trace_origins.is_empty() && lovia_telemetry::Telemetry::in_current().is_on())
            .then(lovia_telemetry::Context::current);
        let trace_origins = self.trace_origins.clone();
        let mut request = request;
        Box::new(async move {
            let url = request.uri().to_string();
            let refuse = |error: WasiHttpError, reason: &str| {
                tracing::warn!(plugin = %escape_controls(&plugin), %tool, %call, %url, reason, "outbound HTTP refused");
                Err(error)
            };
            // Userinfo (`user@host`) is refused, not stripped: the host's
            // allowlist would judge `host` while the guest chose what goes
            // on the wire in the Host header (built from the authority), and
            // RFC 9110 §4.2.4 forbids userinfo in http(s) URIs anyway.
            if has_userinfo(&request) {
                return refuse(WasiHttpError::HttpRequestUriInvalid, "userinfo in the URL or Host header");
            }
            let Some(target) = Target::of(request.uri()) else {
                return refuse(WasiHttpError::HttpRequestUriInvalid, "not an http(s) URL with a host");
            };
            let Some(origin) = origins.iter().find(|o| o.matches(&target)) else {
                return refuse(WasiHttpError::HttpRequestDenied, "origin not granted");
            };
            if let Some(cx) = &trace
                && trace_origins.iter().any(|o| o.matches(&target))
            {
                // The host's context, never one the guest made up.
                let headers = request.headers_mut();
                for key in lovia_telemetry::propagate::KEYS {
                    headers.remove(key);
                }
                lovia_telemetry::propagate::inject(cx, |key, value| {
                    if let Ok(value) = http::HeaderValue::from_str(&value) {
                        headers.insert(key, value);
                    }
                });
            }
            let connect_timeout = options.and_then(|o| o.connect_timeout).unwrap_or(DEFAULT_CONNECT_TIMEOUT);

            let resolved = match tokio::time::timeout(connect_timeout, resolve(&target)).await {
                Ok(Ok(addrs)) => addrs,
                Ok(Err(_)) => return refuse(dns_error("name not resolved"), "DNS lookup failed"),
                Err(_) => return refuse(WasiHttpError::DnsTimeout, "DNS lookup timed out"),
            };
            let allowed: Vec<SocketAddr> =
                resolved.iter().copied().filter(|a| origin.is_exact() || !is_special_address(a.ip())).collect();
            if allowed.is_empty() {
                let reason = if resolved.is_empty() { "no address" } else { "special address via a wildcard grant" };
                return refuse(WasiHttpError::DestinationIpProhibited, reason);
            }
            // Checked last before the request leaves (after the DNS wait):
            // the clock, not a task, says whether the lease still holds.
            if cancel.fence_ended() {
                return refuse(WasiHttpError::HttpRequestDenied, "the run's lease ended (fenced)");
            }
            // Nor does a cancelled run send anything more: the call is
            // interrupted at its next guest instruction, but a request it
            // had made and that waits here (for its address, or its turn)
            // would otherwise still leave (bench/fault-run saw payments
            // arrive 25 to 42 ms after a cancel's answer).
            if cancel.is_cancelled() {
                return refuse(WasiHttpError::HttpRequestDenied, "the run was cancelled");
            }
            let (response, io) = send(request, &target, &allowed, connect_timeout, &cancel).await?;
            Ok((response, Box::new(io) as IoFuture))
        })
    }
}

/// Whether the request's authority or its Host header carries userinfo.
fn has_userinfo(request: &http::Request<WasiBody>) -> bool {
    let in_uri = request.uri().authority().is_some_and(|a| a.as_str().contains('@'));
    let in_host = request.headers().get_all(http::header::HOST).iter().any(|h| h.as_bytes().contains(&b'@'));
    in_uri || in_host
}

fn dns_error(rcode: &str) -> WasiHttpError {
    WasiHttpError::DnsError { rcode: Some(rcode.to_owned()), info_code: None }
}

async fn resolve(target: &Target) -> std::io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = target.host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, target.port)]);
    }
    Ok(tokio::net::lookup_host((target.host.as_str(), target.port)).await?.collect())
}

/// Sends `request` over a connection to one of `addrs` (already checked),
/// with TLS for `https` verified against the requested host name.
async fn send(
    mut request: http::Request<WasiBody>,
    target: &Target,
    addrs: &[SocketAddr],
    connect_timeout: Duration,
    cancel: &crate::call::CancelToken,
) -> Result<(http::Response<WasiBody>, impl Future<Output = Result<(), WasiHttpError>> + Send + use<>), WasiHttpError> {
    use http_body_util::BodyExt;

    let tcp = match tokio::time::timeout(connect_timeout, tokio::net::TcpStream::connect(addrs)).await {
        Ok(stream) => stream.map_err(WasiHttpError::Connect)?,
        Err(_) => return Err(WasiHttpError::ConnectionTimeout),
    };
    let stream: Box<dyn Stream> = if target.https {
        let config = tls_client_config().map_err(|e| WasiHttpError::InternalError(Some(format!("TLS setup: {e}"))))?;
        let name = match target.host.parse::<IpAddr>() {
            Ok(ip) => rustls::pki_types::ServerName::from(ip),
            Err(_) => rustls::pki_types::ServerName::try_from(target.host.clone())
                .map_err(|_| dns_error("invalid DNS name"))?,
        };
        let tls = tokio_rustls::TlsConnector::from(config);
        match tokio::time::timeout(connect_timeout, tls.connect(name, tcp)).await {
            Ok(stream) => Box::new(stream.map_err(WasiHttpError::Tls)?),
            Err(_) => return Err(WasiHttpError::ConnectionTimeout),
        }
    } else {
        Box::new(tcp)
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // The request line carries only the path: the authority went into Host.
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    *request.uri_mut() = http::Uri::try_from(path).map_err(|_| WasiHttpError::HttpRequestUriInvalid)?;

    // Read again once connected (a TLS handshake can take a while): a run
    // cancelled or fenced meanwhile writes nothing.
    if cancel.is_cancelled() {
        return Err(WasiHttpError::HttpRequestDenied);
    }
    // Drive the connection while waiting for the response head.
    let mut conn = Some(Box::pin(conn));
    let mut pending = std::pin::pin!(sender.send_request(request));
    let response = std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = pending.as_mut().poll(cx) {
            return Poll::Ready(r.map_err(WasiHttpError::from));
        }
        if let Some(c) = conn.as_mut()
            && let Poll::Ready(r) = c.as_mut().poll(cx)
        {
            conn = None;
            if let Err(e) = r {
                return Poll::Ready(Err(e.into()));
            }
            return pending.as_mut().poll(cx).map_err(WasiHttpError::from);
        }
        Poll::Pending
    })
    .await?;
    let response = response.map(|body| body.map_err(WasiHttpError::from).boxed_unsync());
    let io = async move {
        match conn {
            Some(c) => c.await.map_err(WasiHttpError::from),
            None => Ok(()),
        }
    };
    Ok((response, io))
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// The TLS client configuration every outgoing connection of lovia uses:
/// the webpki roots (Mozilla's, compiled in: no system store is read) and
/// ring as the crypto provider (no C build of aws-lc), built once. The
/// sandbox's `wasi:http`, the model providers' client, the web tools and
/// MCP's HTTP client all take it, so one change of trust applies to all.
///
/// Errors only if ring offers none of rustls's safe protocol versions,
/// which no released ring does; the error is kept and returned on every call.
///
/// ```
/// let config = lovia_host::sandbox::tls_client_config()?;
/// assert!(config.alpn_protocols.is_empty());
/// # Ok::<(), rustls::Error>(())
/// ```
pub fn tls_client_config() -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, rustls::Error>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.into() };
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Target {
        Target::of(&url.parse().expect("uri")).expect("target")
    }

    fn origin(s: &str) -> HttpOrigin {
        s.parse().expect("origin")
    }

    /// The fence and the cancel are read when the request would leave:
    /// with the fence holding, a connection reaches the listener; once it
    /// has ended, or the run was cancelled, the same request is refused and
    /// no connection arrives.
    #[tokio::test]
    async fn a_call_past_its_fence_or_of_a_cancelled_run_sends_nothing() {
        use http_body_util::BodyExt;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                held.push(socket);
            }
        });
        let fence = crate::call::Fence::until(std::time::Instant::now() + Duration::from_secs(60));
        let mut hooks = HttpHooks {
            origins: vec![origin(&format!("http://{addr}"))].into(),
            trace_origins: Vec::new().into(),
            plugin: "p".into(),
            tool: "t".into(),
            call_id: "c".into(),
            cancel: crate::call::CancelToken::new().with_fence(fence.clone()),
        };
        let request = || {
            let body = http_body_util::Empty::<bytes::Bytes>::new().map_err(|never| match never {}).boxed_unsync();
            http::Request::builder().uri(format!("http://{addr}/refund")).body(body).expect("request")
        };
        let io: IoFuture = Box::new(async { Ok(()) });
        // The listener never answers: the request is in flight once connected.
        let sending = Box::into_pin(hooks.send_request(request(), None, io));
        let _ = tokio::time::timeout(Duration::from_millis(300), sending).await;
        assert_eq!(connections.load(Ordering::SeqCst), 1, "with the fence holding, the request leaves");
        fence.revoke();
        let io: IoFuture = Box::new(async { Ok(()) });
        let refused = Box::into_pin(hooks.send_request(request(), None, io)).await;
        assert!(matches!(refused, Err(WasiHttpError::HttpRequestDenied)), "past the fence it is refused");
        // A cancelled run's request is refused the same way, fence or none.
        let cancelled = crate::call::CancelToken::new();
        cancelled.cancel(Some("cancelled by the client"));
        hooks.cancel = cancelled;
        let io: IoFuture = Box::new(async { Ok(()) });
        let refused = Box::into_pin(hooks.send_request(request(), None, io)).await;
        assert!(matches!(refused, Err(WasiHttpError::HttpRequestDenied)), "a cancelled run's request is refused");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(connections.load(Ordering::SeqCst), 1, "no second connection");
    }

    #[test]
    fn origins_match_scheme_host_and_port() {
        let o = origin("https://api.example.com");
        assert!(o.matches(&target("https://API.example.com/v1")));
        assert!(!o.matches(&target("http://api.example.com/")), "scheme");
        assert!(!o.matches(&target("https://api.example.com:8443/")), "port");
        assert!(!o.matches(&target("https://evil.api.example.com/")), "subdomain");
        assert!(!o.matches(&target("https://api.example.com.evil.net/")), "suffix");

        let sub = origin("https://*.example.com:*");
        assert!(sub.matches(&target("https://a.example.com:9000/")));
        assert!(!sub.matches(&target("https://example.com/")));
        assert!(!sub.matches(&target("https://badexample.com/")));

        assert!(origin("http://[::1]:8080").matches(&target("http://[::1]:8080/")));
        assert!(origin("http://*").matches(&target("http://anything/")));
        assert!(!origin("http://*").matches(&target("http://anything:81/")));
    }

    #[test]
    fn bad_origins_say_why() {
        for (pattern, reason) in [
            ("example.com", "expected http:// or https:// followed by a host"),
            ("https://example.com/path", "an origin is scheme://host[:port], without path, query or user"),
            ("https://user@example.com", "an origin is scheme://host[:port], without path, query or user"),
            ("https://example.com:0", "the port must be 1-65535 or *"),
            ("https://ex*ample.com", "a wildcard host is * or *.domain"),
            ("https://", "the host is empty"),
            ("http://[::1", "unclosed [ in an IPv6 host"),
        ] {
            assert_eq!(pattern.parse::<HttpOrigin>().map_err(|e| e.reason), Err(reason), "{pattern}");
        }
    }

    #[test]
    fn origins_print_as_written() {
        for s in ["https://api.example.com", "http://127.0.0.1:8080", "http://[::1]:8080", "https://*.x.org:*"] {
            assert_eq!(origin(s).to_string(), s);
        }
        assert_eq!(origin("https://a.com:443/").to_string(), "https://a.com");
    }

    /// One address inside every range of both IANA special-purpose
    /// registries (and multicast), written out independently of the tables.
    #[test]
    fn every_iana_special_purpose_range_is_special() {
        for (ip, range) in [
            ("0.1.2.3", "0.0.0.0/8"),
            ("0.0.0.0", "0.0.0.0/32"),
            ("10.255.0.1", "10.0.0.0/8"),
            ("100.64.0.1", "100.64.0.0/10"),
            ("100.127.255.254", "100.64.0.0/10"),
            ("127.0.0.1", "127.0.0.0/8"),
            ("127.255.255.254", "127.0.0.0/8"),
            ("169.254.169.254", "169.254.0.0/16"),
            ("172.16.0.1", "172.16.0.0/12"),
            ("172.31.255.255", "172.16.0.0/12"),
            ("192.0.0.1", "192.0.0.0/24"),
            ("192.0.0.8", "192.0.0.8/32"),
            ("192.0.0.9", "192.0.0.9/32"),
            ("192.0.0.10", "192.0.0.10/32"),
            ("192.0.0.170", "192.0.0.170/31"),
            ("192.0.0.171", "192.0.0.170/31"),
            ("192.0.2.1", "192.0.2.0/24"),
            ("192.31.196.1", "192.31.196.0/24"),
            ("192.52.193.1", "192.52.193.0/24"),
            ("192.88.99.1", "192.88.99.0/24"),
            ("192.168.1.1", "192.168.0.0/16"),
            ("192.175.48.1", "192.175.48.0/24"),
            ("198.18.0.1", "198.18.0.0/15"),
            ("198.19.255.255", "198.18.0.0/15"),
            ("198.51.100.1", "198.51.100.0/24"),
            ("203.0.113.1", "203.0.113.0/24"),
            ("224.0.0.1", "224.0.0.0/4"),
            ("239.255.255.255", "224.0.0.0/4"),
            ("240.0.0.1", "240.0.0.0/4"),
            ("255.255.255.255", "255.255.255.255/32"),
            ("::1", "::1/128"),
            ("::", "::/128"),
            ("::7f00:1", "::/96 IPv4-compatible (deprecated)"),
            ("::ffff:127.0.0.1", "::ffff:0:0/96 with a loopback IPv4"),
            ("::ffff:10.0.0.1", "::ffff:0:0/96 with a private IPv4"),
            ("::ffff:0:7f00:1", "::ffff:0:0:0/96 SIIT with a loopback IPv4"),
            ("::ffff:0:a9fe:a9fe", "::ffff:0:0:0/96 SIIT with the metadata IPv4"),
            ("64:ff9b::a9fe:a9fe", "64:ff9b::/96 with the metadata IPv4"),
            ("64:ff9b::7f00:1", "64:ff9b::/96 with a loopback IPv4"),
            ("64:ff9b:1::1", "64:ff9b:1::/48"),
            ("64:ff9b:1:ffff::5db8:d70e", "64:ff9b:1::/48, whatever it embeds"),
            ("100::1", "100::/64"),
            ("100:0:0:1::1", "100:0:0:1::/64"),
            ("2001::1", "2001::/32 Teredo"),
            ("2001:1::1", "2001:1::1/128"),
            ("2001:1::2", "2001:1::2/128"),
            ("2001:1::3", "2001:1::3/128"),
            ("2001:2::1", "2001:2::/48"),
            ("2001:3::1", "2001:3::/32"),
            ("2001:4:112::1", "2001:4:112::/48"),
            ("2001:10::1", "2001:10::/28"),
            ("2001:20::1", "2001:20::/28"),
            ("2001:30::1", "2001:30::/28"),
            ("2001:1ff::1", "2001::/23"),
            ("2001:db8::1", "2001:db8::/32"),
            ("2002::1", "2002::/16"),
            ("2002:5db8:d70e::1", "2002::/16 with a public IPv4"),
            ("2620:4f:8000::1", "2620:4f:8000::/48"),
            ("3fff::1", "3fff::/20"),
            ("3fff:fff::1", "3fff::/20"),
            ("5f00::1", "5f00::/16"),
            ("fc00::1", "fc00::/7"),
            ("fd00:ec2::254", "fc00::/7"),
            ("fe80::1", "fe80::/10"),
            ("febf::1", "fe80::/10"),
            ("fec0::1", "fec0::/10"),
            ("ff02::1", "ff00::/8"),
        ] {
            assert!(is_special_address(ip.parse().expect("ip")), "{ip} in {range}");
        }
    }

    #[test]
    fn public_addresses_and_embedded_public_ones_are_not_special() {
        for ip in [
            "93.184.215.14",
            "1.1.1.1",
            "100.128.0.1",
            "100.63.255.255",
            "172.32.0.1",
            "192.0.1.1",
            "198.20.0.1",
            "223.255.255.255",
            "2606:4700::1111",
            "2001:200::1",
            "2001:dba::1",
            "3fff:1000::1",
            "::ffff:1.1.1.1",
            "::ffff:0:101:101",
            "64:ff9b::101:101",
        ] {
            assert!(!is_special_address(ip.parse().expect("ip")), "{ip}");
        }
    }

    #[test]
    fn every_table_entry_is_special_at_both_ends() {
        for (net, len, name) in SPECIAL_V4 {
            let first = u32::from(*net);
            let last = first | (u32::MAX.checked_shr(u32::from(*len)).unwrap_or(0));
            for ip in [first, last] {
                assert!(is_special_v4(Ipv4Addr::from(ip)), "{} in {net}/{len} {name}", Ipv4Addr::from(ip));
            }
        }
        for (net, len, name) in SPECIAL_V6 {
            let first = net.to_bits();
            let last = first | (u128::MAX.checked_shr(u32::from(*len)).unwrap_or(0));
            for ip in [first, last] {
                let ip = Ipv6Addr::from_bits(ip);
                assert!(is_special_v6(ip) || embedded_v4(ip).is_some(), "{ip} in {net}/{len} {name}");
            }
        }
    }
}
