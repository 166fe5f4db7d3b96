//! [`Egress`]: where the web tools may connect, with the rules of a
//! plugin's HTTP grant (docs/web.md, "Where the web tools may connect").
//!
//! The URL is judged before anything is sent and again at every redirect
//! hop; a name is judged after DNS, by the addresses it resolved to, and
//! the connection goes only to an address that passed (reqwest connects to
//! what our resolver returns, so there is no second lookup to rebind).

use crate::WebError;
use lovia_host::{HttpOrigin, is_special_address};
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Bytes of a response body read at most, by default: 1,000,000.
pub const DEFAULT_MAX_BYTES: u64 = 1_000_000;
/// The limit of a whole fetch (connect, redirects, body), by default: 30 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Redirects followed at most, by default: 5.
pub const DEFAULT_MAX_REDIRECTS: usize = 5;

/// The rules of outbound fetches: which origins, how much, how long.
///
/// Default: any public host over `http://*` (port 80) and `https://*`
/// (port 443). Loopback, private, link-local (cloud metadata), and every
/// other special-purpose address is refused, after DNS and at every
/// redirect, unless an origin names its host exactly
/// (`http://127.0.0.1:8080`, `http://intranet.local`). Bodies are capped at
/// 1,000,000 bytes, a fetch at 30 s, redirects at 5; proxies from the
/// environment are not used.
///
/// ```
/// use lovia_web::Egress;
/// let egress = Egress::builder()
///     .allow("http://127.0.0.1:8080".parse().unwrap())
///     .max_bytes(200_000)
///     .build()
///     .unwrap();
/// assert_eq!(egress.max_bytes(), 200_000);
/// ```
#[derive(Clone, Debug)]
pub struct Egress {
    rules: Arc<Rules>,
    max_bytes: u64,
    timeout: Duration,
    client: reqwest::Client,
}

/// What a URL is judged by.
#[derive(Debug)]
struct Rules {
    origins: Vec<HttpOrigin>,
    /// Hosts some origin names exactly: only they may resolve to special
    /// addresses, and only through an exact origin.
    exact_hosts: Vec<String>,
    max_redirects: usize,
}

/// Builds an [`Egress`]; see its defaults there.
#[derive(Debug, Clone)]
#[must_use]
pub struct EgressBuilder {
    origins: Vec<HttpOrigin>,
    max_bytes: u64,
    timeout: Duration,
    max_redirects: usize,
    user_agent: String,
}

