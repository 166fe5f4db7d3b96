//! [`WebSection`]: the web tools' configuration, owned here and spelled two
//! ways: `lovia serve`'s `[tenants.web]` table is this struct as TOML, and
//! the CLI's `--read-page`, `--web-allow`, `--searxng` and `--brave-search`
//! fill the same struct. Both check it with [`WebSection::check`] and make
//! the tools with [`WebSection::tools`], so the defaults, the bounds and the
//! messages are the same at every door (docs/architecture.md).

use crate::{BackendConfigError, BraveSearch, ReadPageError, SearxngSearch, WebSearch};
use lovia_host::{HttpOrigin, Tool};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The web tools a door offers: `read_page` and `web_search`, with one
/// page reader for everything made from one section (its reads in flight
/// and its cache are that door's, or that tenant's, alone).
///
/// ```
/// let mut web = lovia_web::WebSection::default();
/// web.read_page = true;
/// let tools = web.tools().expect("a valid section");
/// assert_eq!(tools[0].name(), "read_page");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WebSection {
    /// Offer `read_page` (public http(s) pages under the egress rules).
    /// Default: false.
    #[serde(default)]
    pub read_page: bool,
    /// Origins `read_page` may also reach though their address is loopback
    /// or private, each naming its host exactly (`http://10.0.0.5:8080`).
    /// Default: none.
    #[serde(default)]
    pub allow: Vec<HttpOrigin>,
    /// `read_page` reads in flight at once; more wait. Default: 4; at
    /// least 1.
    #[serde(default = "default_reads")]
    pub max_concurrent_reads: usize,
    /// Offer `web_search` over the SearXNG instance at this URL. Default: none.
    #[serde(default)]
    pub searxng_url: Option<String>,
    /// The environment variable holding a bearer key for `searxng_url`,
    /// which must then be set. Default: none (no key).
    #[serde(default)]
    pub searxng_key_env: Option<String>,
    /// Offer `web_search` over the Brave Search API with the key in this
    /// environment variable. Default: none.
    #[serde(default)]
    pub brave_key_env: Option<String>,
}

fn default_reads() -> usize {
    crate::DEFAULT_MAX_CONCURRENT
}

/// The same defaults as an empty table (a derived `Default` would give
/// `max_concurrent_reads = 0`, which [`WebSection::check`] refuses).
impl Default for WebSection {
    fn default() -> Self {
        Self {
            read_page: false,
            allow: Vec::new(),
            max_concurrent_reads: default_reads(),
            searxng_url: None,
            searxng_key_env: None,
            brave_key_env: None,
        }
    }
}

/// Why a [`WebSection`] is refused. Each names its key ([`Self::key`]), so
/// that a door can say it in its own spelling (`web.allow` in a config
/// file, `--web-allow` on a command line).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebSectionError {
    /// An allowed origin has a wildcard.
    #[error(
        "{origin} has a wildcard; public hosts are reachable already, and an allowed origin names one loopback or private host exactly, such as http://10.0.0.5:8080"
    )]
    Wildcard {
        /// The origin as written.
        origin: String,
    },
    /// Origins are allowed, but `read_page` is off.
    #[error("allowed origins are for read_page, which is off; turn read_page on or allow none")]
    AllowWithoutReadPage,
    /// `max_concurrent_reads` is 0.
    #[error("max_concurrent_reads must be at least 1")]
    NoReads,
    /// Both search backends are named.
    #[error("SearXNG and Brave Search both give web_search; keep one")]
    TwoSearches,
    /// A SearXNG key without a SearXNG URL.
    #[error("a SearXNG key needs a SearXNG URL")]
    KeyWithoutUrl,
    /// A key's environment variable is not set.
    #[error("the environment variable {var} is not set")]
    MissingKey {
        /// The key naming the variable.
        key: &'static str,
        /// The variable.
        var: String,
    },
    /// `read_page` could not be made (its HTTP client did not build).
    #[error("read_page: {source}")]
    ReadPage {
        /// Why.
        #[source]
        source: ReadPageError,
    },
    /// A search backend refused its configuration.
    #[error("{source}")]
    Backend {
        /// The key of the backend.
        key: &'static str,
        /// Its reason.
        #[source]
        source: BackendConfigError,
    },
}

impl WebSectionError {
    /// The key of [`WebSection`] the error is about.
    pub fn key(&self) -> &'static str {
        match self {
            Self::Wildcard { .. } | Self::AllowWithoutReadPage => "allow",
            Self::NoReads => "max_concurrent_reads",
            Self::ReadPage { .. } => "read_page",
            Self::TwoSearches => "searxng_url",
            Self::KeyWithoutUrl => "searxng_key_env",
            Self::MissingKey { key, .. } | Self::Backend { key, .. } => key,
        }
    }
}

impl WebSection {
    /// Checks the section without reading the environment.
    pub fn check(&self) -> Result<(), WebSectionError> {
        if let Some(origin) = self.allow.iter().find(|o| !o.is_exact()) {
            return Err(WebSectionError::Wildcard { origin: origin.to_string() });
        }
        if !self.allow.is_empty() && !self.read_page {
            return Err(WebSectionError::AllowWithoutReadPage);
        }
        if self.max_concurrent_reads == 0 {
            return Err(WebSectionError::NoReads);
        }
        if self.searxng_url.is_some() && self.brave_key_env.is_some() {
            return Err(WebSectionError::TwoSearches);
        }
        if self.searxng_key_env.is_some() && self.searxng_url.is_none() {
            return Err(WebSectionError::KeyWithoutUrl);
        }
        Ok(())
    }

    /// The tools, in the order `read_page`, `web_search`: checked, and the
    /// keys read from the environment now.
    pub fn tools(&self) -> Result<Vec<Tool>, WebSectionError> {
        self.check()?;
        let mut tools = Vec::new();
        if self.read_page {
            let tool = crate::read_page_allowing(&self.allow, self.max_concurrent_reads).map_err(|e| match e {
                ReadPageError::Wildcard { origin } => WebSectionError::Wildcard { origin: origin.to_string() },
                source => WebSectionError::ReadPage { source },
            })?;
            tools.push(tool);
        }
        let key = |key: &'static str, var: &str| {
            std::env::var(var).map_err(|_| WebSectionError::MissingKey { key, var: var.to_owned() })
        };
        let backend = |key: &'static str| move |source| WebSectionError::Backend { key, source };
        let search: Option<Arc<dyn WebSearch>> = match (&self.searxng_url, &self.brave_key_env) {
            (Some(url), _) => {
                let mut search = SearxngSearch::new(url).map_err(backend("searxng_url"))?;
                if let Some(var) = &self.searxng_key_env {
                    search = search.with_key(key("searxng_key_env", var)?);
                }
                Some(Arc::new(search))
            }
            (None, Some(var)) => {
                Some(Arc::new(BraveSearch::new(key("brave_key_env", var)?).map_err(backend("brave_key_env"))?))
            }
            (None, None) => None,
        };
        if let Some(search) = search {
            // The one name is valid: the tool cannot fail to build.
            tools.extend(crate::web_search(search, crate::DEFAULT_SEARCH_NAME).ok());
        }
        Ok(tools)
    }
}
