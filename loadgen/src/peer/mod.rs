//! Peers: the queues a capacity planner would otherwise pick, driven on the same PostgreSQL as
//! the broker cells. PGMQ (a row per message, visibility timeouts) and PgQ (batches of events
//! between ticks) are installed into a cell's fresh database at run time and driven straight
//! over tokio-postgres, with no HTTP in between: that favours the peers, and the report says so.
//!
//! This module owns what every peer shares: which peers exist, what a scenario may ask of them
//! (a peer that cannot do what the scenario asks is refused at load time, never approximated),
//! what is missing on the machine, and the one driver interface the workload calls: produce a
//! batch, consume a batch, answer each message.

pub mod pgmq;
pub mod pgq;

use tokio_postgres::Client;

/// A peer queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerKind {
    Pgmq,
    Pgq,
}

impl PeerKind {
    pub const ALL: [PeerKind; 2] = [PeerKind::Pgmq, PeerKind::Pgq];

    /// The name a scenario and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            PeerKind::Pgmq => "pgmq",
            PeerKind::Pgq => "pgq",
        }
    }

    pub fn parse(name: &str) -> Result<PeerKind, String> {
        PeerKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| format!("unknown peer `{name}`: the peers are pgmq and pgq"))
    }

    /// Why this peer cannot run what `asks` describes, if it cannot.
    pub fn refusal(self, asks: &Asks) -> Option<String> {
        match self {
            PeerKind::Pgmq => pgmq::refusal(asks),
            PeerKind::Pgq => pgq::refusal(asks),
        }
    }

    /// Whether the machine has what this peer needs; the error says what to install.
    pub async fn check_parts(self, admin: &Client) -> Result<(), String> {
        match self {
            // PGMQ's SQL is embedded in the `pgmq` crate this binary links.
            PeerKind::Pgmq => Ok(()),
            PeerKind::Pgq => pgq::check_parts(admin).await,
        }
    }

    /// Installs the peer into a fresh database and creates `queue` with `consumer` subscribed.
    pub async fn install(
        self,
        url: &str,
        client: &Client,
        setup: &Setup<'_>,
    ) -> Result<(), String> {
        match self {
            PeerKind::Pgmq => pgmq::install(url, client, setup).await,
            PeerKind::Pgq => pgq::install(client, setup).await,
        }
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
    /// PgQ's consumer name (PGMQ has none).
    pub consumer: &'a str,
    /// Messages per consumed batch: PGMQ's `read` quantity; PgQ's events per tick.
    pub batch: u32,
}

/// One message as produced: its transactionId (for the audit) and its JSON payload.
pub struct Produced<'a> {
    pub transaction_id: &'a str,
    pub payload_json: &'a str,
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
        }
    }
}

/// A consumed batch; PgQ's stays open until it is answered.
#[derive(Debug, Default)]
pub struct Consumed {
    pub pgq_batch: Option<i64>,
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

/// What answering a batch did, message by message, for the audit.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Answered {
    pub completed: Vec<String>,
    pub redelivering: Vec<String>,
    pub dead_lettered: Vec<String>,
}

/// The driver the workload calls for one peer queue.
#[derive(Debug, Clone)]
pub struct Driver {
    pub kind: PeerKind,
    pub queue: String,
    pub consumer: String,
    /// Seconds a PGMQ read hides a message (its lease).
    pub visibility_secs: i32,
    /// Deliveries after which `failed` dead-letters.
    pub retry_budget: i32,
}

impl Driver {
    pub async fn produce(&self, client: &Client, batch: &[Produced<'_>]) -> Result<(), String> {
        match self.kind {
            PeerKind::Pgmq => pgmq::produce(client, &self.queue, batch).await,
            PeerKind::Pgq => pgq::produce(client, &self.queue, batch).await,
        }
    }

    /// Up to `batch` messages (PGMQ); the next batch between ticks (PgQ: `batch` is set at
    /// install as the events per tick). Empty when nothing is ready.
    pub async fn consume(&self, client: &Client, batch: u32) -> Result<Consumed, String> {
        match self.kind {
            PeerKind::Pgmq => pgmq::consume(client, &self.queue, self.visibility_secs, batch).await,
            PeerKind::Pgq => pgq::consume(client, &self.queue, &self.consumer).await,
        }
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
        match self.kind {
            PeerKind::Pgmq => pgmq::answer(client, self, consumed, answers).await,
            PeerKind::Pgq => pgq::answer(client, consumed, answers).await,
        }
    }

    /// Background work the peer needs while it runs (PgQ's ticker; with `maintain`, its
    /// retry maintenance too); a no-op for PGMQ.
    pub async fn tick(&self, client: &Client, maintain: bool) -> Result<(), String> {
        match self.kind {
            PeerKind::Pgmq => Ok(()),
            PeerKind::Pgq => pgq::tick(client, &self.queue, maintain).await,
        }
    }

    /// The transactionIds the peer dead-lettered (PGMQ's archive; PgQ has none), for the audit.
    pub async fn dead_lettered(&self, client: &Client) -> Result<Vec<String>, String> {
        match self.kind {
            PeerKind::Pgmq => pgmq::archived(client, &self.queue).await,
            PeerKind::Pgq => Ok(Vec::new()),
        }
    }

    /// Messages still in the queue (not completed, not dead-lettered), for the drain.
    pub async fn backlog(&self, client: &Client) -> Result<i64, String> {
        match self.kind {
            PeerKind::Pgmq => pgmq::backlog(client, &self.queue).await,
            PeerKind::Pgq => pgq::backlog(client, &self.queue, &self.consumer).await,
        }
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

fn db(context: &str) -> impl Fn(tokio_postgres::Error) -> String + '_ {
    move |e| match e.as_db_error() {
        Some(d) => format!("{context}: {}", d.message()),
        None => format!("{context}: {e}"),
    }
}

#[cfg(test)]
mod tests;
