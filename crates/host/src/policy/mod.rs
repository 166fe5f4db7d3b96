//! Policies (docs/semantics.md §14): middleware around one attempt. The list order is
//! outermost first; each policy sees the raw arguments, and may rewrite
//! them, short-circuit, call `next` several times, or transform the result.
//! The attempt's timeout and the retries wrap the whole chain: every attempt
//! re-enters at the outermost policy.

mod cache;
mod rate_limit;
mod redact;

pub use cache::ResultCache;
pub use rate_limit::RateLimit;
pub use redact::Redact;

use crate::call::CallContext;
use crate::call::Failure;
use crate::call::{BoxFuture, ToolOutput};
use serde_json::Value;
use std::sync::Arc;

/// What one step of the chain returns.
pub type AttemptResult = Result<ToolOutput, Failure>;

/// One policy. `call` runs once per attempt that reaches it; it must call
/// `next.run(args)` to go on (or not, to short-circuit).
pub trait Policy: Send + Sync {
    /// Handles one attempt of the call of `tool`.
    fn call<'a>(
        &'a self,
        tool: &'a str,
        args: Value,
        ctx: &'a CallContext,
        next: Next<'a>,
    ) -> BoxFuture<'a, AttemptResult>;
}

/// The innermost step: argument validation and the tool body.
pub(crate) type Inner<'a> = dyn Fn(Value) -> BoxFuture<'a, AttemptResult> + Send + Sync + 'a;

/// The rest of the chain after a policy. `Copy`: it can be run several times.
#[derive(Clone, Copy)]
pub struct Next<'a> {
    pub(crate) tool: &'a str,
    pub(crate) rest: &'a [Arc<dyn Policy>],
    pub(crate) inner: &'a Inner<'a>,
    pub(crate) ctx: &'a CallContext,
}

impl<'a> Next<'a> {
    /// Runs the rest of the chain with `args`.
    pub fn run(self, args: Value) -> BoxFuture<'a, AttemptResult> {
        match self.rest.split_first() {
            Some((policy, rest)) => policy.call(self.tool, args, self.ctx, Next { rest, ..self }),
            None => (self.inner)(args),
        }
    }
}

/// Serialises `value` with object keys sorted, so equal arguments give equal keys.
pub(crate) fn canonical_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(entries.into_iter().map(|(k, v)| (k.clone(), sorted(v))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}
