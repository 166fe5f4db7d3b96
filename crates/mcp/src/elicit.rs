//! One `elicitation/create` request of lovia's (an approval's form, an
//! `ask_human` question), withdrawn when lovia stops waiting for its answer.
//!
//! rmcp sends `notifications/cancelled` for a request whose own timeout
//! passes, but a request whose waiting future is dropped (the client
//! cancelled the call that asked, or the approval was decided elsewhere)
//! would stay open in the client: a person could still be looking at a
//! question nobody will read the answer of. [`elicit`] holds a guard that
//! withdraws it in those cases too.

use rmcp::RoleServer;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    RequestId, ServerRequest,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use std::time::Duration;

/// Why a withdrawn request was withdrawn, as the client reads it.
const WITHDRAWN: &str = "lovia no longer needs the answer (the call was cancelled or decided)";

/// Sends `form` to the client and waits at most `timeout` for the answer.
/// Dropped before the answer (the caller stopped waiting), it withdraws
/// the request with `notifications/cancelled`; past `timeout`, rmcp does.
pub(crate) async fn elicit(
    peer: &Peer<RoleServer>,
    form: ElicitRequestParams,
    timeout: Duration,
) -> Result<ElicitResult, ServiceError> {
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(form));
    let mut options = PeerRequestOptions::no_options();
    options.timeout = Some(timeout);
    let handle = peer.send_request_with_option(request, options).await?;
    let mut guard = Withdraw { peer: peer.clone(), id: Some(handle.id.clone()) };
    let answer = handle.await_response().await;
    // Answered, refused or timed out: nothing is left to withdraw.
    guard.id = None;
    match answer? {
        ClientResult::ElicitResult(result) => Ok(result),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// Withdraws its request when dropped while it is still set.
struct Withdraw {
    peer: Peer<RoleServer>,
    id: Option<RequestId>,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        // Drop cannot wait: the notification goes from a task of its own.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            let notification = CancelledNotification::new(CancelledNotificationParam::new(
                Some(id.clone()),
                Some(WITHDRAWN.to_owned()),
            ));
            if let Err(e) = peer.send_notification(notification.into()).await {
                tracing::debug!(request = ?id, error = %e, "cannot withdraw an elicitation (the client is gone)");
            }
        });
    }
}
