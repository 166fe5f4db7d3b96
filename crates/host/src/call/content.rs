//! Rich results: the content parts a tool may return instead of one text or
//! JSON value (contract 0.2), and their projection, the text a model that
//! reads only text sees (docs/semantics.md §11).

use serde::{Deserialize, Serialize};

/// Most parts one result may have. Fixed: 256.
pub const MAX_CONTENT_PARTS: usize = 256;
/// Longest MIME type of a resource link, in bytes. Fixed: 127 (RFC 6838's name limits).
pub const MAX_MIME_TYPE_BYTES: usize = 127;
/// The image types a part may have: the raster formats every client and
/// image-reading model takes.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];
/// The schemes a resource link's URI may have: a client that opens the
/// link (a console, an MCP client) must never run a `javascript:` one.
pub const LINK_SCHEMES: [&str; 3] = ["https", "http", "data"];
/// Longest resource-link URI, in bytes. Fixed: 2,048.
pub const MAX_URI_BYTES: usize = 2048;
/// Longest resource-link name, in bytes. Fixed: 256.
pub const MAX_LINK_NAME_BYTES: usize = 256;

/// One part of a rich result. In JSON (transcripts, events, SSE) it is
/// tagged by `type`, and an image's bytes are base64:
///
/// ```
/// use lovia_host::ContentPart;
/// let part = ContentPart::Image { mime_type: "image/png".into(), data: vec![137, 80, 78, 71] };
/// assert_eq!(
///     serde_json::to_string(&part).unwrap(),
///     r#"{"type":"image","mime_type":"image/png","data":"iVBORw=="}"#
/// );
/// assert_eq!(part.model_text(), "[image: image/png, 4 B]");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentPart {
    /// Text, shown verbatim.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// `image/` and a subtype.
        mime_type: String,
        /// The encoded image (base64 in JSON).
        #[serde(with = "base64_bytes")]
        data: Vec<u8>,
    },
    /// A link to a resource the tool did not inline.
    ResourceLink {
        /// Where it is.
        uri: String,
        /// What to call it.
        name: String,
        /// Its media type, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

impl ContentPart {
    /// What a model that reads only text sees for this part: text verbatim,
    /// `[image: image/png, 12.1 KB]` (the size in `B`, `KB` from 1,024 bytes,
    /// `MB` from 1,048,576, one decimal), or
    /// `[resource link: <name>, <uri>, <mime type>]` (the type left out when unknown).
    pub fn model_text(&self) -> String {
        match self {
            ContentPart::Text { text } => text.clone(),
            ContentPart::Image { mime_type, data } => format!("[image: {mime_type}, {}]", size(data.len())),
            ContentPart::ResourceLink { uri, name, mime_type: Some(m) } => {
                format!("[resource link: {name}, {uri}, {m}]")
            }
            ContentPart::ResourceLink { uri, name, mime_type: None } => format!("[resource link: {name}, {uri}]"),
        }
    }

    /// Why a tool's part is unacceptable, if it is: the bounds above, an
    /// image type outside [`IMAGE_TYPES`], image bytes that do not begin as
    /// that type's files do, a URI with a scheme outside [`LINK_SCHEMES`],
    /// a URI or name with control characters, a link type that is not
    /// `type/subtype` in token characters.
    pub fn problem(&self) -> Option<String> {
        let token =
            |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b));
        let media_type =
            |m: &str| m.len() <= MAX_MIME_TYPE_BYTES && m.split_once('/').is_some_and(|(t, s)| token(t) && token(s));
        match self {
            ContentPart::Text { .. } => None,
            // Raster types only: an SVG "image" can carry script to whatever shows it.
            ContentPart::Image { mime_type, data } => {
                if !IMAGE_TYPES.contains(&mime_type.as_str()) {
                    Some(format!(
                        "an image's MIME type must be one of {}, not \"{}\"",
                        IMAGE_TYPES.join(", "),
                        shown(mime_type)
                    ))
                } else if !looks_like(mime_type, data) {
                    // The declared type is what a client trusts: SVG or HTML
                    // bytes labelled `image/png` would reach it as an image.
                    Some(format!("an image's bytes must be the {mime_type} its MIME type says; these are not"))
                } else {
                    None
                }
            }
            ContentPart::ResourceLink { uri, name, mime_type } => {
                if uri.is_empty() || uri.len() > MAX_URI_BYTES || uri.chars().any(|c| c.is_control() || c == ' ') {
                    Some(format!(
                        "a resource link's URI must be 1 to {MAX_URI_BYTES} bytes without spaces or control characters, not \"{}\"",
                        shown(uri)
                    ))
                } else if !LINK_SCHEMES.contains(&scheme(uri).as_str()) {
                    Some(format!(
                        "a resource link's URI must start with {}, not \"{}\"",
                        LINK_SCHEMES.map(|s| format!("{s}:")).join(", "),
                        shown(uri)
                    ))
                } else if name.is_empty() || name.len() > MAX_LINK_NAME_BYTES || name.chars().any(char::is_control) {
                    Some(format!(
                        "a resource link's name must be 1 to {MAX_LINK_NAME_BYTES} bytes without control characters, not \"{}\"",
                        shown(name)
                    ))
                } else {
                    mime_type.as_deref().filter(|m| !media_type(m)).map(|m| {
                        format!(
                            "a resource link's MIME type must be type/subtype (at most {MAX_MIME_TYPE_BYTES} bytes), not \"{}\"",
                            shown(m)
                        )
                    })
                }
            }
        }
    }
}

