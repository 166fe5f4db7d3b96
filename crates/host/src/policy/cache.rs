//! A result cache: successful results by tool and canonical arguments, for a TTL.

use super::{AttemptResult, Next, Policy, canonical_json};
use crate::call::CallContext;
use crate::call::{BoxFuture, ToolOutput};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Caches successful results for `ttl`; a hit never runs the tool. Errors
/// are never cached. Holds at most `max_entries` (default 1,000); when full,
/// expired entries are dropped first, then the oldest.
#[derive(Debug)]
pub struct ResultCache {
    ttl: Duration,
    max_entries: usize,
    entries: Mutex<HashMap<String, (Instant, ToolOutput)>>,
}

impl ResultCache {
    /// A cache whose entries live for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, max_entries: 1_000, entries: Mutex::default() }
    }

    /// Caps the number of entries (default 1,000).
    #[must_use]
    pub fn max_entries(mut self, n: usize) -> Self {
        self.max_entries = n.max(1);
        self
    }

    fn lookup(&self, key: &str) -> Option<ToolOutput> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(key).filter(|(at, _)| at.elapsed() < self.ttl).map(|(_, out)| out.clone())
    }

    fn store(&self, key: String, output: ToolOutput) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= self.max_entries {
            entries.retain(|_, (at, _)| at.elapsed() < self.ttl);
        }
        if entries.len() >= self.max_entries
            && let Some(oldest) = entries.iter().min_by_key(|(_, (at, _))| *at).map(|(k, _)| k.clone())
        {
            entries.remove(&oldest);
        }
        entries.insert(key, (Instant::now(), output));
    }
}

impl Policy for ResultCache {
    fn call<'a>(
        &'a self,
        tool: &'a str,
        args: Value,
        _ctx: &'a CallContext,
        next: Next<'a>,
    ) -> BoxFuture<'a, AttemptResult> {
        Box::pin(async move {
            let key = format!("{tool}\u{0}{}", canonical_json(&args));
            if let Some(hit) = self.lookup(&key) {
                return Ok(hit);
            }
            let result = next.run(args).await;
            if let Ok(output) = &result {
                self.store(key, output.clone());
            }
            result
        })
    }
}
