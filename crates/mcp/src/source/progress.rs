//! Progress a source server reports for a call: each `tools/call` carries
//! its own `progressToken` (rmcp gives one to every request), and the
//! server's `notifications/progress` for that token become the call's
//! progress messages (`tool_progress` events), as a component's
//! `context.progress`.

use lovia_host::ProgressSink;
use rmcp::model::{NumberOrString, ProgressNotificationParam, ProgressToken};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The calls in flight on one server that want progress, by token.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    /// Each call's sink and the highest progress value it was given.
    sinks: Mutex<HashMap<String, (ProgressSink, Option<f64>)>>,
}

/// A token routed to a call's sink until it is dropped (the call ended,
/// or was cancelled); a notification after that is ignored.
pub(crate) struct Route {
    routes: Arc<ProgressRoutes>,
    key: String,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes.sinks.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.key);
    }
}

impl ProgressRoutes {
    /// Sends the notifications for `token` to `sink` until the route is dropped.
    pub(crate) fn route(self: &Arc<Self>, token: ProgressToken, sink: ProgressSink) -> Route {
        let key = key(&token);
        self.sinks.lock().unwrap_or_else(PoisonError::into_inner).insert(key.clone(), (sink, None));
        Route { routes: self.clone(), key }
    }

    /// Delivers one notification to its call, if the token is one of ours
    /// and its progress is past the last one delivered. The protocol says
    /// progress increases; rmcp hands each notification to a task of its
    /// own, so two sent together may arrive swapped, and the late one is
    /// dropped rather than shown going backwards. The check and the send
    /// happen under one lock, so events leave in the order they were judged.
    pub(crate) fn deliver(&self, note: &ProgressNotificationParam) {
        let mut sinks = self.sinks.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((sink, last)) = sinks.get_mut(&key(&note.progress_token)) else { return };
        if last.is_some_and(|last| note.progress <= last) {
            return;
        }
        *last = Some(note.progress);
        sink(&message(note));
    }
}

/// The map key of a token: a number and a string of its digits are distinct.
fn key(token: &ProgressToken) -> String {
    match &token.0 {
        NumberOrString::String(s) => format!("s:{s}"),
        NumberOrString::Number(n) => format!("n:{n}"),
    }
}

/// The server's message, or `<progress>/<total>` (`<progress>` when the
/// total is unknown) when it sent none.
fn message(note: &ProgressNotificationParam) -> String {
    match (&note.message, note.total) {
        (Some(m), _) if !m.is_empty() => m.clone(),
        (_, Some(total)) => format!("{}/{}", note.progress, total),
        (_, None) => note.progress.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_reaches_its_call_until_the_call_ends() {
        let routes = Arc::new(ProgressRoutes::default());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink: ProgressSink = {
            let seen = seen.clone();
            Arc::new(move |m: &str| seen.lock().expect("lock").push(m.to_owned()))
        };
        let token = ProgressToken(NumberOrString::Number(1));
        let route = routes.route(token.clone(), sink);
        let note = |progress: f64, m: Option<&str>, total| {
            let mut n = ProgressNotificationParam::new(token.clone(), progress);
            n.total = total;
            n.message = m.map(str::to_owned);
            n
        };
        routes.deliver(&note(1.0, Some("copying"), None));
        routes.deliver(&note(2.0, None, Some(4.0)));
        // Arrived after a later one (rmcp's tasks): dropped, not shown going back.
        routes.deliver(&note(1.5, Some("late"), None));
        routes.deliver(&note(2.0, Some("again"), None));
        routes.deliver(&note(3.0, None, None));
        let other = ProgressNotificationParam::new(ProgressToken(NumberOrString::Number(7)), 1.0);
        routes.deliver(&other);
        let same_digits = ProgressNotificationParam::new(ProgressToken(NumberOrString::String("1".into())), 1.0);
        routes.deliver(&same_digits);
        drop(route);
        routes.deliver(&ProgressNotificationParam::new(token, 4.0));
        assert_eq!(*seen.lock().expect("lock"), ["copying", "2/4", "3"]);
    }
}
