//! [`CodeLimits`]: the bounds of one program.

use std::time::Duration;

/// The bounds of one program. Every field documents its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CodeLimits {
    /// The longest program, in characters. Default: 20,000.
    pub max_code_chars: usize,
    /// The program's own CPU, in epoch ticks of 1 ms while it runs (waiting
    /// on tools does not count). Default: 2 s.
    pub max_cpu: Duration,
    /// Deterministic fuel for the program's own instructions (the engine's
    /// included): a backstop behind `max_cpu` that does not depend on the
    /// epoch ticker's timing. Default: 40,000,000,000 (a busy loop burns
    /// 2,000,000,000 in about 250 ms on the machine of docs/performance.md,
    /// so about 5 s).
    pub fuel: u64,
    /// The wall-clock time the program may spend waiting on its tool calls,
    /// approvals included; calls in flight together count once. Default:
    /// 300 s.
    pub max_wait: Duration,
    /// Tool calls one program may make; the next one stops it. Default: 100.
    pub max_calls: u32,
    /// The engine instance's memory (all of its linear memories), at most
    /// 256 MiB. Default: 64 MiB.
    pub memory_bytes: usize,
    /// `console.log` output kept, in characters; the rest is cut with a
    /// note. The result is then truncated like any other. Default: 50,000.
    pub max_log_chars: usize,
    /// The longest TypeScript declaration of the tools, in characters, in
    /// the tool's description. Default: 60,000.
    pub max_declaration_chars: usize,
}

impl Default for CodeLimits {
    fn default() -> Self {
        Self {
            max_code_chars: 20_000,
            max_cpu: Duration::from_secs(2),
            fuel: 40_000_000_000,
            max_wait: Duration::from_secs(300),
            max_calls: 100,
            memory_bytes: 64 << 20,
            max_log_chars: 50_000,
            max_declaration_chars: 60_000,
        }
    }
}
