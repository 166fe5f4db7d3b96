//! Outbound HTTP through `wasi:http`, for tools the host has granted it.
//!
//! Nothing is reachable by default: the host refuses every request unless
//! the plugin's config lists its origin under `[grants] http`, and refuses
//! loopback, private, link-local and metadata addresses unless that exact
//! host is granted. A refusal reaches the tool as an [`HttpError`] whose
//! message names the cause:
//!
//! ```no_run
//! #[lovia::tool]
//! fn status(url: String) -> Result<String, lovia::ToolError> {
//!     let response = lovia::http::get(&url)?;
//!     Ok(format!("{} ({} bytes)", response.status, response.body.len()))
//! }
//! # fn main() {}
//! ```

use wasip2::http::outgoing_handler;
use wasip2::http::types::{ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, Scheme};
use wasip2::io::streams::StreamError;

/// A response, read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code, e.g. 200.
    pub status: u16,
    /// Header names (lower case) and raw values, in the order received.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as UTF-8 text (invalid sequences replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The first value of header `name` (case-insensitive) as text.
    pub fn header(&self, name: &str) -> Option<String> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The URL is not `http://` or `https://` followed by a host.
    InvalidUrl(String),
    /// The host refused the request: its origin is not granted.
    Denied(String),
    /// The host refused the address the name resolved to (loopback, private,
    /// link-local or metadata) because the host was not granted exactly.
    AddressProhibited(String),
    /// Any other failure, with `wasi:http`'s error code.
    Failed(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::InvalidUrl(url) => write!(f, "invalid URL {url:?}: expected http:// or https:// and a host"),
            HttpError::Denied(url) => write!(f, "HTTP request to {url} denied: origin not granted to this plugin"),
            HttpError::AddressProhibited(url) => {
                write!(f, "HTTP request to {url} denied: the address is loopback, private, link-local or metadata")
            }
            HttpError::Failed(reason) => write!(f, "HTTP request failed: {reason}"),
        }
    }
}

impl std::error::Error for HttpError {}

impl From<HttpError> for crate::ToolError {
    fn from(e: HttpError) -> Self {
        crate::ToolError::new(e.to_string())
    }
}

/// `GET url`.
pub fn get(url: &str) -> Result<Response, HttpError> {
    request("GET", url, &[], None)
}

/// Sends one request and reads the whole response.
///
/// `method` is any HTTP method name; `headers` are sent as given (the host
/// drops hop-by-hop headers); `body` is sent when present.
pub fn request(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Result<Response, HttpError> {
    let (scheme, authority, path) = split_url(url).ok_or_else(|| HttpError::InvalidUrl(url.to_owned()))?;
    let failed = |e: ErrorCode| classify(url, e);

    let list: Vec<(String, Vec<u8>)> = headers.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect();
    let fields = Fields::from_list(&list).map_err(|e| HttpError::Failed(format!("header: {e:?}")))?;
    let request = OutgoingRequest::new(fields);
    let method = match method.to_ascii_uppercase().as_str() {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "PATCH" => Method::Patch,
        "OPTIONS" => Method::Options,
        other => Method::Other(other.to_owned()),
    };
    let invalid = || HttpError::InvalidUrl(url.to_owned());
    request.set_method(&method).map_err(|_| HttpError::Failed(format!("invalid method {method:?}")))?;
    request.set_scheme(Some(&scheme)).map_err(|_| invalid())?;
    request.set_authority(Some(authority)).map_err(|_| invalid())?;
    request.set_path_with_query(Some(&path)).map_err(|_| invalid())?;

    let outgoing = request.body().map_err(|_| HttpError::Failed("request body taken".into()))?;
    let pending = outgoing_handler::handle(request, None).map_err(failed)?;
    if let Some(bytes) = body {
        let stream = outgoing.write().map_err(|_| HttpError::Failed("request body stream taken".into()))?;
        // `blocking-write-and-flush` takes at most 4096 bytes at a time.
        for chunk in bytes.chunks(4096) {
            stream.blocking_write_and_flush(chunk).map_err(|e| HttpError::Failed(format!("sending body: {e:?}")))?;
        }
    }
    OutgoingBody::finish(outgoing, None).map_err(failed)?;

    pending.subscribe().block();
    let response = match pending.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(failed(code)),
        Some(Err(())) | None => return Err(HttpError::Failed("response already taken".into())),
    };
    let status = response.status();
    let headers = response.headers().entries();
    let incoming = response.consume().map_err(|_| HttpError::Failed("response body taken".into()))?;
    let stream = incoming.stream().map_err(|_| HttpError::Failed("response body stream taken".into()))?;
    let mut data = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => data.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(HttpError::Failed(format!("reading body: {}", e.to_debug_string())));
            }
        }
    }
    drop(stream);
    drop(IncomingBody::finish(incoming));
    Ok(Response { status, headers, body: data })
}

fn classify(url: &str, code: ErrorCode) -> HttpError {
    match code {
        ErrorCode::HttpRequestDenied => HttpError::Denied(url.to_owned()),
        ErrorCode::DestinationIpProhibited => HttpError::AddressProhibited(url.to_owned()),
        other => HttpError::Failed(format!("{other:?}")),
    }
}

/// `scheme://authority/path?query` → its parts; the path defaults to `/`.
fn split_url(url: &str) -> Option<(Scheme, &str, String)> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (Scheme::Https, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (Scheme::Http, rest)
    } else {
        return None;
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let path = path.split('#').next().unwrap_or("");
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let path = if path.starts_with('/') { path.to_owned() } else { format!("/{path}") };
    Some((scheme, authority, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_scheme_authority_and_path() {
        let (s, a, p) = split_url("https://api.example.com:8443/v1/x?q=1#frag").expect("valid");
        assert!(matches!(s, Scheme::Https));
        assert_eq!((a, p.as_str()), ("api.example.com:8443", "/v1/x?q=1"));
        let parts = |url| split_url(url).map(|(_, a, p)| (a.to_owned(), p));
        assert_eq!(parts("http://h"), Some(("h".into(), "/".into())));
        assert_eq!(parts("http://h?x=1"), Some(("h".into(), "/?x=1".into())));
        assert!(split_url("ftp://h/").is_none());
        assert!(split_url("http:///path").is_none());
        assert!(split_url("http://user@h/").is_none());
    }
}
