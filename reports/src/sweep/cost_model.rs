//! The cost model: the knee predicted from what one message costs and what a machine offers.
//!
//! Costs are measured per answered message on the highest sustained step below the knee: CPU
//! seconds of PostgreSQL, of the broker and of the load generator, and WAL syncs. A machine
//! offers cores (some given to PostgreSQL or the broker alone, the rest shared) and a rate of
//! WAL syncs (fsyncs/s, as a quick probe measures them). Each resource caps the rate at its
//! capacity divided by what a message takes of it:
//!
//! - a confined process: its cores / its CPU per message;
//! - the processes nobody confined: the cores left / their CPU per message together;
//! - the whole machine: every core / every process's CPU per message;
//! - the WAL: fsyncs per second / WAL syncs per message.
//!
//! The lowest cap is the rate at which the busiest resource would be fully used. A latency
//! target ends the knee before that: a message waits longer as its bottleneck gets busier. As in
//! a single-server queue, where a request's time in the system grows as 1 / (1 − ρ) with the
//! server's utilisation ρ, the model takes the p99 at rate r to be `L0 / (1 − r / cap)`, with
//! `L0` the p99 at no load, extrapolated from the steps measured below the knee
//! (`unloaded_p99`). The knee is then where that p99 meets the target:
//! `cap × (1 − L0 / target)`. `L0` carries what load does not change (pops and acks a message
//! waits through in turn, a linger, a long-poll's wake-up); the caps carry what more cores or a
//! faster WAL device change. The resource behind the lowest cap is what limits the knee; where
//! `L0` alone exceeds the target no rate meets it.
//!
//! The model is pure: no I/O, checked on known numbers.

use serde::{Deserialize, Serialize};

use crate::stats::{absent, nullable, Spread};

/// What one answered message costs, measured below the knee. NaN: not measured.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Costs {
    /// PostgreSQL CPU (all its processes), ms per message.
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub pg_cpu_ms: f64,
    /// Execution time of the database's statements (`pg_stat_statements`), ms per message.
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub pg_exec_ms: f64,
    /// Writing transactions per message.
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub commits: f64,
    /// WAL syncs per message.
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub wal_syncs: f64,
    /// WAL bytes per message.
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub wal_bytes: f64,
    /// Broker CPU, ms per message.
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub broker_cpu_ms: f64,
    /// Load-generator CPU, ms per message.
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub loadgen_cpu_ms: f64,
    /// The judged p99 (ack or end-to-end, whichever is higher) at no load, ms: what the
    /// sustained steps extrapolate to (`unloaded_p99`).
    #[serde(default = "absent", deserialize_with = "nullable")]
    pub unloaded_p99_ms: f64,
}

impl Default for Costs {
    fn default() -> Costs {
        let n = f64::NAN;
        Costs {
            pg_cpu_ms: n,
            pg_exec_ms: n,
            commits: n,
            wal_syncs: n,
            wal_bytes: n,
            broker_cpu_ms: n,
            loadgen_cpu_ms: n,
            unloaded_p99_ms: n,
        }
    }
}

impl Costs {
    /// The mean of several measurements, figure by figure over the finite ones.
    pub fn mean(all: &[Costs]) -> Costs {
        let m = |f: fn(&Costs) -> f64| {
            let v: Vec<f64> = all.iter().map(f).filter(|x| x.is_finite()).collect();
            match v.is_empty() {
                true => f64::NAN,
                false => v.iter().sum::<f64>() / v.len() as f64,
            }
        };
        Costs {
            pg_cpu_ms: m(|c| c.pg_cpu_ms),
            pg_exec_ms: m(|c| c.pg_exec_ms),
            commits: m(|c| c.commits),
            wal_syncs: m(|c| c.wal_syncs),
            wal_bytes: m(|c| c.wal_bytes),
            broker_cpu_ms: m(|c| c.broker_cpu_ms),
            loadgen_cpu_ms: m(|c| c.loadgen_cpu_ms),
            unloaded_p99_ms: m(|c| c.unloaded_p99_ms),
        }
    }
}

/// What a machine offers the three processes.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct Offer {
    /// Every core of the machine.
    pub cores: f64,
    /// Cores PostgreSQL is confined to (`None`: it shares the machine).
    pub pg_cores: Option<f64>,
    /// Cores the broker is confined to (`None`: it shares the machine).
    pub broker_cores: Option<f64>,
    /// WAL syncs the storage completes per second (NaN: unknown, not a limit).
    #[serde(deserialize_with = "nullable")]
    pub fsync_per_sec: f64,
}

