//! Bounded capture of a process's output: a foreground stream keeps its head
//! and tail, a background process keeps its newest output. Neither grows
//! with what the process writes.

use crate::text;
use std::collections::VecDeque;

/// Bytes kept per character of the limit: a UTF-8 character is at most 4 bytes.
const BYTES_PER_CHAR: usize = 4;

/// Counts the characters in `bytes` (UTF-8 lead bytes; an invalid byte counts as one).
fn chars_in(bytes: &[u8]) -> usize {
    bytes.iter().filter(|b| (**b & 0xC0) != 0x80).count()
}

/// One foreground stream: its first and last bytes, and how many characters passed.
#[derive(Debug)]
pub(crate) struct HeadTail {
    limit_chars: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total_bytes: usize,
    total_chars: usize,
}

impl HeadTail {
    /// A capture that shows at most `limit_chars` characters.
    pub(crate) fn new(limit_chars: usize) -> Self {
        HeadTail { limit_chars, head: Vec::new(), tail: VecDeque::new(), total_bytes: 0, total_chars: 0 }
    }

    fn half_bytes(&self) -> usize {
        self.limit_chars.div_ceil(2) * BYTES_PER_CHAR
    }

    /// Takes in a chunk.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.total_bytes += chunk.len();
        self.total_chars += chars_in(chunk);
        let room = self.half_bytes().saturating_sub(self.head.len());
        let (to_head, rest) = chunk.split_at(room.min(chunk.len()));
        self.head.extend_from_slice(to_head);
        self.tail.extend(rest);
        let excess = self.tail.len().saturating_sub(self.half_bytes());
        self.tail.drain(..excess);
    }

    /// The text: everything when it fits, else the head and tail halves
    /// around the clip notice.
    pub(crate) fn finish(self) -> String {
        let kept = self.head.len() + self.tail.len();
        let half_bytes = self.half_bytes();
        let mut all = self.head;
        all.extend(self.tail);
        if kept == self.total_bytes {
            let text = String::from_utf8_lossy(&all).into_owned();
            let len = text.chars().count();
            if len <= self.limit_chars {
                return text;
            }
            return clip_middle(&text, self.limit_chars, len);
        }
        // Bytes were dropped in the middle: the head and tail halves are what is left.
        let head_len = half_bytes.min(all.len());
        let head = String::from_utf8_lossy(&all[..head_len]).into_owned();
        let tail = String::from_utf8_lossy(&all[head_len..]).into_owned();
        let half = self.limit_chars / 2;
        let head = text::first_chars(&head, self.limit_chars - half).to_owned();
        let tail_chars = tail.chars().count();
        let tail: String = tail.chars().skip(tail_chars.saturating_sub(half)).collect();
        format!("{head}{}\n{tail}", text::clip_notice(self.limit_chars, self.total_chars, text::SHELL_FILTER_HINT))
    }
}

fn clip_middle(text: &str, limit: usize, len: usize) -> String {
    let half = limit / 2;
    let head = text::first_chars(text, limit - half);
    let tail: String = text.chars().skip(len - half).collect();
    format!("{head}{}\n{tail}", text::clip_notice(limit, len, text::SHELL_FILTER_HINT))
}

/// A background process's newest output, up to a limit in characters.
#[derive(Debug)]
pub(crate) struct TailBuffer {
    limit_chars: usize,
    text: String,
    chars: usize,
    carry: Vec<u8>,
    dropped: bool,
}

impl TailBuffer {
    /// A buffer of `limit_chars` characters.
    pub(crate) fn new(limit_chars: usize) -> Self {
        TailBuffer { limit_chars, text: String::new(), chars: 0, carry: Vec::new(), dropped: false }
    }

    /// Appends a chunk; a character split across chunks waits for its rest.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.carry.extend_from_slice(chunk);
        let valid = match std::str::from_utf8(&self.carry) {
            Ok(_) => self.carry.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.carry.len(),
        };
        let rest = self.carry.split_off(valid);
        let decoded = String::from_utf8_lossy(&self.carry).into_owned();
        self.carry = rest;
        self.chars += decoded.chars().count();
        self.text.push_str(&decoded);
        if self.chars > self.limit_chars {
            let cut = self.chars - self.limit_chars;
            let at = self.text.char_indices().nth(cut).map_or(self.text.len(), |(i, _)| i);
            self.text.drain(..at);
            self.chars = self.limit_chars;
            self.dropped = true;
        }
    }

    /// Takes what arrived since the last read, and whether some was dropped.
    pub(crate) fn take(&mut self) -> (String, bool) {
        self.chars = 0;
        (std::mem::take(&mut self.text), std::mem::replace(&mut self.dropped, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_and_tail_keep_both_ends() {
        let mut small = HeadTail::new(10);
        small.push(b"short");
        assert_eq!(small.finish(), "short");
        let mut big = HeadTail::new(10);
        for _ in 0..100 {
            big.push(b"0123456789");
        }
        assert_eq!(
            big.finish(),
            "01234\n[... truncated: showing 10 of 1000 chars. Re-run with a filter (e.g. pipe through grep/head) for more.]\n56789"
        );
        let mut mid = HeadTail::new(10);
        mid.push(b"abcdefghijklmn");
        assert!(mid.finish().starts_with("abcde\n[... truncated: showing 10 of 14 chars."));
    }

    #[test]
    fn the_tail_buffer_keeps_the_newest_and_says_so() {
        let mut buf = TailBuffer::new(5);
        buf.push(b"abc");
        assert_eq!(buf.take(), ("abc".to_owned(), false));
        buf.push(b"0123456789");
        assert_eq!(buf.take(), ("56789".to_owned(), true));
        buf.push(&[0xC3]);
        buf.push(&[0xA9]);
        assert_eq!(buf.take(), ("é".to_owned(), false));
    }
}
