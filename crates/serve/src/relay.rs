//! A run's events for readers on other replicas (docs/replicas.md, "Run
//! ownership"). With a PostgreSQL store the owner appends every event it
//! publishes to `lovia_run_events` under the event's id (a per-session
//! sequence that a resumed run continues), in batches, each committed with
//! a `NOTIFY` on [`EVENTS_CHANNEL`]. A reader attached to another replica
//! reads the rows after its cursor (`Last-Event-ID`) and then follows: on
//! each notification, and at the latest every `poll_interval_ms` (the
//! backstop for a lost one). Ids come from the rows, so a reader moving to
//! another replica sees no gap and no duplicate.
//!
//! Bounds: a run keeps its newest events and bytes of them within the
//! bounds its owner passes (the in-memory replay's, `chat::RUN_REPLAY_EVENTS`
//! and `chat::RUN_REPLAY_BYTES`) (older ones are pruned, and a
//! reader that needed them gets `replay_truncated`); the events of a run
//! that no replica holds go a minute after their last append, or sooner
//! past the tenant's newest [`ENDED_RUNS_KEPT`] ended runs. An event the
//! owner cannot queue for the table (its queue of [`RELAY_QUEUE`] is full
//! because the store is slow) is missed by remote readers, which are told so.

use super::lease::{LeaseError, RunLeases};
use super::sse::{Reader, frame};
use crate::Service;
use crate::Tenant;
use axum::response::sse::Event;
use serde_json::json;
use std::sync::Arc;
use tokio::sync::mpsc;

/// The channel an owner notifies after appending events.
pub(crate) const EVENTS_CHANNEL: &str = "lovia_events";

/// Events of one run waiting to be written to the table: 1,024.
pub(crate) const RELAY_QUEUE: usize = 1024;

/// Events written in one statement at most: 128.
const BATCH: usize = 128;

/// One event on its way to the table: its id, name and JSON data.
pub(crate) type Relayed = (u64, String, String);

/// Ended runs of one tenant whose events stay in the table, for readers
/// still catching up (at most a minute): the newest 16; older ones go when
/// the tenant starts a run. With its runs in progress (at most its
/// `max_concurrent_runs`, across replicas, plus any waiting for a takeover)
/// and each run's own bounds, this bounds the tenant's rows: by default
/// (4 + 16) runs × 512 events and 1 MiB.
const ENDED_RUNS_KEPT: i64 = 16;

/// Reads of the table per wake-up of a remote reader: 256 rows.
const READ_ROWS: i64 = 256;

