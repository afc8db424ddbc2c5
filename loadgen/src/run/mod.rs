//! `ackbench run`: the accelerator matrix. Cells run interleaved, round by round (A B C D,
//! A B C D, ...), so the machine's drift falls on all of them alike; each cell round gets a fresh
//! database and a broker started with that cell's toggles. The outcome is one `Results`.

pub mod cell;
pub mod confirm;

use std::time::SystemTime;

use tokio::sync::watch;

use ackbench_reports::model::HOST_STEAL_WARN;
use ackbench_reports::results::{
    summarize, Audit, CellResults, Figures, Results, RoundResults, RunMeta, SecondSample, Summary,
    TopologyMeta, SCHEMA_VERSION,
};
use ackbench_reports::stats::{decode_histogram, encode_histogram};

use crate::lifecycle::env::Env;
use crate::lifecycle::settle::Settlement;
use crate::lifecycle::CellRound;
use crate::progress::Progress;
use crate::scenario::{Cell, Scenario, Topology};

/// One cell as a run plans it: the accelerator setting (or peer), the name it carries in
/// results, and the broker topology it runs against.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCell {
    pub cell: Cell,
    pub name: String,
    pub topology: Topology,
}

impl PlannedCell {
    fn new(cell: Cell, name: String, topology: Topology) -> PlannedCell {
        PlannedCell {
            cell,
            name,
            topology,
        }
    }
}

/// The cells of a run with their names: the scenario's cells, or in A/A mode one cell twice
/// (the twin named `<cell> (A/A)`), so the ratio between twins shows a gate's own noise.
/// Against an external broker (`target`: its cell name) there is one cell, named after it: its
/// accelerators cannot be switched, so the accelerator cells would run the same broker alike.
///
/// With several `[broker] topologies`, every broker cell runs once per topology, named
/// `<cell>@<topology>` (`registry+fusion@1`, `registry+fusion@3rr`, ...), cell by cell so a
/// cell's topologies sit side by side; peer cells have no broker and run once. A/A mode and an
/// external broker take the first topology (an external broker: one broker, as given).
pub fn cell_list(scenario: &Scenario, aa: Option<Cell>, target: Option<&str>) -> Vec<PlannedCell> {
    let topologies = scenario.broker.topologies();
    let first = topologies[0];
    let external = Topology::default();
    match (target, aa) {
        (Some(name), None) => vec![PlannedCell::new(Cell::None, name.to_string(), external)],
        (Some(name), Some(_)) => vec![
            PlannedCell::new(Cell::None, name.to_string(), external),
            PlannedCell::new(Cell::None, aa_twin(name), external),
        ],
        (None, Some(c)) => vec![
            PlannedCell::new(c, c.name().to_string(), first),
            PlannedCell::new(c, aa_twin(c.name()), first),
        ],
        (None, None) => scenario
            .run
            .cells
            .iter()
            .flat_map(|c| per_topology(*c, &topologies))
            .collect(),
    }
}

/// The `--external` cells, by their names, after the others in every round.
pub fn external_cells(env: &crate::lifecycle::env::Env) -> Vec<PlannedCell> {
    env.externals
        .iter()
        .enumerate()
        .map(|(i, e)| {
            PlannedCell::new(
                Cell::External(i as u8),
                e.spec.name.clone(),
                Topology::default(),
            )
        })
        .collect()
}

/// A cell once per topology (named after it when there are several); a peer cell once.
fn per_topology(cell: Cell, topologies: &[Topology]) -> Vec<PlannedCell> {
    match (cell.peer(), topologies) {
        (Some(_), _) | (None, [_]) => {
            vec![PlannedCell::new(
                cell,
                cell.name().to_string(),
                topologies[0],
            )]
        }
        (None, several) => several
            .iter()
            .map(|t| PlannedCell::new(cell, format!("{}@{}", cell.name(), t.label()), *t))
            .collect(),
    }
}

