//! The HTML tokenizer `read_page` reads a page with: one linear pass that
//! yields text, start tags (with their attributes' source) and end tags,
//! and steps over comments, doctypes and processing instructions as the
//! WHATWG tokenizer does. The text of `script`, `style` and the other
//! raw-text elements runs to their end tag, whatever it holds.
//!
//! Why not html5ever, the browser-grade parser `read_page` used before:
//! its tokenizer alone took longer than the fetch, and with its tree
//! builder and html2text's layout `read_page` of a 20 KiB page took
//! 1.24–1.29 ms, twelve to sixteen times the fetch (docs/performance.md,
//! "The web tools"). Reading a page
//! as text needs no tree: which element opens and closes is enough, and a
//! pass that keeps no tree has no depth for a hostile page to exploit.

/// One piece of a page, borrowed from its source.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Token<'a> {
    /// Text as written: character references are not decoded yet.
    Text(&'a str),
    /// A start tag: its name as written and the source of its attributes.
    Start {
        /// The element's name, in the case it was written in.
        name: &'a str,
        /// Everything between the name and the tag's `>`.
        attrs: &'a str,
    },
    /// An end tag.
    End {
        /// The element's name, in the case it was written in.
        name: &'a str,
    },
}

/// Elements whose content is text up to their own end tag (the WHATWG
/// RAWTEXT, RCDATA and script data states, as a browser with scripting
/// enabled reads `noscript`).
pub(crate) const RAW_TEXT: &[&str] =
    &["script", "style", "title", "textarea", "xmp", "iframe", "noembed", "noframes", "noscript"];

/// The tokens of `html`, in order.
pub(crate) struct Scanner<'a> {
    html: &'a str,
    at: usize,
    /// Inside a raw-text element: its name.
    raw: Option<&'static str>,
}

impl<'a> Scanner<'a> {
    pub(crate) fn new(html: &'a str) -> Self {
        Self { html, at: 0, raw: None }
    }
}

impl<'a> Iterator for Scanner<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        let html = self.html;
        let bytes = html.as_bytes();
        loop {
            let start = self.at;
            if start >= bytes.len() {
                return None;
            }
            if let Some(name) = self.raw.take() {
                let end = raw_text_end(bytes, start, name);
                self.at = end;
                if end > start {
                    return Some(Token::Text(&html[start..end]));
                }
                continue;
            }
            let Some(lt) = memchr::memchr(b'<', &bytes[start..]) else {
                self.at = bytes.len();
                return Some(Token::Text(&html[start..]));
            };
            if lt > 0 {
                self.at = start + lt;
                return Some(Token::Text(&html[start..start + lt]));
            }
            match bytes.get(start + 1) {
                Some(b'!') if bytes[start + 2..].starts_with(b"--") => self.at = comment_end(bytes, start + 4),
                Some(b'!' | b'?') => self.at = past_gt(bytes, start + 2),
                Some(b'/') => match bytes.get(start + 2) {
                    Some(c) if c.is_ascii_alphabetic() => {
                        let Some((name, _, end)) = tag(html, start + 2) else {
                            self.at = bytes.len();
                            return None;
                        };
                        self.at = end;
                        return Some(Token::End { name });
                    }
                    Some(b'>') => self.at = start + 3,
                    Some(_) => self.at = past_gt(bytes, start + 2),
                    None => {
                        self.at = bytes.len();
                        return Some(Token::Text("</"));
                    }
                },
                Some(c) if c.is_ascii_alphabetic() => {
                    let Some((name, attrs, end)) = tag(html, start + 1) else {
                        self.at = bytes.len();
                        return None;
                    };
                    self.at = end;
                    self.raw = RAW_TEXT.iter().find(|raw| raw.eq_ignore_ascii_case(name)).copied();
                    return Some(Token::Start { name, attrs });
                }
                // A `<` that starts no tag is text.
                _ => {
                    self.at = start + 1;
                    return Some(Token::Text("<"));
                }
            }
        }
    }
}

