//! How the runs this process ended ended, for `GET /api/chat`.

use std::collections::VecDeque;
use std::sync::Mutex;

/// How many ended runs' outcomes a tenant's [`Outcomes`] remembers: 100.
/// The store keeps a status for every session; this only refines it for
/// runs this process ended (`cancelled` rather than `interrupted`).
pub(crate) const RECENT_OUTCOMES: usize = 100;

/// The outcomes of the runs this process ended, newest first, at most
/// [`RECENT_OUTCOMES`]: the run error's kind (`cancelled`, `max_turns`, …)
/// says more than the store's `interrupted` or `failed`.
#[derive(Default)]
pub(crate) struct Outcomes(Mutex<VecDeque<(String, &'static str)>>);

impl Outcomes {
    pub(crate) fn started(&self, id: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).retain(|(s, _)| s != id);
    }

    pub(crate) fn ended(&self, id: &str, outcome: &'static str) {
        let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|(s, _)| s != id);
        list.push_front((id.to_owned(), outcome));
        list.truncate(RECENT_OUTCOMES);
    }

    pub(crate) fn of(&self, id: &str) -> Option<&'static str> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(s, _)| s == id).map(|(_, o)| *o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outcomes_are_bounded_newest_first_and_a_new_run_clears_its_own() {
        let outcomes = Outcomes::default();
        for i in 0..RECENT_OUTCOMES + 5 {
            outcomes.ended(&format!("s{i}"), "completed");
        }
        assert_eq!(outcomes.0.lock().expect("lock").len(), RECENT_OUTCOMES);
        assert_eq!(outcomes.of("s4"), None, "the oldest were forgotten");
        assert_eq!(outcomes.of("s5"), Some("completed"));
        outcomes.ended("s50", "cancelled");
        assert_eq!(outcomes.of("s50"), Some("cancelled"));
        assert_eq!(outcomes.0.lock().expect("lock").iter().filter(|(s, _)| s == "s50").count(), 1);
        // A session that runs again has no outcome until it ends again.
        outcomes.started("s50");
        assert_eq!(outcomes.of("s50"), None);
    }
}
