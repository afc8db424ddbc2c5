//! `ackbench remodel`: this build's cost model applied to a finished sweep's measurements. A
//! sweep's directory keeps every search's `capacity.json` (`point-I-repeat-R/`); the points,
//! knees and costs are collected from them again (`collect`), with the sweep's own settings,
//! offers and latency target, and the model's predictions and error are those of this build. The
//! measurements are the sweep's; nothing runs.

use std::path::Path;

use ackbench_reports::capacity::CapacityResults;
use ackbench_reports::sweep::cost_model::model_error;
use ackbench_reports::sweep::SweepResults;

use super::collect;

/// The sweep in `dir` with its points collected again from its searches' documents.
pub fn remodel(dir: &Path) -> Result<SweepResults, String> {
    let path = dir.join("sweep.json");
    let mut sweep = super::read_sweep(&path)?;
    if !sweep.complete {
        return Err(format!(
            "{}: the sweep did not complete, so its points cannot be matched with its searches' directories",
            path.display()
        ));
    }
    let slo = sweep.criteria.slo_p99_ms;
    for (i, point) in sweep.points.iter_mut().enumerate() {
        let runs = (1..=sweep.repeats)
            .map(|r| read_search(&dir.join(format!("point-{}-repeat-{r}", i + 1))))
            .collect::<Result<Vec<_>, _>>()?;
        let settings = std::mem::take(&mut point.settings);
        *point = collect::point(settings, point.durable, point.offer, slo, &runs);
    }
    sweep.model_error = model_error(&sweep.predicted_measured());
    sweep.meta.notes = super::notes();
    sweep.meta.notes.push(format!(
        "remodelled by ackbench {}: the measurements are the sweep's, the cost model this build's",
        env!("CARGO_PKG_VERSION")
    ));
    Ok(sweep)
}

fn read_search(dir: &Path) -> Result<CapacityResults, String> {
    let path = dir.join("capacity.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    CapacityResults::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ackbench_reports::capacity::{Criteria, Plan, Step};
    use ackbench_reports::sweep::cost_model::{Costs, Offer};
    use ackbench_reports::sweep::{
        Knee, MachineOffer, PointCell, SweepPoint, SWEEP_KIND, SWEEP_SCHEMA_VERSION,
    };

    use super::*;

    /// A search whose cell held `rate` at p99 `p99` ms and failed 5 % above it, on 1 ms of CPU
    /// per message in all.
    fn search(rate: f64, p99: f64) -> CapacityResults {
        let step = |r: f64, sustained: bool| Step {
            offered_rate: r,
            consumer_groups: 1,
            answered_rate: r,
            ack_p99_ms: p99 / 2.0,
            e2e_p99_ms: p99,
            e2e_first_p99_ms: p99,
            pg_cpu_cores: r / 2000.0,
            broker_cpu_cores: r / 2000.0,
            loadgen_cpu_cores: 0.0,
            sustained,
            ..Default::default()
        };
        collect::tests::bracketed_search(Criteria::with_slo(100.0), rate, step)
    }

    /// A sweep document as an older build wrote it: one point, the prediction without a latency
    /// floor.
    fn old_sweep() -> SweepResults {
        let offer = Offer {
            cores: 2.0,
            fsync_per_sec: f64::NAN,
            ..Offer::default()
        };
        SweepResults {
            kind: SWEEP_KIND.into(),
            schema_version: SWEEP_SCHEMA_VERSION,
            complete: true,
            meta: Default::default(),
            criteria: Criteria::with_slo(100.0),
            plan: Plan::default(),
            repeats: 2,
            machine: MachineOffer {
                cores: 2.0,
                fsync_per_sec: f64::NAN,
                fsync_source: "unknown".into(),
            },
            keys: vec!["pg.synchronous_commit".into()],
            points: vec![SweepPoint {
                settings: BTreeMap::from([("pg.synchronous_commit".into(), "on".into())]),
                durable: true,
                offer,
                cells: vec![PointCell {
                    name: "none".into(),
                    knee: Knee::of(vec![Some(1000.0), Some(1200.0)]),
                    p99_ms: 60.0,
                    costs: Costs::default(),
                    predicted_knee: Some(2000.0),
                    limited_by: Some("machine CPU (2 cores)".into()),
                    limits: vec![],
                    stopped: vec![],
                    bracketed: true,
                }],
            }],
            model_error: None,
            warnings: vec![],
            probes: vec![],
        }
    }

    fn write(path: &Path, text: String) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_finished_sweep_is_predicted_again_from_its_searches() {
        let dir = std::env::temp_dir().join(format!("ackbench-remodel-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write(&dir.join("sweep.json"), old_sweep().to_json().unwrap());
        let e = remodel(&dir).unwrap_err();
        assert!(e.contains("point-1-repeat-1/capacity.json"), "{e}");
        // 1 ms of CPU per message on 2 cores: a cap of 2000 msg/s. p99 50 ms held at 1000 msg/s
        // and 40 ms at 1200 extrapolate to 25 and 16 ms at no load (20.5 the median), so at
        // p99 <= 100 ms the knee is 2000 × (1 − 0.205) = 1590.
        for (r, (rate, p99)) in [(1000.0, 50.0), (1200.0, 40.0)].into_iter().enumerate() {
            let path = dir.join(format!("point-1-repeat-{}/capacity.json", r + 1));
            write(&path, search(rate, p99).to_json().unwrap());
        }
        let s = remodel(&dir).unwrap();
        let c = &s.points[0].cells[0];
        assert_eq!(c.knee.sustained, Some(1100.0));
        assert!(
            (c.costs.unloaded_p99_ms - 20.5).abs() < 1e-9,
            "{:?}",
            c.costs
        );
        assert!((c.predicted_knee.unwrap() - 1590.0).abs() < 1e-6, "{c:?}");
        let e = s.model_error.unwrap();
        assert!((e.mean_abs - 490.0 / 1100.0).abs() < 1e-9, "{e:?}");
        assert_eq!(s.points[0].settings["pg.synchronous_commit"], "on");
        assert!(s.meta.notes.last().unwrap().starts_with("remodelled by"));
        let mut broken = old_sweep();
        broken.complete = false;
        write(&dir.join("sweep.json"), broken.to_json().unwrap());
        assert!(remodel(&dir).unwrap_err().contains("did not complete"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
