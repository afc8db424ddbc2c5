//! One cell's knee search: its system installed (database and broker), then steps at the offered
//! rates `verdict::next_rate` picks (up or down from the start until a sustained rate lies below
//! a failing one, then bisecting), each judged as it ends, until the knee is bracketed within
//! the precision, `--max` holds, `--min` fails, an interruption or an error.

use tokio::sync::watch;

use ackbench_reports::capacity::amount;
use ackbench_reports::model::format_number;

use super::model::{CapacityCell, Criteria, Plan, Step};
use super::{step, verdict};
use crate::driver::{self, system::Installed};
use crate::lifecycle::env::Env;
use crate::lifecycle::CellRound;
use crate::progress::Progress;
use crate::scenario::{Cell, LoopMode, Scenario};

/// What every cell's ladder shares: the scenario, where it runs, the plan and how steps are
/// judged.
pub(super) struct Search<'a> {
    pub scenario: &'a Scenario,
    pub env: &'a Env,
    pub plan: &'a Plan,
    pub criteria: &'a Criteria,
    pub seed: u64,
    pub cancel: &'a watch::Receiver<bool>,
}

/// A measured cell and whether it was interrupted, or the error that stopped it (with the
/// cell as far as it got, when its system had been installed).
pub(super) type CellOutcome = Result<(CapacityCell, bool), (Option<CapacityCell>, String)>;

/// Why a cell's search ended.
enum LadderEnd {
    Searched(verdict::Next),
    Interrupted,
    Failed(String),
}

