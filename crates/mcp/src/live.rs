//! The served catalog, swappable while clients are connected (`lovia mcp
//! --watch`): a call or a listing takes the current catalog whole, so a
//! reload never pairs a new listing with an old executor, and every change
//! is announced to the connected clients as `notifications/tools/list_changed`.

use lovia_host::Executor;
use rmcp::RoleServer;
use rmcp::model::Tool;
use rmcp::service::{Peer, SubscriptionContext};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::watch;

/// One version of what is served.
pub(crate) struct Catalog {
    /// Runs the calls.
    pub(crate) exec: Executor,
    /// `tools/list`, built once per version: the same bytes for every client.
    pub(crate) tools: Arc<Vec<Tool>>,
    /// Plugin names by digest, for the approval prompt.
    pub(crate) plugin_names: Arc<HashMap<String, String>>,
    /// The tools that offer to run as tasks (`catalog::runs_as_task`).
    pub(crate) task_tools: Arc<std::collections::HashSet<String>>,
}

/// The current catalog and a counter of its replacements.
pub(crate) struct Live {
    current: RwLock<Arc<Catalog>>,
    /// Bumped after each replacement; every announcer waits on it.
    changes: watch::Sender<u64>,
}

/// How often a session's announcer checks that its client is still there
/// when nothing changes, so a closed session's task ends.
const REAP: Duration = Duration::from_secs(30);

impl Live {
    pub(crate) fn new(catalog: Catalog) -> Self {
        Self { current: RwLock::new(Arc::new(catalog)), changes: watch::Sender::new(0) }
    }

    /// The catalog now; a call keeps it to its end, whatever replaces it meanwhile.
    pub(crate) fn current(&self) -> Arc<Catalog> {
        // The lock guards a plain swap: a panic elsewhere cannot leave it half done.
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Serves `catalog` from now on and wakes every announcer.
    pub(crate) fn replace(&self, catalog: Catalog) {
        *self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(catalog);
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that sees the replacements from now on.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

/// 2025-11-25 and older: the session's client gets `list_changed` on its
/// own stream (stdio, or the session's GET stream over HTTP) after each
/// replacement, until it goes away or the server is dropped.
pub(crate) async fn announce_to_session(peer: Peer<RoleServer>, mut changes: watch::Receiver<u64>) {
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() || peer.is_transport_closed() {
                    return;
                }
                if let Err(e) = peer.notify_tool_list_changed().await {
                    tracing::debug!(error = %e, "tools/list_changed not delivered; the session is gone");
                    return;
                }
            }
            () = tokio::time::sleep(REAP) => {
                if peer.is_transport_closed() {
                    return;
                }
            }
        }
    }
}

/// 2026-07-28 has no sessions: a client that wants `list_changed` opens a
/// `subscriptions/listen` stream asking for `toolsListChanged`, and gets it
/// there after each replacement until it cancels the stream.
pub(crate) async fn announce_to_subscription(subscription: &SubscriptionContext, mut changes: watch::Receiver<u64>) {
    if subscription.accepted().tools_list_changed != Some(true) {
        subscription.cancelled().await;
        return;
    }
    loop {
        tokio::select! {
            () = subscription.cancelled() => return,
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                if let Err(e) = subscription.sink().notify_tool_list_changed().await {
                    tracing::debug!(error = %e, "tools/list_changed not delivered; the stream is gone");
                    return;
                }
            }
        }
    }
}
