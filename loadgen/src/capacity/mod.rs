//! `ackbench capacity`: per cell, search the offered producer rate for the knee: the highest
//! rate sustained within a latency target, and the lowest that is not.
//!
//! Each cell gets one fresh database and one broker (as `run` does). Its first step runs at
//! `start`; then the search steps up by `step` from a sustained rate or down from a failing
//! one (within `min`..`max`) until a sustained rate lies below a failing one, and bisects that
//! bracket (geometric middle) until the two are within `precision`. Each step runs on a fresh
//! queue (the scenario's options and prefill) with its own workers: open-loop producers at the
//! step's rate (everything else from the scenario's `[producers]` and `[consumers]`), a
//! warm-up, and a measured window with snapshots at its edges. The workers stop after the
//! window; the step is not drained. Each step is judged (`verdict`). The outcome is one
//! `capacity.json` (a sustained rate per cell, or the words that even the floor failed) and its
//! report.
//!
//! `ladder` runs one cell's search, `step` measures one step through the shared cell lifecycle
//! (`crate::lifecycle`), `verdict` judges it and picks the next rate; this module plans, runs
//! every cell and reports.

mod ladder;
pub mod model;
mod step;
pub mod verdict;

use std::path::Path;

use tokio::sync::watch;

use ackbench_reports::capacity::{all_warnings, amount, cell_sentence, headline};
use ackbench_reports::model::format_number;
use ackbench_reports::results::RunMeta;

use crate::lifecycle::env::Env;
use crate::progress::Progress;
use crate::run::now_iso;
use crate::scenario::{Cell, Scenario};
use model::{CapacityResults, Criteria, Plan};

/// The rate a capacity run starts at when neither `--start` nor an open-loop scenario rate
/// gives one (msg/s).
pub const DEFAULT_START: f64 = 100.0;
/// The default step factor.
pub const DEFAULT_STEP: f64 = 1.5;
/// Without `--max`, the search may go this factor above the start (the knee stops it earlier).
pub const DEFAULT_SPAN: f64 = 1000.0;
/// Without `--min`, the search may go this factor below the start.
pub const DEFAULT_FLOOR_SPAN: f64 = 20.0;
/// Without `--precision`: the search ends once the failing rate is within 5 % of the sustained.
pub const DEFAULT_PRECISION: f64 = 0.05;

/// The search flags of `ackbench capacity`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchFlags {
    pub start: Option<f64>,
    pub step: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub precision: Option<f64>,
}

/// The plan of a capacity run from the scenario (after overrides) and the flags.
pub fn plan(s: &Scenario, flags: SearchFlags) -> Result<Plan, String> {
    if s.producers.count == 0 {
        return Err(
            "capacity steps the producers' rate up, but the scenario's [producers] count is 0"
                .into(),
        );
    }
    let start = flags
        .start
        .unwrap_or_else(|| s.producers.open_rate().unwrap_or(DEFAULT_START));
    let step = flags.step.unwrap_or(DEFAULT_STEP);
    let max = flags.max.unwrap_or(start * DEFAULT_SPAN);
    let rates = verdict::ladder(start, step, max)?;
    let min = flags.min.unwrap_or(start / DEFAULT_FLOOR_SPAN);
    if !(min.is_finite() && min > 0.0 && min <= start) {
        return Err(format!(
            "--min must be a positive rate at most --start ({}), got {min}",
            amount(start)
        ));
    }
    let precision = flags.precision.unwrap_or(DEFAULT_PRECISION);
    if !(precision.is_finite() && (0.001..=1.0).contains(&precision)) {
        return Err(format!(
            "--precision must be a share between 0.001 and 1 (0.05 = 5%), got {precision}"
        ));
    }
    Ok(Plan {
        start_rate: start,
        step_factor: step,
        max_rate: max,
        min_rate: min,
        precision,
        rates,
        warmup_secs: s.run.warmup_secs,
        step_secs: s.run.duration_secs,
        window_growth: 0.0,
        producers: s.producers.count,
        producer_batch: s.producers.batch,
        consumers: s.consumers.count,
        consumer_groups: s.consumers.group_names().len() as u32,
        prefill_per_partition: s.prefill.messages_per_partition,
        cell_starts: Default::default(),
    })
}

/// The latency target when neither the command line nor the scenario gives one (ms).
pub const DEFAULT_SLO_P99_MS: f64 = 50.0;

