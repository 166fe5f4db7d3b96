//! The checks of a request's head that rmcp's streamable HTTP service does
//! not make, in front of it: one `Host` header, and a request target in
//! absolute form (`POST http://host/mcp`) only for an allowed host. rmcp
//! reads the first `Host` header only, and HTTP/1.1 says the target's
//! authority, not `Host`, names the server (RFC 9112 §3.2.2), so either
//! could carry a foreign host past the allowlist (DNS rebinding).

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The response type of rmcp's service, which this one keeps.
pub(crate) type HttpResponse = Response<BoxBody<Bytes, Infallible>>;

/// Why a request head is refused before rmcp sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadRefused {
    /// More than one `Host` header: 400.
    ManyHosts,
    /// An absolute-form target naming a host not on the allowlist: 403.
    ForeignTarget,
}

impl HeadRefused {
    fn response(self) -> HttpResponse {
        let (status, text) = match self {
            Self::ManyHosts => (StatusCode::BAD_REQUEST, "Bad Request: more than one Host header"),
            Self::ForeignTarget => {
                (StatusCode::FORBIDDEN, "Forbidden: the request target names a host that is not allowed")
            }
        };
        refusal(status, text)
    }
}

/// Whether `host` (`name` or `name:port`, IPv6 in brackets or not) is on
/// `allowed`, where a bare name matches any port, as rmcp matches `Host`.
/// An empty allowlist allows every host.
pub(crate) fn host_allowed(host: &str, port: Option<u16>, allowed: &[String]) -> bool {
    let host = normal(host);
    allowed.is_empty()
        || allowed.iter().any(|entry| {
            let (name, entry_port) = match http::uri::Authority::try_from(entry.trim()) {
                Ok(a) => (normal(a.host()), a.port_u16()),
                Err(_) => (normal(entry), None),
            };
            name == host && entry_port.is_none_or(|p| Some(p) == port)
        })
}

fn normal(host: &str) -> String {
    host.trim().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()
}

/// The refusal of a request head, if any.
pub(crate) fn check<B>(request: &Request<B>, allowed: &[String]) -> Result<(), HeadRefused> {
    if request.headers().get_all(http::header::HOST).iter().count() > 1 {
        return Err(HeadRefused::ManyHosts);
    }
    if let Some(target) = request.uri().authority()
        && !host_allowed(target.host(), target.port_u16(), allowed)
    {
        return Err(HeadRefused::ForeignTarget);
    }
    Ok(())
}

/// The browser origins that go with `allowed_hosts`: `http` and `https` on
/// each host, at its port or any port when it names none. An `Origin` is
/// checked against these (rmcp's `allowed_origins`), so a page of another
/// site cannot call a local server from a visitor's browser.
pub(crate) fn origins(allowed_hosts: &[String]) -> Vec<String> {
    let mut origins = Vec::new();
    for entry in allowed_hosts {
        let (host, port) = match http::uri::Authority::try_from(entry.trim()) {
            Ok(a) => (normal(a.host()), a.port_u16()),
            Err(_) => (normal(entry), None),
        };
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        let port = port.map_or_else(|| "*".to_owned(), |p| p.to_string());
        for scheme in ["http", "https"] {
            origins.push(format!("{scheme}://{host}:{port}"));
        }
    }
    origins
}

/// rmcp's service behind the checks of the request head (this module's `check`).
#[derive(Clone)]
pub struct Guarded<S> {
    pub(crate) inner: S,
    pub(crate) allowed_hosts: Arc<[String]>,
}

impl<S> std::fmt::Debug for Guarded<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHttpService").field("allowed_hosts", &self.allowed_hosts).finish_non_exhaustive()
    }
}

/// The most a request body may hold, as rmcp's own limit: 4 MiB.
const MAX_BODY: usize = 4 << 20;

impl<S, B> tower::Service<Request<B>> for Guarded<S>
where
    S: tower::Service<Request<Full<Bytes>>, Response = HttpResponse, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = HttpResponse;
    type Error = Infallible;
    type Future = futures_util::future::BoxFuture<'static, Result<HttpResponse, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if let Err(refused) = check(&request, &self.allowed_hosts) {
            tracing::warn!(?refused, "refused an MCP request head");
            return Box::pin(std::future::ready(Ok(refused.response())));
        }
        // The service made ready goes with the request; its clone stays.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            // A 2025-11-25 session's message may ask for a task, which rmcp
            // would read without it (tasks/wire.rs): its body is read here,
            // as rmcp would read it, and renamed.
            let post = request.method() == http::Method::POST;
            let session = post && request.headers().contains_key("mcp-session-id");
            let (parts, body) = request.into_parts();
            // Only a POST carries a message: another method's body is not
            // read (rmcp reads none), so one that never ends holds nothing.
            if !post {
                return inner.call(Request::from_parts(parts, Full::new(Bytes::new()))).await;
            }
            let bytes = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
                Ok(body) => body.to_bytes(),
                Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                    return Ok(refusal(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "Payload Too Large: the request body is over 4 MiB",
                    ));
                }
                Err(_) => {
                    return Ok(refusal(StatusCode::BAD_REQUEST, "Bad Request: the request body could not be read"));
                }
            };
            let bytes = match session.then(|| crate::tasks::wire::lift(&bytes)).flatten() {
                Some(lifted) => Bytes::from(lifted),
                None => bytes,
            };
            inner.call(Request::from_parts(parts, Full::new(bytes))).await
        })
    }
}

fn refusal(status: StatusCode, text: &'static str) -> HttpResponse {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts() -> Vec<String> {
        vec!["localhost".into(), "127.0.0.1".into(), "::1".into(), "example.com:8443".into()]
    }

    #[test]
    fn origins_follow_the_host_allowlist() {
        assert_eq!(
            origins(&hosts()),
            [
                "http://localhost:*",
                "https://localhost:*",
                "http://127.0.0.1:*",
                "https://127.0.0.1:*",
                "http://[::1]:*",
                "https://[::1]:*",
                "http://example.com:8443",
                "https://example.com:8443"
            ]
        );
    }

    #[test]
    fn two_hosts_or_a_foreign_target_are_refused() {
        let allowed = hosts();
        let ok = Request::post("/mcp").header("host", "localhost:9").body(()).expect("request");
        assert_eq!(check(&ok, &allowed), Ok(()));
        let two = Request::post("/mcp").header("host", "localhost").header("host", "evil.example").body(());
        assert_eq!(check(&two.expect("request"), &allowed), Err(HeadRefused::ManyHosts));
        let foreign = Request::post("http://evil.example/mcp").header("host", "localhost").body(());
        assert_eq!(check(&foreign.expect("request"), &allowed), Err(HeadRefused::ForeignTarget));
        let own = Request::post("http://[::1]:7/mcp").header("host", "localhost").body(()).expect("request");
        assert_eq!(check(&own, &allowed), Ok(()));
        let wrong_port = Request::post("http://example.com:80/mcp").body(()).expect("request");
        assert_eq!(check(&wrong_port, &allowed), Err(HeadRefused::ForeignTarget));
        // An empty allowlist (lovia serve, behind its keys) allows any target but still one Host.
        let foreign = Request::post("http://evil.example/mcp").body(()).expect("request");
        assert_eq!(check(&foreign, &[]), Ok(()));
    }
}