/// What each peer of the run does instead of what the scenario asks, once per peer.
fn peer_notes(scenario: &Scenario, cells: &[PlannedCell]) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    for peer in cells.iter().filter_map(|c| c.cell.peer()) {
        let note = peer.instead(scenario.consumers.pop_batch, scenario.queue.partitions);
        if let Some(note) = note.filter(|n| !notes.contains(n)) {
            notes.push(note);
        }
    }
    notes
}

/// The name of a cell's A/A twin.
pub fn aa_twin(cell: &str) -> String {
    format!("{cell} (A/A)")
}

/// Runs every round of every cell, settled as `settlement` says (the whole run, or one shard).
/// Stops early (returning what was measured, marked incomplete) when `cancel` flips.
pub async fn run(
    scenario: &Scenario,
    cells: &[PlannedCell],
    env: &Env,
    settlement: &dyn Settlement,
    seed: u64,
    cancel: watch::Receiver<bool>,
) -> Result<Results, String> {
    let started_at = now_iso();
    let rounds = scenario.run.rounds;
    let mut per_cell: Vec<Vec<RoundResults>> = vec![Vec::new(); cells.len()];
    let mut progress = Progress::default();
    let mut complete = true;
    let mut dry_warnings = Vec::new();
    'rounds: for round in 1..=rounds {
        for (i, planned) in cells.iter().enumerate() {
            if *cancel.borrow() {
                complete = false;
                break 'rounds;
            }
            let at = RoundAt {
                round,
                rounds,
                seed,
            };
            let (r, warning) = cell_round(
                scenario,
                planned,
                env,
                settlement,
                at,
                &cancel,
                &mut progress,
            )
            .await?;
            dry_warnings.extend(warning);
            complete &= r.complete;
            per_cell[i].push(r);
        }
    }
    let cell_order: Vec<String> = cells.iter().map(|c| c.name.clone()).collect();
    let notes_of_peers = peer_notes(scenario, cells);
    let own_topologies =
        !env.external_broker() && scenario.broker.topologies() != [Topology::default()];
    let wire_variants = sum_wire_variants(per_cell.iter().flatten());
    let cells: Vec<CellResults> = cells
        .iter()
        .zip(per_cell)
        .filter(|(_, rounds)| !rounds.is_empty())
        .map(|(planned, rounds)| CellResults {
            name: planned.name.clone(),
            registry: planned.cell.registry(),
            fusion: planned.cell.fusion(),
            external: planned.cell.external().is_some(),
            topology: (own_topologies
                && planned.cell.peer().is_none()
                && planned.cell.external().is_none())
            .then(|| topology_meta(planned)),
            summary: summary(&rounds),
            rounds,
        })
        .collect();
    let mut meta = with_wire_variants(crate::meta::run_meta(scenario, env), wire_variants);
    meta.notes.extend(dry_warnings);
    meta.notes.extend(notes_of_peers);
    Ok(Results {
        schema_version: SCHEMA_VERSION,
        complete,
        meta: RunMeta {
            started_at,
            finished_at: now_iso(),
            seed,
            rounds,
            cell_order,
            ..meta
        },
        cells,
        gates: Vec::new(),
    })
}

/// Which round of how many a cell round is, and the run's seed (each round's is derived).
#[derive(Debug, Clone, Copy)]
pub struct RoundAt {
    pub round: u32,
    pub rounds: u32,
    pub seed: u64,
}

