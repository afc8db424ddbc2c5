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
//! - `storage`: the pool, the embedded migrations of `sql/` (all SQL lives there), startup,
//!   `DbError` with the procedures' structured refusals, shared reads; `segment_cache`: decoded
//!   segments;
//! - `segment`: packing and unpacking the compressed frames of a segment;
//! - `longpoll`: parked pops woken by pushes; `retention`: the background purge;
//! - `config`, `metrics`, `app`: environment, counters, shared state.

pub mod ack;
pub mod app;
pub mod config;
pub mod http;
pub mod longpoll;
pub mod metrics;
pub mod pop;
pub mod push;
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
    /// Connects, applies the migrations, binds the listener and starts serving.
    pub async fn start(config: Config) -> Result<Broker, String> {
        let pool = storage::pool(&config.database, config.pool_size)?;
        storage::startup::migrate(&config.database).await?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let app = App::start(config, pool);
        let (stop, stopped) = watch::channel(false);
        let tasks = vec![
            tokio::spawn(server::accept_loop(app.clone(), listener, stopped)),
            tokio::spawn(retention::run(app.clone())),
            tokio::spawn(accelerator_summaries(app.clone())),
        ];
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
    use std::sync::atomic::Ordering::Relaxed;
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    tick.tick().await;
    let (mut flushes, mut rows, mut hits, mut misses) = (0u64, 0u64, 0u64, 0u64);
    let (mut push_flushes, mut push_frames) = (0u64, 0u64);
    loop {
        tick.tick().await;
        if let Some(f) = &app.fusion {
            let (nf, nr) = (f.stats.flushes.load(Relaxed), f.stats.rows.load(Relaxed));
            let (commits, r) = (nf - flushes, nr - rows);
            if commits > 0 {
                let per = r as f64 / commits as f64;
                tracing::info!(target: "ack-fusion", commits, rows = r, rows_per_commit = format!("{per:.2}"), "coalesce summary");
            }
            (flushes, rows) = (nf, nr);
        }
        if let Some(f) = &app.push_fusion {
            let nf = f.stats.flushes.load(Relaxed);
            let nm = f.stats.frames_written.load(Relaxed);
            let (commits, messages) = (nf - push_flushes, nm - push_frames);
            if commits > 0 {
                let per = messages as f64 / commits as f64;
                tracing::info!(target: "push-fusion", commits, messages, messages_per_commit = format!("{per:.2}"), "coalesce summary");
            }
            (push_flushes, push_frames) = (nf, nm);
        }
        if let Some(reg) = &app.registry {
            let (nh, nm) = (reg.hits.load(Relaxed), reg.misses.load(Relaxed));
            let (h, m) = (nh - hits, nm - misses);
            if h + m > 0 {
                let rate = h as f64 / (h + m) as f64;
                tracing::info!(target: "ack-registry", hits = h, misses = m, hit_rate = format!("{rate:.3}"), entries = reg.entries(), "registry summary");
            }
            (hits, misses) = (nh, nm);
        }
    }
}
