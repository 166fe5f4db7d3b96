//! [`PageReader`]: what `read_page` asks for a URL, and [`HttpPageReader`],
//! the default backend: a fetch under [`Egress`], HTML made readable, and a
//! short cache.

use crate::{Egress, WebError, html};
use lovia_host::call::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A page as a backend read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Page {
    /// The URL that answered (after redirects).
    pub url: String,
    /// The HTTP status.
    pub status_code: u16,
    /// The media type, such as `text/html` (no parameters).
    pub media_type: String,
    /// The title, if the page has one.
    pub title: Option<String>,
    /// The readable text, whole: `read_page` pages through it.
    pub text: String,
    /// The page's images, when asked for.
    pub images: Vec<PageImage>,
    /// Whether the download stopped at the size cap.
    pub size_capped: bool,
}

impl Page {
    /// A page with no title, images or cap.
    pub fn new(
        url: impl Into<String>,
        status_code: u16,
        media_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self {
            url: url.into(),
            status_code,
            media_type: media_type.into(),
            title: None,
            text: text.into(),
            images: Vec::new(),
            size_capped: false,
        }
    }
}

/// An image of a page: its absolute URL and alt text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PageImage {
    /// The absolute URL.
    pub url: String,
    /// The alt text, on one line (may be empty).
    pub alt: String,
}

impl PageImage {
    /// An image.
    pub fn new(url: impl Into<String>, alt: impl Into<String>) -> Self {
        Self { url: url.into(), alt: alt.into() }
    }
}

/// Reads a page for `read_page`. Implement it to read through your own
/// service (a headless browser, an internal cache); [`HttpPageReader`] is
/// the default.
///
/// ```
/// use lovia_host::call::BoxFuture;
/// use lovia_web::{Page, PageReader, WebError};
/// #[derive(Debug)]
/// struct Fixed;
/// impl PageReader for Fixed {
///     fn read<'a>(&'a self, url: &'a str, _images: bool) -> BoxFuture<'a, Result<Page, WebError>> {
///         Box::pin(async move { Ok(Page::new(url, 200, "text/plain", "Hello.")) })
///     }
/// }
/// ```
pub trait PageReader: Send + Sync + std::fmt::Debug {
    /// Reads `url` (already checked to be http or https); lists the images
    /// when `images` is true.
    fn read<'a>(&'a self, url: &'a str, images: bool) -> BoxFuture<'a, Result<Page, WebError>>;
}

/// How long a read page is kept, by default: 300 s.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(300);
/// Pages kept at most, by default: 32 (each at most the egress's
/// `max_bytes` of text).
pub const DEFAULT_CACHE_ENTRIES: usize = 32;
/// Reads in flight at once per reader, by default: 4. A reader serves one
/// agent, or one tenant in `lovia serve`; further reads wait.
pub const DEFAULT_MAX_CONCURRENT: usize = 4;

/// The largest page (in bytes, decoded) converted on the async thread that
/// fetched it, about 0.24 ms of work at the measured 137 MB/s; a larger
/// one goes to tokio's blocking pool.
const INLINE_HTML_BYTES: usize = 32 * 1024;

/// Read pages by (URL, images asked), with when they were read.
type PageCache = HashMap<(String, bool), (Instant, Page)>;

/// The default backend: GET under [`Egress`] (public addresses, 1,000,000
/// bytes, 30 s, redirects re-checked), the body decoded by its charset,
/// HTML turned into text (headings, lists, tables, links as numbered
/// references), other text kept as it is, and each
/// page kept 300 s (at most 32 pages). At most 4 reads run at once.
#[derive(Debug, Clone)]
pub struct HttpPageReader {
    egress: Egress,
    cache: Arc<Mutex<PageCache>>,
    ttl: Duration,
    entries: usize,
    permits: Arc<tokio::sync::Semaphore>,
}

impl Default for HttpPageReader {
    fn default() -> Self {
        Self::new(Egress::default())
    }
}

impl HttpPageReader {
    /// A reader fetching under `egress`, with the default cache and
    /// concurrency.
    pub fn new(egress: Egress) -> Self {
        Self {
            egress,
            cache: Arc::default(),
            ttl: DEFAULT_CACHE_TTL,
            entries: DEFAULT_CACHE_ENTRIES,
            permits: Arc::new(tokio::sync::Semaphore::new(DEFAULT_MAX_CONCURRENT)),
        }
    }

    /// Keeps pages `ttl` (zero: no cache), at most `entries` of them.
    #[must_use]
    pub fn with_cache(mut self, ttl: Duration, entries: usize) -> Self {
        self.ttl = ttl;
        self.entries = entries;
        self
    }

