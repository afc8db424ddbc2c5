//! `ackbench merge DIR...`: the results of a sharded run's shards, put back together into one
//! results document that reads like a single run's.
//!
//! Per cell round: the client's counts (messages, requests, redeliveries, errors, the load
//! generator's CPU) add up exactly over the shards; latency histograms are merged and every
//! percentile recomputed from the merged histogram; throughput is the summed count over the
//! shards' mean window. PostgreSQL's counters and the broker's `/metrics` are database-wide and
//! broker-wide: every shard's delta already holds all shards' load over its own window, so they
//! are taken once, from shard 0, never added up. The audit is the reconciliation of every
//! shard's ledger file (`ledger_file`): a message pushed by one shard and acked by another is
//! acked, and only what no shard resolved after a finished drain is lost.
//!
//! The shards must be one run: the same run id, scenario and shard count, each index exactly
//! once; anything else is refused naming the directories, and nothing is written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ackbench_reports::results::{
    CellResults, Figures, Results, RoundResults, SecondSample, ShardsMeta,
};
use ackbench_reports::stats::{encode_histogram, merge_encoded};
use hdrhistogram::Histogram;

use super::ledger_file::{self, ShardLedger};
use crate::lifecycle::round_tag;
use crate::measure::figures::{derive, WindowDeltas};
use crate::measure::pg_counters::{PgSnapshot, StatementCounters};
use crate::workload::CounterValues;
use ackbench_ledger::{reconcile, ByTxn, Fate, TxnSet};

/// One shard's results and the directory they came from.
pub struct ShardRun {
    pub dir: PathBuf,
    pub results: Results,
    pub index: u32,
}

/// Reads the shards' directories and merges them; the error names what does not fit.
pub fn merge_dirs(dirs: &[PathBuf]) -> Result<Results, String> {
    let shards = dirs
        .iter()
        .map(|d| read_shard(d))
        .collect::<Result<Vec<_>, _>>()?;
    let shards = check_one_run(shards)?;
    merge(&shards)
}

fn read_shard(dir: &Path) -> Result<ShardRun, String> {
    let results = ackbench_reports::results::read(&dir.join("results.json"))?;
    let index = results
        .meta
        .shards
        .as_ref()
        .and_then(|s| s.index)
        .ok_or_else(|| {
            format!(
                "{}: not a shard's results (written by `ackbench run --shard I/N`)",
                dir.display()
            )
        })?;
    Ok(ShardRun {
        dir: dir.to_path_buf(),
        results,
        index,
    })
}

/// The shards sorted by index, once checked to be every shard of one run.
pub fn check_one_run(mut shards: Vec<ShardRun>) -> Result<Vec<ShardRun>, String> {
    let first = shards
        .first()
        .ok_or("merge: give the shards' directories")?;
    let (meta0, dir0) = (&first.results.meta, first.dir.display().to_string());
    let run0 = meta0.shards.clone().expect("read_shard checked");
    for s in &shards[1..] {
        let (meta, dir) = (&s.results.meta, s.dir.display());
        let run = meta.shards.as_ref().expect("read_shard checked");
        if run.run_id != run0.run_id {
            return Err(format!(
                "{dir} is run `{}` but {dir0} is run `{}`: shards of different runs do not merge",
                run.run_id, run0.run_id
            ));
        }
        if meta.scenario.hash != meta0.scenario.hash || meta.scenario.name != meta0.scenario.name {
            return Err(format!(
                "{dir} ran scenario {} ({}) but {dir0} ran {} ({}): shards of different scenarios do not merge",
                meta.scenario.name, meta.scenario.hash, meta0.scenario.name, meta0.scenario.hash
            ));
        }
        if run.count != run0.count {
            return Err(format!(
                "{dir} is one of {} shards but {dir0} one of {}",
                run.count, run0.count
            ));
        }
    }
    shards.sort_by_key(|s| s.index);
    check_every_index_once(&shards, run0.count)?;
    Ok(shards)
}