/// One resource's cap on the rate.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Limit {
    /// E.g. `PostgreSQL CPU (1 core)`, `WAL fsync (420/s)`.
    pub resource: String,
    /// msg/s.
    pub rate: f64,
}

/// The model's answer: the knee and what limits it, with every cap it weighed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Prediction {
    /// The predicted knee (msg/s).
    pub rate: f64,
    pub limited_by: String,
    pub limits: Vec<Limit>,
    /// The lowest cap: where the busiest resource would be fully used (msg/s).
    pub cap: f64,
}

/// The process a CPU cost belongs to.
#[derive(Clone, Copy)]
struct Process {
    name: &'static str,
    cpu_ms: f64,
    cores: Option<f64>,
}

fn cores_words(n: f64) -> String {
    match n == 1.0 {
        true => "1 core".into(),
        false => format!("{} cores", crate::capacity::amount(n)),
    }
}

/// The knee `costs` allow on `offer` at p99 ≤ `slo_p99_ms` (NaN: the caps alone); `None` when no
/// cost was measured (nothing to divide).
pub fn predict(costs: &Costs, offer: &Offer, slo_p99_ms: f64) -> Option<Prediction> {
    let mut limits = Vec::new();
    let mut cap = |resource: String, capacity: f64, per_message: f64| {
        if capacity.is_finite() && capacity > 0.0 && per_message.is_finite() && per_message > 0.0 {
            limits.push(Limit {
                resource,
                rate: capacity / per_message,
            });
        }
    };
    for (resource, cores, cpu_ms) in cpu_pools(costs, offer) {
        cap(resource, cores, cpu_ms / 1000.0);
    }
    cap(
        format!(
            "WAL fsync ({}/s)",
            crate::capacity::amount(offer.fsync_per_sec)
        ),
        offer.fsync_per_sec,
        costs.wal_syncs,
    );
    let lowest = limits
        .iter()
        .min_by(|a, b| a.rate.total_cmp(&b.rate))?
        .clone();
    let floor = costs.unloaded_p99_ms;
    let headroom = match floor.is_finite() && slo_p99_ms.is_finite() && slo_p99_ms > 0.0 {
        true => (1.0 - floor / slo_p99_ms).clamp(0.0, 1.0),
        false => 1.0,
    };
    let limited_by = match headroom > 0.0 {
        true => lowest.resource,
        false => format!(
            "latency: p99 {} ms at no load, over the {} ms target",
            crate::capacity::amount(floor),
            crate::capacity::amount(slo_p99_ms)
        ),
    };
    Some(Prediction {
        rate: lowest.rate * headroom,
        limited_by,
        limits,
        cap: lowest.rate,
    })
}

/// A step's utilisation counts at most this much: a step sustained at or above the cap says the
/// cap is low, not that it waited without end.
const MAX_UTILISATION: f64 = 0.95;

/// The p99 at no load that steps measured below the knee extrapolate to, given the throughput
/// `cap` (msg/s): each step's `(rate, p99)` gives `p99 × (1 − rate / cap)`; the median of them
/// (robust to the odd step whose window caught a stall). NaN without a step.
pub fn unloaded_p99(steps: &[(f64, f64)], cap: f64) -> f64 {
    let floors: Vec<f64> = steps
        .iter()
        .filter(|(rate, p99)| rate.is_finite() && p99.is_finite() && cap > 0.0)
        .map(|(rate, p99)| p99 * (1.0 - (rate / cap).clamp(0.0, MAX_UTILISATION)))
        .collect();
    Spread::of(&floors).median
}

/// The three processes whose CPU a message costs, with the cores each is confined to.
fn processes(costs: &Costs, offer: &Offer) -> [Process; 3] {
    [
        Process {
            name: "PostgreSQL",
            cpu_ms: costs.pg_cpu_ms,
            cores: offer.pg_cores,
        },
        Process {
            name: "broker",
            cpu_ms: costs.broker_cpu_ms,
            cores: offer.broker_cores,
        },
        Process {
            name: "load generator",
            cpu_ms: costs.loadgen_cpu_ms,
            cores: None,
        },
    ]
}

