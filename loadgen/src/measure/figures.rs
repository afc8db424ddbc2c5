//! Derived figures of one cell round, from the window's deltas: what `results.json` carries
//! (with several brokers, the round's figures from their totals, and each broker's own).
//!
//! Kept free of I/O so the arithmetic can be checked on known inputs.

use std::collections::BTreeMap;

use ackbench_reports::results::{BrokerFigures, Figures, Percentiles, Statement};
use ackbench_reports::stats::percentiles_ms;
use hdrhistogram::Histogram;

use super::broker_metrics::{self, Scrape};
use super::pg_counters::PgSnapshot;
use crate::workload::CounterValues;

/// Everything measured over one window.
pub struct WindowDeltas<'a> {
    pub window_secs: f64,
    pub counters: CounterValues,
    pub pg: &'a PgSnapshot,
    pub broker: &'a Scrape,
    pub histograms: &'a BTreeMap<String, Histogram<u64>>,
    /// CPU seconds of the load generator over the window (per HTTP request it sent: push, pop,
    /// empty pops included, and ack requests).
    pub loadgen_cpu_secs: f64,
    /// CPU seconds of the broker process over the window (NaN when unknown).
    pub broker_cpu_secs: f64,
    /// The share of the machine's CPU time the host took over the window (NaN when unknown).
    pub host_steal_share: f64,
}

/// `a / b`, NaN when `b` is zero (a ratio that does not exist is not zero).
pub fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        f64::NAN
    } else {
        a / b
    }
}

pub fn derive(d: &WindowDeltas<'_>) -> Figures<f64> {
    let c = &d.counters;
    let acked = c.acked_messages;
    let pg = d.pg;
    let (latency_ms, latency_uncorrected_ms) = latencies(d.histograms);
    let statements: BTreeMap<String, Statement<f64>> = pg
        .statements
        .iter()
        .map(|(k, s)| {
            let st = Statement {
                calls: s.calls,
                total_exec_ms: s.total_exec_ms,
                rows: s.rows,
                wal_bytes: s.wal_bytes,
            };
            (k.clone(), st)
        })
        .collect();
    let by_procedure = pg
        .statements
        .iter()
        .map(|(k, s)| (k.clone(), ratio(s.total_exec_ms, acked)))
        .collect();
    let requests = c.push_requests + c.pop_requests + c.ack_requests;
    let served = broker_metrics::requests_served(d.broker).unwrap_or(requests);
    Figures {
        acked_messages: acked,
        ack_requests: c.ack_requests,
        pushed_messages: c.pushed_messages,
        push_requests: c.push_requests,
        popped_messages: c.popped_messages,
        pop_requests: c.pop_requests,
        ack_throughput: ratio(acked, d.window_secs),
        push_throughput: ratio(c.pushed_messages, d.window_secs),
        commits: pg.xact_commit,
        write_commits: pg.xmax,
        commits_per_sec: ratio(pg.xact_commit, d.window_secs),
        commits_per_ack: ratio(pg.xact_commit, acked),
        ack_commits_per_ack: ratio(pg.ack_calls(), acked),
        commits_per_ack_request: ratio(pg.xact_commit, c.ack_requests),
        wal_records: pg.wal_records,
        wal_bytes: pg.wal_bytes,
        wal_syncs: pg.wal_syncs,
        wal_syncs_per_ack: ratio(pg.wal_syncs, acked),
        wal_syncs_per_commit: ratio(pg.wal_syncs, pg.xact_commit),
        wal_bytes_per_ack: ratio(pg.wal_bytes, acked),
        pg_exec_ms_per_ack: ratio(pg.ack_exec_ms(), acked),
        pg_exec_ms_per_ack_by_procedure: by_procedure,
        registry_hit_rate: broker_metrics::registry_hit_rate(d.broker),
        fusion_rows_per_commit: broker_metrics::fusion_rows_per_commit(d.broker),
        redeliveries: c.redeliveries,
        errors: c.errors,
        latency_ms,
        latency_uncorrected_ms,
        statements,
        loadgen_cpu_us_per_op: ratio(d.loadgen_cpu_secs * 1e6, requests),
        broker_cpu_cores: ratio(d.broker_cpu_secs, d.window_secs),
        broker_cpu_us_per_request: ratio(d.broker_cpu_secs * 1e6, served),
        host_steal_share: d.host_steal_share,
    }
}

/// One broker's share of a window: its `/metrics` deltas and its process's CPU seconds.
pub struct BrokerWindow<'a> {
    pub url: &'a str,
    pub broker: &'a Scrape,
    /// NaN when the process is not this run's.
    pub cpu_secs: f64,
}