/// One round of one planned cell, with its one-line summary said; its ran-dry warning, if any.
pub async fn cell_round(
    scenario: &Scenario,
    planned: &PlannedCell,
    env: &Env,
    settlement: &dyn Settlement,
    at: RoundAt,
    cancel: &watch::Receiver<bool>,
    progress: &mut Progress,
) -> Result<(RoundResults, Option<String>), String> {
    let cr = CellRound {
        scenario,
        cell: planned.cell,
        name: planned.name.clone(),
        topology: planned.topology,
        round: at.round,
        rounds: at.rounds,
        seed: at.seed.wrapping_add(at.round as u64 * 7919),
        run_tag: env.run_tag.clone(),
        shard: settlement.shard(),
    };
    let r = cell::run(env, &cr, settlement, cancel, progress).await?;
    progress.say(fit(&one_line(&cr, &r)).trim_end());
    let warning = ran_dry_warning(&cr, &r);
    if let Some(w) = &warning {
        progress.say(fit(w).trim_end());
    }
    Ok((r, warning))
}

/// A cell's topology as results record it.
fn topology_meta(planned: &PlannedCell) -> TopologyMeta {
    let t = &planned.topology;
    TopologyMeta {
        label: t.label(),
        instances: t.instances,
        routing: t.routing_name().to_string(),
        accelerators: planned.cell.name().to_string(),
    }
}

/// The wire variants of every round, added up.
fn sum_wire_variants<'a>(
    rounds: impl Iterator<Item = &'a RoundResults>,
) -> std::collections::BTreeMap<String, u64> {
    let mut sum = std::collections::BTreeMap::new();
    for r in rounds {
        for (what, n) in &r.wire_variants {
            *sum.entry(what.clone()).or_insert(0) += n;
        }
    }
    sum
}

fn with_wire_variants(
    mut meta: RunMeta,
    variants: std::collections::BTreeMap<String, u64>,
) -> RunMeta {
    meta.broker.wire_variants = variants;
    meta
}

/// The summary of a cell: figures as spreads over rounds, audits added, histograms merged.
pub fn summary(rounds: &[RoundResults]) -> Summary {
    let figures: Vec<&Figures<f64>> = rounds.iter().map(|r| &r.figures).collect();
    let mut audit = Audit {
        drained: true,
        ..Default::default()
    };
    for r in rounds {
        audit.add(&r.audit);
    }
    let mut merged: std::collections::BTreeMap<String, hdrhistogram::Histogram<u64>> =
        Default::default();
    for r in rounds {
        for (op, text) in &r.histograms {
            if let Ok(h) = decode_histogram(text) {
                match merged.get_mut(op) {
                    Some(m) => {
                        let _ = m.add(&h);
                    }
                    None => {
                        merged.insert(op.clone(), h);
                    }
                }
            }
        }
    }
    Summary {
        rounds: rounds.len() as u32,
        figures: summarize(&figures),
        audit,
        histograms: merged
            .iter()
            .map(|(k, h)| (k.clone(), encode_histogram(h)))
            .collect(),
    }
}

/// `text` wrapped to 100 columns, continuation lines indented.
fn fit(text: &str) -> String {
    let mut lines = crate::gates::wrap(text, 100, "    ");
    lines.replace_range(..4.min(lines.len()), "");
    lines
}

fn one_line(cr: &CellRound<'_>, r: &RoundResults) -> String {
    let f = &r.figures;
    let ack_p99 = f.latency_ms.get("ack").map(|p| p.p99).unwrap_or(f64::NAN);
    format!(
        "[{}] {} r{}: ack {}/s, push {}/s, ack commits/ack {}, commits/ack {}, pg ms/ack {}, ack p99 {} ms, audit {}{}",
        cr.scenario.name,
        cr.name,
        cr.round,
        figure_text(f.ack_throughput, 0),
        figure_text(f.push_throughput, 0),
        figure_text(f.ack_commits_per_ack, 3),
        figure_text(f.commits_per_ack, 3),
        figure_text(f.pg_exec_ms_per_ack, 4),
        figure_text(ack_p99, 2),
        audit_words(&r.audit),
        steal_words(f.host_steal_share)
    )
}

