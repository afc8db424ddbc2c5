//! procrastinate (a Python job queue on one job table claimed with `FOR UPDATE SKIP LOCKED`),
//! installed at run time from the schema its own Python package ships (`sql/schema.sql` beside
//! the package, found with the `python3` on the path or `ACKBENCH_PYTHON`): none of its SQL
//! enters this repository. Driven over SQL with the statements its worker issues: a produced
//! batch is one `procrastinate_defer_jobs_v1` call, each message a job whose `lock` is the
//! scenario's partition (so one job per partition is `doing` at a time, handed out in id order:
//! per-partition order and exclusivity, as Queen's partition leases give); a worker registers
//! with `procrastinate_register_worker_v1`. What differs: procrastinate fetches one job per
//! call, so a pop of N is up to N `procrastinate_fetch_job_v2` calls (stopping at the first
//! that finds nothing), and each job is finished by its own `procrastinate_finish_job_v1` call
//! (`succeeded`, kept as its default `delete_jobs = never` keeps it). `retry` is its
//! `procrastinate_retry_job_v2` at once (its retry strategy with no wait); `failed` retries the
//! same way until the budget of deliveries is spent, then finishes the job `failed`, where
//! procrastinate leaves a job out of retries (the audit counts those as dead-lettered). It has
//! no dead-letter queue: `dlq` is refused, as are consumer groups, leases that stall (a `doing`
//! job is never handed to another worker) and pops naming a partition.

use std::path::PathBuf;

use tokio_postgres::types::Type;
use tokio_postgres::Client;

use super::{
    db, txn_column, Answer, Answered, Asks, Consumed, Delivery, Peer, PeerQueue, Produced, Setup,
};
use crate::driver::pending::Pending;
use ackbench_reports::results::Promises;

/// The task name every job carries (procrastinate's workers dispatch on it; ours takes any).
const TASK: &str = "ackbench.message";

/// The environment variable naming the Python interpreter to look for the package with.
pub const PYTHON_ENV: &str = "ACKBENCH_PYTHON";

/// What to install when the package is missing.
pub const INSTALL: &str = "pip install procrastinate";

/// Per-lock order; exclusivity is its unique index on `lock` among `doing` jobs, which the
/// client's checks cannot judge without leases, so it is not claimed to them.
pub const PROMISES: Promises = Promises {
    order: true,
    lease_exclusive: false,
    fencing: false,
    ack_durable: true,
};

pub fn refusal(asks: &Asks) -> Option<String> {
    if asks.consumer_groups > 1 {
        return Some("procrastinate has no consumer groups (a job is run once)".into());
    }
    if asks.lease_stalls {
        return Some(
            "procrastinate has no leases: a stalled `doing` job is never handed to another worker"
                .into(),
        );
    }
    if asks.dead_letters {
        return Some(
            "procrastinate has no dead-letter queue (no `dlq`; a job out of retries stays `failed`)"
                .into(),
        );
    }
    if asks.named_partitions {
        return Some(
            "procrastinate fetches by queue, not by lock: no pops naming a partition".into(),
        );
    }
    None
}

/// The interpreter to look for the package with.
fn python() -> String {
    std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".into())
}

/// The message when `python` cannot give the schema: what to install, and what was tried.
pub fn missing(python: &str, why: &str) -> String {
    format!(
        "the procrastinate peer needs procrastinate's Python package: {INSTALL} \
         (`{python}` could not give its schema: {why}; set {PYTHON_ENV} to another interpreter)"
    )
}

/// Where the installed package keeps its schema (`<package>/sql/schema.sql`).
pub async fn schema_path() -> Result<PathBuf, String> {
    schema_path_with(&python()).await
}

