//! The run's budget (docs/semantics.md §7): token, tool-call and time limits, checked at
//! each turn start, after each model reply and at each call's preflight.
//! Every comparison is strictly greater than the limit.

use serde::{Deserialize, Serialize};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A run's limits. Every field defaults to `None`: unconstrained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Input (prompt) tokens over the whole run.
    pub max_input_tokens: Option<u64>,
    /// Output (completion) tokens over the whole run.
    pub max_output_tokens: Option<u64>,
    /// Input plus output tokens.
    pub max_total_tokens: Option<u64>,
    /// Requested tool calls, rejected ones included.
    pub max_tool_calls: Option<u64>,
    /// Seconds since the first check. Cooperative: a long tool overruns it.
    pub max_seconds: Option<f64>,
}

/// Tokens a provider reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// Input plus output.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// What a run has spent: tokens so far and when its clock started. Shared
/// by the runner and the executor through [`super::RunState`].
#[derive(Debug, Default)]
pub struct BudgetMeter {
    /// The limits.
    pub budget: Budget,
    usage: Mutex<Usage>,
    started: OnceLock<Instant>,
}

impl BudgetMeter {
    /// A meter for `budget`; its clock starts at the first check.
    pub fn new(budget: Budget) -> Self {
        Self { budget, ..Self::default() }
    }

    /// Adds one reply's tokens.
    pub fn add(&self, usage: Usage) {
        let mut u = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        u.input_tokens += usage.input_tokens;
        u.output_tokens += usage.output_tokens;
    }

    /// The tokens spent so far.
    pub fn usage(&self) -> Usage {
        *self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Time since the first check.
    pub fn elapsed(&self) -> Duration {
        self.started.get_or_init(Instant::now).elapsed()
    }

    /// The first limit exceeded, in the order tokens, tool calls,
    /// seconds; `tool_calls` is the count so far. Its text is the spec's
    /// message (`tool call count 3 exceeds budget 2`).
    pub fn check(&self, tool_calls: u64) -> Result<(), BudgetExceeded> {
        let b = &self.budget;
        // The common case, checked on every call's preflight: nothing to measure.
        if *b == Budget::default() {
            return Ok(());
        }
        let u = self.usage();
        let elapsed = self.elapsed();
        let over = |used: u64, max: Option<u64>| max.filter(|&m| used > m);
        if let Some(max) = over(u.input_tokens, b.max_input_tokens) {
            return Err(BudgetExceeded::InputTokens { used: u.input_tokens, max });
        }
        if let Some(max) = over(u.output_tokens, b.max_output_tokens) {
            return Err(BudgetExceeded::OutputTokens { used: u.output_tokens, max });
        }
        if let Some(max) = over(u.total(), b.max_total_tokens) {
            return Err(BudgetExceeded::TotalTokens { used: u.total(), max });
        }
        if let Some(max) = over(tool_calls, b.max_tool_calls) {
            return Err(BudgetExceeded::ToolCalls { used: tool_calls, max });
        }
        if let Some(max) = b.max_seconds
            && elapsed.as_secs_f64() > max
        {
            return Err(BudgetExceeded::Elapsed { seconds: elapsed.as_secs_f64(), max });
        }
        Ok(())
    }
}

/// The limit of a [`Budget`] a run went past. Its text is what the model and
/// the run's caller read (docs/semantics.md §7).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetExceeded {
    /// [`Budget::max_input_tokens`].
    #[error("input tokens {used} exceeds budget {max}")]
    InputTokens {
        /// What the run had used.
        used: u64,
        /// The limit.
        max: u64,
    },
    /// [`Budget::max_output_tokens`].
    #[error("output tokens {used} exceeds budget {max}")]
    OutputTokens {
        /// What the run had used.
        used: u64,
        /// The limit.
        max: u64,
    },
    /// [`Budget::max_total_tokens`].
    #[error("total tokens {used} exceeds budget {max}")]
    TotalTokens {
        /// What the run had used.
        used: u64,
        /// The limit.
        max: u64,
    },
    /// [`Budget::max_tool_calls`], or the executor's own `max_tool_calls`.
    #[error("tool call count {used} exceeds budget {max}")]
    ToolCalls {
        /// What the run had used.
        used: u64,
        /// The limit.
        max: u64,
    },
    /// [`Budget::max_seconds`].
    #[error("elapsed {seconds:.1}s exceeds budget {max:.1}s")]
    Elapsed {
        /// Seconds since the run's first check.
        seconds: f64,
        /// The limit, in seconds.
        max: f64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_trip_strictly_above_and_in_the_spec_order() {
        let meter =
            BudgetMeter::new(Budget { max_tool_calls: Some(2), max_output_tokens: Some(10), ..Budget::default() });
        assert_eq!(meter.check(2), Ok(()));
        assert_eq!(meter.check(3), Err(BudgetExceeded::ToolCalls { used: 3, max: 2 }));
        assert_eq!(meter.check(3).map_err(|e| e.to_string()), Err("tool call count 3 exceeds budget 2".into()));
        meter.add(Usage { input_tokens: 5, output_tokens: 11 });
        assert_eq!(meter.check(3).map_err(|e| e.to_string()), Err("output tokens 11 exceeds budget 10".into()));
        let timed = BudgetMeter::new(Budget { max_seconds: Some(0.0), ..Budget::default() });
        let _ = timed.check(0);
        std::thread::sleep(Duration::from_millis(60));
        let elapsed = timed.check(0).expect_err("elapsed").to_string();
        assert!(elapsed.starts_with("elapsed 0.") && elapsed.ends_with("s exceeds budget 0.0s"), "{elapsed}");
    }
}
