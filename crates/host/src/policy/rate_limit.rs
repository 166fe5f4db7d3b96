//! A rate limiter: a token bucket per tool and tenant.

use super::{AttemptResult, Next, Policy};
use crate::call::BoxFuture;
use crate::call::CallContext;
use crate::call::Failure;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Allows `burst` calls at once and `per_second` calls per second after that,
/// per (tool, tenant). The tenant is the call's `tenant`, else its session.
/// A call over the limit fails with a tool error (retried if the tool retries).
#[derive(Debug)]
pub struct RateLimit {
    burst: f64,
    per_second: f64,
    buckets: Mutex<HashMap<(String, String), (f64, Instant)>>,
}

impl RateLimit {
    /// `per_second` sustained, `burst` at once (at least 1).
    pub fn new(per_second: f64, burst: u32) -> Self {
        Self { burst: f64::from(burst.max(1)), per_second: per_second.max(0.0), buckets: Mutex::default() }
    }

    fn take(&self, key: (String, String)) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let (tokens, last) = buckets.entry(key).or_insert((self.burst, now));
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * self.per_second).min(self.burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else if self.per_second > 0.0 {
            Err(Duration::from_secs_f64((1.0 - *tokens) / self.per_second))
        } else {
            Err(Duration::MAX)
        }
    }
}

impl Policy for RateLimit {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        args: Value,
        ctx: &'a CallContext,
        next: Next<'a>,
    ) -> BoxFuture<'a, AttemptResult> {
        Box::pin(async move {
            let tenant = ctx.tenant.clone().or_else(|| ctx.session_id.clone()).unwrap_or_default();
            match self.take((tool.to_owned(), tenant)) {
                Ok(()) => next.run(args).await,
                Err(wait) => Err(Failure::Tool {
                    message: format!("rate limit exceeded for tool '{tool}'"),
                    hint: Some(if wait == Duration::MAX {
                        "this tool allows no more calls".into()
                    } else {
                        format!("retry in {} ms", wait.as_millis().max(1))
                    }),
                    kind: None,
                }),
            }
        })
    }
}
