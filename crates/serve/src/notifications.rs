//! What other replicas changed, heard at once: with a PostgreSQL store a
//! task keeps one connection of its own that `LISTEN`s for uploads
//! ([`stored::CHANNEL`](super::stored::CHANNEL)), for runs handed back and
//! orders ([`lease::RUNS_CHANNEL`](super::lease::RUNS_CHANNEL)) and for
//! relayed run events ([`relay::EVENTS_CHANNEL`](super::relay::EVENTS_CHANNEL)).
//! A notification only says where to look: the rows stay the truth, and a
//! poll every `poll_interval_ms` catches one lost while the connection was
//! down.

use lovia_runner::{PgPool, pg_message};
use std::sync::Weak;
use std::time::Duration;
use tokio::sync::Notify;

/// Starts the task that `LISTEN`s on `pool`'s database: an upload, a run
/// handed back or an order wakes `wake`; new run events bump `events` for
/// the remote readers. It wakes `wake` at least every `poll`, and connects
/// again at the next poll when the connection drops. It ends when `wake` is
/// dropped.
pub(crate) fn watch(
    pool: &PgPool,
    poll: Duration,
    wake: Weak<Notify>,
    (uploads_channel, runs_channel, events_channel): (&'static str, &'static str, &'static str),
    events: Weak<tokio::sync::watch::Sender<u64>>,
) {
    let config = pool.config().clone();
    let location = pool.location().to_owned();
    let bump = move || {
        if let Some(events) = events.upgrade() {
            events.send_modify(|n| *n = n.wrapping_add(1));
        }
    };
    tokio::spawn(async move {
        let listen = format!("LISTEN {uploads_channel}; LISTEN {runs_channel}; LISTEN {events_channel}");
        let mut listener: Option<(tokio_postgres::Client, tokio::task::JoinHandle<()>)> = None;
        let mut ticks = tokio::time::interval(poll);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(woken) = wake.upgrade() else { return };
            if listener.as_ref().is_none_or(|(client, task)| client.is_closed() || task.is_finished()) {
                let heard = {
                    let (wake, bump) = (wake.clone(), bump.clone());
                    move |channel: &str| {
                        // New run events wake their remote readers only;
                        // the poll still comes on time.
                        if channel == events_channel {
                            bump();
                        } else if let Some(wake) = wake.upgrade() {
                            wake.notify_one();
                        }
                    }
                };
                listener = match listen_on(&config, &listen, heard).await {
                    Ok(listening) => Some(listening),
                    Err(e) => {
                        tracing::warn!(store = %location, error = %pg_message(&e), "cannot LISTEN for other replicas' changes; polling");
                        None
                    }
                };
                // Whatever was notified while the connection was down is
                // read by this wake-up's poll.
                bump();
            }
            woken.notify_one();
        }
    });
}

/// A connection of its own (a pooled one would carry its `LISTEN` to other
/// work) that runs `listen` and calls `heard` with the channel of each
/// notification, on a task that ends when the connection does.
async fn listen_on(
    config: &tokio_postgres::Config,
    listen: &str,
    heard: impl Fn(&str) + Send + 'static,
) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(tokio_postgres::NoTls).await?;
    let task = tokio::spawn(async move {
        while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            match message {
                Ok(tokio_postgres::AsyncMessage::Notification(n)) => heard(n.channel()),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %pg_message(&e), "the connection that listens for other replicas' changes failed");
                    return;
                }
            }
        }
    });
    client.batch_execute(listen).await?;
    Ok((client, task))
}