    /// Runs at most `reads` reads at once (at least one).
    #[must_use]
    pub fn with_max_concurrent(mut self, reads: usize) -> Self {
        self.permits = Arc::new(tokio::sync::Semaphore::new(reads.max(1)));
        self
    }

    fn cached(&self, key: &(String, bool)) -> Option<Page> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|_, (at, _)| at.elapsed() < self.ttl);
        cache.get(key).map(|(_, page)| page.clone())
    }

    fn keep(&self, key: (String, bool), page: &Page) {
        if self.ttl.is_zero() || self.entries == 0 {
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        while cache.len() >= self.entries {
            let Some(oldest) = cache.iter().min_by_key(|(_, (at, _))| *at).map(|(k, _)| k.clone()) else { break };
            cache.remove(&oldest);
        }
        cache.insert(key, (Instant::now(), page.clone()));
    }

    async fn fetch(&self, url: &str, images: bool) -> Result<Page, WebError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| WebError::Backend { message: "The page reader is shut down.".into(), hint: None })?;
        let fetched = self.egress.get(url, &[("accept", "text/html,text/plain;q=0.9,*/*;q=0.5")]).await?;
        let (media_type, charset) = media_type(fetched.content_type.as_deref());
        let encoding = charset
            .as_deref()
            .and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()))
            .unwrap_or(encoding_rs::UTF_8);
        let (decoded, _, _) = encoding.decode(&fetched.body);
        let mut page = Page::new(fetched.url.to_string(), fetched.status, media_type.clone(), String::new());
        page.size_capped = fetched.capped;
        if is_html(&media_type) {
            // A page converts at about 137 MB/s (html/mod.rs's measurement
            // test): a small one here, a larger one (about 7 ms for the 1 MB
            // cap) off the async threads, which the hop to the blocking pool
            // is worth only then.
            let converted = if decoded.len() <= INLINE_HTML_BYTES {
                html::convert(&decoded, &fetched.url, images)
            } else {
                let (decoded, base) = (decoded.into_owned(), fetched.url.clone());
                tokio::task::spawn_blocking(move || html::convert(&decoded, &base, images))
                    .await
                    .map_err(|e| WebError::Backend { message: format!("Reading the page failed: {e}"), hint: None })?
            };
            page.title = converted.title;
            page.text = converted.text;
            page.images = converted.images.into_iter().map(|i| PageImage::new(i.url, i.alt)).collect();
        } else if is_text(&media_type) {
            page.text = decoded.into_owned();
        } else {
            page.text = format!(
                "[The page is {media_type} ({} bytes), which is not text; nothing of it is shown.]",
                fetched.body.len()
            );
        }
        Ok(page)
    }
}

impl PageReader for HttpPageReader {
    fn read<'a>(&'a self, url: &'a str, images: bool) -> BoxFuture<'a, Result<Page, WebError>> {
        Box::pin(async move {
            let key = (url.to_owned(), images);
            if let Some(page) = self.cached(&key) {
                return Ok(page);
            }
            let page = self.fetch(url, images).await?;
            self.keep(key, &page);
            Ok(page)
        })
    }
}

/// The media type (lower case, no parameters) and charset of a
/// `Content-Type`; `application/octet-stream` when there is none.
fn media_type(content_type: Option<&str>) -> (String, Option<String>) {
    let Some(value) = content_type else { return ("application/octet-stream".into(), None) };
    let mut parts = value.split(';');
    let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let charset = parts.find_map(|p| {
        let (key, value) = p.split_once('=')?;
        key.trim().eq_ignore_ascii_case("charset").then(|| value.trim().trim_matches('"').to_owned())
    });
    let media = if media.is_empty() { "application/octet-stream".into() } else { media };
    (media, charset)
}

fn is_html(media: &str) -> bool {
    matches!(media, "text/html" | "application/xhtml+xml")
}

fn is_text(media: &str) -> bool {
    media.starts_with("text/")
        || media.ends_with("+json")
        || media.ends_with("+xml")
        || matches!(media, "application/json" | "application/xml" | "application/javascript")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_split_into_media_type_and_charset() {
        assert_eq!(
            media_type(Some("Text/HTML; charset=\"ISO-8859-1\"")),
            ("text/html".into(), Some("ISO-8859-1".into()))
        );
        assert_eq!(media_type(None).0, "application/octet-stream");
        assert!(is_text("application/ld+json") && !is_text("image/png"));
    }
}
