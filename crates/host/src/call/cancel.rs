//! The run's cancel token (docs/semantics.md §6), on tokio-util's
//! [`CancellationToken`] so that a sub-run's token is a child of its
//! parent's: cancelling the parent cancels every sub-run under it.

use super::fence::Fence;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The reason of a run stopped by its fence.
pub const FENCE_ENDED: &str = "the run's lease ended: another replica may run it now";

/// Cancels a run. Cheap to clone; `cancel` is idempotent and the last reason
/// wins. In-flight component calls are interrupted within about a millisecond.
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    token: CancellationToken,
    reason: Arc<Mutex<Option<String>>>,
    /// The token this one was made from with [`CancelToken::child`]; its
    /// reason is this one's when this one was cancelled through it.
    parent: Option<Arc<CancelToken>>,
    /// Past its end the token reads as cancelled, whether or not anyone
    /// called `cancel` (a lease that may be another replica's by now).
    fence: Option<Fence>,
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
        Self {
            token: self.token.child_token(),
            reason: Arc::default(),
            parent: Some(Arc::new(self.clone())),
            fence: self.fence.clone(),
        }
    }

    /// This token, reading as cancelled once `fence` has ended (checked
    /// against the clock at each question, so a stalled process that
    /// resumes past the fence sees it at once).
    ///
    /// ```
    /// use std::time::Instant;
    /// let fence = lovia_host::Fence::until(Instant::now() + std::time::Duration::from_secs(60));
    /// let run = lovia_host::CancelToken::new().with_fence(fence.clone());
    /// assert!(!run.is_cancelled());
    /// fence.revoke();
    /// assert!(run.is_cancelled() && run.child().is_cancelled());
    /// ```
    #[must_use]
    pub fn with_fence(mut self, fence: Fence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// The fence given with [`CancelToken::with_fence`], if any.
    pub fn fence(&self) -> Option<&Fence> {
        self.fence.as_ref()
    }

    /// Whether the token has a fence that has ended.
    pub fn fence_ended(&self) -> bool {
        self.fence.as_ref().is_some_and(|f| !f.holds())
    }

    /// Cancels the run with `reason` (default message: `run cancelled`).
    pub fn cancel(&self, reason: Option<&str>) {
        *self.reason.lock().unwrap_or_else(|p| p.into_inner()) = reason.map(str::to_owned);
        self.token.cancel();
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled() || self.fence_ended()
    }

    /// The reason, `run cancelled` when none was given.
    pub fn reason(&self) -> String {
        if let Some(reason) = self.reason.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return reason;
        }
        if self.fence_ended() && !self.token.is_cancelled() {
            return FENCE_ENDED.into();
        }
        match &self.parent {
            Some(parent) if parent.is_cancelled() => parent.reason(),
            _ => "run cancelled".into(),
        }
    }

    /// Resolves once the run is cancelled.
    pub async fn cancelled(&self) {
        match &self.fence {
            Some(fence) => tokio::select! {
                () = self.token.cancelled() => {}
                () = fence.ended() => {}
            },
            None => self.token.cancelled().await,
        }
    }
}
