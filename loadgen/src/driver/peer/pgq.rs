//! PgQ (Skytools' batch-cursor queue, Debian's `postgresql-15-pgq3`): events are grouped into
//! batches by ticks, and a consumer takes the batch between its last tick and the next one.
//! The load generator is the ticker (as `pgqd` would be): every 100 ms it calls
//! `pgq.ticker(queue)`, which ticks once `batch` events have arrived or 100 ms have passed, and
//! once a second `pgq.maint_retry_events()` moves retried events back. Mapping: a pop is `next_batch` + `get_batch_events`; the ack is
//! `finish_batch`; `retry` and `failed` are `event_retry` (PgQ keeps no retry budget of its
//! own; `failed` past the budget is refused, since PgQ has no dead-letter queue). The hot
//! statements go with their parameter types in one round trip each, as PgMQ's do.

use tokio_postgres::types::Type;
use tokio_postgres::Client;

use super::DURABLE_ACKS_ONLY;
use super::{
    db, ids_where, Answer, Answered, Asks, Consumed, Delivery, Peer, PeerQueue, Produced, Setup,
};
use crate::driver::pending::Pending;
use ackbench_reports::results::Promises;

/// How long a tick may lag behind the first event waiting for it.
const TICK_MAX_LAG: &str = "100 milliseconds";

/// PgQ has no leases (a batch is the consumer's until it finishes it), no dead-letter queue,
/// and one reader per consumer name (cooperative consumers are a separate extension).
pub fn refusal(asks: &Asks) -> Option<String> {
    if asks.lease_stalls {
        return Some(
            "pgq has no leases: a stalled batch is never handed to another consumer".into(),
        );
    }
    if asks.dead_letters || asks.failures {
        return Some(
            "pgq has no dead-letter queue (no `dlq`, no `failed` past a retry budget)".into(),
        );
    }
    if asks.named_partitions {
        return Some("pgq has no partitions to pop by name".into());
    }
    None
}

/// Whether the server can `CREATE EXTENSION pgq`.
pub async fn check_parts(admin: &Client) -> Result<(), String> {
    let major: String = admin
        .query_one("SELECT current_setting('server_version_num')", &[])
        .await
        .map_err(db("server_version_num"))?
        .get(0);
    let major = major.get(..2).unwrap_or("15").to_string();
    let available = admin
        .query_opt(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'pgq'",
            &[],
        )
        .await
        .map_err(db("pg_available_extensions"))?;
    match available {
        Some(_) => Ok(()),
        None => Err(format!(
            "the pgq peer needs PgQ on the PostgreSQL server: apt-get install -y \
             postgresql-{major}-pgq3"
        )),
    }
}

/// Creates the extension, the queue (ticking every `batch` events) and its consumers.
pub async fn install(client: &Client, setup: &Setup<'_>) -> Result<(), String> {
    client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pgq")
        .await
        .map_err(db("CREATE EXTENSION pgq"))?;
    let queue = setup.queue;
    client
        .execute("SELECT pgq.create_queue($1)", &[&queue])
        .await
        .map_err(db("pgq.create_queue"))?;
    for (param, value) in [
        ("ticker_max_count", setup.batch.max(1).to_string()),
        ("ticker_max_lag", TICK_MAX_LAG.to_string()),
        ("ticker_idle_period", "1 second".to_string()),
    ] {
        client
            .execute(
                "SELECT pgq.set_queue_config($1, $2, $3)",
                &[&queue, &param, &value],
            )
            .await
            .map_err(db("pgq.set_queue_config"))?;
    }
    for consumer in setup.consumers {
        register(client, queue, consumer).await?;
    }
    Ok(())
}

/// Subscribes another consumer (a consumer group of its own: it receives every event).
pub async fn register(client: &Client, queue: &str, consumer: &str) -> Result<(), String> {
    client
        .execute("SELECT pgq.register_consumer($1, $2)", &[&queue, &consumer])
        .await
        .map_err(db("pgq.register_consumer"))?;
    Ok(())
}

