//! Approvals, denials, cancels and answers posted to a replica that does not run
//! the run (docs/replicas.md, "Run ownership"). The replica that gets one
//! writes it as a row of `lovia_run_orders` (the truth) in a transaction
//! that notifies [`RUNS_CHANNEL`]; the owner, woken by the notification or
//! at its next poll (which catches a lost one), applies every open order of
//! its runs and writes the outcome into the row, which the replica that took
//! the order waits for before it answers.

use super::lease::{LeaseError, RUNS_CHANNEL};
use crate::Service;
use lovia_host::approval::ApprovalDecision;
use std::time::{Duration, Instant};

/// Orders of one run waiting for its owner: at most 64. More are refused
/// (429), so a tenant cannot fill the table while the owner is slow.
const OPEN_ORDERS_PER_RUN: i64 = 64;
/// How long the replica that took an order waits for the owner's outcome:
/// 3 s (a notification arrives in milliseconds; a poll in `poll_interval_ms`).
/// After it the order stays queued for the owner and the client is told so.
const ORDER_WAIT: Duration = Duration::from_secs(3);
/// [`ORDER_WAIT`] in milliseconds, for SQL.
const ORDER_WAIT_MS: i64 = ORDER_WAIT.as_millis() as i64;
/// How often it looks for the outcome meanwhile.
const ORDER_CHECK: Duration = Duration::from_millis(50);

/// What a client asks of a run.
#[derive(Debug, Clone)]
pub(crate) enum Order {
    /// Approve or deny the pending call `call_id`.
    Decide {
        /// The call.
        call_id: String,
        /// Its decision.
        decision: ApprovalDecision,
        /// With an approval: allow the tool for the rest of the session.
        always: bool,
    },
    /// Cancel the run.
    Cancel,
    /// Answer the run's open `ask_human` question.
    Answer {
        /// The answer.
        answer: String,
    },
}

/// What became of an order posted for another replica's run.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Posted {
    /// The owner applied it.
    Applied,
    /// The owner has no pending approval that matches.
    Unmatched,
    /// No replica holds the run.
    NoOwner,
    /// [`OPEN_ORDERS_PER_RUN`] orders of the run wait already.
    TooMany,
    /// The order is stored, and the owner did not answer within
    /// [`ORDER_WAIT`] (or its answer could not be read, the store failing):
    /// it applies the order when it next looks.
    Queued,
}

impl Order {
    /// Its columns in `lovia_run_orders`: the call, the decision, the answer.
    fn columns(&self) -> (Option<String>, &'static str, Option<String>) {
        match self {
            Order::Decide { call_id, decision: ApprovalDecision::Approve, always: true } => {
                (Some(call_id.clone()), "approve-always", None)
            }
            Order::Decide { call_id, decision: ApprovalDecision::Approve, .. } => {
                (Some(call_id.clone()), "approve", None)
            }
            Order::Decide { call_id, .. } => (Some(call_id.clone()), "deny", None),
            Order::Cancel => (None, "cancel", None),
            Order::Answer { answer } => (None, "answer", Some(answer.clone())),
        }
    }

    fn from_columns(call_id: Option<String>, decision: &str, answer: Option<String>) -> Option<Order> {
        match (call_id, decision, answer) {
            (Some(call_id), "approve", _) => {
                Some(Order::Decide { call_id, decision: ApprovalDecision::Approve, always: false })
            }
            (Some(call_id), "approve-always", _) => {
                Some(Order::Decide { call_id, decision: ApprovalDecision::Approve, always: true })
            }
            (Some(call_id), "deny", _) => {
                Some(Order::Decide { call_id, decision: ApprovalDecision::Deny, always: false })
            }
            (None, "cancel", _) => Some(Order::Cancel),
            (None, "answer", Some(answer)) => Some(Order::Answer { answer }),
            _ => None,
        }
    }
}

