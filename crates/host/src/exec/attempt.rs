//! Attempts (docs/semantics.md §9, §10, §14): the per-attempt timeout wraps the whole
//! policy chain; failures are retried with backoff `min(5 s, 100 ms·2^(k−1))`,
//! except those that can never succeed on a retry.

use super::ExecSettings;
use super::tool::{Body, Tool};
use crate::args::ArgumentError;
use crate::call::CallContext;
use crate::call::{BoxFuture, ToolOutput};
use crate::call::{CallOutcome, Failure};
use crate::plugin::CallParts;
use crate::policy::{AttemptResult, Inner, Next};
use serde_json::Value;
use std::time::Duration;

/// The pause after failed attempt `k` (1-based): 0.1, 0.2, 0.4, … s, capped at 5 s, no jitter.
pub(crate) fn backoff(k: u32) -> Duration {
    let ms = 100u64.saturating_mul(1u64 << (k.saturating_sub(1)).min(16));
    Duration::from_millis(ms.min(5_000))
}

/// Runs every attempt of one call. `raw_args` is what the model sent (what
/// policies see; kept only for a tool with policies); `prepared` is the same
/// after coercion and validation, moved into the last attempt;
/// `checking` is the time that took, which the first attempt's timeout
/// already spent (docs/semantics.md D15). `on_retry` hears of each failed
/// attempt that another follows, with the pause before it.
pub(super) async fn run(
    settings: &ExecSettings,
    tool: &Tool,
    raw_args: Option<&Value>,
    prepared: Value,
    checking: Duration,
    ctx: &CallContext,
    on_retry: &(dyn Fn(u32, &Failure, Duration) + Send + Sync),
) -> AttemptResult {
    let attempts = 1 + tool.spec.retries.unwrap_or(settings.default_retries);
    let timeout = tool.timeout.or(settings.default_timeout);
    // Without policies the arguments reaching the body are the prepared ones:
    // validating them again would be wasted work on the hot path.
    let revalidate = !tool.policies.is_empty();
    let inner =
        move |args: Value| -> BoxFuture<'_, AttemptResult> { Box::pin(invoke(tool, ctx, timeout, args, revalidate)) };
    let inner: &Inner<'_> = &inner;
    let mut k = 1;
    let mut prepared = Some(prepared);
    loop {
        let args = match raw_args {
            Some(raw) if revalidate => raw.clone(),
            // The last attempt takes the value; an earlier one, a copy.
            _ if k >= attempts => prepared.take().unwrap_or_default(),
            _ => prepared.clone().unwrap_or_default(),
        };
        let chain = Next { tool: &tool.spec.name, rest: &tool.policies, inner, ctx }.run(args);
        // A span per attempt only where there can be more than one.
        let span =
            if attempts > 1 { super::trace::attempt(&settings.telemetry, k) } else { lovia_telemetry::Scope::none() };
        let result = {
            let chain = span.within(chain);
            match timeout {
                Some(t) => {
                    let left = if k == 1 { t.saturating_sub(checking) } else { t };
                    // Spent already (checks, or a wait behind a session's other
                    // calls): the body does not even start.
                    if left.is_zero() {
                        Err(timed_out(t))
                    } else {
                        tokio::time::timeout(left, chain).await.unwrap_or_else(|_| Err(timed_out(t)))
                    }
                }
                None => chain.await,
            }
        };
        if let Err(failure) = &result {
            super::trace::failed(&span, failure);
        }
        span.end();
        match result {
            Ok(output) => return Ok(output),
            Err(failure) if !failure.is_retryable() || k >= attempts => return Err(failure),
            Err(failure) => {
                tracing::debug!(tool = %tool.spec.name, call = %ctx.call_id, attempt = k, %failure, "attempt failed; retrying");
                on_retry(k, &failure, backoff(k));
                tokio::time::sleep(backoff(k)).await;
                k += 1;
            }
        }
    }
}

fn timed_out(t: Duration) -> Failure {
    Failure::TimedOut { ms: u64::try_from(t.as_millis()).unwrap_or(u64::MAX) }
}

/// The innermost step: validation (when policies may have changed the
/// arguments), then the tool's body.
async fn invoke(
    tool: &Tool,
    ctx: &CallContext,
    timeout: Option<Duration>,
    args: Value,
    revalidate: bool,
) -> AttemptResult {
    let args = match (&tool.validator, revalidate) {
        // Inside the attempt's timeout; a costly check runs on the blocking pool.
        (Some(v), true) => {
            let deadline = timeout.map(|t| std::time::Instant::now() + t);
            v.prepare_value_async(args, deadline).await.map_err(|e| match e {
                // The check outlived the attempt: a timeout, like the body's.
                ArgumentError::DeadlinePassed => timed_out(timeout.unwrap_or_default()),
                ArgumentError::Invalid { .. } => Failure::InvalidArguments(e.to_string()),
                other => Failure::InvalidArguments(other.to_string()),
            })?
        }
        _ => args,
    };
    match &tool.body {
        Body::Native(body) => body(args, ctx.clone()).await,
        Body::Component { plugin, session_store } => {
            let parts = CallParts { context: ctx, timeout, limits: None, session_store: session_store.as_ref() };
            match plugin.run(&tool.spec.name, parts, &args.to_string()).await {
                CallOutcome::Text(t) => Ok(ToolOutput::Text(t)),
                CallOutcome::Json(v) => Ok(ToolOutput::Json(v)),
                CallOutcome::Parts(parts) => Ok(ToolOutput::Parts(parts)),
                CallOutcome::Failed(f) => Err(f),
                CallOutcome::CancelRun(reason) => Err(Failure::RunCancelled(reason)),
                CallOutcome::Rejected { text, .. } => Err(Failure::Tool { message: text, hint: None, kind: None }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::backoff;
    use std::time::Duration;

    #[test]
    fn backoff_doubles_from_100_ms_and_caps_at_5_s() {
        let ms: Vec<u128> = (1..=8).map(|k| backoff(k).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(backoff(60), Duration::from_secs(5));
    }
}