/// Where the package `python` imports keeps its schema.
pub async fn schema_path_with(python: &str) -> Result<PathBuf, String> {
    let output = tokio::process::Command::new(python)
        .args([
            "-c",
            "import os, procrastinate; \
             print(os.path.join(os.path.dirname(procrastinate.__file__), 'sql', 'schema.sql'))",
        ])
        .output()
        .await
        .map_err(|e| missing(python, &format!("cannot run it: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr
            .lines()
            .last()
            .unwrap_or("no output")
            .trim()
            .to_string();
        return Err(missing(python, &last));
    }
    let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if !path.is_file() {
        return Err(missing(
            python,
            &format!("the package has no {}", path.display()),
        ));
    }
    Ok(path)
}

/// Applies the installed package's schema to the cell's fresh database.
pub async fn install(client: &Client) -> Result<(), String> {
    let path = schema_path().await?;
    let schema = tokio::fs::read_to_string(&path)
        .await
        .map_err(|e| format!("procrastinate: cannot read {}: {e}", path.display()))?;
    client
        .batch_execute(&schema)
        .await
        .map_err(db("procrastinate: applying its schema.sql"))
}

/// Registers the consumer as a worker, as procrastinate's worker does on start.
pub async fn register(client: &Client, queue: &mut PeerQueue) -> Result<(), String> {
    let row = client
        .query_one("SELECT * FROM procrastinate_register_worker_v1()", &[])
        .await
        .map_err(db("procrastinate_register_worker_v1"))?;
    queue.worker_id = Some(row.get(0));
    Ok(())
}

/// One `procrastinate_defer_jobs_v1` call deferring every message as a job: args
/// `{"txn": id, "data": payload}`, `lock` the partition, no `queueing_lock`.
pub async fn produce(client: &Client, queue: &str, batch: &[Produced<'_>]) -> Result<(), String> {
    let txns: Vec<&str> = batch.iter().map(|m| m.transaction_id).collect();
    let payloads: Vec<&str> = batch.iter().map(|m| m.payload_json).collect();
    let locks: Vec<&str> = batch.iter().map(|m| m.partition).collect();
    client
        .execute_typed(
            "SELECT count(*) FROM unnest(procrastinate_defer_jobs_v1(ARRAY( \
                 SELECT ROW($1, $2, 0, l, NULL, jsonb_build_object('txn', t, 'data', d::jsonb), \
                            NULL)::procrastinate_job_to_defer_v1 \
                 FROM unnest($3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(t, d, l, n) \
                 ORDER BY n)))",
            &[
                (&queue, Type::VARCHAR),
                (&TASK, Type::VARCHAR),
                (&txns, Type::TEXT_ARRAY),
                (&payloads, Type::TEXT_ARRAY),
                (&locks, Type::TEXT_ARRAY),
            ],
        )
        .await
        .map_err(db("procrastinate_defer_jobs_v1"))?;
    Ok(())
}

/// Up to `batch` jobs, one `procrastinate_fetch_job_v2` call each (it fetches one job per
/// call), stopping at the first call that finds none.
pub async fn consume(client: &Client, queue: &PeerQueue, batch: u32) -> Result<Consumed, String> {
    let queues = vec![queue.queue.clone()];
    let mut deliveries = Vec::new();
    for _ in 0..batch.max(1) {
        let row = client
            .query_typed(
                "SELECT id, attempts + 1, args->>'txn', (args->'data')::text, lock \
                 FROM procrastinate_fetch_job_v2($1::varchar[], $2)",
                &[
                    (&queues, Type::VARCHAR_ARRAY),
                    (&queue.worker_id, Type::INT8),
                ],
            )
            .await
            .map_err(db("procrastinate_fetch_job_v2"))?;
        let Some(row) = row.first() else { break };
        let Some(handle) = row.get::<_, Option<i64>>(0) else {
            break;
        };
        deliveries.push(Delivery {
            handle,
            attempt: row.get(1),
            transaction_id: row.get::<_, Option<String>>(2).unwrap_or_default(),
            payload_json: row.get::<_, Option<String>>(3).unwrap_or_default(),
            partition: row.get(4),
            job: None,
        });
    }
    Ok(Consumed {
        open_batch: None,
        deliveries,
    })
}

/// What procrastinate does to one job on an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Succeeded,
    Retried,
    Failed,
}

impl Outcome {
    fn of(answer: Answer, delivery: &Delivery, retry_budget: i32) -> Result<Outcome, String> {
        match answer {
            Answer::Completed => Ok(Outcome::Succeeded),
            Answer::Retry => Ok(Outcome::Retried),
            Answer::Failed if delivery.attempt < retry_budget => Ok(Outcome::Retried),
            Answer::Failed => Ok(Outcome::Failed),
            Answer::Dlq => Err(
                "procrastinate has no dead-letter queue; the scenario should have been refused"
                    .into(),
            ),
        }
    }

    /// Its worker's statement for this outcome.
    fn statement(self) -> &'static str {
        match self {
            Outcome::Succeeded => "SELECT procrastinate_finish_job_v1($1, 'succeeded', false)",
            Outcome::Retried => "SELECT procrastinate_retry_job_v2($1, now(), NULL, NULL, NULL)",
            Outcome::Failed => "SELECT procrastinate_finish_job_v1($1, 'failed', false)",
        }
    }
}

/// Answers each job with its own statement (its own transaction), as its worker does.
pub async fn answer(
    client: &Client,
    queue: &PeerQueue,
    consumed: &Consumed,
    answers: &[Answer],
) -> Result<Answered, String> {
    let mut done = Answered::default();
    for (delivery, answer) in consumed.deliveries.iter().zip(answers) {
        let outcome = Outcome::of(*answer, delivery, queue.retry_budget)?;
        let sql = outcome.statement();
        client
            .execute_typed(sql, &[(&delivery.handle, Type::INT8)])
            .await
            .map_err(db(sql))?;
        let txn = delivery.transaction_id.clone();
        match outcome {
            Outcome::Succeeded => done.completed.push(txn),
            Outcome::Retried => done.redelivering.push(txn),
            Outcome::Failed => done.dead_lettered.push(txn),
        }
    }
    Ok(done)
}

/// Analyzes the job table, as autovacuum would have by the time a table holds a standing
/// backlog: without statistics the planner takes `procrastinate_fetch_job_v2`'s candidates by a
/// bitmap scan of every waiting job and sorts them, seconds per fetch on tens of thousands of
/// jobs, where with them it walks its priority index and stops at the first free lock.
pub async fn settle(client: &Client) -> Result<(), String> {
    client
        .batch_execute("ANALYZE procrastinate_jobs")
        .await
        .map_err(db("procrastinate: ANALYZE procrastinate_jobs"))
}

/// What procrastinate does instead of a pop of `pop_batch` over `partitions` partitions.
pub fn instead(pop_batch: u32, partitions: u32) -> String {
    format!(
        "procrastinate: a pop of {pop_batch} is up to {pop_batch} `procrastinate_fetch_job_v2` \
         calls (one job each, stopping at the first that finds none) and each job is finished by \
         its own `procrastinate_finish_job_v1`; its `lock` is the partition and a lock has one \
         `doing` job at a time, so a pop holds at most {partitions} jobs (one per partition) and \
         all consumers together at most {partitions}; each fetch rejects, one by one, every \
         waiting job whose lock is busy (its NOT EXISTS over the lock's earlier jobs), so on a \
         standing backlog a fetch costs in proportion to the backlog and one that finds nothing \
         reads all of it: its throughput here is that cost, and a backlog it cannot work off \
         within run.drain_timeout_secs is left undrained (still `todo` in its table)"
    )
}

/// Jobs not finished yet (`todo` or `doing`).
pub async fn backlog(client: &Client, queue: &str) -> Result<i64, String> {
    let row = client
        .query_one(
            "SELECT count(*) FROM procrastinate_jobs \
             WHERE queue_name = $1 AND status IN ('todo', 'doing')",
            &[&queue],
        )
        .await
        .map_err(db("procrastinate backlog"))?;
    Ok(row.get(0))
}

/// The transactionIds of the jobs not finished: waiting (`todo`) or taken (`doing`).
pub async fn unfinished(client: &Client, queue: &str) -> Result<Vec<String>, String> {
    txn_column(
        client,
        "SELECT args->>'txn' FROM procrastinate_jobs \
         WHERE queue_name = $1 AND status IN ('todo', 'doing')",
        &[&queue],
        "procrastinate unfinished jobs",
    )
    .await
}

/// The transactionIds of the jobs left `failed` (out of retries).
pub async fn failed(client: &Client, queue: &str) -> Result<Vec<String>, String> {
    txn_column(
        client,
        "SELECT args->>'txn' FROM procrastinate_jobs \
         WHERE queue_name = $1 AND status = 'failed'",
        &[&queue],
        "procrastinate failed jobs",
    )
    .await
}

/// procrastinate as a peer.
pub struct Procrastinate;

impl Peer for Procrastinate {
    fn name(&self) -> &'static str {
        "procrastinate"
    }

    fn refusal(&self, asks: &Asks) -> Option<String> {
        refusal(asks)
    }

    fn promises(&self) -> Promises {
        PROMISES
    }

    /// Its Python package must be importable (its schema ships inside it).
    fn check_parts<'a>(&'a self, _admin: &'a Client) -> Pending<'a, Result<(), String>> {
        Box::pin(async { schema_path().await.map(|_| ()) })
    }

    fn settle<'a>(
        &'a self,
        client: &'a Client,
        _queue: &'a PeerQueue,
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(settle(client))
    }

    /// The scenario's own pops: it fetches one job per call, so a larger drain pop only holds
    /// its jobs' locks longer, through a last fetch that finds none and reads the whole backlog.
    fn drain_batch(&self) -> u32 {
        1
    }

    fn instead(&self, pop_batch: u32, partitions: u32) -> Option<String> {
        Some(instead(pop_batch, partitions))
    }

    fn install<'a>(
        &'a self,
        _url: &'a str,
        client: &'a Client,
        _setup: &'a Setup<'a>,
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(install(client))
    }

    fn open_consumer<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a mut PeerQueue,
    ) -> Pending<'a, Result<(), String>> {
        Box::pin(register(client, queue))
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
        Box::pin(consume(client, queue, batch))
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
        Box::pin(failed(client, &queue.queue))
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
