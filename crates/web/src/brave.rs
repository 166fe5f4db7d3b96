//! [`BraveSearch`]: a backend for the Brave Search web API.

use crate::backend::{BackendConfigError, endpoint_egress, get_json, text};
use crate::{Egress, SearchResult, TimeRange, WebError, WebSearch};
use lovia_host::call::BoxFuture;
use reqwest::Url;

/// Brave's web search endpoint.
pub const BRAVE_ENDPOINT: &str = "https://api.search.brave.com/res/v1/web/search";

/// Searches with the Brave Search API: `GET <endpoint>?q=…&count=…`, with
/// `freshness=pd|pw|pm|py` and the key in `X-Subscription-Token`. Snippets
/// lose the `<strong>` marks Brave puts in them. Each request is capped at
/// 1,000,000 bytes and 20 s and follows no redirect.
///
/// ```
/// let search = lovia_web::BraveSearch::new("BSA-key").unwrap();
/// # let _ = search;
/// ```
#[derive(Debug, Clone)]
pub struct BraveSearch {
    endpoint: Url,
    key: String,
    egress: Egress,
}

impl BraveSearch {
    /// A backend with `key`, at Brave's endpoint.
    pub fn new(key: impl Into<String>) -> Result<Self, BackendConfigError> {
        Self::at(BRAVE_ENDPOINT, key)
    }

    /// A backend with `key`, at `endpoint` (a proxy or a test server
    /// speaking the same API).
    pub fn at(endpoint: &str, key: impl Into<String>) -> Result<Self, BackendConfigError> {
        let (endpoint, egress) = endpoint_egress(endpoint)?;
        Ok(Self { endpoint, key: key.into(), egress })
    }
}

impl WebSearch for BraveSearch {
    fn search<'a>(
        &'a self,
        query: &'a str,
        max_results: u32,
        time_range: Option<TimeRange>,
    ) -> BoxFuture<'a, Result<Vec<SearchResult>, WebError>> {
        Box::pin(async move {
            let mut url = self.endpoint.clone();
            {
                let mut pairs = url.query_pairs_mut();
                pairs.append_pair("q", query).append_pair("count", &max_results.to_string());
                if let Some(range) = time_range {
                    let range = match range {
                        TimeRange::Day => "pd",
                        TimeRange::Week => "pw",
                        TimeRange::Month => "pm",
                        TimeRange::Year => "py",
                    };
                    pairs.append_pair("freshness", range);
                }
            }
            let headers = [("accept", "application/json"), ("x-subscription-token", self.key.as_str())];
            let answer = get_json(&self.egress, &url, &headers, "Brave").await?;
            let results = answer.pointer("/web/results").and_then(|r| r.as_array()).cloned().unwrap_or_default();
            Ok(results
                .iter()
                .take(max_results as usize)
                .map(|r| SearchResult::new(text(r, "title"), text(r, "url"), strip_marks(&text(r, "description"))))
                .collect())
        })
    }
}

/// Removes the `<strong>` and `</strong>` marks of a snippet.
fn strip_marks(snippet: &str) -> String {
    snippet.replace("<strong>", "").replace("</strong>", "")
}
