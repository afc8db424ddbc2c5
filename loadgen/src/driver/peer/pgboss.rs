//! pg-boss (a Node.js job queue on one job table claimed with `FOR UPDATE SKIP LOCKED`),
//! installed at run time from its own npm package: `node` asks the installed package for its
//! construction plans and for the very statements its manager sends (insert, fetch, complete,
//! fail), and the load generator sends those with the parameters pg-boss gives them. None of its
//! SQL enters this repository. The package is looked for under `ACKBENCH_NPM_PREFIX`
//! (default `~/.cache/ackbench/npm`, where `npm install --prefix` puts it).
//!
//! Mapping: a produced batch is one insert of every job (`{"txn": id, "data": payload}`); a pop
//! of N is its fetch with `batchSize` N (with `includeMetadata`, to read the retry count);
//! `completed` is its complete over the batch's ids; `failed` and `retry` are its fail (pg-boss
//! cannot tell them apart: each counts against the queue's `retryLimit`, the scenario's
//! `retry_limit`, after which pg-boss copies the job into the queue's dead-letter queue, which
//! the audit lists). It has no per-key order on a standard queue and no consumer groups; its
//! `expireInSeconds` lease needs its maintenance, which the load generator does not run, so
//! lease stalls are refused, as are `dlq` answers (no immediate dead letter) and named pops.

use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio_postgres::types::{Json, Type};
use tokio_postgres::Client;
use uuid::Uuid;

use super::DURABLE_ACKS_ONLY;
use super::{
    db, ids_where, txn_column, Answer, Answered, Asks, Consumed, Delivery, Peer, PeerQueue,
    Produced, Setup,
};
use crate::driver::pending::Pending;
use ackbench_reports::results::Promises;

/// The schema pg-boss is constructed in (its default).
const SCHEMA: &str = "pgboss";

/// The environment variable naming the npm prefix pg-boss is installed under.
pub const PREFIX_ENV: &str = "ACKBENCH_NPM_PREFIX";

/// Prints, as JSON, what the installed package would run: its construction plans and its
/// manager's statements (argv: prefix, schema).
const PLANS_SCRIPT: &str = r#"
const path = require("path");
const [prefix, schema] = process.argv.slice(1);
const dir = path.join(prefix, "node_modules", "pg-boss");
const PgBoss = require(dir);
const plans = require(path.join(dir, "src", "plans.js"));
console.log(JSON.stringify({
  version: require(path.join(dir, "package.json")).version,
  construct: PgBoss.getConstructionPlans(schema),
  create_queue: plans.createQueue(schema),
  insert: plans.insertJobs(schema),
  fetch: plans.fetchNextJob(schema)({ includeMetadata: true }),
  complete: plans.completeJobs(schema),
  fail: plans.failJobsById(schema),
}));
"#;

/// The installed package's statements.
#[derive(Debug, Deserialize)]
pub struct Plans {
    pub version: String,
    construct: String,
    create_queue: String,
    insert: String,
    fetch: String,
    complete: String,
    fail: String,
}

/// Loaded once per process (every cell uses the same package and schema).
static PLANS: OnceLock<Plans> = OnceLock::new();

fn prefix() -> String {
    std::env::var(PREFIX_ENV).unwrap_or_else(|_| {
        let home = std::env::var("HOME").unwrap_or_else(|_| ".".into());
        format!("{home}/.cache/ackbench/npm")
    })
}

/// The message when pg-boss cannot be loaded from `prefix`.
pub fn missing(prefix: &str, why: &str) -> String {
    format!(
        "the pgboss peer needs pg-boss from npm and node: npm install --prefix {prefix} pg-boss \
         (loading it failed: {why}; set {PREFIX_ENV} to another prefix)"
    )
}

