//! [`WebError`]: why a fetch or a search failed, worded for the model.

/// Why a fetch or a search failed. The tools show it to the model as
/// `Tool error: <message>` with [`WebError::hint`] below it; a backend of
/// your own returns [`WebError::Backend`] with its own words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebError {
    /// The URL's scheme is not `http` or `https`.
    #[error("Unsupported URL scheme: '{scheme}'.")]
    Scheme {
        /// The scheme the URL named.
        scheme: String,
    },
    /// The URL does not parse.
    #[error("Invalid URL '{url}': {reason}.")]
    InvalidUrl {
        /// The URL as given (at most 200 characters of it).
        url: String,
        /// What the parser said.
        reason: String,
    },
    /// The egress rules refused the destination: an origin not granted, a
    /// special-purpose address reached through a wildcard, a user name in
    /// the URL, or too many redirects.
    #[error("Refused to fetch {url}: {reason}.")]
    Refused {
        /// The URL refused (a redirect's target when a hop was refused).
        url: String,
        /// Why.
        reason: String,
    },
    /// No response: DNS, the connection or TLS failed, or the connection
    /// dropped before the response.
    #[error("could not reach {host}: {detail}")]
    Unreachable {
        /// The host asked.
        host: String,
        /// What failed.
        detail: String,
    },
    /// The whole fetch took longer than its limit.
    #[error("Fetching {url} took longer than {secs} s.")]
    TimedOut {
        /// The URL.
        url: String,
        /// The limit in seconds.
        secs: u64,
    },
    /// A search backend answered with an error status:
    /// `<Backend> search failed (HTTP <code>): <detail>`.
    #[error("{backend} search failed (HTTP {code}): {detail}")]
    SearchStatus {
        /// The backend's name, such as `SearXNG`.
        backend: String,
        /// The HTTP status.
        code: u16,
        /// The start of the response body, on one line.
        detail: String,
    },
    /// A backend's own failure.
    #[error("{message}")]
    Backend {
        /// The message.
        message: String,
        /// The hint, if any.
        hint: Option<String>,
    },
}

impl WebError {
    /// The line shown under the message, if any.
    pub fn hint(&self) -> Option<&str> {
        match self {
            WebError::Scheme { .. } => Some("Only http:// and https:// URLs can be fetched."),
            WebError::InvalidUrl { .. } => Some("Give a full URL, such as https://example.com/page."),
            WebError::Refused { .. } => Some(
                "The host's egress rules allow only public addresses and the origins the operator granted; this is not a network problem.",
            ),
            WebError::Unreachable { .. } => Some("network or proxy problem, not a bad query."),
            WebError::Backend { hint, .. } => hint.as_deref(),
            WebError::TimedOut { .. } | WebError::SearchStatus { .. } => None,
        }
    }

    /// Whether asking again could give another answer: a refused scheme,
    /// URL or destination never changes, so those are not retried (each
    /// retry was a failure event and a WARN line more).
    pub fn is_retryable(&self) -> bool {
        !matches!(self, WebError::Scheme { .. } | WebError::InvalidUrl { .. } | WebError::Refused { .. })
    }

    /// The tool failure the model reads.
    pub(crate) fn into_failure(self) -> lovia_host::Failure {
        let hint = self.hint().map(str::to_owned);
        if self.is_retryable() {
            lovia_host::Failure::Tool { message: self.to_string(), hint, kind: None }
        } else {
            lovia_host::Failure::Refused { message: self.to_string(), hint }
        }
    }
}