fn check_every_index_once(sorted: &[ShardRun], count: u32) -> Result<(), String> {
    for pair in sorted.windows(2) {
        if pair[0].index == pair[1].index {
            return Err(format!(
                "shard {}/{count} is given twice: {} and {}",
                pair[0].index,
                pair[0].dir.display(),
                pair[1].dir.display()
            ));
        }
    }
    let missing: Vec<String> = (0..count)
        .filter(|i| !sorted.iter().any(|s| s.index == *i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    match missing.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "shard {} missing: every shard of the run is needed (counts must add up)",
            missing.join(", ")
        )),
    }
}

/// Merges shards already checked by `check_one_run`.
pub fn merge(shards: &[ShardRun]) -> Result<Results, String> {
    let first = &shards[0].results;
    let mut cells = Vec::new();
    for cell in &first.cells {
        cells.push(merge_cell(shards, cell)?);
    }
    let meta = merged_meta(shards);
    Ok(Results {
        schema_version: first.schema_version,
        complete: shards.iter().all(|s| s.results.complete),
        meta,
        cells,
        gates: Vec::new(),
    })
}

fn merge_cell(shards: &[ShardRun], cell: &CellResults) -> Result<CellResults, String> {
    let mut rounds = Vec::new();
    for round in &cell.rounds {
        let parts = shards
            .iter()
            .map(|s| shard_round(s, &cell.name, round.round))
            .collect::<Result<Vec<_>, _>>()?;
        let run_id = &shards[0]
            .results
            .meta
            .shards
            .as_ref()
            .expect("checked")
            .run_id;
        let tag = round_tag(&cell.name, run_id, round.round);
        let ledgers = shards
            .iter()
            .map(|s| ledger_file::read(&ledger_file::path(&s.dir, &tag)))
            .collect::<Result<Vec<_>, _>>()?;
        rounds.push(merge_round(&parts, &ledgers)?);
    }
    Ok(CellResults {
        name: cell.name.clone(),
        registry: cell.registry,
        fusion: cell.fusion,
        summary: crate::run::summary(&rounds),
        rounds,
        topology: cell.topology.clone(),
        external: cell.external,
    })
}

/// Round `round` of cell `name` in one shard's results.
fn shard_round<'a>(s: &'a ShardRun, name: &str, round: u32) -> Result<&'a RoundResults, String> {
    s.results
        .cell(name)
        .and_then(|c| c.rounds.iter().find(|r| r.round == round))
        .ok_or_else(|| {
            format!(
                "{}: shard {} has no round {round} of cell {name}",
                s.dir.display(),
                s.index
            )
        })
}

/// One cell round from every shard's part of it (in shard order) and ledger.
pub fn merge_round(
    parts: &[&RoundResults],
    ledgers: &[ShardLedger],
) -> Result<RoundResults, String> {
    let first = parts[0];
    let histograms = merged_histograms(parts)?;
    let window_secs = parts.iter().map(|r| r.window_secs).sum::<f64>() / parts.len() as f64;
    let counters = summed_counters(parts);
    let pg = database_counters(&first.figures);
    let loadgen_cpu_secs = parts.iter().map(|r| loadgen_cpu_secs(&r.figures)).sum();
    let figures = derive(&WindowDeltas {
        window_secs,
        counters,
        pg: &pg,
        broker: &first.broker_metrics,
        histograms: &histograms,
        loadgen_cpu_secs,
        broker_cpu_secs: first.figures.broker_cpu_cores * first.window_secs,
        // The most any shard's machine lost to its host (each shard reads its own).
        host_steal_share: parts
            .iter()
            .map(|r| r.figures.host_steal_share)
            .fold(f64::NAN, f64::max),
    });
    Ok(RoundResults {
        round: first.round,
        complete: parts.iter().all(|r| r.complete),
        window_secs,
        figures,
        broker_metrics: first.broker_metrics.clone(),
        brokers: first.brokers.clone(),
        audit: parts.iter().fold(
            merged_audit(ledgers, parts.iter().all(|r| r.audit.drained)),
            |mut audit, part| {
                // Each shard judged the history its own workers saw.
                audit.add_guarantees(&part.audit);
                audit
            },
        ),
        series: merged_series(parts),
        faults: first.faults.clone(),
        wire_variants: summed_variants(parts),
        minutes: Vec::new(),
        histograms: histograms
            .iter()
            .map(|(op, h)| (op.clone(), encode_histogram(h)))
            .collect(),
    })
}

