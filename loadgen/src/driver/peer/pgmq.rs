//! PGMQ (a row per message; a read hides a message for a visibility timeout, its lease).
//! Installed from the SQL the `pgmq` crate embeds, at run time, by the crate's own installer
//! (`pgmq_installer`): PGMQ's SQL never enters this repository. Mapping: a pop is
//! `read(queue, vt, qty)`; `completed` is `delete(ids[])`; `retry` is `set_vt(ids[], 0)`;
//! `failed` redelivers the same way until `read_ct` reaches the retry budget, then `archive`s;
//! `dlq` is `archive(ids[])`. Each is one statement in its own
//! transaction, as PGMQ's users issue them, sent with its parameter types in one round trip (an
//! unprepared statement would cost a separate prepare: a round trip and an empty transaction
//! that doubled the commits counted per message).

use tokio_postgres::types::Type;
use tokio_postgres::Client;

use super::DURABLE_ACKS_ONLY;
use super::{
    db, ids_where, txn_column, Answer, Answered, Asks, Consumed, Delivery, Peer, PeerQueue,
    Produced, Setup,
};
use crate::driver::pending::Pending;
use ackbench_reports::results::Promises;

/// PGMQ has one reader set per queue: consumer groups would need a queue per group.
pub fn refusal(asks: &Asks) -> Option<String> {
    if asks.consumer_groups > 1 {
        return Some(
            "pgmq has no consumer groups (each group would need its own copy of the queue)".into(),
        );
    }
    if asks.named_partitions {
        return Some("pgmq has no partitions to pop by name".into());
    }
    None
}

/// Installs PGMQ's SQL into the database at `url` (`pgmq_installer`) and creates the queue.
pub async fn install(url: &str, client: &Client, setup: &Setup<'_>) -> Result<(), String> {
    super::pgmq_installer::install(url).await?;
    client
        .execute("SELECT pgmq.create($1)", &[&setup.queue])
        .await
        .map_err(db("pgmq.create"))?;
    Ok(())
}

