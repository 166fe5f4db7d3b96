//! The run's cancel token (docs/semantics.md §6), on tokio-util's
//! [`CancellationToken`] so that a sub-run's token is a child of its
//! parent's: cancelling the parent cancels every sub-run under it.

use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Cancels a run. Cheap to clone; `cancel` is idempotent and the last reason
/// wins. In-flight component calls are interrupted within about a millisecond.
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
    /// The token this one was made from with [`CancelToken::child`]; its
    /// reason is this one's when this one was cancelled through it.
    parent: Option<Arc<CancelToken>>,
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// A token cancelled with this one (and on its own, without cancelling this one).
    ///
    /// ```
    /// let run = lovia_host::CancelToken::new();
    /// let sub_run = run.child();
    /// run.cancel(Some("stopped by the user"));
    /// assert!(sub_run.is_cancelled());
    /// assert_eq!(sub_run.reason(), "stopped by the user");
    /// ```
    pub fn child(&self) -> Self {
        Self { token: self.token.child_token(), reason: Arc::default(), parent: Some(Arc::new(self.clone())) }
    }

    /// Cancels the run with `reason` (default message: `run cancelled`).
    pub fn cancel(&self, reason: Option<&str>) {
        *self.reason.lock().unwrap_or_else(|p| p.into_inner()) = reason.map(str::to_owned);
        self.token.cancel();
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// The reason, `run cancelled` when none was given.
    pub fn reason(&self) -> String {
        if let Some(reason) = self.reason.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return reason;
        }
        match &self.parent {
            Some(parent) if parent.is_cancelled() => parent.reason(),
            _ => "run cancelled".into(),
        }
    }

    /// Resolves once the run is cancelled.
    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }
}