/// Why an [`Egress`] could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EgressError {
    /// No origin is allowed, so nothing could be fetched.
    #[error("the egress rules allow no origin")]
    NoOrigin,
    /// A limit is zero.
    #[error("{what} must be greater than zero")]
    Zero {
        /// The limit.
        what: &'static str,
    },
    /// The TLS configuration did not build (see
    /// [`lovia_host::sandbox::tls_client_config`]).
    #[error("the TLS configuration could not be built")]
    Tls(#[source] rustls::Error),
    /// The HTTP client did not build.
    #[error("the HTTP client could not be built")]
    Client(#[source] reqwest::Error),
}

impl Default for EgressBuilder {
    fn default() -> Self {
        Self {
            origins: vec![wildcard("http://*"), wildcard("https://*")],
            max_bytes: DEFAULT_MAX_BYTES,
            timeout: DEFAULT_TIMEOUT,
            max_redirects: DEFAULT_MAX_REDIRECTS,
            user_agent: concat!("lovia/", env!("CARGO_PKG_VERSION")).to_owned(),
        }
    }
}

fn wildcard(origin: &str) -> HttpOrigin {
    // Literal patterns of this file; a test parses both.
    origin.parse().unwrap_or_else(|_| unreachable!("valid origin pattern"))
}

impl EgressBuilder {
    /// Adds an allowed origin (see [`HttpOrigin`]); an exact host also
    /// reaches special-purpose addresses.
    pub fn allow(mut self, origin: HttpOrigin) -> Self {
        self.origins.push(origin);
        self
    }

    /// Replaces the allowed origins (the default two included).
    pub fn only(mut self, origins: impl IntoIterator<Item = HttpOrigin>) -> Self {
        self.origins = origins.into_iter().collect();
        self
    }

    /// Bytes of a body read at most; the rest is never fetched. Default:
    /// 1,000,000.
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// The limit of a whole fetch. Default: 30 s.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Redirects followed at most; 0 follows none. Default: 5.
    pub fn max_redirects(mut self, redirects: usize) -> Self {
        self.max_redirects = redirects;
        self
    }

    /// The `User-Agent` header. Default: `lovia/<version>`.
    pub fn user_agent(mut self, agent: impl Into<String>) -> Self {
        self.user_agent = agent.into();
        self
    }

    /// The egress.
    pub fn build(self) -> Result<Egress, EgressError> {
        if self.origins.is_empty() {
            return Err(EgressError::NoOrigin);
        }
        if self.max_bytes == 0 {
            return Err(EgressError::Zero { what: "max_bytes" });
        }
        if self.timeout.is_zero() {
            return Err(EgressError::Zero { what: "timeout" });
        }
        let exact_hosts = self.origins.iter().filter_map(|o| o.exact_host().map(str::to_owned)).collect();
        let rules = Arc::new(Rules { origins: self.origins, exact_hosts, max_redirects: self.max_redirects });
        let judge = rules.clone();
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > judge.max_redirects {
                let (url, reason) = (attempt.url().to_string(), format!("more than {} redirects", judge.max_redirects));
                return attempt.error(Refusal { url, reason });
            }
            match judge.check(attempt.url()) {
                Ok(()) => attempt.follow(),
                Err(reason) => {
                    let url = attempt.url().to_string();
                    attempt.error(Refusal { url, reason })
                }
            }
        });
        let tls = lovia_host::sandbox::tls_client_config().map_err(EgressError::Tls)?;
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured((*tls).clone())
            .no_proxy()
            .redirect(redirects)
            .dns_resolver(Arc::new(CheckedResolver { rules: rules.clone() }))
            .timeout(self.timeout)
            .connect_timeout(self.timeout)
            .user_agent(self.user_agent)
            .build()
            .map_err(EgressError::Client)?;
        Ok(Egress { rules, max_bytes: self.max_bytes, timeout: self.timeout, client })
    }
}

impl Default for Egress {
    /// The default rules (see [`Egress`]).
    fn default() -> Self {
        // Only the TLS backend could fail, and it is built in.
        EgressBuilder::default().build().unwrap_or_else(|e| panic!("the default egress builds: {e}"))
    }
}

/// A response: its final URL (after redirects), status, media type and at
/// most [`Egress::max_bytes`] of its body.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Fetched {
    /// The URL that answered, after redirects.
    pub url: Url,
    /// The HTTP status.
    pub status: u16,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body, at most `max_bytes`.
    pub body: Vec<u8>,
    /// Whether the body was longer than `max_bytes` (the rest was never read).
    pub capped: bool,
}

impl Egress {
    /// Starts from the defaults.
    pub fn builder() -> EgressBuilder {
        EgressBuilder::default()
    }

    /// Bytes of a body read at most.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Parses `url` and checks its scheme: the first step of every fetch.
    pub fn parse(url: &str) -> Result<Url, WebError> {
        let parsed = Url::parse(url)
            .map_err(|e| WebError::InvalidUrl { url: url.chars().take(200).collect(), reason: e.to_string() })?;
        match parsed.scheme() {
            "http" | "https" => Ok(parsed),
            other => Err(WebError::Scheme { scheme: other.to_owned() }),
        }
    }