impl Search<'_> {
    /// The name of cell `c` in results: its own, or against an external broker the target's
    /// (`queen-rows-1.0.0`), which is then the only cell.
    pub(super) fn name(&self, c: Cell) -> String {
        match self.env.external_broker() {
            true => self.env.profile.cell_name(),
            false => c.name().to_string(),
        }
    }

    /// One cell: a fresh database and broker, then its steps.
    pub(super) async fn cell(&self, c: Cell, progress: &mut Progress) -> CellOutcome {
        let label = format!("[{}] {}", self.scenario.name, self.name(c));
        progress.say(&format!(
            "{label}: fresh database and broker; searching for the knee from {} msg/s",
            amount(self.bounds(c).start)
        ));
        let tag = format!("capacity_{}", self.name(c).replace(['+', '.', '-'], "_"));
        let first = self.round(self.scenario, c, 0);
        let system = driver::for_cell(self.env, &first);
        let installed = system
            .install(self.env, &first, &tag)
            .await
            .map_err(|e| (None, e))?;
        let (steps, remeasured, end) = self.climb(c, installed.as_ref(), &label, progress).await;
        if let Some(note) = installed.into_site().release(self.env).await {
            progress.say(&format!("{label}: {note}"));
        }
        let cell = self.cell_results(c, (steps, remeasured), &end);
        match end {
            LadderEnd::Failed(e) => Err((Some(cell), e)),
            LadderEnd::Interrupted => Ok((cell, true)),
            LadderEnd::Searched(_) => Ok((cell, false)),
        }
    }

    /// Measures the rates the search asks for on `system` until it ends: the steps whose
    /// verdicts count, and those measured again because the host slowed them.
    async fn climb(
        &self,
        c: Cell,
        system: &dyn Installed,
        label: &str,
        progress: &mut Progress,
    ) -> (Vec<Step>, Vec<Step>, LadderEnd) {
        let mut steps: Vec<Step> = Vec::new();
        let mut remeasured: Vec<Step> = Vec::new();
        loop {
            let rate = match verdict::next_rate(&steps, &self.bounds(c)) {
                verdict::Next::Try(rate) => rate,
                end => return (steps, remeasured, LadderEnd::Searched(end)),
            };
            if *self.cancel.borrow() {
                return (steps, remeasured, LadderEnd::Interrupted);
            }
            let index = (steps.len() + remeasured.len()) as u32 + 1;
            let scenario = at_rate(self.scenario, rate);
            let cr = self.round(&scenario, c, index);
            let step_label = format!("{label} step {index} @ {} msg/s", amount(rate));
            let postmaster = self
                .env
                .postgres
                .as_ref()
                .and_then(|p| p.embedded_cluster())
                .and_then(|e| e.postmaster_pid());
            let plan = Plan {
                step_secs: verdict::window_secs(&steps, &self.bounds(c), self.plan),
                ..self.plan.clone()
            };
            let measured = step::measure(
                &cr,
                system,
                &plan,
                &step_label,
                postmaster,
                self.cancel,
                progress,
            );
            match measured.await {
                Ok(Some(step)) => {
                    let step = self.judge(step, &step_label, progress);
                    if verdict::slowed_by_host(&step, &remeasured) {
                        progress.say(&format!(
                            "{step_label}: the host took {:.0} % of the machine's CPU (steal) in this window: measuring this rate again",
                            100.0 * step.host_steal_share
                        ));
                        remeasured.push(step);
                    } else {
                        steps.push(step);
                    }
                }
                Ok(None) => return (steps, remeasured, LadderEnd::Interrupted),
                Err(e) => return (steps, remeasured, LadderEnd::Failed(e)),
            }
        }
    }

    /// Cell `c`'s search bounds: the plan's, or from the cell's own start (a knee found
    /// before) galloping away from it.
    fn bounds(&self, c: Cell) -> verdict::Bounds {
        let p = self.plan;
        let own = p.cell_starts.get(&self.name(c)).copied();
        verdict::Bounds {
            start: own.unwrap_or(p.start_rate),
            factor: p.step_factor,
            min: p.min_rate,
            max: p.max_rate,
            precision: p.precision,
            first_factor: own.map(|_| verdict::gallop_from_knee(p.precision)),
        }
    }

    /// Step `step` (0 for installing the cell's system) of cell `c`, with its own seed.
    fn round<'s>(&self, scenario: &'s Scenario, c: Cell, step: u32) -> CellRound<'s> {
        CellRound {
            scenario,
            cell: c,
            name: self.name(c),
            topology: self.scenario.broker.topologies()[0],
            round: step,
            rounds: 0,
            seed: match step {
                0 => self.seed,
                n => self.seed.wrapping_add(n as u64 * 7919),
            },
            run_tag: self.env.run_tag.clone(),
            shard: crate::shard::Shard::WHOLE,
        }
    }

    /// Applies the verdict and reports it (with any warning about the load generator itself).
    fn judge(&self, mut step: Step, label: &str, progress: &mut Progress) -> Step {
        verdict::apply(&mut step, self.criteria);
        progress.say(&step_line(label, &step));
        for w in &step.loadgen_warnings {
            progress.say(&format!("ackbench: WARNING: {label}: {w}"));
        }
        step
    }

    /// The cell's document: its counted steps by offered rate (each keeps its index, the order
    /// it ran in) and those measured again, the sustained rate and knee, and why the search
    /// ended.
    fn cell_results(&self, c: Cell, ran: (Vec<Step>, Vec<Step>), end: &LadderEnd) -> CapacityCell {
        let (mut steps, remeasured) = ran;
        steps.sort_by(|a, b| a.offered_rate.total_cmp(&b.offered_rate));
        let (sustained_rate, knee_rate) = verdict::select(&steps);
        CapacityCell {
            name: self.name(c),
            registry: c.registry(),
            fusion: c.fusion(),
            steps,
            remeasured,
            sustained_rate,
            knee_rate,
            stopped: self.stopped_words(end, sustained_rate, knee_rate),
        }
    }

    /// Why the cell's search ended, as `capacity.json` records it.
    fn stopped_words(&self, end: &LadderEnd, held: Option<f64>, knee: Option<f64>) -> String {
        let p = self.plan;
        let rate = |r: Option<f64>| r.map(amount).unwrap_or_default();
        match end {
            LadderEnd::Searched(verdict::Next::Bracketed) => format!(
                "knee bracketed: {} msg/s sustained, {} msg/s not (precision {}%)",
                rate(held),
                rate(knee),
                format_number(p.precision * 100.0)
            ),
            LadderEnd::Searched(verdict::Next::SustainedAtMax) => format!(
                "every rate up to --max {} msg/s was sustained: the knee lies above",
                amount(p.max_rate)
            ),
            LadderEnd::Searched(verdict::Next::FailedAtFloor) => format!(
                "even the floor --min {} msg/s failed: the knee lies below",
                amount(p.min_rate)
            ),
            LadderEnd::Searched(verdict::Next::Try(_)) => "search did not end".into(),
            LadderEnd::Interrupted => "interrupted".into(),
            LadderEnd::Failed(e) => format!("error: {e}"),
        }
    }
}

/// The scenario with its producers open loop at `rate`.
fn at_rate(scenario: &Scenario, rate: f64) -> Scenario {
    let mut s = scenario.clone();
    s.producers.mode = LoopMode::Open;
    s.producers.rate = Some(rate);
    s
}

/// A judged step in one line.
fn step_line(label: &str, s: &Step) -> String {
    let verdict = if s.sustained {
        "sustained".to_string()
    } else {
        let d: Vec<&str> = s.failed.iter().map(|f| f.detail.as_str()).collect();
        format!("FAILED ({})", d.join("; "))
    };
    format!(
        "{label}: pushed {}/s, answered {}/s per group, backlog {:+.0}, ack p99 {} ms, e2e p99 {} ms, commits {}/s, loadgen cpu {}, lag p99 {} ms: {verdict}",
        format_number(s.achieved_push_rate),
        format_number(s.answered_per_group()),
        s.backlog_growth,
        format_number(s.ack_p99_ms),
        format_number(s.judged_e2e_p99_ms()),
        format_number(s.charted_commits()),
        format_number(s.loadgen_cpu_cores),
        format_number(s.schedule_lag_p99_ms),
    )
}
