//! [`SearxngSearch`]: a backend for the SearXNG JSON API, which many
//! search services (and every SearXNG instance with `json` among its
//! formats) speak.

use crate::backend::{BackendConfigError, endpoint_egress, get_json, text};
use crate::{Egress, SearchResult, TimeRange, WebError, WebSearch};
use lovia_host::call::BoxFuture;
use reqwest::Url;

/// Searches a SearXNG instance: `GET <endpoint>/search?q=…&format=json`,
/// with `time_range=day|week|month|year`, and `Authorization: Bearer <key>`
/// when a key is set. The endpoint is reachable even on a private network:
/// the operator chose it. Each request is capped at 1,000,000 bytes and
/// 20 s and follows no redirect.
///
/// ```
/// let search = lovia_web::SearxngSearch::new("http://127.0.0.1:8888").unwrap().with_key("s3cret");
/// let tool = lovia_web::web_search(std::sync::Arc::new(search), "web_search").unwrap();
/// # let _ = tool;
/// ```
#[derive(Debug, Clone)]
pub struct SearxngSearch {
    endpoint: Url,
    key: Option<String>,
    egress: Egress,
}

impl SearxngSearch {
    /// A backend for the instance at `endpoint` (its base URL).
    pub fn new(endpoint: &str) -> Result<Self, BackendConfigError> {
        let (endpoint, egress) = endpoint_egress(endpoint)?;
        Ok(Self { endpoint, key: None, egress })
    }

    /// Sends `key` as a bearer token.
    #[must_use]
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    fn url(&self, query: &str, range: Option<TimeRange>) -> Url {
        let mut url = self.endpoint.clone();
        let path = format!("{}/search", url.path().trim_end_matches('/'));
        url.set_path(&path);
        {
            let mut pairs = url.query_pairs_mut();
            pairs.append_pair("q", query).append_pair("format", "json");
            if let Some(range) = range {
                let range = match range {
                    TimeRange::Day => "day",
                    TimeRange::Week => "week",
                    TimeRange::Month => "month",
                    TimeRange::Year => "year",
                };
                pairs.append_pair("time_range", range);
            }
        }
        url
    }
}

impl WebSearch for SearxngSearch {
    fn search<'a>(
        &'a self,
        query: &'a str,
        max_results: u32,
        time_range: Option<TimeRange>,
    ) -> BoxFuture<'a, Result<Vec<SearchResult>, WebError>> {
        Box::pin(async move {
            let url = self.url(query, time_range);
            let bearer = self.key.as_ref().map(|k| format!("Bearer {k}"));
            let mut headers = vec![("accept", "application/json")];
            if let Some(bearer) = &bearer {
                headers.push(("authorization", bearer.as_str()));
            }
            let answer = get_json(&self.egress, &url, &headers, "SearXNG").await?;
            let results = answer.get("results").and_then(|r| r.as_array()).cloned().unwrap_or_default();
            Ok(results
                .iter()
                .take(max_results as usize)
                .map(|r| SearchResult::new(text(r, "title"), text(r, "url"), text(r, "content")))
                .collect())
        })
    }
}
