//! The `context` interface: what a call knows about its run.

use super::{Admit, SandboxState};
use crate::bindings::v0_1::lovia::tools as v0_1;
use crate::bindings::v0_2::lovia::tools::context::Host;
use crate::bindings::wit::LogLevel;
use crate::call::LogLevel as CallLogLevel;

impl SandboxState {
    /// Counts one progress message or log line; false once the budget is spent.
    fn take_event_budget(&mut self) -> bool {
        if self.events_left == 0 {
            return false;
        }
        self.events_left -= 1;
        true
    }

    fn bounded(&self, message: &str) -> String {
        let max = self.limits.event_bytes;
        if message.len() <= max {
            return message.to_owned();
        }
        let mut end = max;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &message[..end])
    }
}

impl Host for SandboxState {
    fn run_id(&mut self) -> String {
        self.call.run_id.clone()
    }
    fn session_id(&mut self) -> Option<String> {
        self.call.session_id.clone()
    }
    fn call_id(&mut self) -> String {
        self.call.call_id.clone()
    }
    fn agent(&mut self) -> String {
        self.call.agent.clone()
    }
    fn turn(&mut self) -> u32 {
        self.call.turn
    }
    fn dependency(&mut self, key: String) -> Option<String> {
        self.call.dependencies.get(&key).cloned()
    }
    fn cancelled(&mut self) -> bool {
        self.call.cancel.is_cancelled()
    }
    fn progress(&mut self, message: String) {
        if !self.take_event_budget() {
            return;
        }
        let message = self.bounded(&message);
        if let Some(sink) = &self.call.progress {
            sink(&message);
        }
    }
    fn log(&mut self, level: LogLevel, message: String) {
        if !self.take_event_budget() {
            return;
        }
        // The guest writes this text: its control characters are escaped so
        // that it cannot forge lines of the host's log, in any log format.
        let bounded = self.bounded(&message);
        let message = escape_controls(&bounded);
        // Every line names the tenant (absent outside one) and the plugin's
        // digest: a plugin's name is whatever it says it is.
        let tenant = self.call.tenant.as_deref();
        let (digest, plugin, tool, call) = (&*self.digest, &*self.plugin, &*self.tool, &self.call.call_id);
        let call_level = match level {
            LogLevel::Trace => CallLogLevel::Trace,
            LogLevel::Debug => CallLogLevel::Debug,
            LogLevel::Info => CallLogLevel::Info,
            LogLevel::Warn => CallLogLevel::Warn,
            LogLevel::Error => CallLogLevel::Error,
        };
        // The line as written: the message and the values the host adds.
        let written = [tenant.unwrap_or_default(), digest, plugin, tool, call].iter().map(|v| v.len()).sum::<usize>();
        match self.guest_logs.admit(tenant, call_level, message.len() + written) {
            Admit::BelowLevel | Admit::Suppressed { first: false } => return,
            Admit::Suppressed { first: true } => {
                tracing::warn!(
                    tenant,
                    digest,
                    plugin,
                    tool,
                    call,
                    "guest log budget spent: this tenant's guest log lines are suppressed until it refills"
                );
                return;
            }
            Admit::Write(Some((lines, bytes))) => {
                tracing::warn!(
                    tenant,
                    digest,
                    plugin,
                    "suppressed {lines} guest log lines ({bytes} bytes) over the tenant's log budget"
                );
            }
            Admit::Write(None) => {}
        }
        match level {
            LogLevel::Trace => tracing::trace!(tenant, digest, plugin, tool, call, "{message}"),
            LogLevel::Debug => tracing::debug!(tenant, digest, plugin, tool, call, "{message}"),
            LogLevel::Info => tracing::info!(tenant, digest, plugin, tool, call, "{message}"),
            LogLevel::Warn => tracing::warn!(tenant, digest, plugin, tool, call, "{message}"),
            LogLevel::Error => tracing::error!(tenant, digest, plugin, tool, call, "{message}"),
        }
        // The same line to the run's events (an MCP client's `notifications/message`).
        if let Some(sink) = &self.call.log {
            sink(call_level, &message);
        }
    }
    fn panicked(&mut self, message: String) {
        // Only the last report counts and it is bounded, so a guest that
        // reports in a loop costs its own fuel and nothing else.
        self.panic_report = Some(panic_message(&message));
    }
}

/// The most characters of a panic's message the model reads.
const MAX_PANIC_CHARS: usize = 1_000;

/// `message` cut to [`MAX_PANIC_CHARS`] characters, with `…` when cut.
fn panic_message(message: &str) -> String {
    let message = message.trim();
    match message.char_indices().nth(MAX_PANIC_CHARS) {
        Some((end, _)) => format!("{}…", &message[..end]),
        None => message.to_owned(),
    }
}

impl crate::bindings::wit::Host for SandboxState {}
impl v0_1::types::Host for SandboxState {}

/// 0.1.0's `context` is 0.2.0's: each call goes to the implementation above.
impl v0_1::context::Host for SandboxState {
    fn run_id(&mut self) -> String {
        Host::run_id(self)
    }
    fn session_id(&mut self) -> Option<String> {
        Host::session_id(self)
    }
    fn call_id(&mut self) -> String {
        Host::call_id(self)
    }
    fn agent(&mut self) -> String {
        Host::agent(self)
    }
    fn turn(&mut self) -> u32 {
        Host::turn(self)
    }
    fn dependency(&mut self, key: String) -> Option<String> {
        Host::dependency(self, key)
    }
    fn cancelled(&mut self) -> bool {
        Host::cancelled(self)
    }
    fn progress(&mut self, message: String) {
        Host::progress(self, message);
    }
    fn log(&mut self, level: v0_1::types::LogLevel, message: String) {
        let level = match level {
            v0_1::types::LogLevel::Trace => LogLevel::Trace,
            v0_1::types::LogLevel::Debug => LogLevel::Debug,
            v0_1::types::LogLevel::Info => LogLevel::Info,
            v0_1::types::LogLevel::Warn => LogLevel::Warn,
            v0_1::types::LogLevel::Error => LogLevel::Error,
        };
        Host::log(self, level, message);
    }
}

/// `text` with every control character (newlines, carriage returns, escape
/// sequences) written as its Rust escape, `\n`, `\u{1b}`; other text unchanged.
pub(crate) fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_panic_report_is_cut_to_a_thousand_characters() {
        assert_eq!(super::panic_message("  boom: bad input\n"), "boom: bad input");
        let long = "é".repeat(1_500);
        let cut = super::panic_message(&long);
        assert_eq!(cut.chars().count(), 1_001);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn a_guest_log_line_cannot_forge_another() {
        let forged = "done\n2026-12-01T00:00:00Z ERROR lovia: tenant acme breached\r\u{1b}[2K";
        let escaped = super::escape_controls(forged);
        assert!(!escaped.contains(['\n', '\r', '\u{1b}']), "{escaped}");
        assert_eq!(escaped, "done\\n2026-12-01T00:00:00Z ERROR lovia: tenant acme breached\\r\\u{1b}[2K");
        assert_eq!(super::escape_controls("ünïcode stays"), "ünïcode stays");
    }
}