/// Every operation's histograms merged over the shards.
fn merged_histograms(parts: &[&RoundResults]) -> Result<BTreeMap<String, Histogram<u64>>, String> {
    let mut ops: Vec<&String> = parts.iter().flat_map(|r| r.histograms.keys()).collect();
    ops.sort();
    ops.dedup();
    ops.into_iter()
        .map(|op| {
            let texts = parts.iter().filter_map(|r| r.histograms.get(op));
            Ok((op.clone(), merge_encoded(op, texts.map(String::as_str))?))
        })
        .collect()
}

/// The client's counts of every shard, added up.
fn summed_counters(parts: &[&RoundResults]) -> CounterValues {
    let sum = |pick: fn(&Figures<f64>) -> f64| parts.iter().map(|r| pick(&r.figures)).sum();
    CounterValues {
        push_requests: sum(|f| f.push_requests),
        pushed_messages: sum(|f| f.pushed_messages),
        pop_requests: sum(|f| f.pop_requests),
        popped_messages: sum(|f| f.popped_messages),
        ack_requests: sum(|f| f.ack_requests),
        acked_messages: sum(|f| f.acked_messages),
        redeliveries: sum(|f| f.redeliveries),
        refused_acks: 0.0,
        errors: sum(|f| f.errors),
    }
}

/// The database-wide counters one shard measured, back from its figures.
fn database_counters(f: &Figures<f64>) -> PgSnapshot {
    let statements = f
        .statements
        .iter()
        .map(|(name, s)| {
            let counters = StatementCounters {
                calls: s.calls,
                total_exec_ms: s.total_exec_ms,
                rows: s.rows,
                wal_bytes: s.wal_bytes,
            };
            (name.clone(), counters)
        })
        .collect();
    PgSnapshot {
        xact_commit: f.commits,
        xmax: f.write_commits,
        wal_records: f.wal_records,
        wal_bytes: f.wal_bytes,
        wal_writes: f64::NAN,
        wal_syncs: f.wal_syncs,
        statements,
    }
}

/// A shard's load-generator CPU seconds, back from its per-request figure (0 when it sent
/// nothing).
fn loadgen_cpu_secs(f: &Figures<f64>) -> f64 {
    let requests = f.push_requests + f.pop_requests + f.ack_requests;
    match requests > 0.0 && f.loadgen_cpu_us_per_op.is_finite() {
        true => f.loadgen_cpu_us_per_op * requests / 1e6,
        false => 0.0,
    }
}

/// The audit of the shards' ledgers reconciled together; `drained` when every shard's drain
/// finished. The DLQ listing is the union of the listings the shards read (each lists the
/// whole queue; a later one may hold more); unread by every shard, the DLQ goes unchecked.
pub fn merged_audit(ledgers: &[ShardLedger], drained: bool) -> ackbench_reports::results::Audit {
    let groups = ledgers.iter().map(|l| l.fates.len()).max().unwrap_or(0);
    let mut fates: Vec<ByTxn<Fate>> = vec![ByTxn::default(); groups];
    let mut dlq: Option<Vec<TxnSet>> = None;
    for l in ledgers {
        for (g, group) in l.fates.iter().enumerate() {
            for (txn, f) in group {
                fates[g].entry(*txn).or_default().merge(f);
            }
        }
        if let Some(listed) = &l.dlq {
            let union = dlq.get_or_insert_with(|| vec![TxnSet::default(); groups]);
            for (g, set) in listed.iter().enumerate() {
                union[g].extend(set.iter().copied());
            }
        }
    }
    reconcile(&fates, dlq.as_deref(), drained)
}