impl Service {
    /// Sends `order` to the replica that holds the run (a shared store
    /// only) and waits up to [`ORDER_WAIT`] for what became of it.
    pub(crate) async fn post_order(&self, tenant: &str, session: &str, order: &Order) -> Result<Posted, LeaseError> {
        let leases = self.inner.stores.leases.clone();
        let (t, s, (call_id, decision, answer)) = (tenant.to_owned(), session.to_owned(), order.columns());
        let posted =
            async move {
                let Some(pg) = leases.shared() else { return Ok(Err(Posted::NoOwner)) };
                pg.run(move |c| {
                    Box::pin(async move {
                        let tx = c.transaction().await?;
                        let held = tx.query_opt(
                    "SELECT 1 FROM lovia_run_leases WHERE tenant = $1 AND session = $2 AND expires >= now()",
                    &[&t, &s],
                ).await?;
                        if held.is_none() {
                            return Ok(Err(Posted::NoOwner));
                        }
                        let open: i64 = tx
                    .query_one(
                        "SELECT COUNT(*) FROM lovia_run_orders WHERE tenant = $1 AND session = $2 AND outcome IS NULL",
                        &[&t, &s],
                    ).await?
                    .get(0);
                        if open >= OPEN_ORDERS_PER_RUN {
                            return Ok(Err(Posted::TooMany));
                        }
                        let id: i64 = tx
                            .query_one(
                                "INSERT INTO lovia_run_orders (tenant, session, call_id, decision, answer)
                         VALUES ($1, $2, $3, $4, $5) RETURNING id",
                                &[&t, &s, &call_id, &decision, &answer],
                            )
                            .await?
                            .get(0);
                        // Delivered at commit, to every replica; the owner acts on it.
                        tx.execute("SELECT pg_notify($1, $2)", &[&RUNS_CHANNEL, &id.to_string()]).await?;
                        tx.commit().await?;
                        Ok(Ok(id))
                    })
                })
                .await
            }
            .await?;
        let id = match posted {
            Ok(id) => id,
            Err(refused) => return Ok(refused),
        };
        let deadline = Instant::now() + ORDER_WAIT;
        loop {
            tokio::time::sleep(ORDER_CHECK).await;
            let leases = self.inner.stores.leases.clone();
            let outcome: Result<Option<String>, LeaseError> = async move {
                let Some(pg) = leases.shared() else { return Ok(None) };
                pg.run(move |c| {
                    Box::pin(async move {
                        let row = c.query_opt("SELECT outcome FROM lovia_run_orders WHERE id = $1", &[&id]).await?;
                        Ok(row.and_then(|r| r.get(0)))
                    })
                })
                .await
            }
            .await;
            match outcome.as_ref().map(Option::as_deref) {
                Ok(Some("applied")) => return Ok(Posted::Applied),
                Ok(Some(_)) => return Ok(Posted::Unmatched),
                Ok(None) if Instant::now() >= deadline => return Ok(Posted::Queued),
                Ok(None) => {}
                // The order is stored, and its run's owner applies it: a
                // store that fails while the outcome is awaited changes
                // nothing of that. Answering 503 here told a client that
                // an approval the owner then applied had failed (found by
                // bench/fault-run); it is queued, as past the wait.
                Err(e) => {
                    tracing::warn!(error = %e, order = id, "cannot read an order's outcome; it stays queued");
                    return Ok(Posted::Queued);
                }
            }
        }
    }

    /// Applies the open orders of the runs this replica holds, oldest
    /// first, and records each outcome; drops answered orders after a
    /// minute and unanswered ones after ten (their run's owner is gone),
    /// and stored cancels of runs stored as stopped after ten.
    pub(crate) async fn apply_orders(&self) {
        let leases = self.inner.stores.leases.clone();
        let open = async move {
            let Some(pg) = leases.shared() else { return Ok(Vec::new()) };
            let owner = pg.owner().to_owned();
            pg.run(move |c| {
                Box::pin(async move {
                    c.execute(
                    "DELETE FROM lovia_run_orders WHERE (outcome IS NOT NULL AND created < now() - interval '1 minute')
                        OR created < now() - interval '10 minutes'",
                    &[],
                ).await?;
                    // A stored cancel outlives its run only until the run is
                    // stored as stopped (or deleted), and ten minutes at least.
                    c.execute(
                        "DELETE FROM lovia_run_cancels k WHERE k.created < now() - interval '10 minutes'
                        AND NOT EXISTS (SELECT 1 FROM lovia_runs r
                                        WHERE r.tenant = k.tenant AND r.session = k.session AND r.status = 'running')",
                        &[],
                    )
                    .await?;
                    let rows = c
                        .query(
                            "SELECT o.id, o.tenant, o.session, o.call_id, o.decision, o.answer,
                            o.created > now() - $2::bigint * interval '1 millisecond'
                     FROM lovia_run_orders o
                     JOIN lovia_run_leases l ON l.tenant = o.tenant AND l.session = o.session
                     WHERE l.owner = $1 AND o.outcome IS NULL ORDER BY o.id LIMIT 256",
                            &[&owner, &ORDER_WAIT_MS],
                        )
                        .await?;
                    Ok(rows
                        .iter()
                        .map(|r| {
                            let (id, tenant, session): (i64, String, String) = (r.get(0), r.get(1), r.get(2));
                            (
                                id,
                                tenant,
                                session,
                                r.get::<_, Option<String>>(3),
                                r.get::<_, String>(4),
                                r.get::<_, Option<String>>(5),
                                r.get::<_, bool>(6),
                            )
                        })
                        .collect::<Vec<_>>())
                })
            })
            .await
        }
        .await;
        let open = match open {
            Ok(open) => open,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the orders for this replica's runs; retrying at the next poll");
                return;
            }
        };
        for (id, tenant, session, call_id, decision, answer, young) in open {
            let live = self.inner.tenants.iter().find(|t| t.name == tenant).and_then(|t| self.live(t, &session));
            // This replica holds the lease of a run that is not live here
            // yet (it is starting): a young order waits for it, to a later
            // wake, rather than be answered unmatched while its run begins.
            if live.is_none() && young {
                continue;
            }
            let matched = match (live, Order::from_columns(call_id, &decision, answer)) {
                (Some(live), Some(order)) => live.apply(&order),
                _ => false,
            };
            let leases = self.inner.stores.leases.clone();
            let recorded = async move {
                let Some(pg) = leases.shared() else { return Ok(()) };
                let outcome = if matched { "applied" } else { "unmatched" };
                pg.run(move |c| {
                    Box::pin(async move {
                        c.execute("UPDATE lovia_run_orders SET outcome = $2 WHERE id = $1", &[&id, &outcome])
                            .await
                            .map(drop)
                    })
                })
                .await
            }
            .await;
            if let Err(e) = recorded {
                tracing::warn!(error = %e, order = id, "cannot record an order's outcome");
            }
        }
    }
}
