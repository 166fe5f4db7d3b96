//! The web tools of `lovia run`: `--read-page`, `--searxng URL`,
//! `--brave-search`, and the exact origins `--web-allow` adds
//! (docs/web.md).

use crate::CliError;
use lovia_host::Tool;
use std::sync::Arc;

/// The environment variable holding the SearXNG bearer key, if any.
const SEARXNG_KEY_ENV: &str = "LOVIA_SEARCH_KEY";
/// The environment variable holding the Brave Search API key.
const BRAVE_KEY_ENV: &str = "BRAVE_SEARCH_API_KEY";

/// The web options of `lovia run`.
#[derive(clap::Args, Debug)]
pub(crate) struct WebOptions {
    /// Give the agent `read_page`: fetches public http(s) pages (1,000,000
    /// bytes, 30 s, 5 redirects, each hop re-checked after DNS) and returns
    /// their text fenced as external content [default: off].
    #[arg(long)]
    read_page: bool,
    /// An origin `read_page` may also reach although its address is
    /// loopback or private, written exactly, such as
    /// `http://127.0.0.1:8080` (repeatable) [default: none].
    #[arg(long, value_name = "ORIGIN", requires = "read_page")]
    web_allow: Vec<lovia_host::HttpOrigin>,
    /// Give the agent `web_search` over the SearXNG instance at URL; a key
    /// in $LOVIA_SEARCH_KEY is sent as a bearer token [default: off].
    #[arg(long, value_name = "URL", conflicts_with = "brave_search")]
    searxng: Option<String>,
    /// Give the agent `web_search` over the Brave Search API, with the key
    /// in $BRAVE_SEARCH_API_KEY [default: off].
    #[arg(long)]
    brave_search: bool,
}

/// The tools the options ask for, in the order read_page, web_search.
pub(crate) fn tools(options: &WebOptions) -> Result<Vec<Tool>, CliError> {
    let mut tools = Vec::new();
    if options.read_page {
        let tool = lovia_web::read_page_allowing(&options.web_allow, lovia_web::DEFAULT_MAX_CONCURRENT).map_err(|e| match e {
            lovia_web::ReadPageError::Wildcard { .. } => CliError::new(format!("--web-allow {e}")).hint(
                "public hosts are reachable already; --web-allow names one loopback or private host exactly, such as http://127.0.0.1:8080",
            ),
            other => CliError::new(format!("--read-page: {other}")),
        })?;
        tools.push(tool);
    }
    let backend: Option<Arc<dyn lovia_web::WebSearch>> = if let Some(url) = &options.searxng {
        let mut search = lovia_web::SearxngSearch::new(url).map_err(|e| {
            CliError::new(format!("--searxng: {e}"))
                .hint("pass the instance's base URL, such as https://searx.example.org")
        })?;
        if let Ok(key) = std::env::var(SEARXNG_KEY_ENV) {
            search = search.with_key(key);
        }
        Some(Arc::new(search))
    } else if options.brave_search {
        let key = std::env::var(BRAVE_KEY_ENV).map_err(|_| {
            CliError::new(format!("--brave-search needs the API key in ${BRAVE_KEY_ENV}"))
                .hint("export BRAVE_SEARCH_API_KEY=… (from https://api-dashboard.search.brave.com)")
        })?;
        Some(Arc::new(lovia_web::BraveSearch::new(key).map_err(|e| CliError::new(format!("--brave-search: {e}")))?))
    } else {
        None
    };
    if let Some(backend) = backend {
        tools.push(
            lovia_web::web_search(backend, lovia_web::DEFAULT_SEARCH_NAME).map_err(|e| CliError::new(e.to_string()))?,
        );
    }
    Ok(tools)
}
