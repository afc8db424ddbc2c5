//! `ackbench-broker`: the reference broker of the ackbench suite.
//!
//! A PostgreSQL-backed queue that speaks Queen MQ's HTTP wire and implements the full ack
//! contract of its log engine. The data flow, by module:
//!
//! - `server`: accepting connections, reading requests, dispatching them to `routes`;
//! - `http`: a leaf: the route table, the request and answer types, error answers;
//! - `routes`: one module per route family (push, pop, ack, lease, transaction, dlq, ...):
//!   parse the request, call a domain, write the answer; domain errors become answers there;
//! - domains, which know nothing of HTTP and answer their own error types: `ack` (the ack
//!   path and its accelerators), `pop` (hotlist, pop fusion, claims), `push` (push fusion and
//!   the report of committed segments);
//! - `storage`: the pool, the embedded schema migrations and procedure files of `sql/` (all SQL
//!   lives there), startup, `DbError` with the procedures' structured refusals, shared reads;
//!   `segment_cache`: decoded segments;
//! - `segment`: packing and unpacking the compressed frames of a segment;
//! - `peers`: what the brokers of one database tell each other (`LISTEN/NOTIFY`);
//! - `longpoll`: parked pops woken by pushes; `demand`: whether consumers wait for messages
//!   (the lanes' linger reads it); `retention`: the background purge;
//! - `config`, `metrics`, `app`: environment, counters, shared state.

pub mod ack;
pub mod app;
pub mod config;
pub mod counters;
pub mod crypto;
pub mod demand;
pub mod fasthash;
pub mod fusion;
pub mod http;
pub mod lanes;
pub mod longpoll;
pub mod metrics;
pub mod peers;
pub mod pop;
pub mod push;
pub mod queue_meta;
pub mod queues;
pub mod readiness;
pub mod retention;
pub mod routes;
pub mod segment;
pub mod segment_cache;
pub mod server;
pub mod storage;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use app::App;
pub use config::Config;

/// A running broker: its address, and the handle that stops it.
pub struct Broker {
    addr: SocketAddr,
    app: Arc<App>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Broker {
    /// Connects, applies the SQL of `sql/` (storage::migrations), binds the listener and starts
    /// serving.
    pub async fn start(config: Config) -> Result<Broker, String> {
        let timeline = Arc::new(storage::Timeline::default());
        let pool = storage::pool_watching(
            &config.database,
            config.pool_size,
            Some(Duration::from_millis(config.pool_timeout_ms)),
            timeline.clone(),
        )?;
        storage::startup::migrate(&config.database).await?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let app = App::start(config, pool, timeline);
        let (stop, stopped) = watch::channel(false);
        let mut tasks = vec![
            tokio::spawn(server::accept_loop(app.clone(), listener, stopped)),
            tokio::spawn(retention::run(app.clone())),
            tokio::spawn(accelerator_summaries(app.clone())),
        ];
        if let Some(outbox) = &app.ready.peers {
            if app.registry.is_some() {
                read_peer_key(&app, outbox).await;
            }
            let database = app.config.database.clone();
            tasks.push(tokio::spawn(peers::outbox::send_forever(
                outbox.clone(),
                database,
            )));
            tasks.push(tokio::spawn(peers::listener::listen_forever(app.clone())));
        }
        tracing::info!(%addr, pool = app.config.pool_size, "broker listening");
        Ok(Broker {
            addr,
            app,
            stop,
            tasks,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (loopback even when listening on all interfaces).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.addr.port())
    }

    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// Stops accepting, ends background tasks and closes the pool.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
        self.app.pool.close();
    }
}

/// The `ack-fusion` and `push-fusion` targets' `coalesce summary` and the `ack-registry`
/// target's hit/miss line, about every 10 s, for the interval just ended (silent when nothing
/// happened).
async fn accelerator_summaries(app: Arc<App>) {
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    tick.tick().await;
    let mut last = Totals::default();
    loop {
        tick.tick().await;
        let now = Totals::of(&app);
        summarise(&app, &last, &now);
        last = now;
    }
}

/// The accelerators' running totals the summaries difference.
#[derive(Default)]
struct Totals {
    ack: ack::stats::AckSnapshot,
    push_flushes: u64,
    push_frames: u64,
}

impl Totals {
    fn of(app: &App) -> Totals {
        use std::sync::atomic::Ordering::Relaxed;
        let push = app.push_fusion.as_ref().map(|f| &f.stats);
        Totals {
            ack: ack::stats::AckSnapshot::of(app.registry.as_ref(), app.fusion.as_ref()),
            push_flushes: push.map_or(0, |s| s.flushes.load(Relaxed)),
            push_frames: push.map_or(0, |s| s.frames_written.load(Relaxed)),
        }
    }
}

/// Logs what happened between `last` and `now`.
fn summarise(app: &App, last: &Totals, now: &Totals) {
    if let (Some(n), l) = (&now.ack.fusion, last.ack.fusion.unwrap_or_default()) {
        let (n, l) = (n.counts, l.counts);
        let (commits, rows) = (n.flushes - l.flushes, n.rows - l.rows);
        if commits > 0 {
            let per = rows as f64 / commits as f64;
            tracing::info!(target: "ack-fusion", commits, rows, rows_per_commit = format!("{per:.2}"), "coalesce summary");
        }
    }
    let commits = now.push_flushes - last.push_flushes;
    if app.push_fusion.is_some() && commits > 0 {
        let messages = now.push_frames - last.push_frames;
        let per = messages as f64 / commits as f64;
        tracing::info!(target: "push-fusion", commits, messages, messages_per_commit = format!("{per:.2}"), "coalesce summary");
    }
    if let (Some(n), l) = (&now.ack.registry, last.ack.registry.unwrap_or_default()) {
        let (hits, misses) = (
            n.counts.hits - l.counts.hits,
            n.counts.misses - l.counts.misses,
        );
        if hits + misses > 0 {
            let rate = hits as f64 / (hits + misses) as f64;
            let peer_waits = n.counts.peer_waits - l.counts.peer_waits;
            let peer_waits_met = n.counts.peer_waits_met - l.counts.peer_waits_met;
            tracing::info!(target: "ack-registry", hits, misses, hit_rate = format!("{rate:.3}"), entries = n.entries, peer_waits, peer_waits_met, "registry summary");
        }
    }
}

/// Reads the deployment's peer key (storing a candidate when none is stored yet), with which
/// the ack registry's deliveries to the other brokers are sealed. Without it (the database
/// failed) the brokers still notify each other; only the deliveries stay off.
async fn read_peer_key(app: &App, outbox: &peers::outbox::Outbox) {
    let stored = match app.db("peer key").await {
        Ok(db) => storage::procs::peers::peer_secret(&db, &peers::seal::PeerKey::candidate()).await,
        Err(e) => Err(e),
    };
    match stored.map(peers::seal::PeerKey::new) {
        Ok(Some(key)) => outbox.set_key(key),
        Ok(None) => {
            tracing::warn!(target: "peers", "the stored peer key is too short; deliveries to other brokers stay off")
        }
        Err(e) => {
            tracing::warn!(target: "peers", error = %e, "cannot read the peer key; deliveries to other brokers stay off")
        }
    }
}
