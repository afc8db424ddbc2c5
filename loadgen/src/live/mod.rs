//! Live metrics of a run (`ackbench run --metrics-listen ADDR`): a Prometheus text endpoint
//! (`server`) serving, per cell and round, what the workers count as they go (`metrics`, in the
//! text format of `exposition`), labelled with the run id, scenario, cell and round; and, with
//! `--metrics-push URL`, the same samples pushed to a Prometheus remote-write endpoint
//! (`remote_write`).
//!
//! The run tells the board what happens through the hooks below (a cell round started, a
//! second of the window sampled, a fault began or ended, the window closed, the round was
//! audited); each is a no-op unless a board was installed. The hot paths only bump the counters
//! and recorders the run keeps anyway: the board reads them when scraped. A finished cell
//! round's series stay with their last values (and the audit's final counts), so a run's whole
//! story can be read back from Prometheus.

pub mod exposition;
pub mod metrics;
pub mod remote_write;
pub mod server;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use ackbench_reports::results::{Audit, VacuumSample};

use crate::lifecycle::window::Window;
use crate::lifecycle::CellRound;
use crate::measure::pg_counters::LiveCounters;
use crate::scenario::FaultKind;
use crate::workload::CellContext;
use exposition::{Exposition, Sample};
use metrics::{CellRoundLive, WindowFigures};

/// What the endpoint serves: the cell round running now and the samples of those finished.
pub struct Board {
    run_id: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    current: Option<CellRoundLive>,
    finished: Vec<Vec<Sample>>,
}

static BOARD: OnceLock<Arc<Board>> = OnceLock::new();

impl Board {
    /// Installs the process's board for the run `run_id`; the hooks feed it from now on.
    pub fn install(run_id: &str) -> Arc<Board> {
        BOARD
            .get_or_init(|| {
                Arc::new(Board {
                    run_id: run_id.to_string(),
                    state: Mutex::new(State::default()),
                })
            })
            .clone()
    }

    /// The exposition text now: every finished cell round's samples and the running one's.
    pub fn scrape(&self) -> String {
        let mut e = Exposition::default();
        e.extend(&self.samples());
        e.text()
    }

    /// Every sample now: the finished cell rounds' and the running one's (what a scrape
    /// writes, and what a remote-write push sends).
    pub fn samples(&self) -> Vec<Sample> {
        let state = self.state.lock().expect("live board lock");
        let mut all: Vec<Sample> = state.finished.iter().flatten().cloned().collect();
        if let Some(current) = &state.current {
            all.extend(current.samples(true, None));
        }
        all
    }
}

/// Runs `change` on the running cell round, when a board is installed and a round runs.
fn with_current(change: impl FnOnce(&mut CellRoundLive)) {
    if let Some(board) = BOARD.get() {
        let mut state = board.state.lock().expect("live board lock");
        if let Some(current) = state.current.as_mut() {
            change(current);
        }
    }
}

/// A cell round's workload started (in warm-up), sharing `ctx` with its workers.
pub fn cell_started(cr: &CellRound<'_>, ctx: &Arc<CellContext>) {
    let Some(board) = BOARD.get() else { return };
    let producers = &cr.scenario.producers;
    let offered_rate = producers
        .open_rate()
        .map(|rate| cr.shard.rate_share(rate, producers.count));
    let labels = vec![
        ("run_id", board.run_id.clone()),
        ("scenario", cr.scenario.name.clone()),
        ("cell", cr.name.clone()),
        ("round", cr.round.to_string()),
    ];
    let live = CellRoundLive {
        labels,
        ctx: ctx.clone(),
        offered_rate: offered_rate.filter(|_| producers.count > 0),
        started: Instant::now(),
        producers_stopped: None,
        pg: None,
        window: None,
        faults: FaultKind::ALL.iter().map(|k| (k.name(), false)).collect(),
        vacuum: None,
    };
    let mut state = board.state.lock().expect("live board lock");
    if let Some(earlier) = state.current.replace(live) {
        state.finished.push(earlier.samples(false, None));
    }
}

/// A second of the window sampled PostgreSQL's live counters.
pub fn pg_sampled(pg: LiveCounters) {
    with_current(|c| c.pg = Some(pg));
}

/// The vacuum sampler read the cell database (a window with a `hold_xmin` fault).
pub fn vacuum_sampled(sample: &VacuumSample) {
    let sample = *sample;
    with_current(|c| c.vacuum = Some(sample));
}

/// A fault of `kind` began (`active`) or ended.
pub fn fault(kind: FaultKind, active: bool) {
    with_current(|c| {
        if let Some(entry) = c.faults.iter_mut().find(|(k, _)| *k == kind.name()) {
            entry.1 = active;
        }
    });
}

/// The measured window closed (the producers stop and the drain begins): its figures per acked
/// message, from PostgreSQL's counters at its edges.
pub fn window_closed(window: &Window) {
    let acked = window.end.counters.acked_messages - window.start.counters.acked_messages;
    let per_ack = |v: f64| match acked > 0.0 {
        true => v / acked,
        false => f64::NAN,
    };
    let figures = window.pg_delta().map(|pg| WindowFigures {
        commits: per_ack(pg.xact_commit),
        ack_commits: per_ack(pg.ack_calls()),
        wal_bytes: per_ack(pg.wal_bytes),
    });
    with_current(|c| {
        c.producers_stopped = Some(Instant::now());
        c.window = figures;
    });
}

/// The cell round was audited: its series keep their last values with the audit's counts.
pub fn cell_finished(audit: &Audit) {
    let Some(board) = BOARD.get() else { return };
    let mut state = board.state.lock().expect("live board lock");
    if let Some(done) = state.current.take() {
        let samples = done.samples(false, Some(audit));
        state.finished.push(samples);
    }
}