/// The CPU pools as (resource, cores, CPU ms per message): each confined process on its cores,
/// the unconfined ones together on the cores left (when any process is confined), and every
/// process on the whole machine. Processes whose CPU was not measured are left out.
fn cpu_pools(costs: &Costs, offer: &Offer) -> Vec<(String, f64, f64)> {
    let all = processes(costs, offer);
    let measured: Vec<&Process> = all.iter().filter(|p| p.cpu_ms.is_finite()).collect();
    let mut pools: Vec<(String, f64, f64)> = measured
        .iter()
        .filter_map(|p| {
            let n = p.cores?;
            Some((format!("{} CPU ({})", p.name, cores_words(n)), n, p.cpu_ms))
        })
        .collect();
    let confined: f64 = all.iter().filter_map(|p| p.cores).sum();
    let free: Vec<&&Process> = measured.iter().filter(|p| p.cores.is_none()).collect();
    if confined > 0.0 && !free.is_empty() {
        let left = offer.cores - confined;
        let names: Vec<&str> = free.iter().map(|p| p.name).collect();
        let ms: f64 = free.iter().map(|p| p.cpu_ms).sum();
        let resource = format!("CPU of {} ({} left)", names.join(" + "), cores_words(left));
        pools.push((resource, left, ms));
    }
    let all_ms: f64 = measured.iter().map(|p| p.cpu_ms).sum();
    pools.push((
        format!("machine CPU ({})", cores_words(offer.cores)),
        offer.cores,
        all_ms,
    ));
    pools
}

/// How far predictions were from measurements: over the pairs with both, the mean and the
/// largest |predicted − measured| / measured.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ModelError {
    pub pairs: usize,
    pub mean_abs: f64,
    pub max_abs: f64,
    /// Mean of (predicted − measured) / measured: above 0, the model predicts too high.
    pub mean_signed: f64,
}

