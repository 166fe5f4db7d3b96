//! The text a page's tokens are written into: white space collapsed as a
//! browser collapses it (kept inside `pre`), lines wrapped at a width,
//! blocks apart, with the marks html2text's plain style used: `#` before a
//! heading, `*` or a number before a list item, `>` before a quotation,
//! `**` around strong text, `*` around emphasis, backticks around code.

/// The most list levels indented; deeper ones stay at this indent.
const MAX_INDENT_LEVELS: usize = 16;

/// Text being written.
pub(crate) struct Text {
    out: String,
    width: usize,
    /// Characters on the current line.
    column: usize,
    /// The word being written: it goes on the line whole, so a wrap never
    /// splits it.
    word: String,
    /// Characters in `word`.
    word_chars: usize,
    /// Marks opened since the last text (`**`, `[`): they cling to the
    /// next text, wherever it goes, and vanish if none comes before they
    /// close.
    marks: String,
    /// White space came after the last word on this line.
    space: bool,
    /// Line breaks owed before the next word: 1 ends the line, 2 also
    /// leaves a blank one.
    breaks: u8,
    /// What the next line starts with after its indent: a list item's
    /// marker or a heading's.
    marker: String,
    /// Spaces before every line: the list levels.
    indent: usize,
    /// Quotation levels: each line starts with `> ` for each.
    quotes: usize,
    /// Inside `pre`: white space and line breaks kept, no wrapping.
    pre: usize,
    /// The most bytes written: past it nothing more is.
    limit: usize,
}

impl Text {
    /// Text wrapped at `width` columns, of at most `limit` bytes (the
    /// last word or line start may pass it by its own length).
    pub(crate) fn new(width: usize, capacity: usize, limit: usize) -> Self {
        Self {
            limit,
            out: String::with_capacity(capacity),
            width,
            column: 0,
            word: String::new(),
            word_chars: 0,
            marks: String::new(),
            space: false,
            breaks: 0,
            marker: String::new(),
            indent: 0,
            quotes: 0,
            pre: 0,
        }
    }

    /// Writes text (character references decoded).
    pub(crate) fn text(&mut self, text: &str) {
        if self.pre > 0 {
            for (i, line) in text.split('\n').enumerate() {
                if i > 0 {
                    self.flush_word();
                    if self.full() {
                        return;
                    }
                    self.out.push('\n');
                    self.column = 0;
                    self.start_line();
                }
                self.push_word(line);
            }
            return;
        }
        // Byte by byte: ASCII white space never occurs inside a UTF-8
        // sequence, so every cut is at a character boundary.
        let bytes = text.as_bytes();
        let mut start = 0;
        while start < bytes.len() {
            let Some(end) = bytes[start..].iter().position(u8::is_ascii_whitespace).map(|p| start + p) else {
                // The text may go on in the next token: keep the word open.
                self.push_word(&text[start..]);
                break;
            };
            if self.word.is_empty() && self.marks.is_empty() {
                // A whole word: straight onto the line, not through `word`.
                self.place(&text[start..end], width(&text[start..end]));
            } else {
                self.push_word(&text[start..end]);
                self.flush_word();
            }
            self.space = true;
            start = end + 1;
            while start < bytes.len() && bytes[start].is_ascii_whitespace() {
                start += 1;
            }
        }
    }

    /// Adds text to the current word, after the marks opened before it.
    fn push_word(&mut self, part: &str) {
        if part.is_empty() {
            return;
        }
        if !self.marks.is_empty() {
            self.word_chars += width(&self.marks);
            self.word.push_str(&self.marks);
            self.marks.clear();
        }
        self.word.push_str(part);
        self.word_chars += width(part);
    }

    /// Opens a mark (`**`, `*`, a backtick, a link's `[`): it clings to
    /// the text after it.
    pub(crate) fn open_mark(&mut self, open: &str) {
        self.marks.push_str(open);
    }

    /// Drops the mark `open` if no text came after it; whether it did.
    pub(crate) fn drop_empty_mark(&mut self, open: &str) -> bool {
        let empty = self.marks.ends_with(open);
        if empty {
            self.marks.truncate(self.marks.len() - open.len());
        }
        empty
    }

    /// Closes a mark opened with [`Self::open_mark`]: it clings to the text
    /// before it, and an element with no text leaves neither mark.
    pub(crate) fn close_mark(&mut self, open: &str, close: &str) {
        if self.drop_empty_mark(open) {
            return;
        }
        if self.word.is_empty() {
            // The text before ended with white space: the mark goes right after it.
            self.out.push_str(close);
            self.column += width(close);
        } else {
            self.word.push_str(close);
            self.word_chars += width(close);
        }
    }

