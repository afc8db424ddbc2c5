//! `ackbench plan`: a target rate and latency answered from a sweep: which points met it on the
//! machine the sweep ran on (every repeat, or only the median), and what the cost model says a
//! host with the given cores and fsync rate would sustain with each point's settings, with the
//! model's error over the sweep stated. Pure: the document in, the answer out.

use ackbench_reports::capacity::amount;
use ackbench_reports::model::format_number;
use ackbench_reports::sweep::cost_model::{predict, Offer};
use ackbench_reports::sweep::SweepResults;

/// What the planner asks.
#[derive(Debug, Clone, Copy)]
pub struct Question {
    /// msg/s.
    pub target_rate: f64,
    pub slo_p99_ms: f64,
    /// The host's cores (default: the sweep machine's).
    pub cores: Option<f64>,
    /// The host's WAL syncs per second (default: the sweep machine's).
    pub fsync_per_sec: Option<f64>,
}

/// One point and cell, answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub settings: String,
    pub cell: String,
    pub durable: bool,
    /// Measured here: (median, low, high).
    pub measured: (Option<f64>, Option<f64>, Option<f64>),
    /// The knee was bracketed in every repeat (otherwise the rates are bounds: it lies above).
    pub bracketed: bool,
    /// `every repeat`, `median only`, `no`.
    pub here: &'static str,
    /// The model on the host asked about, and what limits it.
    pub host: Option<(f64, String)>,
    /// `likely`, `uncertain`, `no`, `unknown`.
    pub host_verdict: &'static str,
}

/// Checks the question against the sweep: a clear sentence for what cannot be answered.
pub fn check(sweep: &SweepResults, q: &Question) -> Result<(), String> {
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if !positive(q.target_rate) {
        return Err(format!(
            "--target-rate must be a positive rate in msg/s, got {}",
            q.target_rate
        ));
    }
    if !positive(q.slo_p99_ms) {
        return Err(format!(
            "--slo-p99-ms must be a positive number of milliseconds, got {}",
            q.slo_p99_ms
        ));
    }
    if let Some(c) = q.cores.filter(|c| !(positive(*c) && *c <= 4096.0)) {
        return Err(format!("--cores must be between 1 and 4096, got {c}"));
    }
    if let Some(f) = q.fsync_per_sec.filter(|f| !positive(*f)) {
        return Err(format!("--fsync-per-sec must be a positive rate, got {f}"));
    }
    let measured_at = sweep.criteria.slo_p99_ms;
    if q.slo_p99_ms < measured_at {
        return Err(format!(
            "the sweep judged p99 against {} ms: it cannot say what holds at a tighter {} ms (sweep again with --slo-p99-ms {})",
            amount(measured_at),
            amount(q.slo_p99_ms),
            amount(q.slo_p99_ms)
        ));
    }
    if sweep.points.iter().all(|p| p.cells.is_empty()) {
        return Err("the sweep holds no measured point".into());
    }
    Ok(())
}

/// Every point and cell, answered.
pub fn answer(sweep: &SweepResults, q: &Question) -> Vec<Row> {
    let host = Offer {
        cores: q.cores.unwrap_or(sweep.machine.cores),
        pg_cores: None,
        broker_cores: None,
        fsync_per_sec: q.fsync_per_sec.unwrap_or(sweep.machine.fsync_per_sec),
    };
    let error = sweep.model_error.map(|e| e.mean_abs).unwrap_or(f64::NAN);
    let mut rows = Vec::new();
    for p in &sweep.points {
        for c in &p.cells {
            let k = &c.knee;
            let here = match (k.low, k.sustained) {
                (Some(low), _) if low >= q.target_rate => "every repeat",
                (_, Some(mid)) if mid >= q.target_rate => "median only",
                _ => "no",
            };
            let predicted = predict(&c.costs, &host, q.slo_p99_ms).map(|p| (p.rate, p.limited_by));
            let host_verdict = match &predicted {
                None => "unknown",
                Some((r, _)) if !error.is_finite() && *r >= q.target_rate => "uncertain",
                Some((r, _)) if *r * (1.0 - error) >= q.target_rate => "likely",
                Some((r, _)) if *r >= q.target_rate => "uncertain",
                Some(_) => "no",
            };
            rows.push(Row {
                settings: SweepResults::point_label(p),
                cell: c.name.clone(),
                durable: p.durable,
                measured: (k.sustained, k.low, k.high),
                bracketed: c.bracketed,
                here,
                host: predicted,
                host_verdict,
            });
        }
    }
    rows
}

