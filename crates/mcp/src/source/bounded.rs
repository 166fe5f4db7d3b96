//! A stdio server's output with a bound on one message: a line longer than
//! [`MAX_MESSAGE_BYTES`] fails the read, which ends the session.
//!
//! rmcp's own line reader (`AsyncRwTransport::with_max_line_length`) drops
//! an oversized line and keeps the session open, so the call that line
//! answered would wait for its timeout and the server that sent it would
//! stay. lovia treats the line as a broken session instead: the call gets
//! an error result at once and the server is restarted, as on a crash.
//! Failing the read is the one signal rmcp's transport turns into "closed"
//! (docs/mcp.md, "MCP servers as tool sources").

use super::config::MAX_MESSAGE_BYTES;
use super::task_support::TaskOnly;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// Counts the bytes since the last newline and fails once they pass the
/// limit; `overflowed` is raised then, so the caller can say why the
/// session ended.
pub(crate) struct BoundedLines<R> {
    inner: R,
    limit: usize,
    since_newline: usize,
    overflowed: Arc<AtomicBool>,
    /// With a reader of tool listings: each complete line goes to it, and
    /// the line still open is kept here (bounded by `limit`).
    tap: Option<(TaskOnly, Vec<u8>)>,
}

impl<R> BoundedLines<R> {
    /// `inner` with lines of at most [`MAX_MESSAGE_BYTES`].
    pub(crate) fn new(inner: R, overflowed: Arc<AtomicBool>) -> Self {
        Self::with_limit(inner, MAX_MESSAGE_BYTES, overflowed)
    }

    fn with_limit(inner: R, limit: usize, overflowed: Arc<AtomicBool>) -> Self {
        Self { inner, limit, since_newline: 0, overflowed, tap: None }
    }

    /// Hands each complete line to `tasks` as well.
    pub(crate) fn with_task_reader(mut self, tasks: TaskOnly) -> Self {
        self.tap = Some((tasks, Vec::new()));
        self
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.overflowed.load(Ordering::SeqCst) {
            return Poll::Ready(Err(overflow(self.limit)));
        }
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = &buf.filled()[before..];
                // The first piece continues the line still open; each later
                // piece starts a line; the last is the line left open.
                let mut open = this.since_newline;
                let mut too_long = false;
                for (i, piece) in read.split(|b| *b == b'\n').enumerate() {
                    open = if i == 0 { open.saturating_add(piece.len()) } else { piece.len() };
                    if open > this.limit {
                        too_long = true;
                        break;
                    }
                }
                this.since_newline = open;
                if too_long {
                    this.overflowed.store(true, Ordering::SeqCst);
                    buf.set_filled(before);
                    return Poll::Ready(Err(overflow(this.limit)));
                }
                if let Some((tasks, line)) = &mut this.tap {
                    let mut pieces = read.split(|b| *b == b'\n').peekable();
                    while let Some(piece) = pieces.next() {
                        line.extend_from_slice(piece);
                        if pieces.peek().is_some() {
                            tasks.read_line(line);
                            line.clear();
                        }
                    }
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

fn overflow(limit: usize) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("the server sent a message over {limit} bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn read_all(input: &[u8], limit: usize) -> (io::Result<Vec<u8>>, bool) {
        let flag = Arc::new(AtomicBool::new(false));
        let mut reader = BoundedLines::with_limit(input, limit, flag.clone());
        let mut out = Vec::new();
        let result = reader.read_to_end(&mut out).await.map(|_| out);
        (result, flag.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn lines_up_to_the_limit_pass() {
        let (out, overflowed) = read_all(b"abcd\nefgh\nij", 4).await;
        assert_eq!(out.expect("fits"), b"abcd\nefgh\nij");
        assert!(!overflowed);
    }

    #[tokio::test]
    async fn a_longer_line_fails_the_read() {
        for input in [&b"abcd\nefghi\n"[..], b"abcdefghij", b"ab\nabcde", b"abcdefgh\nab\n"] {
            let (out, overflowed) = read_all(input, 4).await;
            let err = out.expect_err("over the limit");
            assert_eq!(err.kind(), io::ErrorKind::InvalidData);
            assert!(err.to_string().contains("over 4 bytes"), "{err}");
            assert!(overflowed, "{input:?}");
        }
    }

    #[tokio::test]
    async fn a_line_split_over_reads_is_counted_whole() {
        let flag = Arc::new(AtomicBool::new(false));
        let (mut tx, rx) = tokio::io::duplex(3);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = tx.write_all(b"abc").await;
            let _ = tx.write_all(b"de\n").await;
        });
        let mut reader = BoundedLines::with_limit(rx, 4, flag.clone());
        let mut out = Vec::new();
        assert!(reader.read_to_end(&mut out).await.is_err());
        assert!(flag.load(Ordering::SeqCst));
        writer.abort();
    }
}
