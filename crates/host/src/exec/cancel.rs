//! The run's cancel token (docs/semantics.md §6).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// Cancels a run. Cheap to clone; `cancel` is idempotent and the last reason
/// wins. In-flight component calls are interrupted within about a millisecond.
#[derive(Debug, Clone)]
pub struct CancelToken {
    tx: Arc<watch::Sender<bool>>,
    reason: Arc<Mutex<Option<String>>>,
    flag: Arc<AtomicBool>,
}

impl Default for CancelToken {
    fn default() -> Self {
        Self { tx: Arc::new(watch::channel(false).0), reason: Arc::default(), flag: Arc::default() }
    }
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels the run with `reason` (default message: `run cancelled`).
    pub fn cancel(&self, reason: Option<&str>) {
        *self.reason.lock().unwrap_or_else(|p| p.into_inner()) = reason.map(str::to_owned);
        self.flag.store(true, Ordering::SeqCst);
        self.tx.send_replace(true);
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// The reason, `run cancelled` when none was given.
    pub fn reason(&self) -> String {
        self.reason.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or_else(|| "run cancelled".into())
    }

    /// Resolves once the run is cancelled.
    pub async fn cancelled(&self) {
        let mut rx = self.tx.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// The flag a guest polls through `context.cancelled()`.
    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }
}
