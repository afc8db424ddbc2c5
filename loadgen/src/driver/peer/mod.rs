//! Peers: the queues a capacity planner would otherwise pick, driven on the same PostgreSQL as
//! the broker cells. PGMQ (a row per message, visibility timeouts) and PgQ (batches of events
//! between ticks) are installed into a cell's fresh database at run time and driven straight
//! over tokio-postgres, with no HTTP in between: that favours the peers, and the report says so.
//!
//! This module owns what every peer shares: the `Peer` interface a peer implements (install,
//! produce a batch, consume a batch, answer each message, its background work, what it
//! dead-lettered), the registry of peers (`PEERS`: adding a peer is a file implementing `Peer`
//! and a line there: it is then a cell of its name), what a scenario may ask of them (a
//! peer that cannot do what the scenario asks is refused at load time, never approximated), and
//! `PeerQueue`, one cell's queue as the workload calls it. `system` runs a peer as one of the
//! load generator's systems under test.

pub mod pgboss;
pub mod pgmq;
pub mod pgmq_installer;
pub mod pgq;
pub mod procrastinate;
pub mod system;
pub mod worker;

use tokio_postgres::Client;

use ackbench_reports::results::Promises;

use super::pending::Pending;

/// A queue driven over SQL on the measured PostgreSQL. Each call is one request of a worker
/// (a batch produced, a batch consumed, a batch answered): dispatched once per batch, never
/// per message.
pub trait Peer: Send + Sync {
    /// The name a scenario and the command line use.
    fn name(&self) -> &'static str;

    /// Why this peer cannot run what `asks` describes, if it cannot.
    fn refusal(&self, asks: &Asks) -> Option<String>;

    /// Whether the machine has what this peer needs; the error says what to install.
    fn check_parts<'a>(&'a self, admin: &'a Client) -> Pending<'a, Result<(), String>>;

    /// Installs the peer into a fresh database and creates the queue with its consumers
    /// subscribed (`setup.consumers`, one per consumer group).
    fn install<'a>(
        &'a self,
        url: &'a str,
        client: &'a Client,
        setup: &'a Setup<'a>,
    ) -> Pending<'a, Result<(), String>>;

    /// One producer's push of a batch.
    fn produce<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
        batch: &'a [Produced<'a>],
    ) -> Pending<'a, Result<(), String>>;

    /// Up to `batch` messages, or the next batch the peer hands out; empty when nothing is
    /// ready.
    fn consume<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
        batch: u32,
    ) -> Pending<'a, Result<Consumed, String>>;

    /// Answers every delivery of `consumed` (`answers[i]` for `deliveries[i]`, same length).
    fn answer<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
        consumed: &'a Consumed,
        answers: &'a [Answer],
    ) -> Pending<'a, Result<Answered, String>>;

    /// Whether the peer needs the load generator to run its background work (`tick`).
    fn needs_ticker(&self) -> bool {
        false
    }

    /// Background work the peer needs while it runs (with `maintain`, its slower maintenance
    /// too); only called when `needs_ticker`.
    fn tick<'a>(
        &'a self,
        _client: &'a Client,
        _queue: &'a PeerQueue,
        _maintain: bool,
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    /// The transactionIds the peer dead-lettered, for the audit (none where it keeps none).
    fn dead_lettered<'a>(
        &'a self,
        _client: &'a Client,
        _queue: &'a PeerQueue,
    ) -> Pending<'a, Result<Vec<String>, String>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Messages still in the queue (not completed, not dead-lettered).
    fn backlog<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
    ) -> Pending<'a, Result<i64, String>>;

    /// The transactionIds of the messages the queue still holds unfinished (waiting, or taken
    /// and not completed), read from its own tables when a drain timed out: the audit counts an
    /// unresolved message found there as still queued rather than undrained. `None` where the
    /// peer cannot list them.
    fn still_queued<'a>(
        &'a self,
        _client: &'a Client,
        _queue: &'a PeerQueue,
    ) -> Pending<'a, Result<Option<Vec<String>>, String>> {
        Box::pin(async { Ok(None) })
    }

    /// What the peer promises beyond at-least-once delivery, for the guarantee checks (a
    /// peer's queue is judged as one partition whose messages carry no lease).
    fn promises(&self) -> Promises;

    /// Readies one consumer's connection before its first pop (procrastinate registers a
    /// worker, as its own workers do on start).
    fn open_consumer<'a>(
        &'a self,
        _client: &'a Client,
        _queue: &'a mut PeerQueue,
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    /// Consumer workers per consumer group when the scenario asks for `consumers`.
    fn readers_per_group(&self, consumers: u32) -> u32 {
        consumers.max(1)
    }

    /// Brings a freshly prefilled backlog to the state a standing table of its size is in
    /// before the workers start: a job table filled in seconds has no planner statistics yet,
    /// which autovacuum's analyze gives a table that size long before anyone measures it (the
    /// job-table peers analyze their tables; the others need nothing).
    fn settle<'a>(
        &'a self,
        _client: &'a Client,
        _queue: &'a PeerQueue,
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    /// Messages a consumer asks for per pop in the drain, where nothing is measured (at least
    /// the scenario's pop batch).
    fn drain_batch(&self) -> u32 {
        crate::workload::plan::DRAIN_POP_BATCH
    }

    /// What the peer does instead of what the scenario asks, for the report's notes, given the
    /// scenario's pop batch and partitions; `None` where it does what is asked.
    fn instead(&self, _pop_batch: u32, _partitions: u32) -> Option<String> {
        None
    }
}

