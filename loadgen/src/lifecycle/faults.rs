//! The fault injector: runs beside the window sampler, fires each `[[faults]]` step at its time
//! (seconds from the window's start), restores what it broke, and records when each fault fired
//! and ended as the round's `FaultEvent`s. Also the start-time refusal of faults the target
//! cannot take (`--broker-url`, `--database-url`).

use std::time::{Duration, Instant};

use tokio::sync::watch;

use ackbench_reports::recovery::recovery_secs;
use ackbench_reports::results::{FaultEvent, SecondSample};

use super::env::TargetSettings;
use crate::driver::system::Site;
use crate::scenario::{Fault, FaultKind};
use crate::target::broker::BrokerProcess;
use crate::target::postgres::Postgres;
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
                "the {} fault (line {}) restarts the throwaway cluster: drop --database-url",
                f.kind.name(),
                f.line
            ));
        }
    }
    Ok(())
}

/// What the faults act on in one cell round.
pub struct Injector<'a> {
    pub faults: &'a [Fault],
    pub target: &'a Site,
    pub postgres: Option<&'a Postgres>,
    pub ctx: &'a CellContext,
}

impl Injector<'_> {
    /// Fires every fault at `start + at_secs`, one after another, until the window is cancelled
    /// (a fault already fired is always ended and restored).
    pub async fn run(&self, start: Instant, cancel: &watch::Receiver<bool>) -> Vec<FaultEvent> {
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
            None => self.apply(fault).await.err().unwrap_or_default(),
        };
        FaultEvent {
            kind: fault.kind.name().to_string(),
            at_secs,
            ended_secs: start.elapsed().as_secs_f64(),
            note,
            recovery_secs: None,
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
        if kind.needs_embedded_postgres() && !self.postgres.is_some_and(|p| p.embedded_cluster()) {
            return Some("no throwaway cluster to restart");
        }
        None
    }

    async fn apply(&self, fault: &Fault) -> Result<(), String> {
        let length = Duration::from_millis(fault.length_ms);
        match fault.kind {
            FaultKind::KillBroker => kill_and_restart(self.broker()?, length).await,
            FaultKind::PauseBroker => stop_and_continue(self.broker()?, length).await,
            FaultKind::PauseConsumers => {
                self.ctx.pause_consumers(true);
                tokio::time::sleep(length).await;
                self.ctx.pause_consumers(false);
                Ok(())
            }
            FaultKind::RestartPostgres => match self.postgres {
                Some(pg) => pg.restart_immediately().await,
                None => Err("no PostgreSQL to restart".into()),
            },
        }
    }

    fn broker(&self) -> Result<&BrokerProcess, String> {
        self.target
            .process()
            .ok_or_else(|| "no broker process".to_string())
    }
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