impl Service {
    /// With a shared store: the id the run's first event gets, after
    /// clearing the session's old events for a new run (`fresh`) or
    /// continuing them for a resumed one. `None` with one process.
    pub(crate) async fn first_event_id(
        &self,
        tenant: &str,
        session: &str,
        fresh: bool,
    ) -> Result<Option<u64>, LeaseError> {
        let Some(pg) = self.inner.stores.leases.shared() else { return Ok(None) };
        let (t, s) = (tenant.to_owned(), session.to_owned());
        pg.run(move |c| {
            Box::pin(async move {
                // The tenant's bound: the events of its ended runs past the
                // newest ENDED_RUNS_KEPT go (their transcripts stay in the run store).
                c.execute(
                    "DELETE FROM lovia_run_events e USING (
                     SELECT ev.session FROM lovia_run_events ev
                      WHERE ev.tenant = $1 AND ev.session <> $2
                        AND NOT EXISTS (SELECT 1 FROM lovia_run_leases l
                                         WHERE l.tenant = ev.tenant AND l.session = ev.session)
                      GROUP BY ev.session ORDER BY max(ev.at) DESC OFFSET $3) old
                  WHERE e.tenant = $1 AND e.session = old.session",
                    &[&t, &s, &ENDED_RUNS_KEPT],
                )
                .await?;
                if fresh {
                    c.execute("DELETE FROM lovia_run_events WHERE tenant = $1 AND session = $2", &[&t, &s]).await?;
                    return Ok(Some(0));
                }
                let last: Option<i64> = c
                    .query_one("SELECT MAX(seq) FROM lovia_run_events WHERE tenant = $1 AND session = $2", &[&t, &s])
                    .await?
                    .get(0);
                // A resumed run's ids skip past every id its previous owner may
                // have given to events it published but never wrote (at most a
                // queue and a batch), so a reader coming back with one of those
                // ids misses nothing of the resumed run; the gap reads as
                // `replay_truncated`.
                let skip = (RELAY_QUEUE + BATCH) as i64;
                Ok(Some(last.map_or(0, |last| u64::try_from(last.saturating_add(1 + skip)).unwrap_or(0))))
            })
        })
        .await
    }

    /// Whether another replica holds an unexpired lease of the run (its
    /// events are then read from the table). Always false with one process.
    pub(crate) async fn held_elsewhere(&self, tenant: &str, session: &str) -> Result<bool, LeaseError> {
        let Some(pg) = self.inner.stores.leases.shared() else { return Ok(false) };
        let (t, s, owner) = (tenant.to_owned(), session.to_owned(), pg.owner().to_owned());
        pg.run(move |c| Box::pin(async move {
            let row = c.query_opt(
                "SELECT 1 FROM lovia_run_leases WHERE tenant = $1 AND session = $2 AND owner <> $3 AND expires >= now()",
                &[&t, &s, &owner],
            ).await?;
            Ok(row.is_some())
        }))
        .await
    }

    /// Starts the task that writes a run's events to the table, in order;
    /// it ends when the sender is dropped and everything queued is written.
    pub(crate) fn relay_events(
        &self,
        tenant: &str,
        session: &str,
        (events, bytes): (usize, usize),
    ) -> (mpsc::Sender<Relayed>, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<Relayed>(RELAY_QUEUE);
        let leases = self.inner.stores.leases.clone();
        let (tenant, session) = (tenant.to_owned(), session.to_owned());
        let task = tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < BATCH {
                    match rx.try_recv() {
                        Ok(event) => batch.push(event),
                        Err(_) => break,
                    }
                }
                let (leases, t, s) = (leases.clone(), tenant.clone(), session.clone());
                if let Err(e) = append(&leases, t, s, batch, (events, bytes)).await {
                    tracing::warn!(error = %e, "cannot relay a run's events; remote readers miss them");
                }
            }
        });
        (tx, task)
    }

    /// A reader of another replica's run: the stored events after `after`
    /// (all of them without it), then the new ones as they are appended,
    /// until the run ends or no replica holds it any more.
    pub(crate) fn follow_remote(&self, tenant: &Tenant, session: &str, after: Option<u64>) -> Reader {
        let (tx, reader) = Reader::new(|| {});
        let service = self.clone();
        let (t, s) = (tenant.name.clone(), session.to_owned());
        tokio::spawn(async move {
            let mut changed = service.inner.events_seen.subscribe();
            // The next id this reader needs.
            let mut next = after.map_or(0, |a| a.saturating_add(1));
            loop {
                changed.mark_unchanged();
                let (leases, t2, s2) = (service.inner.stores.leases.clone(), t.clone(), s.clone());
                let from = i64::try_from(next).unwrap_or(i64::MAX);
                let (rows, held) = match read(&leases, t2, s2, from).await {
                    Ok(found) => found,
                    _ => {
                        let _ = tx
                            .send(frame(
                                "error",
                                &json!({"type": "store", "fatal": true,
                            "message": "the run's events cannot be read; reconnect to follow the run"}),
                            ))
                            .await;
                        return;
                    }
                };
                let mut ended = false;
                for (seq, name, data) in rows {
                    let seq = u64::try_from(seq).unwrap_or(0);
                    if seq > next {
                        // Pruned (or never written): say what is missing.
                        let missing = json!({"missing_through": seq - 1});
                        if tx.send(frame("replay_truncated", &missing)).await.is_err() {
                            return;
                        }
                    }
                    ended |= name == "run_completed"
                        || (name == "error"
                            && serde_json::from_str::<serde_json::Value>(&data).is_ok_and(|d| d["fatal"] == true));
                    let event = Event::default().event(name).id(seq.to_string()).data(data);
                    if tx.send(event).await.is_err() {
                        return;
                    }
                    next = seq + 1;
                }
                // The owner writes every event before it lets the lease go:
                // with no lease, what was read is all there is. A run that
                // ended without its end in the table lost events (dropped
                // past the tenant's bound, or never written): say so.
                if !held && !ended {
                    let gone = json!({"type": "events_gone", "fatal": true,
                        "message": "the run is over and its remaining events are not kept; GET /api/chat/{session_id} has its transcript"});
                    let _ = tx.send(frame("error", &gone)).await;
                }
                if ended || !held {
                    return;
                }
                let poll = service.inner.limits.poll_interval;
                tokio::select! {
                    _ = changed.changed() => {}
                    () = tokio::time::sleep(poll) => {}
                    () = tx.closed() => return,
                }
            }
        });
        reader
    }
}

