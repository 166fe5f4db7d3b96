//! The HTTP client of the model providers: JSON over HTTP(S) with retries
//! on 408, 409, 429, 5xx and 529.
//!
//! One pooled `reqwest` client serves every provider of the process: it keeps
//! connections alive between turns, speaks HTTPS with the host's TLS
//! configuration (rustls with ring and the webpki roots,
//! [`lovia_host::sandbox::tls_client_config`]), and honours `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY`
//! as curl does.

use super::sse::{SseEvent, SseParser};
use super::{MAX_RESPONSE_BYTES, ProviderOptions};
use crate::ProviderError;
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::OnceLock;
use std::time::Duration;

/// The process's pooled client; built on first use.
fn client() -> Result<&'static reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let tls = lovia_host::sandbox::tls_client_config().map_err(|e| format!("TLS setup: {e}"))?;
            reqwest::Client::builder()
                // reqwest takes the configuration itself, not the Arc it is shared in.
                .tls_backend_preconfigured((*tls).clone())
                .user_agent(concat!("lovia/", env!("CARGO_PKG_VERSION")))
                .tcp_nodelay(true)
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// How a provider retries. Statuses 408, 409, 429, 500, 502, 503, 504 and
/// 529, and failed connections, are retried; the delay before retry *k*
/// (1-based) is `base × 2^(k−1)`, capped at `max_delay`, times a random
/// factor in [0.5, 1), or the server's `Retry-After` when it sends one
/// (capped at `max_delay`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
    /// `max_retries` retries after the first attempt, the first after about
    /// `base`, none after more than `max_delay`.
    pub fn new(max_retries: u32, base: Duration, max_delay: Duration) -> Self {
        Self { max_retries, base, max_delay }
    }

    fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_delay);
        }
        let exp = self.base.saturating_mul(1 << retry.saturating_sub(1).min(16)).min(self.max_delay);
        exp.mul_f64(0.5 + rand::random::<f64>() / 2.0)
    }
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
) -> Result<reqwest::Response, ProviderError> {
    let err = |message: String, status: Option<u16>| ProviderError { provider: provider.to_owned(), message, status };
    let url: reqwest::Url = url.parse().map_err(|e| err(format!("invalid URL {url}: {e}"), None))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(err(format!("unsupported URL scheme {:?}", url.scheme()), None));
    }
    let payload = Bytes::from(serde_json::to_vec(body).map_err(|e| err(e.to_string(), None))?);
    let mut attempt = 0;
    loop {
        let outcome = tokio::time::timeout(timeout, send(&url, headers, payload.clone())).await;
        let (message, status, retry_after) = match outcome {
            Err(_) => (format!("no response from {url} within {} s", timeout.as_secs()), None, None),
            Ok(Err(message)) => (message, None, None),
            Ok(Ok(response)) if response.status().is_success() => return Ok(response),
            Ok(Ok(response)) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
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
            body: response,
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
    body: reqwest::Response,
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
            match self.body.chunk().await {
                Ok(None) => return Ok(None),
                Err(e) => return Err(ProviderError::new(self.provider, format!("the stream broke: {e}"))),
                Ok(Some(data)) => self.ready.extend(self.parser.push(&data)),
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
fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
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
async fn read_text(mut response: reqwest::Response, limit: usize) -> String {
    let mut out = Vec::new();
    while out.len() < limit {
        match response.chunk().await {
            Ok(Some(data)) => out.extend_from_slice(&data),
            _ => break,
        }
    }
    out.truncate(limit);
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads the whole body, refusing more than `limit` bytes.
async fn read_all(provider: &str, mut response: reqwest::Response, limit: usize) -> Result<Bytes, ProviderError> {
    let mut out = Vec::new();
    while let Some(data) =
        response.chunk().await.map_err(|e| ProviderError::new(provider, format!("reading the response: {e}")))?
    {
        out.extend_from_slice(&data);
        if out.len() > limit {
            return Err(ProviderError::new(provider, format!("the response is larger than {limit} bytes")));
        }
    }
    Ok(out.into())
}

async fn send(url: &reqwest::Url, headers: &[(&str, String)], payload: Bytes) -> Result<reqwest::Response, String> {
    let client = client()?;
    let mut request = client.post(url.clone()).header(reqwest::header::CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    request.body(payload).send().await.map_err(|e| describe(url, &e))
}

/// A transport error with its causes, as `cannot connect to host:port: …`.
fn describe(url: &reqwest::Url, error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    if error.is_connect() {
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or_default();
        format!("cannot connect to {host}:{port}: {text}")
    } else {
        text
    }
}

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