/// One `send_batch`: each message is `{"txn": id, "data": payload}`.
pub async fn produce(client: &Client, queue: &str, batch: &[Produced<'_>]) -> Result<(), String> {
    let messages: Vec<String> = batch
        .iter()
        .map(|m| {
            let txn = serde_json::to_string(m.transaction_id).expect("a string serializes");
            format!(r#"{{"txn":{txn},"data":{}}}"#, m.payload_json)
        })
        .collect();
    client
        .execute_typed(
            "SELECT count(*) FROM pgmq.send_batch($1, $2::text[]::jsonb[])",
            &[(&queue, Type::TEXT), (&messages, Type::TEXT_ARRAY)],
        )
        .await
        .map_err(db("pgmq.send_batch"))?;
    Ok(())
}

pub async fn consume(
    client: &Client,
    queue: &str,
    visibility_secs: i32,
    batch: u32,
) -> Result<Consumed, String> {
    let rows = client
        .query_typed(
            "SELECT msg_id, read_ct, message->>'txn', (message->'data')::text \
             FROM pgmq.read($1, $2, $3)",
            &[
                (&queue, Type::TEXT),
                (&visibility_secs, Type::INT4),
                (&(batch as i32), Type::INT4),
            ],
        )
        .await
        .map_err(db("pgmq.read"))?;
    Ok(Consumed {
        open_batch: None,
        deliveries: rows.iter().map(Delivery::from_row).collect(),
    })
}

pub async fn answer(
    client: &Client,
    driver: &PeerQueue,
    consumed: &Consumed,
    answers: &[Answer],
) -> Result<Answered, String> {
    let mut done = Answered::default();
    let completed = ids_where(consumed, answers, Answer::Completed);
    let (spent, again): (Vec<&Delivery>, Vec<&Delivery>) =
        ids_where(consumed, answers, Answer::Failed)
            .into_iter()
            .partition(|d| d.attempt >= driver.retry_budget);
    let mut redeliver = ids_where(consumed, answers, Answer::Retry);
    redeliver.extend(again);
    let mut dead = ids_where(consumed, answers, Answer::Dlq);
    dead.extend(spent);
    let q = driver.queue.as_str();
    run(
        client,
        "SELECT count(*) FROM pgmq.delete($1::text, $2::bigint[])",
        q,
        &completed,
    )
    .await?;
    run(
        client,
        "SELECT count(*) FROM pgmq.set_vt($1::text, $2::bigint[], 0)",
        q,
        &redeliver,
    )
    .await?;
    run(
        client,
        "SELECT count(*) FROM pgmq.archive($1::text, $2::bigint[])",
        q,
        &dead,
    )
    .await?;
    done.completed = txns(&completed);
    done.redelivering = txns(&redeliver);
    done.dead_lettered = txns(&dead);
    Ok(done)
}

/// One statement over the deliveries' ids, skipped when there are none.
async fn run(client: &Client, sql: &str, queue: &str, of: &[&Delivery]) -> Result<(), String> {
    if of.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = of.iter().map(|d| d.handle).collect();
    client
        .execute_typed(sql, &[(&queue, Type::TEXT), (&ids, Type::INT8_ARRAY)])
        .await
        .map_err(db(sql))?;
    Ok(())
}

fn txns(of: &[&Delivery]) -> Vec<String> {
    of.iter().map(|d| d.transaction_id.clone()).collect()
}

pub async fn backlog(client: &Client, queue: &str) -> Result<i64, String> {
    let row = client
        .query_one("SELECT queue_length FROM pgmq.metrics($1)", &[&queue])
        .await
        .map_err(db("pgmq.metrics"))?;
    Ok(row.get(0))
}

/// The transactionIds in the queue's archive (where `archive` moved them).
pub async fn archived(client: &Client, queue: &str) -> Result<Vec<String>, String> {
    if !queue.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "pgmq queue name `{queue}` is not a plain identifier"
        ));
    }
    let sql = format!("SELECT message->>'txn' FROM pgmq.a_{queue}");
    txn_column(client, &sql, &[], "pgmq archive").await
}

/// PGMQ as a peer.
pub struct Pgmq;

impl Peer for Pgmq {
    fn name(&self) -> &'static str {
        "pgmq"
    }

    fn refusal(&self, asks: &Asks) -> Option<String> {
        refusal(asks)
    }

    /// Deletes (and archives) by id, whoever holds the row: no order, no lease exclusivity.
    fn promises(&self) -> Promises {
        DURABLE_ACKS_ONLY
    }

    /// PGMQ's SQL is embedded in the `pgmq` crate this binary links.
    fn check_parts<'a>(&'a self, _admin: &'a Client) -> Pending<'a, Result<(), String>> {
        Box::pin(async { super::pgmq_installer::ready().await.map(|_| ()) })
    }

    fn install<'a>(
        &'a self,
        url: &'a str,
        client: &'a Client,
        setup: &'a Setup<'a>,
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(install(url, client, setup))
    }

    fn produce<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
        batch: &'a [Produced<'a>],
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(produce(client, &queue.queue, batch))
    }

    fn consume<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
        batch: u32,
    ) -> Pending<'a, Result<Consumed, String>> {
        Box::pin(consume(client, &queue.queue, queue.visibility_secs, batch))
    }

    fn answer<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
        consumed: &'a Consumed,
        answers: &'a [Answer],
    ) -> Pending<'a, Result<Answered, String>> {
        Box::pin(answer(client, queue, consumed, answers))
    }

    fn dead_lettered<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
    ) -> Pending<'a, Result<Vec<String>, String>> {
        Box::pin(archived(client, &queue.queue))
    }

    fn backlog<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
    ) -> Pending<'a, Result<i64, String>> {
        Box::pin(backlog(client, &queue.queue))
    }
}
