//! `ask_human` in `lovia serve` (docs/operators.md, "Questions"): each chat
//! run has one [`Questions`] slot. The question goes out as the run's
//! `question` event (kept for readers who attach later, like every event)
//! and to the console (`GET /api/questions`); the answer comes back through
//! `POST /api/chat/answer` on any replica, as an order to the run's owner
//! (`remote`), like an approval decision.

use lovia_host::CallContext;
use lovia_host::call::BoxFuture;
use lovia_runner::{HumanChannel, HumanError, Question};
use serde_json::{Value, json};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// Sends an event to the run's stream.
pub(crate) type Publish = Box<dyn Fn(&str, Value) + Send + Sync>;

/// The open question of one run, if any.
pub(crate) struct Questions {
    timeout: Duration,
    /// Set once the run's feed exists (the tool is built before it).
    publish: OnceLock<Publish>,
    pending: Mutex<Option<Pending>>,
}

struct Pending {
    question: Question,
    asked: SystemTime,
    answer: tokio::sync::oneshot::Sender<String>,
}

impl std::fmt::Debug for Questions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Questions").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

impl Questions {
    /// A slot whose questions wait `timeout` for their answer.
    pub(crate) fn new(timeout: Duration) -> Self {
        Self { timeout, publish: OnceLock::new(), pending: Mutex::new(None) }
    }

    /// Where the `question` events go.
    pub(crate) fn bind(&self, publish: Publish) {
        let _ = self.publish.set(publish);
    }

    /// Answers the open question; false when none is open.
    pub(crate) fn answer(&self, text: String) -> bool {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner()).take();
        pending.is_some_and(|p| p.answer.send(text).is_ok())
    }

    /// The open question and when it was asked.
    pub(crate) fn open(&self) -> Option<(Question, SystemTime)> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|p| (p.question.clone(), p.asked))
    }

    /// The `question` event's data (also an entry of `GET /api/questions`).
    pub(crate) fn event(&self, question: &Question, asked: SystemTime) -> Value {
        json!({
            "call_id": question.call_id,
            "question": question.question,
            "options": question.options,
            "multi_select": question.multi_select,
            "asked_ms": super::sse::unix_ms(asked),
            "cancel_at_ms": super::sse::unix_ms(asked + self.timeout),
        })
    }

    fn clear(&self, call_id: &str) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.as_ref().is_some_and(|p| p.question.call_id == call_id) {
            *pending = None;
        }
    }
}

/// Withdraws the question when its call ends without an answer (a timeout,
/// the run cancelled): the slot is free and the console stops showing it.
struct Withdraw<'a>(&'a Questions, String);

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        self.0.clear(&self.1);
    }
}

impl HumanChannel for Questions {
    fn ask<'a>(&'a self, question: &'a Question, _ctx: &'a CallContext) -> BoxFuture<'a, Result<String, HumanError>> {
        Box::pin(async move {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let asked = SystemTime::now();
            {
                let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                if pending.is_some() {
                    // ask_human is not parallel; another tool of the same
                    // channel could still try.
                    return Err(HumanError::Cancelled("another question is waiting for its answer".into()));
                }
                *pending = Some(Pending { question: question.clone(), asked, answer: tx });
            }
            let _withdraw = Withdraw(self, question.call_id.clone());
            if let Some(publish) = self.publish.get() {
                publish("question", self.event(question, asked));
            }
            match tokio::time::timeout(self.timeout, rx).await {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(_)) => Err(HumanError::Closed),
                Err(_) => Err(HumanError::Cancelled(format!(
                    "no answer within {}s — continue without one",
                    self.timeout.as_secs()
                ))),
            }
        })
    }
}