/// The figures of one broker of several, from its own counters.
pub fn per_broker(b: &BrokerWindow<'_>) -> BrokerFigures {
    let d = b.broker;
    let requests = broker_metrics::requests_served(d).unwrap_or(f64::NAN);
    BrokerFigures {
        url: b.url.to_string(),
        requests,
        registry_hits: broker_metrics::value(d, "queen_ack_registry_hits_total"),
        registry_misses: broker_metrics::value(d, "queen_ack_registry_misses_total"),
        registry_hit_rate: broker_metrics::registry_hit_rate(d),
        acks_registry: broker_metrics::acks_by_path(d, "registry")
            + broker_metrics::acks_by_path(d, "fusion"),
        acks_hash: broker_metrics::acks_by_path(d, "hash"),
        fusion_flushes: broker_metrics::value(d, "queen_ack_fusion_flushes_total"),
        fusion_rows_per_commit: broker_metrics::fusion_rows_per_commit(d),
        cpu_secs: b.cpu_secs,
        cpu_us_per_request: ratio(b.cpu_secs * 1e6, requests),
        peer_notifications_sent: reported(d, "queen_peer_notifications_sent_total"),
        peer_notifications_received: reported(d, "queen_peer_notifications_received_total"),
        peer_events_applied: reported(d, "queen_peer_events_applied_total"),
        peer_notifications_dropped: reported(d, "queen_peer_notifications_dropped_total"),
        peer_deliveries_adopted: reported(d, "queen_peer_deliveries_adopted_total"),
        peer_deliveries_refused: reported(d, "queen_peer_deliveries_refused_total"),
    }
}

/// A series' delta, NaN when the broker does not expose it (not 0: it did not count it).
fn reported(d: &Scrape, series: &str) -> f64 {
    d.get(series).copied().unwrap_or(f64::NAN)
}

type Latencies = BTreeMap<String, Percentiles<f64>>;