/// The criteria with latency target `slo_p99_ms`.
pub fn criteria(slo_p99_ms: f64) -> Result<Criteria, String> {
    if !(slo_p99_ms.is_finite() && slo_p99_ms > 0.0) {
        return Err(format!(
            "--slo-p99-ms must be a positive number of milliseconds, got {slo_p99_ms}"
        ));
    }
    Ok(Criteria::with_slo(slo_p99_ms))
}

/// Warnings about the plan itself: windows too short for the rate's granularity.
pub fn plan_warnings(p: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(&low) = p.rates.first() {
        let per_producer =
            low * p.step_secs / (p.producer_batch.max(1) as f64 * p.producers.max(1) as f64);
        if per_producer < 20.0 {
            out.push(format!(
                "at {} msg/s each producer sends only {} batches per {} s window: achieved rates there are coarse (about ±{}%); lengthen --step-secs or lower [producers] batch",
                amount(low),
                format_number(per_producer),
                amount(p.step_secs),
                format_number(100.0 / per_producer.max(1.0))
            ));
        }
    }
    out
}

/// When the scenario stalls batches past their lease on purpose: each stall holds its partition
/// for the lease, and the messages pushed there meanwhile wait behind it. Their share grows with
/// the rate (rate × stall × lease / (partitions × pop batch)); above the rate where it passes
/// 1 %, end-to-end p99 is the lease, whatever the system does. None when the lease is within
/// the target or nothing stalls.
pub fn stall_warning(s: &Scenario, slo_p99_ms: f64) -> Option<String> {
    let c = &s.consumers;
    let lease = f64::from(c.lease_seconds.unwrap_or(s.queue.options.lease_time));
    if c.stall <= 0.0 || lease * 1000.0 <= slo_p99_ms {
        return None;
    }
    let lanes = f64::from(s.queue.partitions.max(1)) * f64::from(c.pop_batch.max(1));
    let rate = 0.01 * lanes / (c.stall * lease);
    Some(format!(
        "the scenario stalls {}% of popped batches past their {} s lease, holding the partition: above about {} msg/s more than 1% of messages wait behind a stall, so end-to-end p99 nears {} ms whatever the system does: above that rate a step holds or fails on whether stalls fell in its window, and p99 <= {} ms is the scenario's limit there, not the system's",
        format_number(c.stall * 100.0),
        amount(lease),
        amount(rate.round()),
        amount(lease * 1000.0),
        amount(slo_p99_ms)
    ))
}

/// What the document says about how capacity was measured.
fn notes() -> Vec<String> {
    let mut notes = vec![
        "each step runs on a fresh queue (the scenario's options and prefill) with its own producers and consumers, warm-up and measured window; \
         its workers stop after the window and the step is neither drained nor audited: what it left unanswered stays in its queue, and the next step starts on a new one"
            .to_string(),
        "producers run open loop at the step's rate, split evenly over [producers] count; everything else is the scenario's. Its rounds and gates do not apply"
            .to_string(),
        "answered = (message, group) obligations acked, dead-lettered or dropped; backlog = obligations outstanding; both from the client's ledger, \
         so with several consumer groups they count every group"
            .to_string(),
        "commits/s = pg_snapshot_xmax delta over the window (writing transactions, lag-free); pg_stat_database.xact_commit beside it lags ~1 s at each edge"
            .to_string(),
        "schedule lag = delay from a batch's intended send time to its actual send start; each producer sends one batch at a time, \
         so it grows when pushes outlast the producer's interval as well as when the load generator is short of CPU"
            .to_string(),
        "latency counts from the intended send time (open loop, no coordinated omission); the load generator's CPU is read from /proc over each window"
            .to_string(),
    ];
    notes.push("the scenario's prefill is skipped: each step starts from an empty queue, so it measures the steady state of the offered load".into());
    notes.push("the search moves by the step factor up from a sustained rate or down from a failing one, then bisects the bracket; coming down it goes at once to what the failing step answered per second when that is lower".into());
    notes
}