/// Writes `batch` in one transaction, prunes the run's oldest events past
/// the bounds, and notifies the readers at commit.
async fn append(
    leases: &Arc<RunLeases>,
    t: String,
    s: String,
    batch: Vec<Relayed>,
    (events, bytes): (usize, usize),
) -> Result<(), LeaseError> {
    let Some(pg) = leases.shared() else { return Ok(()) };
    let seqs: Vec<i64> = batch.iter().map(|(id, ..)| i64::try_from(*id).unwrap_or(i64::MAX)).collect();
    let names: Vec<String> = batch.iter().map(|(_, n, _)| n.clone()).collect();
    let data: Vec<String> = batch.into_iter().map(|(.., d)| d).collect();
    pg.run(move |c| Box::pin(async move {
        let tx = c.transaction().await?;
        // A replica that lost the run may still be writing its last events:
        // an id already stored is the other's, and kept.
        tx.execute(
            "INSERT INTO lovia_run_events (tenant, session, seq, name, data)
             SELECT $1, $2, e.seq, e.name, e.data FROM UNNEST($3::bigint[], $4::text[], $5::text[]) AS e (seq, name, data)
             ON CONFLICT DO NOTHING",
            &[&t, &s, &seqs, &names, &data],
        ).await?;
        tx.execute(
            "DELETE FROM lovia_run_events e USING (
                 SELECT seq FROM (
                     SELECT seq, SUM(octet_length(name) + octet_length(data)) OVER (ORDER BY seq DESC) AS tail,
                            ROW_NUMBER() OVER (ORDER BY seq DESC) AS n
                       FROM lovia_run_events WHERE tenant = $1 AND session = $2) w
                  WHERE w.tail > $3 OR w.n > $4) old
              WHERE e.tenant = $1 AND e.session = $2 AND e.seq = old.seq",
            &[&t, &s, &(bytes as i64), &(events as i64)],
        ).await?;
        tx.execute("SELECT pg_notify($1, $2)", &[&EVENTS_CHANNEL, &""]).await?;
        tx.commit().await
    }))
    .await
}

/// The stored events from `from` on (at most [`READ_ROWS`]), and whether a
/// replica holds the run (its lease row exists, expired or not: an expired
/// one is about to be taken over).
#[allow(clippy::type_complexity)]
async fn read(
    leases: &Arc<RunLeases>,
    t: String,
    s: String,
    from: i64,
) -> Result<(Vec<(i64, String, String)>, bool), LeaseError> {
    let Some(pg) = leases.shared() else { return Ok((Vec::new(), false)) };
    pg.run(move |c| {
        Box::pin(async move {
            // The lease first: an event appended after this read of the lease
            // is read at the next wake-up, which the lease being held allows.
            let held = c
                .query_opt("SELECT 1 FROM lovia_run_leases WHERE tenant = $1 AND session = $2", &[&t, &s])
                .await?
                .is_some();
            let rows = c
                .query(
                    "SELECT seq, name, data FROM lovia_run_events WHERE tenant = $1 AND session = $2 AND seq >= $3
             ORDER BY seq LIMIT $4",
                    &[&t, &s, &from, &READ_ROWS],
                )
                .await?;
            let rows: Vec<(i64, String, String)> = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
            // A full page: more follow at once, whatever the lease says.
            let more = rows.len() as i64 == READ_ROWS;
            Ok((rows, held || more))
        })
    })
    .await
}

/// Deletes the events of runs no replica holds, a minute after their last
/// append (a reader that was following has read them by then).
pub(crate) async fn forget_old_events(leases: &RunLeases) -> Result<(), LeaseError> {
    let Some(pg) = leases.shared() else { return Ok(()) };
    pg.run(|c| {
        Box::pin(async move {
            c.execute(
                "DELETE FROM lovia_run_events e WHERE e.at < now() - interval '1 minute'
               AND NOT EXISTS (SELECT 1 FROM lovia_run_leases l WHERE l.tenant = e.tenant AND l.session = e.session)",
                &[],
            )
            .await
            .map(drop)
        })
    })
    .await
}