/// The tag whose name starts at `from`: its name, the source of its
/// attributes and the index past its `>`; `None` when the input ends
/// first (a browser drops such a tag). A `>` inside a quoted attribute
/// value does not end it; a quote opens a value only right after a name's
/// `=`, as in the WHATWG tokenizer.
fn tag(html: &str, from: usize) -> Option<(&str, &str, usize)> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        /// After the tag's name or a value: `=` here starts a name.
        Between,
        /// In an attribute's name.
        Name,
        /// White space after a name: `=` here gives it a value.
        AfterName,
        /// After a name's `=`, before its value.
        BeforeValue,
        /// In an unquoted value.
        Unquoted,
    }
    let bytes = html.as_bytes();
    let name_end = bytes[from..]
        .iter()
        .position(|b| b.is_ascii_whitespace() || *b == b'/' || *b == b'>')
        .map_or(bytes.len(), |p| from + p);
    let mut state = State::Between;
    let mut i = name_end;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'>' {
            return Some((&html[from..name_end], &html[name_end..i], i + 1));
        }
        state = match (state, b) {
            (State::BeforeValue, b'"' | b'\'') => {
                i = memchr::memchr(b, &bytes[i + 1..]).map_or(bytes.len(), |p| i + 1 + p);
                State::Between
            }
            (State::BeforeValue, b) if b.is_ascii_whitespace() => State::BeforeValue,
            (State::BeforeValue, _) => State::Unquoted,
            (State::Unquoted, b) if b.is_ascii_whitespace() => State::Between,
            (State::Unquoted, _) => State::Unquoted,
            (State::Name | State::AfterName, b'=') => State::BeforeValue,
            (State::Name | State::AfterName, b) if b.is_ascii_whitespace() => State::AfterName,
            (_, b'/') => State::Between,
            (State::Between, b) if b.is_ascii_whitespace() => State::Between,
            (State::Between | State::Name | State::AfterName, _) => State::Name,
        };
        i += 1;
    }
    None
}

/// The index past the comment whose text starts at `from` (after `<!--`):
/// past `-->` or `--!>`, at once for `<!-->` and `<!--->`, else the end.
fn comment_end(bytes: &[u8], from: usize) -> usize {
    let rest = &bytes[from..];
    if rest.starts_with(b">") {
        return from + 1;
    }
    if rest.starts_with(b"->") {
        return from + 2;
    }
    let mut i = from;
    while let Some(p) = memchr::memchr(b'>', &bytes[i..]) {
        let gt = i + p;
        let before = &bytes[from..gt];
        if before.ends_with(b"--") || before.ends_with(b"--!") {
            return gt + 1;
        }
        i = gt + 1;
    }
    bytes.len()
}

/// The index past the next `>` at or after `from`, else the end.
fn past_gt(bytes: &[u8], from: usize) -> usize {
    memchr::memchr(b'>', &bytes[from.min(bytes.len())..]).map_or(bytes.len(), |p| from + p + 1)
}

/// Where the text of the raw-text element `name` that starts at `from`
/// ends: at its end tag (`</name` in any case, then a space, `/` or `>`),
/// else at the end of the input.
fn raw_text_end(bytes: &[u8], from: usize, name: &str) -> usize {
    let mut i = from;
    while let Some(p) = memchr::memmem::find(&bytes[i..], b"</") {
        let at = i + p;
        let after = at + 2 + name.len();
        if bytes.len() >= after
            && bytes[at + 2..after].eq_ignore_ascii_case(name.as_bytes())
            && bytes.get(after).is_none_or(|b| b.is_ascii_whitespace() || *b == b'/' || *b == b'>')
        {
            return at;
        }
        i = at + 2;
    }
    bytes.len()
}