/// The statements of the pg-boss installed under `prefix`.
pub async fn load_plans(prefix: &str) -> Result<Plans, String> {
    let output = tokio::process::Command::new("node")
        .args(["-e", PLANS_SCRIPT, prefix, SCHEMA])
        .output()
        .await
        .map_err(|e| missing(prefix, &format!("cannot run node: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let why = stderr
            .lines()
            .find(|l| l.contains("Error"))
            .unwrap_or("no output");
        return Err(missing(prefix, why.trim()));
    }
    let plans: Plans = serde_json::from_slice(&output.stdout)
        .map_err(|e| missing(prefix, &format!("its plans did not parse: {e}")))?;
    Ok(plans.labelled())
}

impl Plans {
    /// Each hot statement opened by a comment naming it as a call (`/* pgboss.fetch() */`),
    /// for PostgreSQL's statement counters to fold it by name as they fold the other peers'
    /// procedures; the statement itself is pg-boss's, unchanged.
    fn labelled(mut self) -> Plans {
        for (name, sql) in [
            ("insert", &mut self.insert),
            ("fetch", &mut self.fetch),
            ("complete", &mut self.complete),
            ("fail", &mut self.fail),
        ] {
            *sql = format!("/* pgboss.{name}() */ {}", sql.trim_start());
        }
        self
    }
}

/// The plans, loaded on first use.
async fn plans() -> Result<&'static Plans, String> {
    if let Some(p) = PLANS.get() {
        return Ok(p);
    }
    let loaded = load_plans(&prefix()).await?;
    Ok(PLANS.get_or_init(|| loaded))
}

fn loaded() -> Result<&'static Plans, String> {
    PLANS
        .get()
        .ok_or_else(|| "pgboss: its statements were not loaded (not installed)".into())
}

pub fn refusal(asks: &Asks) -> Option<String> {
    if asks.consumer_groups > 1 {
        return Some("pg-boss has no consumer groups on one queue".into());
    }
    if asks.lease_stalls {
        return Some(
            "pg-boss expires a stalled job only in its maintenance, which the load generator \
             does not run"
                .into(),
        );
    }
    if asks.dead_letters {
        return Some("pg-boss dead-letters only past the retry limit (no `dlq` answer)".into());
    }
    if asks.named_partitions {
        return Some("pg-boss has no partitions to pop by name".into());
    }
    None
}

/// Its construction plans, then the dead-letter queue and the queue (a standard queue, the
/// scenario's retry limit without delay, its lease as `expireInSeconds`).
pub async fn install(client: &Client, setup: &Setup<'_>) -> Result<(), String> {
    let plans = plans().await?;
    client
        .batch_execute(&plans.construct)
        .await
        .map_err(db("pgboss: its construction plans"))?;
    let dead = dead_letter_queue(setup.queue);
    let options = [
        (dead.clone(), serde_json::json!({ "policy": "standard" })),
        (
            setup.queue.to_string(),
            serde_json::json!({
                "policy": "standard",
                "retryLimit": setup.retry_limit,
                "retryDelay": 0,
                "retryBackoff": false,
                "expireInSeconds": setup.lease_secs.max(1),
                "deadLetter": dead,
            }),
        ),
    ];
    for (name, opts) in options {
        client
            .execute_typed(
                &plans.create_queue,
                &[(&name, Type::TEXT), (&Json(&opts), Type::JSON)],
            )
            .await
            .map_err(db("pgboss.create_queue"))?;
    }
    Ok(())
}

fn dead_letter_queue(queue: &str) -> String {
    format!("{queue}_dlq")
}

