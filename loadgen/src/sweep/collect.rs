//! From the capacity searches of a sweep to its points: per point and cell the knee's interval
//! over the repeats, the costs per message at the highest sustained step, the p99 at no load its
//! sustained steps extrapolate to, and the cost model's prediction on what the point offered at
//! the sweep's latency target. Pure, so it is checked on known documents.

use std::collections::BTreeMap;

use ackbench_reports::capacity::{CapacityCell, CapacityResults, Step};
use ackbench_reports::sweep::cost_model::{self, Costs, Offer};
use ackbench_reports::sweep::{prediction_fields, Knee, PointCell, SweepPoint};

/// What one answered message cost in `step` (the rate is answered messages per group).
pub fn costs_of(step: &Step) -> Costs {
    let rate = step.answered_per_group();
    let per = |v: f64| match rate > 0.0 {
        true => v / rate,
        false => f64::NAN,
    };
    Costs {
        pg_cpu_ms: per(step.pg_cpu_cores * 1000.0),
        pg_exec_ms: per(step.pg_exec_ms_per_sec),
        commits: per(step.charted_commits()),
        wal_syncs: per(step.wal_syncs_per_sec),
        wal_bytes: per(step.wal_bytes_per_sec),
        broker_cpu_ms: per(step.broker_cpu_cores * 1000.0),
        loadgen_cpu_ms: per(step.loadgen_cpu_cores * 1000.0),
        unloaded_p99_ms: f64::NAN,
    }
}

/// One point's cells from its repeats' capacity documents (in the order run), predicted at p99
/// ≤ `slo_p99_ms`.
pub fn point(
    settings: BTreeMap<String, String>,
    durable: bool,
    offer: Offer,
    slo_p99_ms: f64,
    repeats: &[CapacityResults],
) -> SweepPoint {
    let mut names: Vec<String> = Vec::new();
    for r in repeats {
        for c in &r.cells {
            if !names.contains(&c.name) {
                names.push(c.name.clone());
            }
        }
    }
    let cells = names
        .iter()
        .map(|name| {
            let runs: Vec<&CapacityCell> = repeats.iter().filter_map(|r| r.cell(name)).collect();
            point_cell(name, &runs, &offer, slo_p99_ms)
        })
        .collect();
    SweepPoint {
        settings,
        durable,
        offer,
        cells,
    }
}