/// Whether `data` begins as files of the raster type `mime_type` do (the
/// checks of the console's parts.js); false for any other type. Providers
/// that send images on use it too, for parts stored before the host checked.
pub fn looks_like(mime_type: &str, data: &[u8]) -> bool {
    match mime_type {
        "image/png" => data.starts_with(b"\x89PNG\r\n\x1a\n"),
        "image/jpeg" => data.starts_with(&[0xff, 0xd8, 0xff]),
        "image/gif" => data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a"),
        "image/webp" => data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WEBP",
        _ => false,
    }
}

/// The scheme of `uri` in lower case (RFC 3986: a letter, then letters,
/// digits, `+`, `-`, `.`, up to the first `:`), or `""` when it has none.
fn scheme(uri: &str) -> String {
    match uri.split_once(':') {
        Some((scheme, _))
            if scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            scheme.to_ascii_lowercase()
        }
        _ => String::new(),
    }
}

/// A byte count as the projection shows it: `5 B`, `1.4 KB`, `2.0 MB`.
fn size(bytes: usize) -> String {
    const KB: usize = 1024;
    const MB: usize = 1024 * 1024;
    match bytes {
        b if b >= MB => format!("{:.1} MB", b as f64 / MB as f64),
        b if b >= KB => format!("{:.1} KB", b as f64 / KB as f64),
        b => format!("{b} B"),
    }
}

/// At most 80 characters of a hostile string, escaped, for an error message.
fn shown(s: &str) -> String {
    s.chars().take(80).collect::<String>().escape_debug().to_string()
}

/// The projection of `parts`, what the model reads: each part's
/// [`ContentPart::model_text`], one per line, empty text parts left out
/// (docs/semantics.md §11).
///
/// ```
/// use lovia_host::{ContentPart, render_parts};
/// let parts = [
///     ContentPart::Text { text: "shot.png".into() },
///     ContentPart::Text { text: String::new() },
///     ContentPart::Image { mime_type: "image/png".into(), data: vec![0; 5] },
/// ];
/// assert_eq!(render_parts(&parts), "shot.png\n[image: image/png, 5 B]");
/// ```
pub fn render_parts(parts: &[ContentPart]) -> String {
    parts
        .iter()
        .filter(|p| !matches!(p, ContentPart::Text { text } if text.is_empty()))
        .map(ContentPart::model_text)
        .collect::<Vec<_>>()
        .join("\n")
}