/// Runs every cell's ladder. The document is returned even when the run was interrupted
/// (marked incomplete) or a set-up step failed (the error beside it).
pub async fn run(
    scenario: &Scenario,
    env: &Env,
    plan: &Plan,
    criteria: &Criteria,
    seed: u64,
    cancel: watch::Receiver<bool>,
) -> (CapacityResults, Option<String>) {
    let started_at = now_iso();
    let mut progress = Progress::default();
    let mut warnings = plan_warnings(plan);
    warnings.extend(stall_warning(scenario, criteria.slo_p99_ms));
    for w in &warnings {
        progress.say(&format!("ackbench: WARNING: {w}"));
    }
    let mut cells = Vec::new();
    let mut complete = true;
    let mut error = None;
    let search = ladder::Search {
        scenario,
        env,
        plan,
        criteria,
        seed,
        cancel: &cancel,
    };
    // Against an external broker the accelerator cells would step the same broker alike:
    // one cell, named after the target.
    let planned = match env.external_broker() {
        true => vec![Cell::None],
        false => scenario.run.cells.clone(),
    };
    for c in planned {
        if *cancel.borrow() {
            complete = false;
            break;
        }
        match search.cell(c, &mut progress).await {
            Ok((cell, interrupted)) => {
                complete &= !interrupted;
                let slo = criteria.slo_p99_ms;
                if let Some(w) = verdict::latency_floor(&cell.name, &cell.steps, slo) {
                    progress.say(&format!("ackbench: WARNING: {w}"));
                    warnings.push(w);
                }
                cells.push(cell);
                if interrupted {
                    break;
                }
            }
            Err((cell, e)) => {
                progress.say(&format!("ackbench: {}: {e}", search.name(c)));
                warnings.push(format!("{}: stopped by an error: {e}", search.name(c)));
                cells.extend(cell);
                complete = false;
                error = Some(e);
                break;
            }
        }
    }
    progress.finish();
    let base = crate::meta::run_meta(scenario, env);
    let results = CapacityResults {
        kind: model::CAPACITY_KIND.into(),
        schema_version: model::CAPACITY_SCHEMA_VERSION,
        complete,
        meta: RunMeta {
            started_at,
            finished_at: now_iso(),
            seed,
            rounds: 1,
            warmup_secs: plan.warmup_secs,
            duration_secs: plan.step_secs,
            notes: notes(),
            ..base
        },
        criteria: *criteria,
        plan: plan.clone(),
        cells,
        warnings,
    };
    (results, error)
}

/// Writes `capacity.json` and `capacity.html` into `out_dir`.
pub fn write_outputs(results: &CapacityResults, out_dir: &Path) -> Result<(), String> {
    let path = out_dir.join("capacity.json");
    std::fs::write(&path, results.to_json()?).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("ackbench: wrote {}", path.display());
    let html = ackbench_reports::capacity::render_capacity(results)?;
    let report = out_dir.join("capacity.html");
    ackbench_reports::write_report(&report, &html)?;
    eprintln!("ackbench: wrote {}", report.display());
    Ok(())
}

/// The text summary on stdout: every step, one sentence per cell, the headline, warnings.
pub fn summary(r: &CapacityResults) -> String {
    let mut out = format!(
        "{:<16} {:>4} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>6} {:>8}  verdict\n",
        "cell",
        "step",
        "offered",
        "pushed/s",
        "answer/s",
        "backlogΔ",
        "ack p99",
        "e2e p99",
        "commit/s",
        "cpu",
        "lag p99"
    );
    for c in &r.cells {
        for s in &c.steps {
            let verdict = if s.sustained {
                "sustained".to_string()
            } else {
                let names: Vec<&str> = s.failed.iter().map(|f| f.condition.label()).collect();
                format!("failed: {}", names.join(", "))
            };
            out.push_str(&format!(
                "{:<16} {:>4} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>6} {:>8}  {verdict}\n",
                c.name,
                s.index,
                amount(s.offered_rate),
                format_number(s.achieved_push_rate),
                format_number(s.answered_per_group()),
                amount(s.backlog_growth.round()),
                format_number(s.ack_p99_ms),
                format_number(s.judged_e2e_p99_ms()),
                format_number(s.charted_commits()),
                format_number(s.loadgen_cpu_cores),
                format_number(s.schedule_lag_p99_ms),
            ));
        }
    }
    out.push_str(
        "e2e p99: messages acked on their first delivery (retries wait out their backoff)\n\n",
    );
    for c in &r.cells {
        out.push_str(&cell_sentence(c, &r.criteria));
        out.push('\n');
    }
    out.push_str(&format!("\n{}\n", headline(r)));
    for w in all_warnings(r) {
        out.push_str(&format!("WARNING: {w}\n"));
    }
    if !r.complete {
        out.push_str("INCOMPLETE: the run was interrupted or broke; cells or steps are missing\n");
    }
    out
}