/// One statement inserting every event: `ev_data` is the payload, `ev_extra1` the
/// transactionId.
pub async fn produce(client: &Client, queue: &str, batch: &[Produced<'_>]) -> Result<(), String> {
    let txns: Vec<&str> = batch.iter().map(|m| m.transaction_id).collect();
    let payloads: Vec<&str> = batch.iter().map(|m| m.payload_json).collect();
    client
        .execute_typed(
            "SELECT count(pgq.insert_event($1, 'm', d, t, NULL, NULL, NULL)) \
             FROM unnest($2::text[], $3::text[]) AS u(t, d)",
            &[
                (&queue, Type::TEXT),
                (&txns, Type::TEXT_ARRAY),
                (&payloads, Type::TEXT_ARRAY),
            ],
        )
        .await
        .map_err(db("pgq.insert_event"))?;
    Ok(())
}

pub async fn consume(client: &Client, queue: &str, consumer: &str) -> Result<Consumed, String> {
    let batch: Option<i64> = client
        .query_typed(
            "SELECT pgq.next_batch($1, $2)",
            &[(&queue, Type::TEXT), (&consumer, Type::TEXT)],
        )
        .await
        .map_err(db("pgq.next_batch"))?
        .first()
        .and_then(|row| row.get(0));
    let Some(batch) = batch else {
        return Ok(Consumed::default());
    };
    let rows = client
        .query_typed(
            "SELECT ev_id, coalesce(ev_retry, 0) + 1, ev_extra1, ev_data \
             FROM pgq.get_batch_events($1)",
            &[(&batch, Type::INT8)],
        )
        .await
        .map_err(db("pgq.get_batch_events"))?;
    Ok(Consumed {
        open_batch: Some(batch),
        deliveries: rows.iter().map(Delivery::from_row).collect(),
    })
}

/// Retries what asks for it, then finishes the batch (the ack of everything else).
pub async fn answer(
    client: &Client,
    consumed: &Consumed,
    answers: &[Answer],
) -> Result<Answered, String> {
    let Some(batch) = consumed.open_batch else {
        return Ok(Answered::default());
    };
    if answers.contains(&Answer::Dlq) {
        return Err("pgq has no dead-letter queue; the scenario should have been refused".into());
    }
    let mut again = ids_where(consumed, answers, Answer::Retry);
    again.extend(ids_where(consumed, answers, Answer::Failed));
    if !again.is_empty() {
        let ids: Vec<i64> = again.iter().map(|d| d.handle).collect();
        client
            .execute(
                "SELECT count(pgq.event_retry($1, e, 0)) FROM unnest($2::bigint[]) AS e",
                &[&batch, &ids],
            )
            .await
            .map_err(db("pgq.event_retry"))?;
    }
    client
        .execute_typed("SELECT pgq.finish_batch($1)", &[(&batch, Type::INT8)])
        .await
        .map_err(db("pgq.finish_batch"))?;
    let completed = ids_where(consumed, answers, Answer::Completed);
    Ok(Answered {
        completed: completed.iter().map(|d| d.transaction_id.clone()).collect(),
        redelivering: again.iter().map(|d| d.transaction_id.clone()).collect(),
        dead_lettered: Vec::new(),
    })
}

/// What `pgqd` would do: tick the queue when due, and (with `maintain`) put retried events
/// back into it.
pub async fn tick(client: &Client, queue: &str, maintain: bool) -> Result<(), String> {
    client
        .execute_typed("SELECT pgq.ticker($1)", &[(&queue, Type::TEXT)])
        .await
        .map_err(db("pgq.ticker"))?;
    if maintain {
        client
            .execute("SELECT pgq.maint_retry_events()", &[])
            .await
            .map_err(db("pgq.maint_retry_events"))?;
    }
    Ok(())
}

/// Events the consumer has not finished: those up to the last tick it has not taken, those
/// not yet ticked, and those waiting to be retried.
pub async fn backlog(client: &Client, queue: &str, consumer: &str) -> Result<i64, String> {
    let row = client
        .query_one(
            "SELECT coalesce(c.pending_events, 0) + coalesce(q.ev_new, 0) \
                    + (SELECT count(*) FROM pgq.retry_queue) \
             FROM pgq.get_consumer_info($1, $2) c, pgq.get_queue_info($1) q",
            &[&queue, &consumer],
        )
        .await
        .map_err(db("pgq backlog"))?;
    Ok(row.get(0))
}

/// PgQ as a peer: the load generator is its ticker, and one reader per consumer name.
pub struct Pgq;

impl Peer for Pgq {
    fn name(&self) -> &'static str {
        "pgq"
    }

    fn refusal(&self, asks: &Asks) -> Option<String> {
        refusal(asks)
    }

    /// One reader per consumer; a finished batch is not handed out again; events come in no
    /// promised order (a retried event returns in a later batch).
    fn promises(&self) -> Promises {
        DURABLE_ACKS_ONLY
    }

    fn check_parts<'a>(&'a self, admin: &'a Client) -> Pending<'a, Result<(), String>> {
        Box::pin(check_parts(admin))
    }

    fn install<'a>(
        &'a self,
        _url: &'a str,
        client: &'a Client,
        setup: &'a Setup<'a>,
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(install(client, setup))
    }

    fn produce<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
        batch: &'a [Produced<'a>],
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(produce(client, &queue.queue, batch))
    }

    /// The batch size was set at install as the events per tick.
    fn consume<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
        _batch: u32,
    ) -> Pending<'a, Result<Consumed, String>> {
        Box::pin(consume(client, &queue.queue, &queue.consumer))
    }

    fn answer<'a>(
        &'a self,
        client: &'a Client,
        _queue: &'a PeerQueue,
        consumed: &'a Consumed,
        answers: &'a [Answer],
    ) -> Pending<'a, Result<Answered, String>> {
        Box::pin(answer(client, consumed, answers))
    }

    fn needs_ticker(&self) -> bool {
        true
    }

    fn tick<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
        maintain: bool,
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(tick(client, &queue.queue, maintain))
    }

    fn backlog<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
    ) -> Pending<'a, Result<i64, String>> {
        Box::pin(backlog(client, &queue.queue, &queue.consumer))
    }

    /// PgQ hands a batch to one reader per consumer name.
    fn readers_per_group(&self, _consumers: u32) -> u32 {
        1
    }
}
