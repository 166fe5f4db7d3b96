//! The step and wall-clock budget of a costly argument check, and the cheap
//! size checks that decide whether a check runs inline.

use super::ArgumentError;
use serde_json::Value;
use std::time::Instant;

/// Why a budgeted check did not produce a value.
pub(super) enum Failed {
    /// The arguments are rejected.
    Argument(ArgumentError),
    /// The check stopped early.
    Stopped(Stop),
}

impl From<Stop> for Failed {
    fn from(stop: Stop) -> Self {
        Failed::Stopped(stop)
    }
}

/// Why an argument check stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// [`MAX_ARGUMENT_STEPS`] ran out.
    Steps,
    /// The call's deadline passed.
    Deadline,
    /// A string to be matched against a pattern is longer than
    /// [`MAX_PATTERN_SUBJECT_BYTES`].
    Subject,
}

/// The steps one argument check has spent, and its deadline.
pub(super) struct Budget {
    steps: u64,
    limit: u64,
    deadline: Option<Instant>,
    next_clock_check: u64,
}

/// The budget of a check run in place on an async task before it moves to
/// the blocking pool ([`super::ArgumentValidator::prepare_value_async`]): ordinary
/// calls take a few hundred steps. Fixed: 10,000.
pub const INLINE_STEPS: u64 = 10_000;

/// Arguments with more values than this skip the in-place try. Fixed: 1,000.
pub(super) const INLINE_NODES: usize = 1_000;

/// Steps between two readings of the clock (a reading costs more than a step).
pub(super) const CLOCK_EVERY: u64 = 4096;

impl Budget {
    pub(super) fn new(deadline: Option<Instant>, limit: u64) -> Self {
        Self { steps: 0, limit, deadline, next_clock_check: CLOCK_EVERY }
    }

    pub(super) fn spend(&mut self, steps: u64) -> Result<(), Stop> {
        self.steps = self.steps.saturating_add(steps);
        if self.steps > self.limit {
            return Err(Stop::Steps);
        }
        if self.steps >= self.next_clock_check {
            self.next_clock_check = self.steps + CLOCK_EVERY;
            self.check_deadline()?;
        }
        Ok(())
    }

    pub(super) fn check_deadline(&self) -> Result<(), Stop> {
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => Err(Stop::Deadline),
            _ => Ok(()),
        }
    }
}

/// Whether `value` nests deeper than `limit` (the value itself is depth 0).
/// Iterative, so that no nesting can overflow the stack here.
pub(super) fn nested_deeper_than(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            Value::Array(items) if !items.is_empty() => {
                if depth >= limit {
                    return true;
                }
                stack.extend(items.iter().map(|c| (c, depth + 1)));
            }
            Value::Object(obj) if !obj.is_empty() => {
                if depth >= limit {
                    return true;
                }
                stack.extend(obj.values().map(|c| (c, depth + 1)));
            }
            _ => {}
        }
    }
    false
}

/// Whether `value` has at most `limit` nodes (counting stops past it).
pub(super) fn at_most_nodes(value: &Value, limit: usize) -> bool {
    let mut seen = 0usize;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        seen += 1;
        if seen > limit {
            return false;
        }
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(obj) => stack.extend(obj.values()),
            _ => {}
        }
    }
    true
}

/// Waits for a check on the blocking pool until `deadline`.
pub(super) async fn until<T>(
    deadline: Option<Instant>,
    task: tokio::task::JoinHandle<T>,
) -> Result<Result<T, tokio::task::JoinError>, ArgumentError> {
    match deadline {
        Some(at) => tokio::time::timeout_at(at.into(), task).await.map_err(|_| ArgumentError::DeadlinePassed),
        None => Ok(task.await),
    }
}