/// The model's error over (predicted, measured) pairs; `None` without a usable pair.
pub fn model_error(pairs: &[(f64, f64)]) -> Option<ModelError> {
    let errors: Vec<f64> = pairs
        .iter()
        .filter(|(p, m)| p.is_finite() && m.is_finite() && *m > 0.0)
        .map(|(p, m)| (p - m) / m)
        .collect();
    if errors.is_empty() {
        return None;
    }
    let n = errors.len() as f64;
    Some(ModelError {
        pairs: errors.len(),
        mean_abs: errors.iter().map(|e| e.abs()).sum::<f64>() / n,
        max_abs: errors.iter().fold(0.0, |m, e| m.max(e.abs())),
        mean_signed: errors.iter().sum::<f64>() / n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs(pg: f64, broker: f64, loadgen: f64, syncs: f64) -> Costs {
        Costs {
            pg_cpu_ms: pg,
            broker_cpu_ms: broker,
            loadgen_cpu_ms: loadgen,
            wal_syncs: syncs,
            ..Costs::default()
        }
    }

    #[test]
    fn a_shared_machine_is_limited_by_all_its_cpu_or_the_fsyncs() {
        // 0.5 + 0.3 + 0.2 = 1 ms per message on 2 cores: 2000 msg/s; 0.1 syncs on 500/s: 5000.
        let offer = Offer {
            cores: 2.0,
            pg_cores: None,
            broker_cores: None,
            fsync_per_sec: 500.0,
        };
        let p = predict(&costs(0.5, 0.3, 0.2, 0.1), &offer, f64::NAN).unwrap();
        assert!((p.rate - 2000.0).abs() < 1e-6, "{p:?}");
        assert_eq!(p.limited_by, "machine CPU (2 cores)");
        let p = predict(&costs(0.5, 0.3, 0.2, 1.0), &offer, f64::NAN).unwrap();
        assert!((p.rate - 500.0).abs() < 1e-6);
        assert_eq!(p.limited_by, "WAL fsync (500/s)");
    }

    #[test]
    fn a_confined_process_is_limited_by_its_own_cores() {
        let offer = Offer {
            cores: 2.0,
            pg_cores: Some(1.0),
            broker_cores: None,
            fsync_per_sec: f64::NAN,
        };
        // PostgreSQL: 1 core / 0.8 ms = 1250; the rest: 1 core / 0.4 ms = 2500; all: 2 / 1.2.
        let p = predict(&costs(0.8, 0.3, 0.1, 0.5), &offer, f64::NAN).unwrap();
        assert!((p.rate - 1250.0).abs() < 1e-6, "{p:?}");
        assert_eq!(p.limited_by, "PostgreSQL CPU (1 core)");
        assert_eq!(p.limits.len(), 3, "no fsync cap when the rate is unknown");
        // The broker and the load generator on the core left limit first.
        let p = predict(&costs(0.2, 0.7, 0.3, 0.0), &offer, f64::NAN).unwrap();
        assert!((p.rate - 1000.0).abs() < 1e-6);
        assert_eq!(p.limited_by, "CPU of broker + load generator (1 core left)");
    }

    #[test]
    fn nothing_measured_predicts_nothing_and_errors_are_relative() {
        let offer = Offer {
            cores: 2.0,
            fsync_per_sec: 100.0,
            ..Offer::default()
        };
        assert!(predict(&Costs::default(), &offer, 100.0).is_none());
        let e = model_error(&[(110.0, 100.0), (80.0, 100.0), (f64::NAN, 5.0)]).unwrap();
        assert_eq!(e.pairs, 2);
        assert!((e.mean_abs - 0.15).abs() < 1e-9 && (e.max_abs - 0.2).abs() < 1e-9);
        assert!((e.mean_signed + 0.05).abs() < 1e-9);
        assert!(model_error(&[]).is_none());
        let m = Costs::mean(&[
            costs(1.0, f64::NAN, 2.0, 0.0),
            costs(3.0, 4.0, f64::NAN, 0.0),
        ]);
        assert_eq!(
            (m.pg_cpu_ms, m.broker_cpu_ms, m.loadgen_cpu_ms),
            (2.0, 4.0, 2.0)
        );
        assert!(m.commits.is_nan());
    }

    #[test]
    fn a_latency_target_ends_the_knee_before_the_cap() {
        let offer = Offer {
            cores: 2.0,
            fsync_per_sec: f64::NAN,
            ..Offer::default()
        };
        // 1 ms of CPU per message on 2 cores: a cap of 2000 msg/s.
        let mut c = costs(0.5, 0.3, 0.2, f64::NAN);
        // p99 40 ms at 1000 msg/s (half the cap) and 80 ms at 1500 (three quarters): both
        // extrapolate to 20 ms at no load, the odd stalled step does not move the median.
        let steps = [
            (1000.0, 40.0),
            (1500.0, 80.0),
            (500.0, 26.0 + 2.0 / 3.0),
            (1200.0, 400.0),
        ];
        c.unloaded_p99_ms = unloaded_p99(&steps[..3], 2000.0);
        assert!(
            (c.unloaded_p99_ms - 20.0).abs() < 1e-9,
            "{}",
            c.unloaded_p99_ms
        );
        assert!(
            (unloaded_p99(&steps, 2000.0) - 20.0).abs() < 1e-9,
            "the stalled step does not move the median"
        );
        // At p99 <= 100 ms the knee is where 20 / (1 - r / 2000) = 100: 1600 msg/s.
        let p = predict(&c, &offer, 100.0).unwrap();
        assert!((p.rate - 1600.0).abs() < 1e-6, "{p:?}");
        assert_eq!(
            (p.cap, p.limited_by.as_str()),
            (2000.0, "machine CPU (2 cores)")
        );
        // A looser target gets nearer the cap; without one the cap is the knee.
        assert!(predict(&c, &offer, 400.0).unwrap().rate > 1850.0);
        assert_eq!(predict(&c, &offer, f64::NAN).unwrap().rate, 2000.0);
        // Four cores double the cap; the floor stays: 3200.
        let big = Offer {
            cores: 4.0,
            ..offer
        };
        assert!((predict(&c, &big, 100.0).unwrap().rate - 3200.0).abs() < 1e-6);
        // A floor above the target: no rate meets it, and the sentence says why.
        c.unloaded_p99_ms = 120.0;
        let p = predict(&c, &offer, 100.0).unwrap();
        assert_eq!(p.rate, 0.0);
        assert!(
            p.limited_by.starts_with("latency: p99 120 ms"),
            "{}",
            p.limited_by
        );
        // A step sustained at the cap counts as nearly saturated, not as no wait at all.
        assert!((unloaded_p99(&[(2500.0, 100.0)], 2000.0) - 5.0).abs() < 1e-9);
        assert!(unloaded_p99(&[], 2000.0).is_nan());
    }
}