    /// GETs `url` with `headers`, under the rules.
    pub async fn get(&self, url: &str, headers: &[(&str, &str)]) -> Result<Fetched, WebError> {
        let url = Self::parse(url)?;
        if let Err(reason) = self.rules.check(&url) {
            tracing::warn!(%url, %reason, "web fetch refused");
            return Err(WebError::Refused { url: url.to_string(), reason });
        }
        let host = url.host_str().unwrap_or_default().to_owned();
        let mut request = self.client.get(url.clone());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let secs = self.timeout.as_secs().max(1);
        let fetch = async {
            let mut response = request.send().await.map_err(|e| self.failure(&url, &host, &e))?;
            let status = response.status().as_u16();
            let final_url = response.url().clone();
            let content_type =
                response.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_owned);
            let mut body = Vec::new();
            let mut capped = false;
            while let Some(chunk) = response.chunk().await.map_err(|e| self.failure(&url, &host, &e))? {
                let room = usize::try_from(self.max_bytes).unwrap_or(usize::MAX).saturating_sub(body.len());
                if chunk.len() > room {
                    body.extend_from_slice(&chunk[..room]);
                    capped = true;
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Fetched { url: final_url, status, content_type, body, capped })
        };
        let span = fetch_span(&url);
        // reqwest's own timeout covers the body too; this one also covers
        // a resolver that never answers.
        let fetched = match span.within(tokio::time::timeout(self.timeout, fetch)).await {
            Ok(result) => result,
            Err(_) => Err(WebError::TimedOut { url: url.to_string(), secs }),
        };
        match &fetched {
            Ok(f) => span.set_with(|| {
                use lovia_telemetry::{KeyValue, attr};
                vec![
                    KeyValue::new(attr::HTTP_STATUS, i64::from(f.status)),
                    KeyValue::new(attr::BYTES, f.body.len() as i64),
                ]
            }),
            Err(e) => span.fail("fetch", e.to_string()),
        }
        fetched
    }

    /// The error of a failed request: a refusal of ours found in its
    /// sources, a timeout, or an unreachable host.
    fn failure(&self, url: &Url, host: &str, error: &reqwest::Error) -> WebError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(e) = source {
            if let Some(refusal) = e.downcast_ref::<Refusal>() {
                tracing::warn!(url = %refusal.url, reason = %refusal.reason, "web fetch refused");
                return WebError::Refused { url: refusal.url.clone(), reason: refusal.reason.clone() };
            }
            source = e.source();
        }
        if error.is_timeout() {
            return WebError::TimedOut { url: url.to_string(), secs: self.timeout.as_secs().max(1) };
        }
        WebError::Unreachable { host: host.to_owned(), detail: describe(error) }
    }
}

/// A fetch's span (docs/telemetry.md), a child of its call's: the origin
/// only, since a URL's path and query can carry what the model was asked
/// to keep; the whole URL only with content captured.
fn fetch_span(url: &Url) -> lovia_telemetry::Scope {
    use lovia_telemetry::{KeyValue, SpanKind, Telemetry, attr};
    let telemetry = Telemetry::in_current();
    let span = telemetry.start("GET", SpanKind::Client, &telemetry.current(), || {
        vec![
            KeyValue::new("http.request.method", "GET"),
            KeyValue::new(attr::SERVER_ADDRESS, url.host_str().unwrap_or_default().to_owned()),
            KeyValue::new("lovia.url.origin", url.origin().ascii_serialization()),
        ]
    });
    span.set_content(|| vec![KeyValue::new(attr::URL_FULL, url.to_string())]);
    span
}

/// An error and its sources on one line, deduplicated (reqwest repeats
/// hyper's words).
fn describe(error: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(e) = source {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = e.source();
    }
    if parts.is_empty() { error.to_string() } else { parts.join(": ") }
}