/// `; the host took 7 % of the CPU (steal)` when it took at least 1 %, with a warning from
/// `HOST_STEAL_WARN` on.
fn steal_words(share: f64) -> String {
    match share {
        s if s >= HOST_STEAL_WARN => format!(
            "; the host took {:.0} % of the CPU (steal): its timings are slowed by the host",
            100.0 * s
        ),
        s if s >= 0.01 => format!("; the host took {:.0} % of the CPU (steal)", 100.0 * s),
        _ => String::new(),
    }
}

/// A drain scenario's (no producers) warning when its backlog reached zero before the measured
/// window ended: the consumers then idled, so the window's ack/s understates the drain rate.
fn ran_dry_warning(cr: &CellRound<'_>, r: &RoundResults) -> Option<String> {
    if cr.scenario.producers.count > 0 {
        return None;
    }
    let at = ran_dry_at(&r.series)?;
    Some(format!(
        "[{}] {} r{}: the backlog ran dry {at:.0} s into the {:.0} s window, so its ack/s understates the drain rate: raise prefill.messages_per_partition",
        cr.scenario.name, cr.name, cr.round, r.window_secs
    ))
}

/// The second at which the backlog first read zero, when that was before the window's last
/// second (a backlog emptied by the very end is a drain that lasted).
fn ran_dry_at(series: &[SecondSample]) -> Option<f64> {
    let (_, before_last) = series.split_last()?;
    before_last.iter().find(|s| s.backlog == 0.0).map(|s| s.t)
}

/// A figure for the terminal with `decimals` places, or `—` when it was not measured (NaN:
/// no counter readable, or PostgreSQL's counters reset by a restart in the window) or is not
/// finite, as the report writes it.
pub fn figure_text(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        "—".to_string()
    } else {
        format!("{v:.decimals$}")
    }
}

pub fn audit_words(a: &Audit) -> String {
    format!(
        "{} (pushed {}, acked {}, dlq {}, dropped {}, lost {}, undrained {}{}, duplicates {}{}{}{})",
        if !a.passed() {
            "LOST MESSAGES"
        } else if !a.broken().is_empty() {
            "GUARANTEES BROKEN"
        } else if a.undrained > 0 {
            "UNDRAINED"
        } else {
            "ok"
        },
        a.pushed,
        a.acked,
        a.dead_lettered,
        a.dropped,
        a.lost,
        a.undrained,
        crate::gates::still_queued_words(a),
        a.duplicates,
        if a.drained { "" } else { ", not drained" },
        guarantee_words(a),
        match a.dlq_unchecked {
            true => format!("; not checked: {}", a.unchecked_words()),
            false => String::new(),
        }
    )
}

/// The guarantee counts above zero (besides lost), e.g. `; order_violations 3, recovered 1`.
fn guarantee_words(a: &Audit) -> String {
    let counts: Vec<String> = a
        .guarantees()
        .iter()
        .filter(|g| g.name != "lost" && g.count > 0)
        .map(|g| format!("{} {}", g.name, g.count))
        .collect();
    match counts.is_empty() {
        true => String::new(),
        false => format!("; {}", counts.join(", ")),
    }
}

pub fn now_iso() -> String {
    humantime::format_rfc3339_micros(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::ran_dry_at;
    use ackbench_reports::results::SecondSample;

    fn series(backlogs: &[f64]) -> Vec<SecondSample> {
        backlogs
            .iter()
            .enumerate()
            .map(|(i, &backlog)| SecondSample {
                t: i as f64 + 1.0,
                backlog,
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn a_backlog_emptied_inside_the_window_ran_dry_and_one_emptied_at_its_end_did_not() {
        assert_eq!(ran_dry_at(&series(&[400.0, 100.0, 0.0, 0.0])), Some(3.0));
        assert_eq!(ran_dry_at(&series(&[400.0, 200.0, 100.0, 0.0])), None);
        assert_eq!(ran_dry_at(&series(&[400.0, 300.0])), None);
        assert_eq!(ran_dry_at(&[]), None);
    }
}
