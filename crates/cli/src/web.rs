//! The web tools of `lovia run`: `--read-page`, `--searxng URL`,
//! `--brave-search`, and the exact origins `--web-allow` adds
//! (docs/web.md).

use crate::CliError;
use lovia_host::Tool;
use lovia_web::{WebSection, WebSectionError};

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

impl WebOptions {
    /// The web section these flags spell (the one `[tenants.web]` spells
    /// in `lovia serve`): a SearXNG key is sent when $LOVIA_SEARCH_KEY is
    /// set, the Brave key is read from $BRAVE_SEARCH_API_KEY.
    pub(crate) fn section(&self) -> WebSection {
        let mut section = WebSection::default();
        section.read_page = self.read_page;
        section.allow = self.web_allow.clone();
        section.searxng_url = self.searxng.clone();
        section.searxng_key_env =
            (self.searxng.is_some() && std::env::var_os(SEARXNG_KEY_ENV).is_some()).then(|| SEARXNG_KEY_ENV.into());
        section.brave_key_env = self.brave_search.then(|| BRAVE_KEY_ENV.into());
        section
    }
}

/// The tools the options ask for, in the order read_page, web_search.
pub(crate) fn tools(options: &WebOptions) -> Result<Vec<Tool>, CliError> {
    options.section().tools().map_err(refusal)
}

/// The section's error in the flags' spelling.
fn refusal(e: WebSectionError) -> CliError {
    match (e.key(), &e) {
        ("allow", WebSectionError::Wildcard { origin }) => CliError::new(format!("--web-allow {origin} has a wildcard"))
            .hint(
                "public hosts are reachable already; --web-allow names one loopback or private host exactly, such as http://127.0.0.1:8080",
            ),
        ("allow", _) => CliError::new(format!("--web-allow: {e}")),
        ("searxng_url", _) => CliError::new(format!("--searxng: {e}"))
            .hint("pass the instance's base URL, such as https://searx.example.org"),
        ("brave_key_env", WebSectionError::MissingKey { .. }) => {
            CliError::new(format!("--brave-search needs the API key in ${BRAVE_KEY_ENV}"))
                .hint("export BRAVE_SEARCH_API_KEY=… (from https://api-dashboard.search.brave.com)")
        }
        ("brave_key_env", _) => CliError::new(format!("--brave-search: {e}")),
        _ => CliError::new(format!("--read-page: {e}")),
    }
}