mod base64_bytes {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(data))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text.as_bytes()).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_render_as_documented() {
        let parts = vec![
            ContentPart::Text { text: "chart of sales".into() },
            ContentPart::Image { mime_type: "image/png".into(), data: vec![0; 12_345] },
            ContentPart::ResourceLink {
                uri: "https://example.com/r.pdf".into(),
                name: "report".into(),
                mime_type: Some("application/pdf".into()),
            },
            ContentPart::ResourceLink { uri: "file:///tmp/x".into(), name: "x".into(), mime_type: None },
        ];
        assert_eq!(
            render_parts(&parts),
            "chart of sales\n[image: image/png, 12.1 KB]\n[resource link: report, https://example.com/r.pdf, application/pdf]\n[resource link: x, file:///tmp/x]"
        );
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1024), "1.0 KB");
        assert_eq!(size(3 << 20), "3.0 MB");
    }

    #[test]
    fn hostile_parts_are_named() {
        let image = |m: &str| ContentPart::Image { mime_type: m.into(), data: b"\x89PNG\r\n\x1a\n....".to_vec() };
        assert_eq!(image("image/png").problem(), None);
        assert!(image("text/html").problem().expect("refused").contains("must be one of image/png"));
        assert!(image("image/svg+xml").problem().is_some(), "an SVG can carry script");
        assert!(image("image/png\nX-Forged: 1").problem().is_some());
        let link = |u: &str, n: &str| ContentPart::ResourceLink { uri: u.into(), name: n.into(), mime_type: None };
        assert!(link("", "n").problem().is_some());
        assert!(link(&"u".repeat(MAX_URI_BYTES + 1), "n").problem().is_some());
        assert!(link("https://x", "a\u{1b}[2J").problem().is_some());
        assert_eq!(link("https://x/y", "y").problem(), None);
    }

    #[test]
    fn image_bytes_must_be_their_declared_type() {
        let image = |m: &str, data: &[u8]| ContentPart::Image { mime_type: m.into(), data: data.to_vec() };
        for (mime_type, data) in [
            ("image/png", &b"\x89PNG\r\n\x1a\nIHDR"[..]),
            ("image/jpeg", &[0xff, 0xd8, 0xff, 0xe0][..]),
            ("image/gif", &b"GIF89a\x01\x00"[..]),
            ("image/webp", &b"RIFF\x10\x00\x00\x00WEBPVP8 "[..]),
        ] {
            assert_eq!(image(mime_type, data).problem(), None, "{mime_type}");
        }
        let svg = image("image/png", b"<svg onload=alert(1)>");
        assert_eq!(
            svg.problem().as_deref(),
            Some("an image's bytes must be the image/png its MIME type says; these are not")
        );
        assert!(image("image/jpeg", b"\x89PNG\r\n\x1a\n").problem().is_some(), "a PNG is no JPEG");
        assert!(image("image/gif", b"").problem().is_some());
        assert!(image("image/webp", b"RIFF").problem().is_some());
    }

    #[test]
    fn links_have_web_or_data_schemes_only() {
        let link = |u: &str| ContentPart::ResourceLink { uri: u.into(), name: "n".into(), mime_type: None };
        for ok in ["https://example.com/r.pdf", "http://example.com", "HTTPS://x", "data:text/csv,a%0A1"] {
            assert_eq!(link(ok).problem(), None, "{ok}");
        }
        for bad in ["javascript:alert(1)", "JavaScript:alert(1)", "vbscript:x", "file:///etc/passwd", "/relative", "x"]
        {
            let problem = link(bad).problem().unwrap_or_else(|| panic!("{bad} passed"));
            assert!(
                problem.starts_with("a resource link's URI must start with https:, http:, data:, not"),
                "{problem}"
            );
        }
    }

    #[test]
    fn parts_round_trip_through_json() {
        let parts = vec![
            ContentPart::Text { text: "t".into() },
            ContentPart::Image { mime_type: "image/gif".into(), data: vec![1, 2, 3, 255] },
            ContentPart::ResourceLink { uri: "u:x".into(), name: "n".into(), mime_type: None },
        ];
        let json = serde_json::to_string(&parts).expect("serialises");
        assert_eq!(serde_json::from_str::<Vec<ContentPart>>(&json).expect("parses"), parts);
    }
}
