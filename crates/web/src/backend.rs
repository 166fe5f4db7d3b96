//! What the search backends share: an egress that reaches only the
//! configured endpoint, and a GET that turns an error status or a body that
//! is not JSON into a [`WebError`].

use crate::{Egress, EgressError, WebError};
use lovia_host::HttpOrigin;
use reqwest::Url;
use std::time::Duration;

/// Bytes of a search answer read at most: 1,000,000.
const MAX_ANSWER: u64 = 1_000_000;
/// The limit of one search request: 20 s.
const TIMEOUT: Duration = Duration::from_secs(20);
/// Characters of an error body quoted in the message.
const MAX_DETAIL: usize = 200;

/// Why a search backend could not be configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendConfigError {
    /// The endpoint is not an http(s) URL with a host.
    #[error("the search endpoint '{endpoint}' is not an http(s) URL with a host: {reason}")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client did not build.
    #[error(transparent)]
    Egress(#[from] EgressError),
}

/// The endpoint parsed, and an egress reaching only its origin. The
/// operator chose the endpoint, so it is granted exactly: a search service
/// on the loopback or a private network is reachable.
pub(crate) fn endpoint_egress(endpoint: &str) -> Result<(Url, Egress), BackendConfigError> {
    let bad = |reason: String| BackendConfigError::Endpoint { endpoint: endpoint.to_owned(), reason };
    let url = Url::parse(endpoint).map_err(|e| bad(e.to_string()))?;
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return Err(bad("no host".into()));
    };
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad(format!("the scheme is '{}'", url.scheme())));
    }
    let origin: HttpOrigin = format!("{}://{host}:{port}", url.scheme())
        .parse()
        .map_err(|e: lovia_host::InvalidOrigin| bad(e.to_string()))?;
    let egress = Egress::builder().only([origin]).max_bytes(MAX_ANSWER).timeout(TIMEOUT).max_redirects(0).build()?;
    Ok((url, egress))
}

/// GETs `url` and parses its JSON; `backend` names the service in errors.
pub(crate) async fn get_json(
    egress: &Egress,
    url: &Url,
    headers: &[(&str, &str)],
    backend: &str,
) -> Result<serde_json::Value, WebError> {
    let fetched = egress.get(url.as_str(), headers).await?;
    if !(200..300).contains(&fetched.status) {
        let body = String::from_utf8_lossy(&fetched.body);
        let detail: String = body.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(MAX_DETAIL).collect();
        return Err(WebError::SearchStatus { backend: backend.to_owned(), code: fetched.status, detail });
    }
    if fetched.capped {
        return Err(WebError::Backend {
            message: format!("{backend} answered with more than {MAX_ANSWER} bytes."),
            hint: None,
        });
    }
    serde_json::from_slice(&fetched.body).map_err(|e| WebError::Backend {
        message: format!("{backend} answered with something other than JSON: {e}"),
        hint: None,
    })
}

/// The string at `key` of `value`, or "".
pub(crate) fn text(value: &serde_json::Value, key: &str) -> String {
    value.get(key).and_then(serde_json::Value::as_str).unwrap_or_default().to_owned()
}