fn latencies(histograms: &BTreeMap<String, Histogram<u64>>) -> (Latencies, Latencies) {
    let mut corrected = BTreeMap::new();
    let mut uncorrected = BTreeMap::new();
    for (op, h) in histograms {
        match op.strip_suffix("_uncorrected") {
            Some(base) => uncorrected.insert(base.to_string(), percentiles_ms(h)),
            None => corrected.insert(op.clone(), percentiles_ms(h)),
        };
    }
    (corrected, uncorrected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::pg_counters::StatementCounters;
    use ackbench_reports::stats::new_histogram;

    #[test]
    fn figures_on_known_inputs() {
        let mut pg = PgSnapshot {
            xact_commit: 500.0,
            xmax: 450.0,
            wal_syncs: 100.0,
            wal_bytes: 200_000.0,
            ..Default::default()
        };
        pg.statements.insert(
            "log_ack_multi_v1".into(),
            StatementCounters {
                calls: 50.0,
                total_exec_ms: 20.0,
                rows: 50.0,
                wal_bytes: 1.0,
            },
        );
        pg.statements.insert(
            "log_ack_by_hash_v1".into(),
            StatementCounters {
                calls: 10.0,
                total_exec_ms: 30.0,
                rows: 10.0,
                wal_bytes: 1.0,
            },
        );
        pg.statements.insert(
            "log_push_v1".into(),
            StatementCounters {
                calls: 200.0,
                total_exec_ms: 100.0,
                rows: 200.0,
                wal_bytes: 1.0,
            },
        );
        let broker = broker_metrics::parse(
            "queen_ack_registry_hits_total 90\nqueen_ack_registry_misses_total 10\n\
             queen_ack_fusion_flushes_total 50\nqueen_ack_fusion_rows_total 400\n\
             queen_requests_total{route=\"push\",status=\"201\"} 300\n\
             queen_requests_total{route=\"pop\",status=\"200\"} 1700\n",
        )
        .series;
        let mut h = new_histogram();
        for ms in 1..=100u64 {
            h.record(ms * 1000).unwrap();
        }
        let histograms = BTreeMap::from([
            ("ack".to_string(), h.clone()),
            ("push_uncorrected".to_string(), h),
        ]);
        let counters = CounterValues {
            acked_messages: 1000.0,
            ack_requests: 250.0,
            pushed_messages: 1200.0,
            push_requests: 300.0,
            pop_requests: 250.0,
            ..Default::default()
        };
        let f = derive(&WindowDeltas {
            window_secs: 10.0,
            counters,
            pg: &pg,
            broker: &broker,
            histograms: &histograms,
            loadgen_cpu_secs: 0.08,
            broker_cpu_secs: 5.0,
            host_steal_share: 0.02,
        });
        assert_eq!(f.ack_throughput, 100.0);
        assert_eq!(f.push_throughput, 120.0);
        assert_eq!(f.commits_per_sec, 50.0);
        assert_eq!(f.commits_per_ack, 0.5);
        assert_eq!(
            f.ack_commits_per_ack, 0.06,
            "multi + by_hash calls, push excluded"
        );
        assert_eq!(f.commits_per_ack_request, 2.0);
        assert_eq!(f.wal_syncs_per_ack, 0.1);
        assert_eq!(f.wal_syncs_per_commit, 0.2);
        assert_eq!(f.wal_bytes_per_ack, 200.0);
        assert_eq!(f.pg_exec_ms_per_ack, 0.05, "ack procedures only");
        assert_eq!(f.pg_exec_ms_per_ack_by_procedure["log_push_v1"], 0.1);
        assert_eq!(f.registry_hit_rate, 0.9);
        assert_eq!(f.fusion_rows_per_commit, 8.0);
        assert_eq!(f.loadgen_cpu_us_per_op, 100.0);
        assert_eq!(f.broker_cpu_cores, 0.5);
        assert_eq!(f.host_steal_share, 0.02);
        assert_eq!(
            f.broker_cpu_us_per_request, 2500.0,
            "5 s over the 2000 requests the broker counted"
        );
        assert!((f.latency_ms["ack"].p99 - 99.0).abs() < 0.1);
        assert!(f.latency_uncorrected_ms.contains_key("push"));
        assert!(!f.latency_ms.contains_key("push_uncorrected"));
    }

    #[test]
    fn one_broker_of_several_has_its_own_hit_rate_and_cpu_per_request() {
        let d = broker_metrics::parse(
            "queen_ack_registry_hits_total 30\nqueen_ack_registry_misses_total 70\n\
             queen_acks_total{path=\"fusion\"} 300\nqueen_acks_total{path=\"hash\"} 700\n\
             queen_ack_fusion_flushes_total 10\nqueen_ack_fusion_rows_total 30\n\
             queen_requests_total{route=\"ack_batch\",status=\"200\"} 400\n",
        )
        .series;
        let f = per_broker(&BrokerWindow {
            url: "http://127.0.0.1:1",
            broker: &d,
            cpu_secs: 0.2,
        });
        assert_eq!(f.registry_hit_rate, 0.3);
        assert_eq!((f.acks_registry, f.acks_hash), (300.0, 700.0));
        assert_eq!(f.fusion_rows_per_commit, 3.0);
        assert_eq!(f.requests, 400.0);
        assert_eq!(f.cpu_us_per_request, 500.0);
        assert!(
            f.peer_notifications_sent.is_nan(),
            "not exposed: not reported"
        );
    }

    #[test]
    fn one_broker_of_several_carries_its_peer_notifications() {
        let d = broker_metrics::parse(
            "queen_peer_notifications_sent_total 40
queen_peer_notifications_received_total 75
             queen_peer_events_applied_total 160
queen_peer_notifications_dropped_total 0
queen_peer_deliveries_adopted_total 33
queen_peer_deliveries_refused_total 1
",
        )
        .series;
        let f = per_broker(&BrokerWindow {
            url: "http://127.0.0.1:1",
            broker: &d,
            cpu_secs: 0.2,
        });
        let peers = (
            f.peer_notifications_sent,
            f.peer_notifications_received,
            f.peer_events_applied,
            f.peer_notifications_dropped,
        );
        assert_eq!(peers, (40.0, 75.0, 160.0, 0.0));
        let deliveries = (f.peer_deliveries_adopted, f.peer_deliveries_refused);
        assert_eq!(deliveries, (33.0, 1.0));
    }

    #[test]
    fn missing_denominators_are_nan_not_zero() {
        let pg = PgSnapshot::default();
        let f = derive(&WindowDeltas {
            window_secs: 10.0,
            counters: CounterValues::default(),
            pg: &pg,
            broker: &Scrape::new(),
            histograms: &BTreeMap::new(),
            loadgen_cpu_secs: 0.0,
            broker_cpu_secs: f64::NAN,
            host_steal_share: f64::NAN,
        });
        assert!(f.commits_per_ack.is_nan());
        assert!(f.registry_hit_rate.is_nan());
        assert!(f.broker_cpu_us_per_request.is_nan());
    }

    #[test]
    fn broker_cpu_per_request_falls_back_to_the_requests_sent() {
        let pg = PgSnapshot::default();
        let counters = CounterValues {
            push_requests: 100.0,
            pop_requests: 250.0,
            ack_requests: 150.0,
            ..Default::default()
        };
        let f = derive(&WindowDeltas {
            window_secs: 10.0,
            counters,
            pg: &pg,
            broker: &Scrape::new(),
            histograms: &BTreeMap::new(),
            loadgen_cpu_secs: 0.01,
            broker_cpu_secs: 1.0,
            host_steal_share: 0.0,
        });
        assert_eq!(f.loadgen_cpu_us_per_op, 20.0);
        assert_eq!(
            f.broker_cpu_us_per_request, 2000.0,
            "no request counter on /metrics: the 500 requests sent"
        );
    }
}
