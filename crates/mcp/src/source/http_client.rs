//! The transport of a server reached by `url`: rmcp's streamable HTTP
//! client, on a reqwest client built here, with the configured headers
//! read from lovia's environment and lovia's bound on one message.
//!
//! Why rmcp's reqwest client and not one of our own: rmcp implements
//! `StreamableHttpClient` for reqwest (and a Unix socket), and our own
//! would repeat its reqwest one
//! (src/transport/common/reqwest/streamable_http_client.rs): the
//! transport's HTTP rules (session header, status codes, content types, SSE
//! framing and its size bounds, session expiry), the hand-written protocol
//! lovia leaves to the SDK. It is the workspace's reqwest, on the host's TLS
//! configuration (ring and the webpki roots).

use super::config::{MAX_MESSAGE_BYTES, McpServerConfig, START_TIMEOUT};
use super::start_error::StartError;
use super::task_support::TaskOnly;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::FixedInterval;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How often a response stream that broke is resumed (`Last-Event-ID`)
/// before the request fails, and the wait before each try. A dead server
/// fails its call within about a second instead of at the call's timeout.
const RESUME_TRIES: usize = 2;
const RESUME_WAIT: Duration = Duration::from_millis(250);

/// The transport to `url` with the headers of `config.headers_from_env`;
/// the tools its streamed listings say run only as tasks go to `task_only`.
pub(crate) fn transport(
    config: &McpServerConfig,
    url: &str,
    task_only: TaskOnly,
) -> Result<StreamableHttpClientTransport<Tapped>, StartError> {
    let server = || config.name.clone();
    let mut headers = HashMap::new();
    for (header, variable) in &config.headers_from_env {
        let value = std::env::var(variable).map_err(|_| StartError::MissingVariable {
            server: server(),
            variable: variable.clone(),
            key: "headers_from_env",
        })?;
        // The name was checked with the configuration; the value is only
        // ever named by its variable, never shown.
        let name = HeaderName::try_from(header.as_str()).map_err(|_| StartError::Header {
            server: server(),
            header: header.clone(),
            variable: variable.clone(),
        })?;
        let mut value = HeaderValue::try_from(value).map_err(|_| StartError::Header {
            server: server(),
            header: header.clone(),
            variable: variable.clone(),
        })?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let client = client().map_err(|reason| StartError::Connect { server: server(), reason })?;
    let mut resume = FixedInterval::default();
    resume.max_times = Some(RESUME_TRIES);
    resume.duration = RESUME_WAIT;
    let mut transport = StreamableHttpClientTransportConfig::with_uri(url);
    transport.custom_headers = headers;
    transport.retry_config = Arc::new(resume);
    transport.max_sse_event_size = MAX_MESSAGE_BYTES;
    transport.max_json_response_size = MAX_MESSAGE_BYTES;
    // The 2025-11-25 revision lovia speaks has sessions; a server that
    // answers without one is still served (a stateless server).
    transport.allow_stateless = true;
    Ok(StreamableHttpClientTransport::with_client(Tapped { inner: client, task_only }, transport))
}

/// rmcp's reqwest client, with each event of a streamed answer shown to
/// [`TaskOnly`] first: rmcp's typed tool listing drops `execution`, so a
/// tool that runs only as a task is known from the raw event. An answer a
/// server sends as one JSON body reaches lovia typed, and such a tool is
/// called as a plain call there (docs/mcp.md, "Not done yet").
#[derive(Clone)]
pub(crate) struct Tapped {
    inner: reqwest::Client,
    task_only: TaskOnly,
}

impl Tapped {
    fn tap(&self, stream: BoxStream<'static, Result<Sse, SseError>>) -> BoxStream<'static, Result<Sse, SseError>> {
        let task_only = self.task_only.clone();
        stream
            .inspect(move |event| {
                if let Ok(Sse { data: Some(data), .. }) = event {
                    task_only.read_line(data.as_bytes());
                }
            })
            .boxed()
    }
}

impl StreamableHttpClient for Tapped {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let answer = self.inner.post_message(uri, message, session_id, auth_header, custom_headers).await?;
        Ok(self.tapped(answer))
    }

    // The inner client's own limits, which its default `post_message` lacks.
    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let answer = self
            .inner
            .post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
            .await?;
        Ok(self.tapped(answer))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let stream = self.inner.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await?;
        Ok(self.tap(stream))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.tap(stream))
    }
}

impl Tapped {
    fn tapped(&self, answer: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match answer {
            StreamableHttpPostResponse::Sse(stream, session) => {
                StreamableHttpPostResponse::Sse(self.tap(stream), session)
            }
            other => other,
        }
    }
}

/// One client for every `url` server: the host's TLS configuration
/// ([`lovia_host::sandbox::tls_client_config`]),
/// no redirects (a redirect would carry the headers elsewhere), no proxy,
/// no idle connections kept (rmcp's advice: reusing one whose last body
/// was not read to the end stalls on delayed ACKs).
fn client() -> Result<reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let tls = lovia_host::sandbox::tls_client_config().map_err(|e| format!("TLS setup: {e}"))?;
            reqwest::Client::builder()
                .tls_backend_preconfigured((*tls).clone())
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .pool_max_idle_per_host(0)
                .connect_timeout(START_TIMEOUT)
                .build()
                .map_err(|e| format!("the HTTP client did not build: {e}"))
        })
        .clone()
}

/// Longest part of a transport error the model reads (the rest is cut):
/// the text can come from the server.
const MAX_REASON_CHARS: usize = 300;

/// What the model reads about a failed HTTP exchange: never the URL (it
/// may hold a secret) and at most [`MAX_REASON_CHARS`] of the server's text.
/// The HTTP error is looked for down `error`'s chain of sources.
pub(crate) fn reason(error: &(dyn std::error::Error + 'static)) -> String {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(e) = e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            return bounded(describe(e));
        }
        next = e.source();
    }
    bounded(error.to_string())
}

fn describe(error: &StreamableHttpError<reqwest::Error>) -> String {
    match error {
        StreamableHttpError::Client(e) if e.is_connect() => "cannot connect to the server".to_owned(),
        StreamableHttpError::Client(e) if e.is_timeout() => "the HTTP request timed out".to_owned(),
        StreamableHttpError::Client(e) if e.is_body() || e.is_decode() => {
            "the server's HTTP response broke off".to_owned()
        }
        StreamableHttpError::Client(e) => match e.status() {
            Some(status) => format!("the server answered HTTP {status}"),
            None => "the HTTP request failed".to_owned(),
        },
        StreamableHttpError::ResponseBodyTooLarge { .. } => {
            format!("the server sent a message over {MAX_MESSAGE_BYTES} bytes")
        }
        other => other.to_string(),
    }
}

fn bounded(text: String) -> String {
    let mut chars = text.chars();
    let mut shown: String = chars.by_ref().take(MAX_REASON_CHARS).collect();
    if chars.next().is_some() {
        shown.push('…');
    }
    shown
}
