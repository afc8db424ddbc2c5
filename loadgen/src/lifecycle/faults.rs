//! The fault injector: runs beside the window sampler, fires each `[[faults]]` step at its time
//! (seconds from the window's start), restores what it broke, and records when each fault fired
//! and ended as the round's `FaultEvent`s, with a note on what it did where there is one to
//! tell (the connections cut, the sessions terminated, what a failover's standby was missing).
//! Also the start-time refusal of faults the target cannot take (`--broker-url`,
//! `--database-url`).

use std::time::{Duration, Instant};

use tokio::sync::watch;

use ackbench_reports::recovery::recovery_secs;
use ackbench_reports::results::{Audit, FaultEvent, SecondSample, VacuumSample};

use super::env::TargetSettings;
use crate::driver::system::Site;
use crate::measure::vacuum;
use crate::scenario::{Fault, FaultKind};
use crate::target::broker::BrokerProcess;
use crate::target::embedded::{Embedded, BROKER_APPLICATION};
use crate::target::postgres::{connect, pg, Postgres};
use crate::target::relay::Link;
use crate::workload::CellContext;

/// Refuses faults the run's target cannot take: broker faults need a broker this run starts,
/// a PostgreSQL restart needs the throwaway cluster.
pub fn refuse_unavailable(faults: &[Fault], target: &TargetSettings) -> Result<(), String> {
    for f in faults {
        if f.kind.needs_broker_process() && target.broker_url.is_some() {
            return Err(format!(
                "the {} fault (line {}) needs a broker process this run starts: drop --broker-url",
                f.kind.name(),
                f.line
            ));
        }
        if f.kind.needs_embedded_postgres() && target.database_url.is_some() {
            return Err(format!(
                "the {} fault (line {}) acts on the throwaway cluster: drop --database-url",
                f.kind.name(),
                f.line
            ));
        }
    }
    Ok(())
}

/// How long `kill_pg_backends` waits for a broker session to be inside a transaction.
const BUSY_WAIT: Duration = Duration::from_secs(2);

/// Terminates the broker's sessions ($2) in database $1 when one of them is inside a
/// transaction, or when $3 says to anyway; answers how many it terminated and how many were
/// inside a transaction (one snapshot of `pg_stat_activity`).
const TERMINATE_SQL: &str = "WITH s AS (SELECT pid, xact_start IS NOT NULL AS busy \
       FROM pg_stat_activity WHERE datname = $1 AND application_name = $2), \
     go AS (SELECT $3 OR coalesce(bool_or(busy), false) AS now FROM s) \
     SELECT count(*) FILTER (WHERE CASE WHEN go.now THEN pg_terminate_backend(s.pid) ELSE false END), \
            count(*) FILTER (WHERE go.now AND s.busy) FROM s, go";

/// What the faults act on in one cell round.
pub struct Injector<'a> {
    pub faults: &'a [Fault],
    pub target: &'a Site,
    pub postgres: Option<&'a Postgres>,
    pub ctx: &'a CellContext,
}