/// The per-second series: the client's rates and backlog added up second by second, the
/// database's commit rates from shard 0 (database-wide), ack p99 the highest shard's (an upper
/// bound: a percentile of a second cannot be recomputed from the shards' own).
fn merged_series(parts: &[&RoundResults]) -> Vec<SecondSample> {
    let seconds = parts.iter().map(|r| r.series.len()).min().unwrap_or(0);
    (0..seconds)
        .map(|i| {
            let at = |r: &&RoundResults| r.series[i].clone();
            let all: Vec<SecondSample> = parts.iter().map(at).collect();
            SecondSample {
                t: all[0].t,
                commits: all[0].commits,
                ack_commits: all[0].ack_commits,
                ack_exec_ms: all[0].ack_exec_ms,
                pushed: all.iter().map(|s| s.pushed).sum(),
                acked: all.iter().map(|s| s.acked).sum(),
                ack_p99_ms: all.iter().map(|s| s.ack_p99_ms).fold(f64::NAN, f64::max),
                backlog: all.iter().map(|s| s.backlog).sum(),
                errors: all.iter().map(|s| s.errors).sum(),
            }
        })
        .collect()
}

fn summed_variants(parts: &[&RoundResults]) -> BTreeMap<String, u64> {
    let mut sum = BTreeMap::new();
    for (what, n) in parts.iter().flat_map(|r| &r.wire_variants) {
        *sum.entry(what.clone()).or_insert(0) += n;
    }
    sum
}

/// Shard 0's metadata, spanning every shard's start and finish, marked merged, with the
/// shards' own notes replaced by what the merge did.
fn merged_meta(shards: &[ShardRun]) -> ackbench_reports::results::RunMeta {
    let mut meta = shards[0].results.meta.clone();
    let run = meta.shards.clone().expect("checked");
    meta.started_at = shards
        .iter()
        .map(|s| s.results.meta.started_at.clone())
        .min()
        .unwrap_or_default();
    meta.finished_at = shards
        .iter()
        .map(|s| s.results.meta.finished_at.clone())
        .max()
        .unwrap_or_default();
    meta.shards = Some(ShardsMeta {
        index: None,
        ..run.clone()
    });
    meta.broker.wire_variants = summed_meta_variants(shards);
    meta.notes.retain(|n| !n.starts_with("shard "));
    meta.notes.extend(merge_notes(shards, &run));
    meta
}

fn summed_meta_variants(shards: &[ShardRun]) -> BTreeMap<String, u64> {
    let mut sum = BTreeMap::new();
    for (what, n) in shards
        .iter()
        .flat_map(|s| &s.results.meta.broker.wire_variants)
    {
        *sum.entry(what.clone()).or_insert(0) += n;
    }
    sum
}

