//! Progress throttling. A tool may call `context.progress` in a tight loop
//! (up to the host's 1,000 events per call); a client gets at most one
//! `notifications/progress` per interval for each call: the first message at
//! once, then the latest message of each interval when the interval ends,
//! and the last one before the result always. What is sent counts 1, 2, 3…
//! without gaps, so a client never sees a skipped step number.

use std::time::Duration;
use tokio::time::Instant;

/// The least time between two progress notifications of one call, by
/// default: 100 ms ([`crate::McpOptions::progress_interval`]).
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// One notification to send: its `progress` value and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    pub(crate) progress: u32,
    pub(crate) message: String,
}

/// Which of one call's progress messages are sent, and when.
#[derive(Debug)]
pub(crate) struct Throttle {
    interval: Duration,
    last_sent: Option<Instant>,
    /// The latest message not sent yet; a newer one replaces it.
    pending: Option<String>,
    sent: u32,
}

impl Throttle {
    pub(crate) fn new(interval: Duration) -> Self {
        Self { interval, last_sent: None, pending: None, sent: 0 }
    }

    /// A message from the tool at `now`: the step to send now, or `None`
    /// when it waits (replacing any older waiting one) for its interval.
    pub(crate) fn offer(&mut self, message: String, now: Instant) -> Option<Step> {
        match self.last_sent {
            Some(last) if now.saturating_duration_since(last) < self.interval => {
                self.pending = Some(message);
                None
            }
            _ => Some(self.send(message, now)),
        }
    }

    /// When the waiting message is due, if one waits.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.pending.as_ref()?;
        Some(self.last_sent? + self.interval)
    }

    /// The waiting message, to send now: its interval ended, or the call did.
    pub(crate) fn flush(&mut self, now: Instant) -> Option<Step> {
        let message = self.pending.take()?;
        Some(self.send(message, now))
    }

    fn send(&mut self, message: String, now: Instant) -> Step {
        self.last_sent = Some(now);
        self.sent = self.sent.saturating_add(1);
        Step { progress: self.sent, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(progress: u32, message: &str) -> Option<Step> {
        Some(Step { progress, message: message.to_owned() })
    }

    #[test]
    fn a_burst_becomes_its_first_and_its_last() {
        let t0 = Instant::now();
        let mut t = Throttle::new(PROGRESS_INTERVAL);
        assert_eq!(t.offer("1".into(), t0), step(1, "1"));
        for i in 2..=1000 {
            assert_eq!(t.offer(i.to_string(), t0 + Duration::from_micros(i)), None);
        }
        assert_eq!(t.due(), Some(t0 + PROGRESS_INTERVAL));
        // The call ends before the interval does: the latest is still sent.
        assert_eq!(t.flush(t0 + Duration::from_millis(2)), step(2, "1000"));
        assert_eq!(t.flush(t0 + Duration::from_millis(3)), None);
        assert_eq!(t.due(), None);
    }

    #[test]
    fn a_slow_stream_is_sent_in_full_and_a_steady_one_once_per_interval() {
        let t0 = Instant::now();
        let mut t = Throttle::new(PROGRESS_INTERVAL);
        // One message every 150 ms: each goes at once.
        for i in 0..5u32 {
            let at = t0 + Duration::from_millis(150 * u64::from(i));
            assert_eq!(t.offer(format!("s{i}"), at), step(i + 1, &format!("s{i}")));
        }
        // Then one every 10 ms for 1 s, the window flushed when due.
        let mut t = Throttle::new(PROGRESS_INTERVAL);
        let mut sent = Vec::new();
        for i in 0..100u64 {
            let now = t0 + Duration::from_millis(10 * i);
            if let Some(due) = t.due()
                && due <= now
            {
                sent.extend(t.flush(due));
            }
            sent.extend(t.offer(format!("m{i}"), now));
        }
        sent.extend(t.flush(t0 + Duration::from_secs(1)));
        let numbers: Vec<u32> = sent.iter().map(|s| s.progress).collect();
        assert_eq!(numbers, (1..=sent.len() as u32).collect::<Vec<_>>(), "no gaps");
        assert!((10..=12).contains(&sent.len()), "{sent:?}");
        assert_eq!(sent.last().map(|s| s.message.as_str()), Some("m99"), "the last is always sent");
    }

    #[test]
    fn a_zero_interval_sends_everything() {
        let t0 = Instant::now();
        let mut t = Throttle::new(Duration::ZERO);
        for i in 1..=5u32 {
            assert_eq!(t.offer(i.to_string(), t0), step(i, &i.to_string()));
        }
    }
}
