//! Server-sent events as the model APIs send them: `event:` and `data:`
//! lines, an empty line ending each event.

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SseEvent {
    /// The `event:` field; empty when absent.
    pub(crate) event: String,
    /// The `data:` lines, joined with newlines.
    pub(crate) data: String,
}

/// Splits a byte stream into events; feed it chunks as they arrive.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buffer: Vec<u8>,
}

impl SseParser {
    /// Adds `chunk` and returns the events it completed.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some((end, skip)) = block_end(&self.buffer) {
            let block: Vec<u8> = self.buffer.drain(..end + skip).take(end).collect();
            let text = String::from_utf8_lossy(&block);
            let mut event = SseEvent::default();
            let mut data = Vec::new();
            for line in text.lines() {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => event.event = value.to_owned(),
                    "data" => data.push(value),
                    _ => {}
                }
            }
            if !data.is_empty() || !event.event.is_empty() {
                event.data = data.join("\n");
                events.push(event);
            }
        }
        events
    }
}

/// Where the first event block ends and how long its terminator is.
fn block_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buffer.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_line_endings() {
        let mut p = SseParser::default();
        assert!(p.push(b"event: ping\nda").is_empty());
        let got = p.push(b"ta: {\"a\":1}\n\ndata: [DONE]\r\n\r\n: comment\n\n");
        assert_eq!(
            got,
            [
                SseEvent { event: "ping".into(), data: "{\"a\":1}".into() },
                SseEvent { event: String::new(), data: "[DONE]".into() }
            ]
        );
    }
}