/// One insert of the batch, with pg-boss's defaults (its parameters 2 to 6 unset).
pub async fn produce(client: &Client, queue: &str, batch: &[Produced<'_>]) -> Result<(), String> {
    let mut jobs = String::from("[");
    for (i, m) in batch.iter().enumerate() {
        if i > 0 {
            jobs.push(',');
        }
        let name = serde_json::to_string(queue).expect("a string serializes");
        let txn = serde_json::to_string(m.transaction_id).expect("a string serializes");
        jobs.push_str(&format!(
            r#"{{"name":{name},"data":{{"txn":{txn},"data":{}}}}}"#,
            m.payload_json
        ));
    }
    jobs.push(']');
    let jobs = RawValue::from_string(jobs).map_err(|e| format!("pgboss: a job's JSON: {e}"))?;
    let none: Option<&str> = None;
    let no_int: Option<i32> = None;
    let no_bool: Option<bool> = None;
    client
        .execute_typed(
            &loaded()?.insert,
            &[
                (&Json(&jobs), Type::JSON),
                (&none, Type::TEXT),
                (&none, Type::TEXT),
                (&no_int, Type::INT4),
                (&no_int, Type::INT4),
                (&no_bool, Type::BOOL),
            ],
        )
        .await
        .map_err(db("pgboss insert"))?;
    Ok(())
}

/// Its fetch of up to `batch` jobs.
pub async fn consume(client: &Client, queue: &str, batch: u32) -> Result<Consumed, String> {
    let rows = client
        .query_typed(
            &loaded()?.fetch,
            &[(&queue, Type::TEXT), (&(batch as i64), Type::INT8)],
        )
        .await
        .map_err(db("pgboss fetch"))?;
    let mut deliveries = Vec::with_capacity(rows.len());
    for r in &rows {
        let data: serde_json::Value = r.try_get("data").map_err(|e| format!("pgboss: {e}"))?;
        let retries: i32 = r
            .try_get("retryCount")
            .map_err(|e| format!("pgboss: {e}"))?;
        deliveries.push(Delivery {
            handle: 0,
            job: Some(r.try_get("id").map_err(|e| format!("pgboss: {e}"))?),
            transaction_id: data["txn"].as_str().unwrap_or_default().to_string(),
            payload_json: data["data"].to_string(),
            attempt: retries + 1,
            partition: None,
        });
    }
    Ok(Consumed {
        open_batch: None,
        deliveries,
    })
}

/// Its complete over the completed jobs, then its fail over the rest.
pub async fn answer(
    client: &Client,
    queue: &PeerQueue,
    consumed: &Consumed,
    answers: &[Answer],
) -> Result<Answered, String> {
    if answers.contains(&Answer::Dlq) {
        return Err("pg-boss has no `dlq` answer; the scenario should have been refused".into());
    }
    let plans = loaded()?;
    let completed = ids_where(consumed, answers, Answer::Completed);
    let mut failed = ids_where(consumed, answers, Answer::Failed);
    failed.extend(ids_where(consumed, answers, Answer::Retry));
    run(client, &plans.complete, &queue.queue, &completed).await?;
    run(client, &plans.fail, &queue.queue, &failed).await?;
    let (dead, again): (Vec<&Delivery>, Vec<&Delivery>) = failed
        .into_iter()
        .partition(|d| d.attempt >= queue.retry_budget);
    let txns = |of: &[&Delivery]| of.iter().map(|d| d.transaction_id.clone()).collect();
    Ok(Answered {
        completed: txns(&completed),
        redelivering: txns(&again),
        dead_lettered: txns(&dead),
    })
}

/// One statement of pg-boss's over the jobs' ids (no output data), skipped when there are none.
async fn run(client: &Client, sql: &str, queue: &str, of: &[&Delivery]) -> Result<(), String> {
    if of.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = of.iter().filter_map(|d| d.job).collect();
    let output: Option<&str> = None;
    client
        .execute_typed(
            sql,
            &[
                (&queue, Type::TEXT),
                (&ids, Type::UUID_ARRAY),
                (&output, Type::TEXT),
            ],
        )
        .await
        .map_err(db("pgboss complete/fail"))?;
    Ok(())
}

/// Readies a consumer's connection: its client learns pg-boss's `job_state` enum (the type of
/// the `state` column its fetch returns) from a statement with no rows. tokio-postgres looks an
/// unknown result type up on the same connection while the query's rows wait in a one-slot
/// channel, so the first fetch of a hundred jobs on a cold connection waited forever for the
/// lookup queued behind its own rows: every consumer hung on its first pop.
pub async fn learn_types(client: &Client) -> Result<(), String> {
    client
        .prepare("SELECT NULL::pgboss.job_state")
        .await
        .map_err(db("pgboss: learning its job_state type"))?;
    Ok(())
}

/// Jobs a drain pop asks for: its fetch sorts every waiting job of the queue whatever the
/// batch (`ORDER BY priority desc, created_on, id` under `FOR UPDATE SKIP LOCKED`, which keeps
/// PostgreSQL from a top-N sort), so the drain of a standing backlog asks for large batches, as
/// its `batchSize` allows, to work it off in a bounded time.
pub const DRAIN_BATCH: u32 = 20_000;

/// Analyzes the job table (every queue's partition), as autovacuum would have by the time a
/// table holds a standing backlog.
pub async fn settle(client: &Client) -> Result<(), String> {
    client
        .batch_execute("ANALYZE pgboss.job")
        .await
        .map_err(db("pgboss: ANALYZE pgboss.job"))
}

/// What pg-boss does instead of a pop of `pop_batch`.
pub fn instead(pop_batch: u32) -> String {
    format!(
        "pgboss: a pop of {pop_batch} is its fetch with batchSize {pop_batch} and the answer its \
         complete (or fail) over the batch's ids; a standard queue keeps no per-partition order \
         (the partition is not sent); its fetch sorts every waiting job of the queue before \
         taking a batch (ORDER BY priority desc, created_on, id under FOR UPDATE SKIP LOCKED: no \
         top-N sort, and its index on (name, start_after) gives no order), so a fetch costs in \
         proportion to the backlog; the drain fetches with batchSize {DRAIN_BATCH}"
    )
}

/// Jobs not finished: created, retrying or active.
pub async fn backlog(client: &Client, queue: &str) -> Result<i64, String> {
    let row = client
        .query_one(
            "SELECT count(*) FROM pgboss.job WHERE name = $1 AND state < 'completed'",
            &[&queue],
        )
        .await
        .map_err(db("pgboss backlog"))?;
    Ok(row.get(0))
}

/// The transactionIds of the jobs not finished: created, retrying or active.
pub async fn unfinished(client: &Client, queue: &str) -> Result<Vec<String>, String> {
    txn_column(
        client,
        "SELECT data->>'txn' FROM pgboss.job WHERE name = $1 AND state < 'completed'",
        &[&queue],
        "pgboss unfinished jobs",
    )
    .await
}

/// The transactionIds pg-boss copied into the queue's dead-letter queue.
pub async fn dead_letters(client: &Client, queue: &str) -> Result<Vec<String>, String> {
    txn_column(
        client,
        "SELECT data->>'txn' FROM pgboss.job WHERE name = $1",
        &[&dead_letter_queue(queue)],
        "pgboss dead letters",
    )
    .await
}

/// pg-boss as a peer.
pub struct PgBoss;

impl Peer for PgBoss {
    fn name(&self) -> &'static str {
        "pgboss"
    }

    fn refusal(&self, asks: &Asks) -> Option<String> {
        refusal(asks)
    }

    /// Completes by id whoever holds the job; a standard queue keeps no per-key order.
    fn promises(&self) -> Promises {
        DURABLE_ACKS_ONLY
    }

    /// node and the package must give its statements.
    fn check_parts<'a>(&'a self, _admin: &'a Client) -> Pending<'a, Result<(), String>> {
        Box::pin(async { plans().await.map(|_| ()) })
    }

    fn settle<'a>(
        &'a self,
        client: &'a Client,
        _queue: &'a PeerQueue,
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(settle(client))
    }

    fn drain_batch(&self) -> u32 {
        DRAIN_BATCH
    }

    fn open_consumer<'a>(
        &'a self,
        client: &'a Client,
        _queue: &'a mut PeerQueue,
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(learn_types(client))
    }

    fn instead(&self, pop_batch: u32, _partitions: u32) -> Option<String> {
        Some(instead(pop_batch))
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

    fn consume<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
        batch: u32,
    ) -> Pending<'a, Result<Consumed, String>> {
        Box::pin(consume(client, &queue.queue, batch))
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
        Box::pin(dead_letters(client, &queue.queue))
    }

    fn backlog<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
    ) -> Pending<'a, Result<i64, String>> {
        Box::pin(backlog(client, &queue.queue))
    }

    fn still_queued<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a PeerQueue,
    ) -> Pending<'a, Result<Option<Vec<String>>, String>> {
        Box::pin(async move { unfinished(client, &queue.queue).await.map(Some) })
    }
}