/// What a queue that hands out rows (or batches) without partition leases promises: no
/// per-partition order, no lease exclusivity or fencing; an answered delete or finished batch is
/// durable (the message is not handed out again).
pub const DURABLE_ACKS_ONLY: Promises = Promises {
    order: false,
    lease_exclusive: false,
    fencing: false,
    ack_durable: true,
};

/// Every peer, in the order the command line lists them; each is a cell of its name.
pub static PEERS: [&'static dyn Peer; 4] = [
    &pgmq::Pgmq,
    &pgq::Pgq,
    &procrastinate::Procrastinate,
    &pgboss::PgBoss,
];

/// A peer by its place in `PEERS` (what a scenario's cell holds: small, `Copy`, hashable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerId(u8);

impl PeerId {
    /// Every peer's id, in the registry's order.
    pub fn all() -> impl Iterator<Item = PeerId> {
        (0..PEERS.len() as u8).map(PeerId)
    }

    pub fn peer(self) -> &'static dyn Peer {
        PEERS[self.0 as usize]
    }
}

/// The peer named `name`.
pub fn named(name: &str) -> Result<&'static dyn Peer, String> {
    PEERS
        .iter()
        .copied()
        .find(|p| p.name() == name)
        .ok_or_else(|| format!("unknown peer `{name}`: the peers are {}", peer_names()))
}

/// The peers' names, for messages: `pgmq, pgq and procrastinate`.
fn peer_names() -> String {
    let names: Vec<&str> = PEERS.iter().map(|p| p.name()).collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The peers' names as a list: `pgmq, pgq, procrastinate`.
pub fn listed() -> String {
    let names: Vec<&str> = PEERS.iter().map(|p| p.name()).collect();
    names.join(", ")
}

impl std::fmt::Debug for dyn Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq for dyn Peer {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

/// What a scenario asks of a queue, in the terms a peer can be judged by.
#[derive(Debug, Clone, Default)]
pub struct Asks {
    /// Consumer groups, each receiving every message (1 for queue mode or a single group).
    pub consumer_groups: usize,
    /// Consumers holding a batch past its lease on purpose (lease-expiry stalls).
    pub lease_stalls: bool,
    /// Some answers are `dlq`.
    pub dead_letters: bool,
    /// Some answers are `failed` (a retry budget then a dead letter).
    pub failures: bool,
    /// Pops name a partition (ordering within a partition).
    pub named_partitions: bool,
}

/// How a peer's queue is set up in a cell's database.
pub struct Setup<'a> {
    pub queue: &'a str,
    /// The consumer names, one per consumer group, the first the queue mode's (PgQ subscribes
    /// each; PGMQ has none).
    pub consumers: &'a [String],
    /// Messages per consumed batch: PGMQ's `read` quantity; PgQ's events per tick.
    pub batch: u32,
    /// Redeliveries a `failed` message gets before it is dead-lettered (pg-boss's queue
    /// `retryLimit`).
    pub retry_limit: u32,
    /// Seconds a delivery is held before the peer may hand it out again (pg-boss's
    /// `expireInSeconds`).
    pub lease_secs: u32,
}

/// One message as produced: its transactionId (for the audit), its JSON payload and the
/// scenario's partition it was written to (procrastinate's `lock`; the other peers have no
/// partitions).
pub struct Produced<'a> {
    pub transaction_id: &'a str,
    pub payload_json: &'a str,
    pub partition: &'a str,
}

/// One consumed message.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// PGMQ's `msg_id`, PgQ's `ev_id`.
    pub handle: i64,
    pub transaction_id: String,
    pub payload_json: String,
    /// 1 on the first delivery.
    pub attempt: i32,
    /// The partition it was produced to, where the peer keeps one (procrastinate's `lock`).
    pub partition: Option<String>,
    /// The job's id where the peer names jobs by UUID (pg-boss; `handle` is then 0).
    pub job: Option<uuid::Uuid>,
}

impl Delivery {
    /// A delivery from a row of (handle, attempt, transactionId, payload), the order both
    /// peers' consume statements select them in.
    fn from_row(r: &tokio_postgres::Row) -> Delivery {
        Delivery {
            handle: r.get(0),
            attempt: r.get(1),
            transaction_id: r.get::<_, Option<String>>(2).unwrap_or_default(),
            payload_json: r.get::<_, Option<String>>(3).unwrap_or_default(),
            partition: None,
            job: None,
        }
    }
}

