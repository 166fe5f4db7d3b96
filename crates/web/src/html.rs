//! HTML to readable text with `html2text` (the browser-grade html5ever
//! parser; every visible block kept, links as numbered references), plus
//! the page's title and images.

use reqwest::Url;

/// Columns the text is wrapped at: wide enough to keep a paragraph's lines
/// long, narrow enough that a cut at a newline is never far away.
const WIDTH: usize = 100;
/// The longest title kept, in characters.
const MAX_TITLE: usize = 300;
/// The longest image URL and alt text kept, in characters.
const MAX_IMAGE_FIELD: usize = 500;
/// Images collected at most (the rendering shows 50).
const MAX_IMAGES: usize = 1000;

/// An image: its absolute URL and alt text. (Not `PageImage`: this module
/// stays below `page` in the module graph.)
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Image {
    pub(crate) url: String,
    pub(crate) alt: String,
}

/// A page's readable parts.
pub(crate) struct Converted {
    pub(crate) title: Option<String>,
    pub(crate) text: String,
    pub(crate) images: Vec<Image>,
}

/// The deepest nesting of elements given to the HTML parser. html5ever's
/// tree builder scans the stack of open elements for most tags, so its
/// time grows with depth × tags: 8,000 nested `<div>`s take about 1.5-1.8 s
/// (`cargo test -p lovia-web --lib where_deep_nesting_spends_its_time --
/// --ignored --nocapture` prints the figures), and a megabyte of them would
/// take many minutes. Real pages nest a few dozen
/// deep; a deeper one is read by [`strip_tags`] instead.
const MAX_DEPTH: usize = 512;

/// Converts `html` fetched from `base`.
pub(crate) fn convert(html: &str, base: &Url, want_images: bool) -> Converted {
    if nesting(html) > MAX_DEPTH {
        return Converted { title: title(html), text: tidy(&strip_tags(html)), images: Vec::new() };
    }
    let config = html2text::config::plain();
    let Ok(dom) = config.parse_html(html.as_bytes()) else {
        return Converted { title: None, text: String::new(), images: Vec::new() };
    };
    let images = if want_images { images(&dom, base) } else { Vec::new() };
    let text =
        config.dom_to_render_tree(&dom).and_then(|tree| config.render_to_string(tree, WIDTH)).unwrap_or_default();
    Converted { title: title(html), text: tidy(&text), images }
}

/// Elements that hold no content, and those the parser closes by itself
/// when a sibling starts: neither can make the tree deep.
const NOT_NESTING: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr", "p", "li",
    "dt", "dd", "tr", "td", "th", "option", "optgroup", "thead", "tbody", "tfoot", "rp", "rt", "colgroup", "caption",
    "!doctype", "html", "head", "body",
];

/// An upper estimate of how deep `html` nests, in one linear pass: every
/// start tag of an element that can nest opens a level, every end tag
/// closes one. Comments and the text of `script` and `style` are skipped.
fn nesting(html: &str) -> usize {
    let bytes = html.as_bytes();
    let (mut depth, mut deepest, mut i) = (0usize, 0usize, 0usize);
    while let Some(at) = bytes[i..].iter().position(|b| *b == b'<') {
        i += at + 1;
        if bytes[i..].starts_with(b"!--") {
            i = find(bytes, i, b"-->").unwrap_or(bytes.len());
            continue;
        }
        let closing = bytes.get(i) == Some(&b'/');
        let name_start = i + usize::from(closing);
        let name_len = bytes[name_start..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'!').count();
        if name_len == 0 {
            continue;
        }
        let name = html[name_start..name_start + name_len].to_ascii_lowercase();
        let Some(end) = bytes[name_start..].iter().position(|b| *b == b'>').map(|p| name_start + p) else { break };
        let self_closing = bytes[..end].ends_with(b"/");
        i = end + 1;
        if NOT_NESTING.contains(&name.as_str()) || self_closing {
            continue;
        }
        if closing {
            depth = depth.saturating_sub(1);
        } else if name == "script" || name == "style" {
            let close = format!("</{name}");
            i = find_ignore_case(html, i, &close).unwrap_or(bytes.len());
        } else {
            depth += 1;
            deepest = deepest.max(depth);
        }
    }
    deepest
}

/// The index just past the first `needle` at or after `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes[from..].windows(needle.len()).position(|w| w == needle).map(|p| from + p + needle.len())
}

/// The index of the first `needle` (ASCII, any case) at or after `from`.
fn find_ignore_case(html: &str, from: usize, needle: &str) -> Option<usize> {
    html.as_bytes()[from..]
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
        .map(|p| from + p)
}

/// The text of a page too deep to parse: tags, comments, scripts and
/// styles removed, a few entities decoded, in one linear pass.
fn strip_tags(html: &str) -> String {
    let bytes = html.as_bytes();
    let mut out = String::with_capacity(html.len() / 2);
    let mut i = 0;
    while i < bytes.len() {
        let Some(at) = bytes[i..].iter().position(|b| *b == b'<') else {
            out.push_str(&html[i..]);
            break;
        };
        out.push_str(&html[i..i + at]);
        i += at + 1;
        if bytes[i..].starts_with(b"!--") {
            i = find(bytes, i, b"-->").unwrap_or(bytes.len());
            continue;
        }
        let raw = ["script", "style"]
            .into_iter()
            .find(|n| bytes.len() >= i + n.len() && bytes[i..i + n.len()].eq_ignore_ascii_case(n.as_bytes()));
        let end = bytes[i..].iter().position(|b| *b == b'>').map_or(bytes.len(), |p| i + p + 1);
        i = match raw {
            Some(name) => find_ignore_case(html, end, &format!("</{name}")).unwrap_or(bytes.len()),
            None => end,
        };
        out.push(' ');
    }
    let out = out
        .replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    out.split('\n').map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect::<Vec<_>>().join("\n")
}

