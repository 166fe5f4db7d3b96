//! The web tools a model can use: `read_page` ([`page_reader`]) and
//! `web_search` ([`web_search`]), each a factory over a backend you may
//! replace. Every default backend fetches under [`Egress`], the rules of a
//! plugin's HTTP grant (public addresses only unless an origin names a host
//! exactly, judged after DNS and at every redirect, size and time capped),
//! and everything fetched reaches the model between the
//! [external-content fence](fence) (docs/web.md).
//!
//! ```
//! use lovia_web::{HttpPageReader, PageReaderOptions, SearxngSearch, page_reader, web_search};
//! use std::sync::Arc;
//! let read_page = page_reader(Arc::new(HttpPageReader::default()), PageReaderOptions::default()).unwrap();
//! let search = web_search(Arc::new(SearxngSearch::new("https://searx.example.org").unwrap()), "web_search").unwrap();
//! let tools = vec![read_page, search]; // add them to the agent's tools
//! # let _ = tools;
//! ```

/// docs/web.md, whose Rust snippets rustdoc compiles as this crate's
/// doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/web.md")]
mod web_docs {}

mod backend;
mod brave;
mod egress;
mod error;
mod fence;
mod html;
mod page;
mod read_page;
mod search;
mod searxng;
mod section;

pub use backend::BackendConfigError;
pub use brave::{BRAVE_ENDPOINT, BraveSearch};
pub use egress::{
    DEFAULT_MAX_BYTES, DEFAULT_MAX_REDIRECTS, DEFAULT_TIMEOUT, Egress, EgressBuilder, EgressError, Fetched,
};
pub use error::WebError;
pub use fence::{FENCE_BEGIN, FENCE_END, fence};
pub use page::{
    DEFAULT_CACHE_ENTRIES, DEFAULT_CACHE_TTL, DEFAULT_MAX_CONCURRENT, HttpPageReader, Page, PageImage, PageReader,
};
pub use read_page::{
    DEFAULT_MAX_CHARS, DEFAULT_NAME, PageReaderOptions, ReadPageError, page_reader, read_page_allowing,
};
pub use search::{DEFAULT_SEARCH_NAME, MAX_RESULTS, SearchResult, TimeRange, WebSearch, web_search};
pub use searxng::SearxngSearch;
pub use section::{WebSection, WebSectionError};

/// The web tools a door was given (`read_page`, a search tool) as one
/// capability, among the host's single tools at the head of a table.
pub fn capability(tools: Vec<lovia_host::Tool>) -> lovia_host::capability::ToolList {
    lovia_host::capability::ToolList::new("the web tools", lovia_host::ToolSource::AgentTools, tools)
}
