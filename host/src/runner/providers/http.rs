//! The HTTP client of the model providers: JSON over HTTP/1.1 or HTTPS
//! (rustls, webpki roots), with retries on 429 and 5xx.

use super::sse::{SseEvent, SseParser};
use super::{MAX_RESPONSE_BYTES, ProviderOptions};
use crate::runner::ProviderError;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::collections::VecDeque;
use std::time::Duration;
use wasmtime_wasi_http::io::TokioIo;

/// How a provider retries. Statuses 408, 409, 429, 500, 502, 503, 504 and
/// 529, and failed connections, are retried; the delay before retry *k*
/// (1-based) is `base × 2^(k−1)`, capped at `max_delay`, times a random
/// factor in [0.5, 1), or the server's `Retry-After` when it sends one
/// (capped at `max_delay`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt. Default: 3.
    pub max_retries: u32,
    /// The first delay. Default: 500 ms.
    pub base: Duration,
    /// The longest delay. Default: 8 s.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_retries: 3, base: Duration::from_millis(500), max_delay: Duration::from_secs(8) }
    }
}

impl RetryPolicy {
    fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_delay);
        }
        let exp = self.base.saturating_mul(1 << retry.saturating_sub(1).min(16)).min(self.max_delay);
        exp.mul_f64(0.5 + jitter() / 2.0)
    }
}

/// A number in [0, 1) from the process's random hasher keys.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

fn retryable(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500 | 502 | 503 | 504 | 529)
}

/// Sends `body` as JSON to `url` with `headers`, retrying per `retry`; the
/// response is returned once its status is a success. The body is left
/// unread, for streaming.
async fn post_json(
    provider: &str,
    url: &str,
    headers: &[(&str, String)],
    body: &serde_json::Value,
    retry: &RetryPolicy,
    timeout: Duration,
) -> Result<http::Response<Incoming>, ProviderError> {
    let err = |message: String, status: Option<u16>| ProviderError { provider: provider.to_owned(), message, status };
    let uri: http::Uri = url.parse().map_err(|e| err(format!("invalid URL {url}: {e}"), None))?;
    let payload = Bytes::from(serde_json::to_vec(body).map_err(|e| err(e.to_string(), None))?);
    let mut attempt = 0;
    loop {
        let outcome = tokio::time::timeout(timeout, send(&uri, headers, payload.clone())).await;
        let (message, status, retry_after) = match outcome {
            Err(_) => (format!("no response from {url} within {} s", timeout.as_secs()), None, None),
            Ok(Err(message)) => (message, None, None),
            Ok(Ok(response)) if response.status().is_success() => return Ok(response),
            Ok(Ok(response)) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get(http::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(Duration::from_secs_f64);
                let text = read_text(response, 4096).await;
                (format!("HTTP {status}: {}", error_message(&text)), Some(status), retry_after)
            }
        };
        let transient = status.is_none_or(retryable);
        if !transient || attempt >= retry.max_retries {
            let tries = if attempt > 0 { format!(" (after {} attempts)", attempt + 1) } else { String::new() };
            return Err(err(format!("{message}{tries}"), status));
        }
        attempt += 1;
        let delay = retry.delay(attempt, retry_after);
        tracing::warn!(
            provider,
            attempt,
            delay_ms = delay.as_millis() as u64,
            "model request failed, retrying: {message}"
        );
        tokio::time::sleep(delay).await;
    }
}

/// What a model API answered: one JSON document, or a stream of events.
pub(crate) enum Answer {
    Json(serde_json::Value),
    Stream(EventStream),
}

/// Posts `body` to `url` with the provider's options. Some compatible
/// servers answer a streaming request with plain JSON: the answer is read as
/// what came, not as what was asked.
pub(crate) async fn request(
    provider: &'static str,
    url: &str,
    headers: &[(&str, String)],
    body: &serde_json::Value,
    options: &ProviderOptions,
) -> Result<Answer, ProviderError> {
    let response = post_json(provider, url, headers, body, &options.retry, options.timeout).await?;
    if is_event_stream(&response) {
        return Ok(Answer::Stream(EventStream {
            provider,
            body: response.into_body(),
            parser: SseParser::default(),
            ready: VecDeque::new(),
        }));
    }
    let bytes = read_all(provider, response, MAX_RESPONSE_BYTES).await?;
    serde_json::from_slice(&bytes)
        .map(Answer::Json)
        .map_err(|e| ProviderError::new(provider, format!("the response is not JSON: {e}")))
}

