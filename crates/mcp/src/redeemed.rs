//! Where the 2026-07-28 request states are sealed from and remembered as
//! redeemed. By default both are this server's own (a random key, a map in
//! memory); replicas behind a load balancer share them
//! ([`McpOptions::state_key`](crate::McpOptions::state_key) and
//! [`McpOptions::redeemed`](crate::McpOptions::redeemed)), so a state sealed by
//! one opens on any other, once.

use lovia_host::BoxFuture;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

/// The key that seals request states (HMAC-SHA256): at least 32 bytes.
/// Its `Debug` never shows it.
#[derive(Clone)]
pub struct StateKey(Vec<u8>);

impl StateKey {
    /// A key from its bytes; [`McpServer::with_options`](crate::McpServer::with_options)
    /// refuses one shorter than 32 bytes.
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateKey({} bytes)", self.0.len())
    }
}

/// Remembers the nonces of redeemed request states, so a state is redeemed
/// at most once wherever it comes back.
pub trait RedeemedStates: Send + Sync {
    /// Records `nonce` (a state's random id, 32 hex digits) as redeemed
    /// until `expires`, when its state has expired anyway: `Ok(true)` the
    /// first time, `Ok(false)` for a nonce already recorded. An `Err` (the
    /// store cannot say) refuses the redemption: the call is not approved.
    fn redeem<'a>(&'a self, nonce: &'a str, expires: SystemTime) -> BoxFuture<'a, Result<bool, String>>;
}

/// How many redeemed request states one server remembers in memory at
/// most (each until it would have expired anyway). Past it, a new
/// redemption is refused: the replay check fails closed rather than forgetting.
pub const MAX_REDEEMED_IN_MEMORY: usize = 100_000;

/// The default: this process's memory, at most [`MAX_REDEEMED_IN_MEMORY`].
#[derive(Default)]
pub(crate) struct InMemory(Mutex<HashMap<String, SystemTime>>);

impl RedeemedStates for InMemory {
    fn redeem<'a>(&'a self, nonce: &'a str, expires: SystemTime) -> BoxFuture<'a, Result<bool, String>> {
        let answer = {
            let now = SystemTime::now();
            let mut redeemed = self.0.lock().unwrap_or_else(|p| p.into_inner());
            redeemed.retain(|_, until| *until > now);
            if redeemed.contains_key(nonce) {
                Ok(false)
            } else if redeemed.len() >= MAX_REDEEMED_IN_MEMORY {
                Err(format!("{MAX_REDEEMED_IN_MEMORY} redeemed approvals are remembered already"))
            } else {
                redeemed.insert(nonce.to_owned(), expires);
                Ok(true)
            }
        };
        Box::pin(std::future::ready(answer))
    }
}
