//! A running workload and its phases: started by the cell's installed system (queue set-up,
//! prefill, workers), warm-up, drain, stop, and the audit that reconciles the client's ledger
//! with the system's dead letters, both settled as this process's `Settlement` says (the whole
//! run, or one shard of it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use ackbench_reports::results::Audit;

use super::settle::Settlement;
use super::CellRound;
use crate::driver::system::{Installed, Running};
use crate::progress::Progress;
use crate::workload::{CellContext, Phase};

/// One queue with its producers and consumers running on an installed system.
pub struct Workload<'a> {
    running: Running,
    system: &'a dyn Installed,
    settlement: &'a dyn Settlement,
}

impl<'a> Workload<'a> {
    /// Starts the cell round's workload on `system` (in warm-up).
    pub async fn start(
        cr: &CellRound<'_>,
        system: &'a dyn Installed,
        settlement: &'a dyn Settlement,
        progress: &mut Progress,
    ) -> Result<Workload<'a>, String> {
        let running = system.start(cr, progress).await?;
        Ok(Workload {
            running,
            system,
            settlement,
        })
    }

    /// What the workers share: the ledger, the latency recorder, the counters, the phase.
    pub fn ctx(&self) -> &Arc<CellContext> {
        &self.running.ctx
    }

    /// A warm-up of `secs` with a progress line each second (nothing is recorded); true when
    /// interrupted.
    pub async fn warm_up(
        &self,
        label: &str,
        secs: f64,
        cancel: &watch::Receiver<bool>,
        progress: &mut Progress,
    ) -> bool {
        let ctx = &self.running.ctx;
        let started = tokio::time::Instant::now();
        let total = Duration::from_secs_f64(secs);
        let mut last = ctx.counters.values();
        while started.elapsed() < total {
            let step = Duration::from_secs(1).min(total - started.elapsed());
            tokio::time::sleep(step).await;
            if *cancel.borrow() {
                return true;
            }
            let now = ctx.counters.values();
            let dt = step.as_secs_f64().max(1e-3);
            progress.update(&format!(
                "{label} warm-up {:>3.0}/{secs:.0}s  push {:>7.0}/s  ack {:>7.0}/s  backlog {:>7}  errors {}",
                started.elapsed().as_secs_f64(),
                (now.pushed_messages - last.pushed_messages) / dt,
                (now.acked_messages - last.acked_messages) / dt,
                ctx.ledger.backlog(),
                now.errors
            ));
            last = now;
        }
        *cancel.borrow()
    }

    /// Stops the producers and lets the consumers finish the backlog; true when every
    /// obligation was resolved within `limit_secs`.
    pub async fn drain(
        &self,
        label: &str,
        limit_secs: f64,
        cancel: &watch::Receiver<bool>,
        progress: &mut Progress,
    ) -> bool {
        self.running.ctx.set_phase(Phase::Drain);
        let limit = Duration::from_secs_f64(limit_secs);
        let started = Instant::now();
        loop {
            // Settled first, the backlog after: a push still in flight when the backlog was read
            // could book its messages and settle before the check, and the drain would end
            // owing them (they were then counted lost). Once no push is in flight, every push
            // that began has booked, and none begins after the phase changed.
            let settled = self.running.ctx.pushes_settled();
            let backlog = self.running.ctx.ledger.backlog();
            progress.update(&format!(
                "{label} drain {:.0}s  backlog {backlog}",
                started.elapsed().as_secs_f64()
            ));
            if settled && self.nothing_owed(backlog).await {
                return true;
            }
            if *cancel.borrow() || started.elapsed() > limit {
                // The workers' last answers may still resolve some: the audit, taken once
                // they stop, has the count every output shows.
                progress.say(&format!(
                    "{label} drain stopped with {backlog} messages outstanding (the audit counts what stays unresolved)"
                ));
                return false;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Whether the drain is done, pushes settled: nothing is owed, as the settlement judges.
    async fn nothing_owed(&self, backlog: u64) -> bool {
        self.settlement
            .owes_nothing(self.system, &self.running, backlog)
            .await
    }

    /// Stops every worker (a parked long-poll gets a bounded grace, then is aborted).
    pub async fn stop(&mut self) {
        self.running.ctx.set_phase(Phase::Stop);
        stop_workers(std::mem::take(&mut self.running.workers)).await;
    }

    /// Stops every worker at once, aborting requests in flight and parked long-polls: for a
    /// workload that is neither drained nor audited (a capacity step), which need not wait out
    /// a long-poll's timeout.
    pub async fn abort(&mut self) {
        self.running.ctx.set_phase(Phase::Stop);
        for w in std::mem::take(&mut self.running.workers) {
            w.abort();
            // Cancelled, or finished first: either way it has stopped.
            let _ = w.await;
        }
    }

    /// The round's audit (`tag` names the round), as the settlement takes it; `drained` says
    /// whether the drain resolved everything.
    pub async fn audit(&self, drained: bool, tag: &str) -> Result<Audit, String> {
        self.settlement
            .audit(self.system, &self.running, drained, tag)
            .await
    }
}

/// Stops the workers: they see `Phase::Stop` before their next request; a parked long-poll may
/// take up to its timeout, so they get a bounded grace and the rest are aborted.
async fn stop_workers(workers: Vec<JoinHandle<()>>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    for w in workers {
        let abort = w.abort_handle();
        if tokio::time::timeout_at(deadline, w).await.is_err() {
            abort.abort();
        }
    }
}