/// The events of a streamed answer, as they arrive.
pub(crate) struct EventStream {
    provider: &'static str,
    body: Incoming,
    parser: SseParser,
    ready: VecDeque<SseEvent>,
}

impl EventStream {
    /// The next event; `None` when the server closed the stream.
    pub(crate) async fn next(&mut self) -> Result<Option<SseEvent>, ProviderError> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(ProviderError::new(self.provider, format!("the stream broke: {e}"))),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.ready.extend(self.parser.push(&data));
                    }
                }
            }
        }
    }

    /// An event's data as JSON.
    pub(crate) fn json(&self, event: &SseEvent) -> Result<serde_json::Value, ProviderError> {
        serde_json::from_str(&event.data)
            .map_err(|e| ProviderError::new(self.provider, format!("a stream event is not JSON: {e}")))
    }
}

/// Whether the response is an SSE stream (by its content type).
fn is_event_stream(response: &http::Response<Incoming>) -> bool {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}

/// The API's own error message when the body is `{"error": {"message"}}`.
fn error_message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.pointer("/error/message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_else(|| body.trim().chars().take(500).collect())
}

/// Up to `limit` bytes of the body as text.
async fn read_text(response: http::Response<Incoming>, limit: usize) -> String {
    let mut body = response.into_body();
    let mut out = Vec::new();
    while out.len() < limit {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    out.extend_from_slice(&data);
                }
            }
            _ => break,
        }
    }
    out.truncate(limit);
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads the whole body, refusing more than `limit` bytes.
async fn read_all(provider: &str, response: http::Response<Incoming>, limit: usize) -> Result<Bytes, ProviderError> {
    let mut body = response.into_body();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ProviderError::new(provider, format!("reading the response: {e}")))?;
        if let Ok(data) = frame.into_data() {
            out.extend_from_slice(&data);
            if out.len() > limit {
                return Err(ProviderError::new(provider, format!("the response is larger than {limit} bytes")));
            }
        }
    }
    Ok(out.into())
}

async fn send(uri: &http::Uri, headers: &[(&str, String)], payload: Bytes) -> Result<http::Response<Incoming>, String> {
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        other => return Err(format!("unsupported URL scheme {other:?}")),
    };
    let host = uri.host().ok_or("the URL has no host")?.trim_start_matches('[').trim_end_matches(']').to_owned();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Io> = if https {
        let config = crate::sandbox::tls_config()?;
        let name = rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| format!("{host}: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(config);
        Box::new(tls.connect(name, tcp).await.map_err(|e| format!("TLS with {host}: {e}"))?)
    } else {
        Box::new(tcp)
    };
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let authority = uri.authority().map_or(host.clone(), |a| a.to_string());
    let mut request = http::Request::post(path)
        .header(http::header::HOST, authority)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::USER_AGENT, concat!("lovia/", env!("CARGO_PKG_VERSION")));
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let request = request.body(Full::new(payload)).map_err(|e| e.to_string())?;
    sender.send_request(request).await.map_err(|e| e.to_string())
}

trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Io for T {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after() {
        let p = RetryPolicy::default();
        for k in 1..=6 {
            let d = p.delay(k, None);
            let full = (p.base * (1 << (k - 1))).min(p.max_delay);
            assert!(d >= full / 2 && d < full, "retry {k}: {d:?} vs {full:?}");
        }
        assert_eq!(p.delay(1, Some(Duration::from_secs(2))), Duration::from_secs(2));
        assert_eq!(p.delay(1, Some(Duration::from_secs(60))), p.max_delay);
    }
}
