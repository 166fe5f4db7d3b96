//! [`RunHandle`]: a run in progress — its events, its approvals, its cancel
//! switch and, at the end, its result.

use super::event::RunEvent;
use super::{RunError, RunResult};
use lovia_host::approval::ApprovalChannel;
use lovia_host::exec::CancelToken;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A streaming run. Take events with [`RunHandle::next_event`]; the run
/// waits at an `ApprovalRequired` until the next event is taken, and then
/// hands an undecided call to the approval handler (docs/semantics.md §13). Dropping the
/// handle or calling [`RunHandle::result`] stops consuming: later approvals
/// go straight to the handler, so a run never hangs on a reader that left.
#[derive(Debug)]
pub struct RunHandle {
    pub(super) events: mpsc::UnboundedReceiver<RunEvent>,
    pub(super) approvals: ApprovalChannel,
    pub(super) cancel: CancelToken,
    pub(super) task: JoinHandle<Result<RunResult, RunError>>,
}

impl RunHandle {
    /// The next event; `None` after `RunCompleted` or `RunFailed`.
    pub async fn next_event(&mut self) -> Option<RunEvent> {
        self.events.recv().await
    }

    /// The run's approval channel, for decisions out of band.
    pub fn approvals(&self) -> &ApprovalChannel {
        &self.approvals
    }

    /// Cancels the run: in-flight calls are interrupted and pending
    /// approvals denied.
    pub fn cancel(&self, reason: Option<&str>) {
        self.cancel.cancel(reason);
    }

    /// Stops the run where it is, without saving anything more: its
    /// checkpoint stays as last saved, for another process to resume (a
    /// replica that lost the run's lease). Unlike [`RunHandle::cancel`], the
    /// run is not marked as stopped. A call already running on a blocking
    /// thread may still finish, but its result is not saved, so a resume
    /// runs it again. The event stream ends.
    pub fn abort(&self) {
        self.task.abort();
    }

    /// Stops consuming events and waits for the run's result.
    pub async fn result(self) -> Result<RunResult, RunError> {
        drop(self.events);
        match self.task.await {
            Ok(result) => result,
            Err(e) => Err(RunError::Aborted { message: e.to_string() }),
        }
    }
}