/// The answer as text: a sentence on the sweep and the model, then a row per point and cell.
pub fn render(sweep: &SweepResults, q: &Question, rows: &[Row]) -> String {
    let mut out = preamble(sweep, q);
    let width = rows
        .iter()
        .map(|r| settings_label(r).chars().count())
        .fold("settings".len(), usize::max);
    out += &format!(
        "{:<width$} {:<16} {:>20} {:>13} {:>10} {:>10}  limited by\n",
        "settings", "cell", "knee here [low-high]", "meets here", "host", "on host"
    );
    let opt = |v: Option<f64>| v.map(amount).unwrap_or_else(|| "—".into());
    for r in rows {
        out += &row_line(r, width, &opt);
    }
    let here = rows.iter().filter(|r| r.here == "every repeat").count();
    out += &format!(
        "\n{here} of {} point-cells met {} msg/s in every repeat on the sweep's machine",
        rows.len(),
        amount(q.target_rate)
    );
    if rows.iter().any(|r| !r.durable && r.here != "no") {
        out += "; points marked (not durable) may lose acknowledged commits on a crash";
    }
    out + "\n"
}

/// What was asked, what the sweep measured, and how far its model can be trusted.
fn preamble(sweep: &SweepResults, q: &Question) -> String {
    let mut out = format!(
        "target {} msg/s at p99 <= {} ms; the sweep measured {} point(s) × {} repeat(s) at p99 <= {} ms on {} cores (fsync {}/s)\n",
        amount(q.target_rate),
        amount(q.slo_p99_ms),
        sweep.points.len(),
        sweep.repeats,
        amount(sweep.criteria.slo_p99_ms),
        amount(sweep.machine.cores),
        format_number(sweep.machine.fsync_per_sec)
    );
    out += &match &sweep.model_error {
        Some(e) => format!(
            "the cost model's error over this sweep: {}% on average, {}% at worst over {} knees; a host figure is `likely` when it meets the target less the average error\n",
            amount(e.mean_abs * 100.0),
            amount(e.max_abs * 100.0),
            e.pairs
        ),
        None => "the cost model could not be checked against this sweep (no bracketed knee with a prediction): its host figures are unvalidated\n".into(),
    };
    out += &format!(
        "host asked about: {} cores, fsync {}/s (PostgreSQL, broker and load generator sharing them); its figure is the rate where each point's p99 at no load, grown as the busiest resource fills, meets {} ms\n\n",
        amount(q.cores.unwrap_or(sweep.machine.cores)),
        format_number(q.fsync_per_sec.unwrap_or(sweep.machine.fsync_per_sec)),
        amount(q.slo_p99_ms)
    );
    out
}

/// A point's settings as the answer names them, marked when they are not durable.
fn settings_label(r: &Row) -> String {
    match r.durable {
        true => r.settings.clone(),
        false => format!("{} (not durable)", r.settings),
    }
}