    /// Inside `pre`.
    pub(crate) fn in_pre(&self) -> bool {
        self.pre > 0
    }

    /// Puts the current word on the line, wrapping before it when it
    /// would pass the width.
    fn flush_word(&mut self) {
        if self.word.is_empty() {
            return;
        }
        let word = std::mem::take(&mut self.word);
        self.place(&word, self.word_chars);
        // The buffer goes back, emptied, for the next word.
        self.word = word;
        self.word.clear();
        self.word_chars = 0;
    }

    /// Puts `word` (`chars` characters) on the line, wrapping before it
    /// when it would pass the width.
    fn place(&mut self, word: &str, chars: usize) {
        if word.is_empty() || self.full() {
            return;
        }
        if self.breaks > 0 || self.out.is_empty() {
            self.new_line();
        } else if self.space && self.column > 0 {
            if self.pre == 0 && self.column + 1 + chars > self.width {
                self.out.push('\n');
                self.column = 0;
                self.start_line();
            } else {
                self.out.push(' ');
                self.column += 1;
            }
        }
        self.out.push_str(word);
        self.column += chars;
        self.space = false;
    }

    /// Ends the line (and leaves the blank one owed) and starts the next.
    fn new_line(&mut self) {
        if !self.out.is_empty() {
            if !self.out.ends_with('\n') {
                self.out.push('\n');
            }
            if self.breaks >= 2 && !self.out.ends_with("\n\n") {
                self.out.push('\n');
            }
        }
        self.breaks = 0;
        self.column = 0;
        self.start_line();
        if !self.marker.is_empty() {
            self.column += width(&self.marker);
            self.out.push_str(&self.marker);
            self.marker.clear();
        }
    }

    /// Whether the text reached its limit.
    pub(crate) fn full(&self) -> bool {
        self.out.len() >= self.limit
    }

    /// A line's indent and quotation marks.
    fn start_line(&mut self) {
        if self.full() {
            return;
        }
        for _ in 0..self.quotes.min(MAX_INDENT_LEVELS) {
            self.out.push_str("> ");
            self.column += 2;
        }
        let indent = self.indent.min(2 * MAX_INDENT_LEVELS);
        for _ in 0..indent {
            self.out.push(' ');
        }
        self.column += indent;
    }

    /// A block's edge: the next text starts on a new line, after a blank
    /// one when `blank`.
    pub(crate) fn block(&mut self, blank: bool) {
        self.flush_word();
        self.space = false;
        self.breaks = self.breaks.max(if blank { 2 } else { 1 });
    }

    /// `<br>`: a line break, kept even when nothing follows on the line
    /// (two make a blank line). A block's break owed already is one.
    pub(crate) fn line_break(&mut self) {
        self.flush_word();
        self.space = false;
        if self.breaks == 0 && !self.full() {
            self.out.push('\n');
            self.column = 0;
            self.start_line();
        }
    }

    /// Forgets the marker of a block that ends with no text of its own:
    /// the text written so far gets it, the next block does not.
    pub(crate) fn drop_marker(&mut self) {
        self.flush_word();
        self.marker.clear();
    }

    /// What the next block's first line starts with.
    pub(crate) fn mark_next_line(&mut self, marker: String) {
        self.marker = marker;
    }

    /// Before a table cell other than a row's first.
    pub(crate) fn cell_separator(&mut self) {
        self.flush_word();
        if self.column > 0 && self.breaks == 0 {
            self.out.push_str(" |");
            self.column += 2;
            self.space = true;
        }
    }

    pub(crate) fn indent(&mut self, by: isize) {
        self.indent = self.indent.saturating_add_signed(by);
    }

    pub(crate) fn quote(&mut self, by: isize) {
        self.quotes = self.quotes.saturating_add_signed(by);
    }

    pub(crate) fn pre(&mut self, by: isize) {
        self.pre = self.pre.saturating_add_signed(by);
    }

    /// The text written, its last word included.
    pub(crate) fn finish(mut self) -> String {
        self.flush_word();
        self.out
    }
}

/// Characters in `text`: its length when it is ASCII, else its bytes that
/// start a character (where `chars().count()` would decode each).
fn width(text: &str) -> usize {
    if text.is_ascii() { text.len() } else { text.bytes().filter(|b| (b & 0xC0) != 0x80).count() }
}