/// Drops trailing spaces and runs of more than one blank line.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim_matches('\n').to_owned()
}

/// The first `<title>`'s text, entities decoded, on one line. Found in the
/// source (html2text exposes elements but not text nodes): the first
/// `<title` tag to the next `</title`, rendered as HTML on its own.
fn title(html: &str) -> Option<String> {
    let lower = html.get(..html.len().min(200_000))?.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let raw = html.get(start..end)?;
    let text =
        html2text::config::plain().string_from_read(format!("<p>{raw}</p>").as_bytes(), 10_000).unwrap_or_default();
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!one_line.is_empty()).then(|| one_line.chars().take(MAX_TITLE).collect())
}

/// Every `<img>` with a `src`, resolved against `base`, in document order.
fn images(dom: &html2text::RcDom, base: &Url) -> Vec<Image> {
    let mut found = Vec::new();
    // Depth-first without recursion: a hostile page may nest deeply.
    let mut stack = vec![dom.document.clone()];
    while let Some(node) = stack.pop() {
        if found.len() >= MAX_IMAGES {
            break;
        }
        if let html2text::Element { name, attrs, .. } = &node.data
            && &*name.local == "img"
        {
            let attrs = attrs.borrow();
            let get = |key: &str| attrs.iter().find(|a| &*a.name.local == key).map(|a| a.value.to_string());
            if let Some(src) = get("src")
                && let Ok(url) = base.join(src.trim())
                && matches!(url.scheme(), "http" | "https")
            {
                let alt = get("alt").unwrap_or_default();
                let alt = alt.split_whitespace().collect::<Vec<_>>().join(" ");
                found.push(Image {
                    url: url.to_string().chars().take(MAX_IMAGE_FIELD).collect(),
                    alt: alt.chars().take(MAX_IMAGE_FIELD).collect(),
                });
            }
        }
        stack.extend(node.children.borrow().iter().rev().cloned());
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_becomes_text_with_its_title_and_images() {
        let base = Url::parse("http://example.test/docs/").expect("as written");
        let html = "<html><head><title> Tea &amp; Biscuits </title><script>var x = 'hidden';</script></head>\
            <body><h1>Brewing</h1><p>Steep for <b>three</b> minutes.</p><img src=\"cup.png\" alt=\"A cup\">\
            <ul><li>Milk</li><li>Sugar</li></ul><img src=\"data:image/png;base64,AAAA\"></body></html>";
        let page = convert(html, &base, true);
        assert_eq!(page.title.as_deref(), Some("Tea & Biscuits"));
        assert!(page.text.contains("Brewing") && page.text.contains("Steep for **three** minutes."), "{}", page.text);
        assert!(page.text.contains("Milk") && !page.text.contains("hidden"), "{}", page.text);
        assert_eq!(page.images, vec![Image { url: "http://example.test/docs/cup.png".into(), alt: "A cup".into() }]);
    }

    #[test]
    fn a_page_nested_past_the_bound_is_read_without_the_parser() {
        // 200,000 levels: the parser would take hours (its time grows with
        // depth × tags); the linear reading takes milliseconds.
        let depth = 200_000;
        let html = format!(
            "<title>Deep</title>{}deep &amp; down{}",
            "<div><b id=x>".repeat(depth),
            "</b></div>".repeat(depth)
        );
        assert_eq!(nesting(&html), 2 * depth);
        let base = Url::parse("http://example.test/").expect("as written");
        // The default 2 MiB stack of a test thread, as on tokio's blocking pool.
        let page = std::thread::spawn(move || convert(&html, &base, true)).join().expect("as written");
        assert_eq!(page.title.as_deref(), Some("Deep"));
        assert!(page.text.ends_with("deep & down"), "{}", page.text);
    }

    /// A measurement, not a check: html5ever's parse time at growing
    /// depths, beside html2text's render of the same tree.
    #[test]
    #[ignore = "a measurement; run it by name"]
    fn where_deep_nesting_spends_its_time() {
        for depth in [2_000usize, 4_000, 8_000] {
            let html = format!("{}deep{}", "<div>".repeat(depth), "</div>".repeat(depth));
            let config = html2text::config::plain();
            let start = std::time::Instant::now();
            let dom = config.parse_html(html.as_bytes()).expect("parsed");
            let parse = start.elapsed();
            let start = std::time::Instant::now();
            let text = config.dom_to_render_tree(&dom).and_then(|tree| config.render_to_string(tree, WIDTH));
            eprintln!(
                "depth {depth}: parse {parse:?}, render {:?} ({} bytes)",
                start.elapsed(),
                text.map_or(0, |t| t.len())
            );
        }
    }

    #[test]
    fn nesting_counts_only_elements_that_can_nest() {
        let list = format!("<ul>{}</ul>", "<li>item".repeat(5000));
        assert_eq!(nesting(&list), 1);
        assert_eq!(nesting("<div><!-- <div><div> --><script>if (a<b) { '<div>' }</script><br><img src=x/></div>"), 1);
        assert_eq!(nesting("<div><section><span>x</span></section></div>"), 3);
    }

    #[test]
    fn a_page_within_the_bound_keeps_the_parser() {
        let depth = MAX_DEPTH - 1;
        let html = format!("{}<h1>deep</h1>{}", "<div>".repeat(depth), "</div>".repeat(depth));
        let page = convert(&html, &Url::parse("http://example.test/").expect("as written"), false);
        assert!(page.text.contains("# deep"), "{}", page.text);
    }
}
