//! How this process settles a cell round's end, chosen once on the command line: `Whole` runs
//! the whole scenario, ends its drain when its ledger owes nothing and audits against the
//! system's dead letters; `OneShard` runs a slice (`--shard`), ends its drain when the system
//! says the queue is drained (its own ledger cannot know what other shards resolved), audits
//! what it alone cannot resolve as undrained, never lost, and leaves its ledger for the merge
//! (`ackbench merge` proves or disproves loss).

use std::path::PathBuf;

use ackbench_reports::results::Audit;

use crate::driver::system::{Installed, Pending, Running};
use crate::shard::ledger_file::{self, ShardLedger};
use crate::shard::Shard;
use ackbench_ledger::reconcile;

/// A way to settle a cell round's drain and audit.
pub trait Settlement: Send + Sync {
    /// The slice of the scenario this process runs.
    fn shard(&self) -> Shard;

    /// Whether nothing more is owed, pushes settled, with `backlog` outstanding in this
    /// process's ledger.
    fn owes_nothing<'a>(
        &'a self,
        system: &'a dyn Installed,
        running: &'a Running,
        backlog: u64,
    ) -> Pending<'a, bool>;

    /// The round's audit (`tag` names the round); `drained` says whether the drain resolved
    /// everything.
    fn audit<'a>(
        &'a self,
        system: &'a dyn Installed,
        running: &'a Running,
        drained: bool,
        tag: &'a str,
    ) -> Pending<'a, Result<Audit, String>>;
}

/// The whole scenario in this one process.
pub struct Whole;

impl Settlement for Whole {
    fn shard(&self) -> Shard {
        Shard::WHOLE
    }

    fn owes_nothing<'a>(
        &'a self,
        _system: &'a dyn Installed,
        _running: &'a Running,
        backlog: u64,
    ) -> Pending<'a, bool> {
        Box::pin(async move { backlog == 0 })
    }

    /// Reconciles the ledger with the system's dead letters.
    fn audit<'a>(
        &'a self,
        system: &'a dyn Installed,
        running: &'a Running,
        drained: bool,
        _tag: &'a str,
    ) -> Pending<'a, Result<Audit, String>> {
        Box::pin(async move {
            let ledger = &running.ctx.ledger;
            let queued = if drained {
                None
            } else {
                match system.still_queued(running).await {
                    Ok(listed) => listed,
                    Err(e) => {
                        running
                            .ctx
                            .error(format!("audit: listing what is still queued failed: {e}"));
                        None
                    }
                }
            };
            let mut audit = match system.dead_letters(running).await {
                Ok(dlq) => ledger.audit(&dlq, drained),
                Err(_) => ledger.audit_without_listing(drained),
            };
            if let Some(queued) = queued {
                ledger.count_still_queued(&mut audit, &queued);
            }
            Ok(audit)
        })
    }
}

/// One shard of a sharded run; its ledger files go to `out_dir`.
pub struct OneShard {
    pub shard: Shard,
    pub out_dir: PathBuf,
}

impl Settlement for OneShard {
    fn shard(&self) -> Shard {
        self.shard
    }

    fn owes_nothing<'a>(
        &'a self,
        system: &'a dyn Installed,
        running: &'a Running,
        _backlog: u64,
    ) -> Pending<'a, bool> {
        Box::pin(async move {
            match system.queue_drained(running).await {
                Ok(drained) => drained,
                Err(e) => {
                    running.ctx.error(format!("drain: {e}"));
                    false
                }
            }
        })
    }

    /// The shard's audit, and its ledger file beside it for the merge.
    fn audit<'a>(
        &'a self,
        system: &'a dyn Installed,
        running: &'a Running,
        drained: bool,
        tag: &'a str,
    ) -> Pending<'a, Result<Audit, String>> {
        Box::pin(async move {
            let dlq = system.dead_letters(running).await.ok();
            let fates = running.ctx.ledger.fates();
            let partial = reconcile(&fates, dlq.as_deref(), false);
            let audit = Audit { drained, ..partial };
            let ledger = ShardLedger { fates, dlq };
            ledger_file::write(&ledger_file::path(&self.out_dir, tag), &ledger)?;
            Ok(audit)
        })
    }
}