/// The value of the attribute `key` (ASCII, lower case) in a start tag's
/// attribute source, as written (character references not decoded).
pub(crate) fn attribute<'a>(attrs: &'a str, key: &str) -> Option<&'a str> {
    let bytes = attrs.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // Skip to the next name.
        while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b'/') {
            i += 1;
        }
        let name_start = i;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() && !matches!(bytes[i], b'/' | b'=' | b'>')
            || i == name_start && i < bytes.len() && bytes[i] == b'='
        {
            i += 1;
        }
        let name = &attrs[name_start..i];
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = None;
        if bytes.get(i) == Some(&b'=') {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            match bytes.get(i) {
                Some(quote @ (b'"' | b'\'')) => {
                    let start = i + 1;
                    let end = memchr::memchr(*quote, &bytes[start..]).map_or(bytes.len(), |p| start + p);
                    value = Some(&attrs[start..end]);
                    i = end + 1;
                }
                _ => {
                    let start = i;
                    while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    value = Some(&attrs[start..i]);
                }
            }
        }
        if name.is_empty() && value.is_none() {
            break;
        }
        // The first of duplicate attributes counts, as in a browser.
        if name.eq_ignore_ascii_case(key) {
            return Some(value.unwrap_or(""));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(html: &str) -> Vec<Token<'_>> {
        Scanner::new(html).collect()
    }

    #[test]
    fn tags_text_and_what_is_stepped_over() {
        assert_eq!(
            tokens("<!doctype html><P class=\"a>b\">x<!-- <b> -->y</P ><?php no ?>a < b</>"),
            vec![
                Token::Start { name: "P", attrs: " class=\"a>b\"" },
                Token::Text("x"),
                Token::Text("y"),
                Token::End { name: "P" },
                Token::Text("a "),
                Token::Text("<"),
                Token::Text(" b"),
            ]
        );
    }

    #[test]
    fn raw_text_runs_to_its_own_end_tag() {
        assert_eq!(
            tokens("<script>if (a<b) { '</div>' }</scripts></SCRIPT>z"),
            vec![
                Token::Start { name: "script", attrs: "" },
                Token::Text("if (a<b) { '</div>' }</scripts>"),
                Token::End { name: "SCRIPT" },
                Token::Text("z"),
            ]
        );
        assert_eq!(
            tokens("<style>never closed"),
            vec![Token::Start { name: "style", attrs: "" }, Token::Text("never closed")]
        );
    }

    #[test]
    fn comments_end_as_a_browser_ends_them() {
        assert_eq!(
            tokens("<!-->a<!--->b<!-- x --!>c<!-- open"),
            vec![Token::Text("a"), Token::Text("b"), Token::Text("c")]
        );
    }

    #[test]
    fn a_quote_opens_a_value_only_after_a_names_equals_sign() {
        assert_eq!(
            tokens("<a href=/x?q=\"y>Visible</a>\"<b =\"> shown\">"),
            vec![
                Token::Start { name: "a", attrs: " href=/x?q=\"y" },
                Token::Text("Visible"),
                Token::End { name: "a" },
                Token::Text("\""),
                Token::Start { name: "b", attrs: " =\"" },
                Token::Text(" shown\">"),
            ]
        );
        assert_eq!(
            tokens("<p title = 'a>b' x>t"),
            vec![Token::Start { name: "p", attrs: " title = 'a>b' x" }, Token::Text("t")]
        );
    }

    #[test]
    fn a_tag_the_input_ends_in_is_dropped() {
        assert_eq!(tokens("text<img alt=\"rest of the page"), vec![Token::Text("text")]);
        assert_eq!(tokens("text</p"), vec![Token::Text("text")]);
    }

    #[test]
    fn attributes_are_found_quoted_or_not() {
        let attrs = " data-x='1' HREF = \"/a?b=1&amp;c\" alt=bare checked src=x";
        assert_eq!(attribute(attrs, "href"), Some("/a?b=1&amp;c"));
        assert_eq!(attribute(attrs, "alt"), Some("bare"));
        assert_eq!(attribute(attrs, "checked"), Some(""));
        assert_eq!(attribute(attrs, "src"), Some("x"));
        assert_eq!(attribute(attrs, "title"), None);
        assert_eq!(attribute(" src=a src=b", "src"), Some("a"));
        assert_eq!(attribute(" = =x src=y", "src"), Some("y"));
    }
}