/// A consumed batch.
#[derive(Debug, Default)]
pub struct Consumed {
    /// The batch the peer keeps open until it is answered, even empty (PgQ's); `None` where
    /// the peer hands out loose messages.
    pub open_batch: Option<i64>,
    pub deliveries: Vec<Delivery>,
}

/// How a consumer answers one message (the broker's ack statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Completed,
    /// Processing failed: redeliver until the retry budget is spent, then dead-letter.
    Failed,
    /// Redeliver, not counted against the budget where the peer can tell.
    Retry,
    Dlq,
}

impl Answer {
    /// The answer of a broker's ack status (`failed` for any other).
    pub fn of(status: &str) -> Answer {
        match status {
            "completed" => Answer::Completed,
            "retry" => Answer::Retry,
            "dlq" => Answer::Dlq,
            _ => Answer::Failed,
        }
    }

    /// The broker's ack status of the same meaning (`completed`, `failed`, `retry`, `dlq`).
    pub fn status(self) -> &'static str {
        match self {
            Answer::Completed => "completed",
            Answer::Failed => "failed",
            Answer::Retry => "retry",
            Answer::Dlq => "dlq",
        }
    }
}

/// What answering a batch did, message by message, for the audit.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Answered {
    pub completed: Vec<String>,
    pub redelivering: Vec<String>,
    pub dead_lettered: Vec<String>,
}

/// One cell's peer queue, as the workload calls it.
#[derive(Debug, Clone)]
pub struct PeerQueue {
    pub peer: &'static dyn Peer,
    pub queue: String,
    /// The consumer name this worker reads as (its consumer group's).
    pub consumer: String,
    /// Seconds a PGMQ read hides a message (its lease).
    pub visibility_secs: i32,
    /// Deliveries after which `failed` dead-letters.
    pub retry_budget: i32,
    /// The worker this consumer registered as, where the peer registers workers
    /// (procrastinate).
    pub worker_id: Option<i64>,
}

impl PeerQueue {
    pub async fn produce(&self, client: &Client, batch: &[Produced<'_>]) -> Result<(), String> {
        self.peer.produce(client, self, batch).await
    }

    /// Up to `batch` messages (PGMQ); the next batch between ticks (PgQ: `batch` is set at
    /// install as the events per tick). Empty when nothing is ready.
    pub async fn consume(&self, client: &Client, batch: u32) -> Result<Consumed, String> {
        self.peer.consume(client, self, batch).await
    }

    /// Answers every delivery of `consumed` (`answers[i]` for `deliveries[i]`).
    pub async fn answer(
        &self,
        client: &Client,
        consumed: &Consumed,
        answers: &[Answer],
    ) -> Result<Answered, String> {
        if answers.len() != consumed.deliveries.len() {
            return Err(format!(
                "{} answers for {} deliveries",
                answers.len(),
                consumed.deliveries.len()
            ));
        }
        self.peer.answer(client, self, consumed, answers).await
    }

    /// Background work the peer needs while it runs (PgQ's ticker; with `maintain`, its
    /// retry maintenance too).
    pub async fn tick(&self, client: &Client, maintain: bool) -> Result<(), String> {
        self.peer.tick(client, self, maintain).await
    }

    /// The transactionIds the peer dead-lettered (PGMQ's archive; PgQ has none), for the audit.
    pub async fn dead_lettered(&self, client: &Client) -> Result<Vec<String>, String> {
        self.peer.dead_lettered(client, self).await
    }

    /// Messages still in the queue (not completed, not dead-lettered), for the drain.
    pub async fn backlog(&self, client: &Client) -> Result<i64, String> {
        self.peer.backlog(client, self).await
    }

    /// The transactionIds the queue still holds unfinished, where the peer can list them.
    pub async fn still_queued(&self, client: &Client) -> Result<Option<Vec<String>>, String> {
        self.peer.still_queued(client, self).await
    }
}

/// The deliveries' transactionIds where `answers` says `which`.
fn ids_where<'a>(consumed: &'a Consumed, answers: &[Answer], which: Answer) -> Vec<&'a Delivery> {
    consumed
        .deliveries
        .iter()
        .zip(answers)
        .filter(|(_, a)| **a == which)
        .map(|(d, _)| d)
        .collect()
}

/// The transactionIds one query's first column names (rows with none are skipped); `what`
/// names the query in an error.
async fn txn_column(
    client: &tokio_postgres::Client,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    what: &str,
) -> Result<Vec<String>, String> {
    let rows = client.query(sql, params).await.map_err(db(what))?;
    Ok(rows
        .iter()
        .filter_map(|r| r.get::<_, Option<String>>(0))
        .collect())
}

fn db(context: &str) -> impl Fn(tokio_postgres::Error) -> String + '_ {
    move |e| match e.as_db_error() {
        Some(d) => format!("{context}: {}", d.message()),
        None => format!("{context}: {e}"),
    }
}

#[cfg(test)]
mod tests;