impl Rules {
    /// Judges a URL: no user name or password, an allowed origin, and a
    /// special-purpose IP literal or exactly-named host only through an
    /// exact origin.
    fn check(&self, url: &Url) -> Result<(), String> {
        if !url.username().is_empty() || url.password().is_some() {
            return Err("the URL carries a user name or password".to_owned());
        }
        let (scheme, Some(host), Some(port)) = (url.scheme(), url.host_str(), url.port_or_known_default()) else {
            return Err("the URL has no host".to_owned());
        };
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        let matching: Vec<&HttpOrigin> = self.origins.iter().filter(|o| o.permits(scheme, &host, port)).collect();
        if matching.is_empty() {
            return Err(format!("the origin {scheme}://{}:{port} is not allowed", url.host_str().unwrap_or_default()));
        }
        let exact = matching.iter().any(|o| o.is_exact());
        let special = match url.host() {
            Some(url::Host::Ipv4(ip)) => is_special_address(ip.into()),
            Some(url::Host::Ipv6(ip)) => is_special_address(ip.into()),
            // A host some origin names exactly may resolve to a special
            // address (the resolver lets it): reach it only through that
            // exact origin, not through a wildcard on another port.
            _ => self.exact_hosts.contains(&host),
        };
        if special && !exact {
            return Err(format!(
                "{host} is a loopback, private or other special-purpose address, reachable only through an origin that names it exactly"
            ));
        }
        Ok(())
    }
}

/// A refusal raised inside reqwest (the redirect policy, the resolver) and
/// found again in the error's sources.
#[derive(Debug)]
struct Refusal {
    url: String,
    reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused {}: {}", self.url, self.reason)
    }
}

impl std::error::Error for Refusal {}

/// Resolves a name and keeps only the addresses the rules allow: a public
/// one, or any for a host an origin names exactly.
#[derive(Debug)]
struct CheckedResolver {
    rules: Arc<Rules>,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_ascii_lowercase();
        let exact = self.rules.exact_hosts.contains(&host);
        Box::pin(async move {
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> =
                resolved.iter().copied().filter(|a| exact || !is_special_address(a.ip())).collect();
            if allowed.is_empty() {
                let reason = if resolved.is_empty() {
                    format!("{host} resolved to no address")
                } else {
                    let list: Vec<String> = resolved.iter().map(|a| a.ip().to_string()).collect();
                    format!(
                        "{host} resolved only to special-purpose addresses ({}), which a wildcard origin does not reach",
                        list.join(", ")
                    )
                };
                return Err(Box::new(Refusal { url: host, reason }) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(origins: &[&str]) -> Rules {
        let origins: Vec<HttpOrigin> = origins.iter().map(|o| o.parse().expect("as written")).collect();
        let exact_hosts = origins.iter().filter_map(|o| o.exact_host().map(str::to_owned)).collect();
        Rules { origins, exact_hosts, max_redirects: 5 }
    }

    fn check(rules: &Rules, url: &str) -> Result<(), String> {
        rules.check(&Url::parse(url).expect("as written"))
    }

    #[test]
    fn the_default_origins_parse_and_reach_only_public_addresses() {
        let _ = Egress::default();
        let r = rules(&["http://*", "https://*"]);
        assert!(check(&r, "https://example.com/a").is_ok());
        assert!(check(&r, "http://93.184.215.14/").is_ok());
        for refused in [
            "http://127.0.0.1/",
            "http://10.1.2.3/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[fd00:ec2::254]/",
            "http://example.com:8080/",
            "http://user@example.com/",
        ] {
            assert!(check(&r, refused).is_err(), "{refused} should be refused");
        }
    }

    #[test]
    fn an_exact_origin_reaches_its_special_host_on_its_port_only() {
        let r = rules(&["http://*", "https://*", "http://localhost:8080", "http://127.0.0.1:9000"]);
        assert!(check(&r, "http://localhost:8080/").is_ok());
        assert!(check(&r, "http://127.0.0.1:9000/x").is_ok());
        // The same host through the wildcard origin on another port.
        assert!(check(&r, "http://localhost/").is_err());
        assert!(check(&r, "http://127.0.0.1/").is_err());
    }
}