fn merge_notes(shards: &[ShardRun], run: &ShardsMeta) -> Vec<String> {
    let hosts: Vec<String> = shards
        .iter()
        .map(|s| format!("{} on {}", s.index, s.results.meta.machine.hostname))
        .collect();
    vec![
        format!(
            "merged from {} shards of run {} (shard {}); the machine above is shard 0's",
            run.count,
            run.run_id,
            hosts.join(", ")
        ),
        "client counts (messages, requests, redeliveries, errors, load-generator CPU) add up over the shards; \
         throughput is their sum over the shards' mean window; latency percentiles are recomputed from the merged \
         histograms"
            .into(),
        "PostgreSQL counters and the broker's /metrics are database- and broker-wide, so they are taken once, from \
         shard 0's window, never added up: where the shards' windows overlap, that delta already holds every \
         shard's load; per-second commits come from shard 0 and per-second ack p99 is the highest shard's"
            .into(),
        "the audit reconciles every shard's ledger: a message pushed by one shard and acked by another counts as \
         acked; only what no shard resolved after every shard's drain finished is lost"
            .into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use ackbench_reports::results::{RunMeta, ScenarioMeta};
    use ackbench_wire::txn_hash;

    fn shard(dir: &str, run_id: &str, hash: &str, index: u32, count: u32) -> ShardRun {
        let meta = RunMeta {
            scenario: ScenarioMeta {
                name: "s".into(),
                hash: hash.into(),
                ..Default::default()
            },
            shards: Some(ShardsMeta {
                run_id: run_id.into(),
                count,
                index: Some(index),
            }),
            ..Default::default()
        };
        let results = Results {
            schema_version: 2,
            complete: true,
            meta,
            cells: Vec::new(),
            gates: Vec::new(),
        };
        ShardRun {
            dir: dir.into(),
            results,
            index,
        }
    }

    fn refusal(shards: Vec<ShardRun>) -> String {
        check_one_run(shards).err().expect("refused")
    }

    #[test]
    fn only_every_shard_of_one_run_merges() {
        let ok = check_one_run(vec![shard("b", "r", "h", 1, 2), shard("a", "r", "h", 0, 2)]);
        let order: Vec<u32> = ok.unwrap().iter().map(|s| s.index).collect();
        assert_eq!(order, [0, 1]);
        let e = refusal(vec![shard("a", "r", "h", 0, 2), shard("b", "q", "h", 1, 2)]);
        assert!(e.contains("b is run `q` but a is run `r`"), "{e}");
        let e = refusal(vec![shard("a", "r", "h", 0, 2), shard("b", "r", "x", 1, 2)]);
        assert!(
            e.contains("shards of different scenarios do not merge"),
            "{e}"
        );
        let e = refusal(vec![shard("a", "r", "h", 0, 2), shard("b", "r", "h", 0, 2)]);
        assert!(e.contains("shard 0/2 is given twice: a and b"), "{e}");
        let e = refusal(vec![shard("a", "r", "h", 0, 3), shard("c", "r", "h", 2, 3)]);
        assert!(e.contains("shard 1/3 missing"), "{e}");
        let e = refusal(vec![shard("a", "r", "h", 0, 3), shard("b", "r", "h", 1, 2)]);
        assert!(e.contains("one of 2 shards but a one of 3"), "{e}");
    }

    /// A message pushed by shard 0 and acked by shard 1 is acked; one shard 2 saw dead-lettered
    /// and the DLQ lists is dead-lettered; one nobody resolved is lost once all drained.
    #[test]
    fn the_audit_reconciles_what_different_shards_saw() {
        let (x, y, z) = (txn_hash("x"), txn_hash("y"), txn_hash("z"));
        let fate = |deliveries, acked, dead_lettered| Fate {
            deliveries,
            acked,
            dead_lettered,
            dropped: false,
        };
        let one = |pairs: &[(ackbench_wire::TxnHash, Fate)]| ShardLedger {
            fates: vec![pairs.iter().copied().collect()],
            dlq: None,
        };
        let pushed = one(&[
            (x, fate(0, false, false)),
            (y, fate(0, false, false)),
            (z, fate(0, false, false)),
        ]);
        let acker = one(&[(x, fate(1, true, false)), (y, fate(1, false, false))]);
        let mut dead = one(&[(y, fate(1, false, true))]);
        dead.dlq = Some(vec![TxnSet::from_iter([y])]);
        let a = merged_audit(&[pushed, acker, dead], true);
        assert_eq!(
            (a.pushed, a.acked, a.dead_lettered, a.lost, a.duplicates),
            (3, 1, 1, 1, 1)
        );
        assert!(!a.dlq_unchecked, "one shard read the listing");
    }
}