fn point_cell(name: &str, runs: &[&CapacityCell], offer: &Offer, slo_p99_ms: f64) -> PointCell {
    let knee = Knee::of(runs.iter().map(|c| c.sustained_rate).collect());
    let held: Vec<&Step> = runs.iter().filter_map(|c| c.capacity_step()).collect();
    let mut costs = Costs::mean(&held.iter().map(|s| costs_of(s)).collect::<Vec<_>>());
    // Every step that held, in every repeat, tells how p99 grows with the rate.
    let below: Vec<(f64, f64)> = runs
        .iter()
        .flat_map(|c| c.steps.iter().filter(|s| s.sustained))
        .map(|s| (s.answered_per_group(), s.judged_p99_ms()))
        .collect();
    if let Some(cap) = cost_model::predict(&costs, offer, f64::NAN).map(|p| p.cap) {
        costs.unloaded_p99_ms = cost_model::unloaded_p99(&below, cap);
    }
    let p99s: Vec<f64> = held
        .iter()
        .map(|s| s.judged_p99_ms())
        .filter(|v| v.is_finite())
        .collect();
    let p99_ms = match p99s.is_empty() {
        true => f64::NAN,
        false => p99s.iter().sum::<f64>() / p99s.len() as f64,
    };
    let (predicted_knee, limited_by, limits) =
        prediction_fields(cost_model::predict(&costs, offer, slo_p99_ms));
    PointCell {
        name: name.to_string(),
        knee,
        p99_ms,
        costs,
        predicted_knee,
        limited_by,
        limits,
        stopped: runs.iter().map(|c| c.stopped.clone()).collect(),
        bracketed: !runs.is_empty()
            && runs
                .iter()
                .all(|c| c.sustained_rate.is_some() && c.knee_rate.is_some()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ackbench_reports::capacity::{Criteria, Plan, CAPACITY_KIND, CAPACITY_SCHEMA_VERSION};

    fn step(rate: f64, sustained: bool) -> Step {
        Step {
            offered_rate: rate,
            consumer_groups: 1,
            answered_rate: rate,
            ack_p99_ms: 10.0,
            e2e_p99_ms: 12.0,
            e2e_first_p99_ms: 12.0,
            pg_cpu_cores: rate / 1000.0,
            broker_cpu_cores: rate / 2000.0,
            loadgen_cpu_cores: rate / 4000.0,
            wal_syncs_per_sec: rate / 10.0,
            write_commits_per_sec: rate,
            sustained,
            ..Default::default()
        }
    }

    fn capacity(held: f64) -> CapacityResults {
        bracketed_search(Criteria::default(), held, step)
    }

    /// A search judged by `criteria` whose one cell, `none`, held `held` msg/s and failed 5 %
    /// above it, its steps made by `step(rate, sustained)`.
    pub(crate) fn bracketed_search(
        criteria: Criteria,
        held: f64,
        step: impl Fn(f64, bool) -> Step,
    ) -> CapacityResults {
        CapacityResults {
            kind: CAPACITY_KIND.into(),
            schema_version: CAPACITY_SCHEMA_VERSION,
            complete: true,
            meta: Default::default(),
            criteria,
            plan: Plan::default(),
            cells: vec![CapacityCell {
                name: "none".into(),
                steps: vec![step(held, true), step(held * 1.05, false)],
                sustained_rate: Some(held),
                knee_rate: Some(held * 1.05),
                stopped: "knee bracketed".into(),
                ..Default::default()
            }],
            warnings: vec![],
        }
    }

    #[test]
    fn repeats_make_the_interval_and_costs_the_prediction() {
        let offer = Offer {
            cores: 2.0,
            pg_cores: None,
            broker_cores: None,
            fsync_per_sec: 1000.0,
        };
        let p = point(
            BTreeMap::new(),
            true,
            offer,
            100.0,
            &[capacity(800.0), capacity(1000.0)],
        );
        let c = &p.cells[0];
        assert_eq!(
            (c.knee.low, c.knee.high, c.knee.sustained),
            (Some(800.0), Some(1000.0), Some(900.0))
        );
        // 1 + 0.5 + 0.25 = 1.75 ms per message on 2 cores: 1143 msg/s; 0.1 syncs on 1000/s: 10000.
        assert!((c.costs.pg_cpu_ms - 1.0).abs() < 1e-9 && (c.costs.commits - 1.0).abs() < 1e-9);
        // p99 12 ms held at 800 and 1000 msg/s: 12 × (1 − 800 / 1143) = 3.6 and
        // 12 × (1 − 1000 / 1143) = 1.5 ms at no load, 2.55 the median; at p99 <= 100 ms the
        // knee is the cap less 2.55 %.
        let cap = 2000.0 / 1.75;
        assert!(
            (c.costs.unloaded_p99_ms - 2.55).abs() < 1e-9,
            "{:?}",
            c.costs
        );
        assert!((c.predicted_knee.unwrap() - cap * (1.0 - 0.0255)).abs() < 1e-6);
        assert_eq!(c.limited_by.as_deref(), Some("machine CPU (2 cores)"));
        assert_eq!(c.limits.len(), 2, "the machine's CPU and the WAL");
        assert_eq!(c.p99_ms, 12.0);
        assert_eq!(c.stopped.len(), 2);
        assert!(c.bracketed);
        let mut above = capacity(500.0);
        above.cells[0].knee_rate = None;
        let p = point(
            BTreeMap::new(),
            true,
            offer,
            100.0,
            &[capacity(800.0), above],
        );
        assert!(
            !p.cells[0].bracketed,
            "a repeat that held up to --max gives a bound"
        );
    }
}