impl Injector<'_> {
    /// Fires every fault at `start + at_secs`, one after another, until the window is cancelled
    /// (a fault already fired is always ended and restored). With a `hold_xmin` fault, the
    /// database's vacuum state is sampled each second of the window (`window_secs`) beside
    /// them, and the samples go with each `hold_xmin` event.
    pub async fn run(
        &self,
        start: Instant,
        window_secs: f64,
        cancel: &watch::Receiver<bool>,
    ) -> Vec<FaultEvent> {
        let holds = self.faults.iter().any(|f| f.kind == FaultKind::HoldXmin);
        let sampler = match holds {
            true => self.database_session().await.ok(),
            false => None,
        };
        let Some(client) = sampler else {
            return self.fire_all(start, cancel).await;
        };
        let live = |s: &VacuumSample| crate::live::vacuum_sampled(s);
        let samples = vacuum::sample_window(&client, start, window_secs, cancel, live);
        let (mut events, samples) = tokio::join!(self.fire_all(start, cancel), samples);
        for e in events
            .iter_mut()
            .filter(|e| e.kind == FaultKind::HoldXmin.name())
        {
            e.note
                .push_str(&vacuum_words(&samples, e.at_secs, e.ended_secs));
            e.vacuum = samples.clone();
        }
        events
    }

    /// Fires every fault at its time (see `run`).
    async fn fire_all(&self, start: Instant, cancel: &watch::Receiver<bool>) -> Vec<FaultEvent> {
        let mut events = Vec::new();
        for fault in self.faults {
            let due = start + Duration::from_secs_f64(fault.at_secs);
            if !sleep_until_unless_cancelled(due, cancel).await {
                break;
            }
            events.push(self.inject(fault, start).await);
        }
        events
    }

    /// Fires one fault, waits out its length, restores, and says what happened.
    async fn inject(&self, fault: &Fault, start: Instant) -> FaultEvent {
        let at_secs = start.elapsed().as_secs_f64();
        let note = match self.skip_reason(fault.kind) {
            Some(why) => format!("skipped: {why}"),
            None => {
                crate::live::fault(fault.kind, true);
                let note = self.apply(fault).await.unwrap_or_else(|e| e);
                crate::live::fault(fault.kind, false);
                note
            }
        };
        FaultEvent {
            kind: fault.kind.name().to_string(),
            at_secs,
            ended_secs: start.elapsed().as_secs_f64(),
            note,
            recovery_secs: None,
            vacuum: Vec::new(),
        }
    }

    /// Why this cell cannot take the fault (a peer cell has no broker process).
    fn skip_reason(&self, kind: FaultKind) -> Option<&'static str> {
        if kind.needs_broker_process() && self.target.process().is_none() {
            return Some(if self.target.brokers.is_empty() {
                "a peer cell has no broker process"
            } else {
                "no broker process to fault"
            });
        }
        if kind.needs_embedded_postgres() && self.embedded().is_err() {
            return Some("no throwaway cluster to fault");
        }
        if kind == FaultKind::HoldXmin
            && (self.postgres.is_none() || self.target.database.is_none())
        {
            return Some("no database to hold the horizon of");
        }
        None
    }

    /// Does the fault; `Ok` carries what there is to tell about it (often nothing), `Err` why
    /// it failed.
    async fn apply(&self, fault: &Fault) -> Result<String, String> {
        let length = Duration::from_millis(fault.length_ms);
        let quiet = |r: Result<(), String>| r.map(|()| String::new());
        match fault.kind {
            FaultKind::KillBroker => {
                kill_and_restart(self.broker()?, length).await?;
                Ok(self.which_broker())
            }
            FaultKind::PauseBroker => {
                stop_and_continue(self.broker()?, length).await?;
                Ok(self.which_broker())
            }
            FaultKind::PauseConsumers => {
                self.ctx.pause_consumers(true);
                tokio::time::sleep(length).await;
                self.ctx.pause_consumers(false);
                Ok(String::new())
            }
            FaultKind::RestartPostgres => quiet(self.embedded()?.restart_primary().await),
            FaultKind::PausePostgres => quiet(self.embedded()?.pause_primary(length).await),
            FaultKind::FailoverPostgres => {
                let database = self.target.database.as_ref().map(|(name, _)| name.as_str());
                self.embedded()?.failover(length, database).await
            }
            FaultKind::PartitionPostgres => self.hold_link(Link::Cut, length).await,
            FaultKind::LatencyPostgres => {
                let delay = Duration::from_millis(fault.delay_ms);
                self.hold_link(Link::Delay(delay), length).await
            }
            FaultKind::KillPgBackends => self.terminate_broker_sessions().await,
            FaultKind::HoldXmin => self.hold_xmin(length).await,
        }
    }

    /// A session of its own on the cell's database.
    async fn database_session(&self) -> Result<tokio_postgres::Client, String> {
        let (pg_server, (database, _)) = self
            .postgres
            .zip(self.target.database.as_ref())
            .ok_or("no database to hold the horizon of")?;
        connect(&pg_server.url_of(database)).await
    }

    /// A `REPEATABLE READ` transaction that takes its snapshot and stays open for `length` on a
    /// session of its own, then is rolled back; a second session checks that the holder's
    /// `backend_xmin` shows in `pg_stat_activity` while held and is gone after.
    async fn hold_xmin(&self, length: Duration) -> Result<String, String> {
        let holder = self.database_session().await?;
        let watcher = self.database_session().await?;
        let pid: i32 = holder
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .map_err(pg)?
            .get(0);
        holder
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1")
            .await
            .map_err(pg)?;
        let held = backend_xmin(&watcher, pid).await?;
        tokio::time::sleep(length).await;
        holder.batch_execute("ROLLBACK").await.map_err(pg)?;
        let after = backend_xmin(&watcher, pid).await?;
        let held = held.ok_or("the holding transaction showed no backend_xmin")?;
        match after {
            None => Ok(format!(
                "xmin horizon held at {held} (backend_xmin of pid {pid}) for {:.1} s, then released",
                length.as_secs_f64()
            )),
            Some(x) => Err(format!("backend_xmin {x} of pid {pid} still held after the rollback")),
        }
    }

    fn embedded(&self) -> Result<&Embedded, String> {
        self.postgres
            .and_then(Postgres::embedded_cluster)
            .ok_or_else(|| "no throwaway cluster".to_string())
    }

    /// Sets the relays between broker and database to `link` for `length`, then back to
    /// passing traffic.
    async fn hold_link(&self, link: Link, length: Duration) -> Result<String, String> {
        let relays = self
            .embedded()?
            .relays()
            .ok_or("no relay between the broker and its database")?;
        let cut_before = relays.cut_connections();
        relays.set(link);
        tokio::time::sleep(length).await;
        relays.set(Link::Pass);
        Ok(match link {
            Link::Cut => format!(
                "{} broker connections cut or refused",
                relays.cut_connections() - cut_before
            ),
            _ => String::new(),
        })
    }

    /// `pg_terminate_backend` of every session of the cell's broker (found by its
    /// `application_name` in the cell's database), at a moment when at least one is inside a
    /// transaction (waiting up to `BUSY_WAIT` for one; then whatever they are doing).
    async fn terminate_broker_sessions(&self) -> Result<String, String> {
        let (pg_server, (database, _)) = self
            .postgres
            .zip(self.target.database.as_ref())
            .ok_or("no database to find the broker's sessions in")?;
        let admin = connect(&pg_server.url_of("postgres")).await?;
        let give_up = Instant::now() + BUSY_WAIT;
        loop {
            let anyway = Instant::now() >= give_up;
            let row = admin
                .query_one(TERMINATE_SQL, &[database, &BROKER_APPLICATION, &anyway])
                .await
                .map_err(pg)?;
            let (terminated, in_transaction): (i64, i64) = (row.get(0), row.get(1));
            if terminated > 0 || anyway {
                return Ok(format!(
                    "{terminated} broker sessions terminated, {in_transaction} of them inside a transaction"
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// With several brokers in the cell, which one a broker fault struck (the first; the
    /// others kept serving); nothing to say with one.
    fn which_broker(&self) -> String {
        let n = self.target.processes.len();
        match self.target.process() {
            Some(p) if n > 1 => format!("broker 1 of {n} ({}); the others kept serving", p.url),
            _ => String::new(),
        }
    }

    fn broker(&self) -> Result<&BrokerProcess, String> {
        self.target
            .process()
            .ok_or_else(|| "no broker process".to_string())
    }
}

/// What the samples say of a hold from `at` to `ended` (seconds into the window): dead tuples
/// and the bystander query's latency as the hold began, as it ended and at the window's end.
fn vacuum_words(samples: &[VacuumSample], at: f64, ended: f64) -> String {
    let last_before = |t: f64| samples.iter().rev().find(|s| s.t <= t).or(samples.first());
    let (Some(start), Some(end), Some(last)) =
        (last_before(at), last_before(ended), samples.last())
    else {
        return "; no vacuum samples".to_string();
    };
    format!(
        "; dead tuples {:.0} as the hold began, {:.0} as it ended, {:.0} at the window's end; bystander query {:.2} ms, {:.2} ms, {:.2} ms",
        start.dead_tuples,
        end.dead_tuples,
        last.dead_tuples,
        start.bystander_ms,
        end.bystander_ms,
        last.bystander_ms
    )
}

/// The `backend_xmin` of session `pid` as `pg_stat_activity` shows it (as text), if it has one.
async fn backend_xmin(
    watcher: &tokio_postgres::Client,
    pid: i32,
) -> Result<Option<String>, String> {
    let row = watcher
        .query_opt(
            "SELECT backend_xmin::text FROM pg_stat_activity WHERE pid = $1",
            &[&pid],
        )
        .await
        .map_err(pg)?;
    Ok(row.and_then(|r| r.get::<_, Option<String>>(0)))
}

/// SIGKILL, `downtime`, then the same broker again on the same port and database.
async fn kill_and_restart(broker: &BrokerProcess, downtime: Duration) -> Result<(), String> {
    broker.kill().await?;
    tokio::time::sleep(downtime).await;
    broker.restart().await
}

/// SIGSTOP, `pause`, SIGCONT (sent even when the stop failed, so nothing stays stopped).
async fn stop_and_continue(broker: &BrokerProcess, pause: Duration) -> Result<(), String> {
    let stopped = broker.signal("STOP").await;
    if stopped.is_ok() {
        tokio::time::sleep(pause).await;
    }
    let resumed = broker.signal("CONT").await;
    stopped.and(resumed)
}

/// Sleeps until `due`; false when `cancel` flipped first.
async fn sleep_until_unless_cancelled(due: Instant, cancel: &watch::Receiver<bool>) -> bool {
    loop {
        if *cancel.borrow() {
            return false;
        }
        let now = Instant::now();
        if now >= due {
            return true;
        }
        tokio::time::sleep((due - now).min(Duration::from_millis(100))).await;
    }
}

/// Fills each event's recovery time from the round's per-second series.
pub fn with_recovery(mut events: Vec<FaultEvent>, series: &[SecondSample]) -> Vec<FaultEvent> {
    for e in events.iter_mut().filter(|e| !e.note.starts_with("skipped")) {
        e.recovery_secs = recovery_secs(series, e.at_secs, e.ended_secs);
    }
    events
}

/// Adds the round's audit to each failover's note: what the failover lost, as the client saw
/// it (pushes lost with an asynchronous standby can never be delivered, so they keep the drain
/// from finishing and count as undrained; lost acks come back as duplicates).
pub fn with_audit(mut events: Vec<FaultEvent>, audit: &Audit) -> Vec<FaultEvent> {
    let failovers = events
        .iter_mut()
        .filter(|e| e.kind == FaultKind::FailoverPostgres.name() && !e.note.starts_with("skipped"));
    for e in failovers {
        let mut said = format!(
            "; the round's audit: {} lost, {} undrained, {} duplicates",
            audit.lost, audit.undrained, audit.duplicates
        );
        if !audit.drained && audit.undrained > 0 {
            said.push_str(
                " (the drain did not finish: messages whose push the failover lost are never delivered)",
            );
        }
        e.note.push_str(&said);
    }
    events
}