/// One point and cell of the answer, its settings padded to the column's `width`.
fn row_line(r: &Row, width: usize, opt: &dyn Fn(Option<f64>) -> String) -> String {
    let (mid, low, high) = r.measured;
    format!(
        "{:<width$} {:<16} {:>20} {:>13} {:>10} {:>10}  {}\n",
        settings_label(r),
        r.cell,
        format!(
            "{}{} [{}-{}]",
            if r.bracketed { "" } else { ">=" },
            opt(mid),
            opt(low),
            opt(high)
        ),
        r.here,
        opt(r.host.as_ref().map(|h| h.0)),
        r.host_verdict,
        r.host.as_ref().map(|h| h.1.as_str()).unwrap_or("")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ackbench_reports::sweep::cost_model::{Costs, ModelError};
    use ackbench_reports::sweep::{
        Knee, MachineOffer, PointCell, SweepPoint, SWEEP_KIND, SWEEP_SCHEMA_VERSION,
    };

    fn cell(knees: &[f64], pg_cpu_ms: f64) -> PointCell {
        PointCell {
            name: "none".into(),
            knee: Knee::of(knees.iter().map(|k| Some(*k)).collect()),
            p99_ms: 20.0,
            costs: Costs {
                pg_cpu_ms,
                broker_cpu_ms: 0.0,
                loadgen_cpu_ms: 0.0,
                wal_syncs: 0.01,
                ..Costs::default()
            },
            predicted_knee: None,
            limited_by: None,
            limits: vec![],
            stopped: vec![],
            bracketed: true,
        }
    }

    fn sweep() -> SweepResults {
        let point = |sync: &str, c: PointCell| SweepPoint {
            settings: [("pg.synchronous_commit".to_string(), sync.to_string())].into(),
            durable: sync == "on",
            offer: Offer::default(),
            cells: vec![c],
        };
        SweepResults {
            kind: SWEEP_KIND.into(),
            schema_version: SWEEP_SCHEMA_VERSION,
            complete: true,
            meta: Default::default(),
            criteria: ackbench_reports::capacity::Criteria::with_slo(50.0),
            plan: Default::default(),
            repeats: 2,
            machine: MachineOffer {
                cores: 2.0,
                fsync_per_sec: 500.0,
                fsync_source: "probe".into(),
            },
            keys: vec!["pg.synchronous_commit".into()],
            points: vec![
                point("on", cell(&[900.0, 1100.0], 1.0)),
                point("off", cell(&[1900.0, 2100.0], 0.5)),
            ],
            model_error: Some(ModelError {
                pairs: 2,
                mean_abs: 0.1,
                max_abs: 0.2,
                mean_signed: 0.0,
            }),
            warnings: vec![],
            probes: vec![],
        }
    }

    fn q(rate: f64) -> Question {
        Question {
            target_rate: rate,
            slo_p99_ms: 50.0,
            cores: None,
            fsync_per_sec: None,
        }
    }

    #[test]
    fn points_meet_a_target_here_and_on_a_bigger_host() {
        let s = sweep();
        let rows = answer(&s, &q(1000.0));
        assert_eq!(
            (rows[0].here, rows[1].here),
            ("median only", "every repeat")
        );
        // 2 cores / 1 ms = 2000 msg/s, less 10 % = 1800 >= 1000.
        assert_eq!(rows[0].host.as_ref().unwrap().0, 2000.0);
        assert_eq!(rows[0].host_verdict, "likely");
        let big = Question {
            cores: Some(16.0),
            fsync_per_sec: Some(2000.0),
            ..q(30_000.0)
        };
        let rows = answer(&s, &big);
        // on: 16 / 1 ms = 16000; off: 16 / 0.5 ms = 32000, its fsyncs 2000/0.01 = 200000.
        assert_eq!(rows[0].host_verdict, "no");
        assert_eq!(rows[1].host.as_ref().unwrap().0, 32_000.0);
        assert_eq!(
            rows[1].host_verdict, "uncertain",
            "within the model's error"
        );
        let text = render(&s, &big, &rows);
        assert!(
            text.contains("10% on average, 20% at worst over 2 knees"),
            "{text}"
        );
        assert!(text.contains("(not durable)"));
        // The cell column lines up whatever the length of a point's settings.
        let table: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("settings"))
            .take(1 + rows.len())
            .collect();
        let column = table[0].find("cell").expect("a header");
        assert!(
            table[1..].iter().all(|l| l[column..].starts_with("none")),
            "{text}"
        );
    }

    #[test]
    fn the_host_figure_keeps_each_points_latency_floor_at_the_asked_target() {
        let mut s = sweep();
        s.points[1].cells[0].costs.unloaded_p99_ms = 10.0;
        let host = |slo: f64| {
            let big = Question {
                slo_p99_ms: slo,
                cores: Some(16.0),
                ..q(1000.0)
            };
            answer(&s, &big)[1].host.as_ref().unwrap().0
        };
        // 16 cores / 0.5 ms = 32000 msg/s with the CPU fully used; p99 10 ms at no load meets
        // 50 ms at 80 % of that, 100 ms at 90 %.
        assert!((host(50.0) - 25_600.0).abs() < 1e-6, "{}", host(50.0));
        assert!((host(100.0) - 28_800.0).abs() < 1e-6, "{}", host(100.0));
    }

    #[test]
    fn bad_questions_are_refused_with_a_reason() {
        let s = sweep();
        let e = check(
            &s,
            &Question {
                slo_p99_ms: 20.0,
                ..q(100.0)
            },
        )
        .unwrap_err();
        assert!(
            e.contains("judged p99 against 50 ms") && e.contains("tighter 20 ms"),
            "{e}"
        );
        assert!(check(&s, &q(-1.0)).unwrap_err().contains("--target-rate"));
        let e = check(
            &s,
            &Question {
                cores: Some(0.0),
                ..q(1.0)
            },
        )
        .unwrap_err();
        assert!(e.contains("--cores"));
        let e = check(
            &s,
            &Question {
                fsync_per_sec: Some(f64::NAN),
                ..q(1.0)
            },
        )
        .unwrap_err();
        assert!(e.contains("--fsync-per-sec"));
        assert!(check(
            &s,
            &Question {
                slo_p99_ms: 100.0,
                ..q(1.0)
            }
        )
        .is_ok());
    }
}
