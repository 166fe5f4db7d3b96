//! Rich results: text, images and resource links in one result (contract 0.2).

use crate::bindings::lovia::tools::types as wit;

/// A result made of content parts, for clients that show images and links.
/// A tool returns it like any other value; a model that reads only text sees
/// each part's text rendering, one per line: the text verbatim,
/// `[image: image/png, 1.4 KB]`, `[resource link: <name>, <uri>, <mime type>]`
/// (docs/semantics.md §11).
///
/// ```
/// /// Draws the week's sales.
/// #[lovia::tool(read_only)]
/// fn sales_chart() -> lovia::Content {
///     let png: Vec<u8> = vec![0x89, b'P', b'N', b'G'];
///     lovia::Content::new()
///         .text("Sales rose 12% this week.")
///         .image("image/png", png)
///         .link("https://example.com/sales.csv", "sales.csv", Some("text/csv"))
/// }
/// # fn main() {}
/// ```
///
/// The host refuses (as an error the model reads) more than 256 parts, an
/// image type other than `image/png`, `image/jpeg`, `image/gif` or
/// `image/webp`, and links over 2,048 bytes of URI or 256 of name. The
/// output cap applies to the projection; past it the result degrades to its
/// truncated text. Write the return type as `lovia::Content` (the macro
/// recognises that path).
#[derive(Debug, Clone, Default)]
pub struct Content {
    parts: Vec<wit::ContentPart>,
}

impl Content {
    /// No parts yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a text part.
    #[must_use]
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.parts.push(wit::ContentPart::Text(text.into()));
        self
    }

    /// Adds an image: its media type (`image/png`) and encoded bytes.
    #[must_use]
    pub fn image(mut self, mime_type: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        self.parts.push(wit::ContentPart::Image(wit::Image { mime_type: mime_type.into(), data: data.into() }));
        self
    }

    /// Adds a link to a resource: where it is, what to call it, its media type if known.
    #[must_use]
    pub fn link(mut self, uri: impl Into<String>, name: impl Into<String>, mime_type: Option<&str>) -> Self {
        self.parts.push(wit::ContentPart::ResourceLink(wit::ResourceLink {
            uri: uri.into(),
            name: name.into(),
            mime_type: mime_type.map(Into::into),
        }));
        self
    }

    /// How many parts it has.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Whether it has no parts.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    pub(crate) fn into_parts(self) -> Vec<wit::ContentPart> {
        self.parts
    }
}
