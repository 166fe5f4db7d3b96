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

    /// Whether the host is written out exactly, which is what lets it reach
    /// special addresses.
    fn is_exact(&self) -> bool {
        matches!(self.host, HostPattern::Exact(_))
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
/// grant: loopback, private, link-local (cloud metadata lives at
/// 169.254.169.254), shared, unspecified, broadcast, multicast, reserved, and
/// IPv6 forms that embed such an IPv4 address.
pub fn is_special_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_special_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4() {
                return is_special_v4(v4);
            }
            let s = v6.segments();
            // NAT64 (64:ff9b::/96) reaches the embedded IPv4 address.
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                let [a, b] = s[6].to_be_bytes();
                let [c, d] = s[7].to_be_bytes();
                return is_special_v4(Ipv4Addr::new(a, b, c, d));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local, incl. fd00:ec2::254 (metadata)
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        }
    }
}

fn is_special_v4(ip: Ipv4Addr) -> bool {
    let [a, b, _, _] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // shared address space (carrier NAT, some metadata services)
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 240 // reserved
}

/// The `wasi:http` hooks of one call: which origins it may reach, and who
/// is asking (for the log line of a refusal).
pub(crate) struct HttpHooks {
    pub(crate) origins: Arc<[HttpOrigin]>,
    pub(crate) plugin: Arc<str>,
    pub(crate) tool: Arc<str>,
    pub(crate) call_id: Arc<str>,
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
        Box::new(async move {
            let url = request.uri().to_string();
            let refuse = |error: WasiHttpError, reason: &str| {
                tracing::warn!(plugin = %escape_controls(&plugin), %tool, %call, %url, reason, "outbound HTTP refused");
                Err(error)
            };
            let Some(target) = Target::of(request.uri()) else {
                return refuse(WasiHttpError::HttpRequestUriInvalid, "not an http(s) URL with a host");
            };
            let Some(origin) = origins.iter().find(|o| o.matches(&target)) else {
                return refuse(WasiHttpError::HttpRequestDenied, "origin not granted");
            };
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
            let (response, io) = send(request, &target, &allowed, connect_timeout).await?;
            Ok((response, Box::new(io) as IoFuture))
        })
    }
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
) -> Result<(http::Response<WasiBody>, impl Future<Output = Result<(), WasiHttpError>> + Send + use<>), WasiHttpError> {
    use http_body_util::BodyExt;

    let tcp = match tokio::time::timeout(connect_timeout, tokio::net::TcpStream::connect(addrs)).await {
        Ok(stream) => stream.map_err(WasiHttpError::Connect)?,
        Err(_) => return Err(WasiHttpError::ConnectionTimeout),
    };
    let stream: Box<dyn Stream> = if target.https {
        let config = tls_config().map_err(|e| WasiHttpError::InternalError(Some(e)))?;
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

/// TLS with the webpki roots and ring, built once.
pub(crate) fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.into() };
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
                .map_err(|e| format!("TLS setup: {e}"))
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

    #[test]
    fn special_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(is_special_address(ip.parse().expect("ip")), "{ip}");
        }
        for ip in ["93.184.215.14", "1.1.1.1", "2606:4700::1111", "100.128.0.1"] {
            assert!(!is_special_address(ip.parse().expect("ip")), "{ip}");
        }
    }
}
