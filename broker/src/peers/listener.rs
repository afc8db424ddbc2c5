//! The receiving half of peer notifications: a dedicated connection `LISTEN`s on the channel,
//! and every notification from another broker is parsed strictly and its events fed into this
//! broker's readiness as the local events would be. The broker's own notifications come back
//! on the channel too and are ignored. Malformed ones are dropped and counted, never applied,
//! and so are deliveries whose seal does not verify (`seal`).
//!
//! After every (re)connection whatever was said meanwhile may have been missed, so every
//! candidate list reseeds and every parked pop looks again.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_postgres::{AsyncMessage, Connection, NoTls, Socket};

use super::message::{parse, Event};
use super::outbox::CHANNEL;
use super::stats::PeerStats;
use crate::app::App;
use crate::pop::hotlist::Release;

/// The listening connection's `application_name` (as `pg_stat_activity` shows it) when the
/// database configuration names none (else it keeps the broker's, so that whatever finds the
/// broker's sessions by name finds this one too).
pub const LISTENER_NAME: &str = "ackbench-peer-listener";

/// How long the listener waits before connecting again after a failure.
const RECONNECT_AFTER: Duration = Duration::from_secs(1);
/// How often the listening connection is checked to be alive (a silent drop would stop
/// notifications without any error).
const PING_EVERY: Duration = Duration::from_secs(5);

/// Listens until the broker stops, connecting again after any failure.
pub async fn listen_forever(app: Arc<App>) {
    loop {
        if let Err(e) = listen_on_one_connection(&app).await {
            tracing::warn!(target: "peers", error = %e, "peer notifications: listening connection failed; connecting again");
        }
        tokio::time::sleep(RECONNECT_AFTER).await;
    }
}

/// One connection's life: `LISTEN`, reseed, then apply notifications while pings answer.
async fn listen_on_one_connection(app: &Arc<App>) -> Result<(), String> {
    let mut database = app.config.database.clone();
    if database.get_application_name().is_none() {
        database.application_name(LISTENER_NAME);
    }
    let (client, connection) = database.connect(NoTls).await.map_err(|e| e.to_string())?;
    let mut feeder = AbortOnDrop(tokio::spawn(feed(app.clone(), connection)));
    let alive = async {
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .await
            .map_err(|e| e.to_string())?;
        PeerStats::add(&app.ready.peer_stats.listener_connects, 1);
        app.ready.reseed_all();
        loop {
            tokio::time::sleep(PING_EVERY).await;
            match tokio::time::timeout(PING_EVERY, client.simple_query("")).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e.to_string()),
                Err(_) => return Err("the listening connection stopped answering".to_string()),
            }
        }
    };
    tokio::select! {
        ended = &mut feeder.0 => match ended {
            Ok(Ok(())) => Err("the listening connection closed".to_string()),
            Ok(Err(e)) => Err(e),
            Err(e) => Err(e.to_string()),
        },
        failed = alive => failed,
    }
}

/// Ends the task it holds when dropped (also when the listener's own task is aborted at a
/// broker's shutdown), so the listening connection never outlives its listener.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Drives the connection, applying each notification as it arrives.
async fn feed(
    app: Arc<App>,
    mut connection: Connection<Socket, tokio_postgres::tls::NoTlsStream>,
) -> Result<(), String> {
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    while let Some(message) = messages.next().await {
        match message {
            Ok(AsyncMessage::Notification(n)) if n.channel() == CHANNEL => {
                receive(&app, n.payload())
            }
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// Parses one payload and applies it, unless it is this broker's own.
pub fn receive(app: &App, payload: &str) {
    let stats = &app.ready.peer_stats;
    let envelope = match parse(payload) {
        Ok(envelope) => envelope,
        Err(why) => {
            PeerStats::add(&stats.notifications_dropped, 1);
            tracing::debug!(target: "peers", %why, "peer notification dropped");
            return;
        }
    };
    let own = app.ready.peers.as_ref().map(|o| o.instance);
    if Some(envelope.from) == own {
        return;
    }
    if let Some(outbox) = &app.ready.peers {
        outbox.heard_peer();
    }
    PeerStats::add(&stats.notifications_received, 1);
    let n = envelope.events.len() as u64;
    // Leases first: a push that the sender's own pop claimed is then not listed here, so a
    // pop it wakes here parks again without going to PostgreSQL to find it taken. (Whatever the order, the lists end the same: a
    // leased partition is not poppable for its group until a release, which names its span.)
    let (leases, rest): (Vec<Event>, Vec<Event>) = envelope
        .events
        .into_iter()
        .partition(|e| matches!(e, Event::Leased { .. }));
    for event in leases.into_iter().chain(rest) {
        apply(app, event);
    }
    PeerStats::add(&stats.events_applied, n);
}

/// Feeds one peer's event into this broker's readiness as the local event would be (without
/// telling the peers again).
fn apply(app: &App, event: Event) {
    let ready = &app.ready;
    match event {
        Event::Pushed {
            tenant,
            queue,
            partition,
            pid,
            end,
            messages,
        } => {
            ready.list_pushed(tenant, &queue, pid, end);
            ready
                .long_poll
                .pushed(tenant, &queue, Some(&partition), messages as usize);
        }
        Event::Released {
            pid,
            group,
            completed,
            end,
            lease,
            committed,
        } => {
            if let (Some(registry), Some(lease)) = (&app.registry, &lease) {
                // Acked through another broker: the entry this broker's pop left is spent.
                registry.forget(pid, &group, lease);
            }
            let r = Release {
                completed,
                end,
                committed,
                lease: lease.as_deref(),
            };
            ready.released_by_peer(pid, &group, r)
        }
        Event::Leased {
            tenant,
            queue,
            pid,
            group,
            lease,
            end,
            lease_ms,
        } => {
            if let Some(hot) = &ready.hotlist {
                let key = (tenant, queue);
                let hold = Duration::from_millis(lease_ms);
                hot.leased_by_peer(&key, &group, pid, &lease, end, hold);
            }
        }
        delivered @ Event::Delivered { .. } => {
            let stats = &ready.peer_stats;
            if crate::ack::adopt_peer_delivery(app, &delivered) {
                PeerStats::add(&stats.deliveries_adopted, 1);
            } else if app.registry.is_some() {
                PeerStats::add(&stats.deliveries_refused, 1);
                tracing::debug!(target: "peers", "a delivery whose seal or hashes do not verify was dropped");
            }
        }
        Event::QueueDeleted { tenant, queue } => crate::queues::forget_hints(app, tenant, &queue),
        Event::QueueChanged { tenant, queue } => {
            app.queue_metas.forget(tenant, &queue);
            if let Some(hot) = &ready.hotlist {
                hot.invalidate(&(tenant, queue.clone()));
            }
            ready.long_poll.pushed(tenant, &queue, None, 1);
        }
        Event::Present => {}
    }
}
