//! The broker's own counters, rendered as Prometheus text on `GET /metrics`.
//!
//! Plain atomics: every hot path bumps a counter without a lock. Requests by (route, status)
//! sit behind one mutex because their label set is open; that lock is held for one increment.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// Counters the broker exposes.
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    pub messages_pushed: AtomicU64,
    pub messages_duplicate: AtomicU64,
    pub messages_delivered: AtomicU64,
    pub messages_acked: AtomicU64,
    pub pops_empty: AtomicU64,
    pub long_poll_parked: AtomicU64,
    pub long_poll_woken: AtomicU64,
    pub retention_passes: AtomicU64,
    pub retention_txns_purged: AtomicU64,
    pub retention_segments_deleted: AtomicU64,
    /// Ack items answered by the hash path (`queen.log_ack_by_hash_v1`).
    pub acks_hash: AtomicU64,
    /// Ack items answered by a positional advance (`queen.log_ack_at_v1`).
    pub acks_positional: AtomicU64,
    /// Ack items answered by a registry hit committed with a synchronous log_ack_at_v1.
    pub acks_registry: AtomicU64,
    /// Ack items answered by a registry hit committed through a fusion flush.
    pub acks_fusion: AtomicU64,
}

impl Metrics {
    pub fn count_request(&self, route: &'static str, status: u16) {
        let mut map = self.requests.lock().expect("metrics lock");
        *map.entry((route, status)).or_default() += 1;
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    /// Renders the Prometheus text exposition; `extra` appends sections owned elsewhere.
    pub fn render(&self, extra: &dyn Fn(&mut String)) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP queen_requests_total HTTP requests by route and status.\n");
        out.push_str("# TYPE queen_requests_total counter\n");
        for ((route, status), n) in self.requests.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                out,
                "queen_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        let counters: [(&str, &str, &AtomicU64); 10] = [
            (
                "queen_messages_pushed_total",
                "Messages written by push.",
                &self.messages_pushed,
            ),
            (
                "queen_messages_duplicate_total",
                "Pushed messages refused as duplicates.",
                &self.messages_duplicate,
            ),
            (
                "queen_messages_delivered_total",
                "Messages handed out by pop.",
                &self.messages_delivered,
            ),
            (
                "queen_messages_acked_total",
                "Offsets committed by acks (cursor advance).",
                &self.messages_acked,
            ),
            (
                "queen_pops_empty_total",
                "Pops answered 204.",
                &self.pops_empty,
            ),
            (
                "queen_long_poll_parked_total",
                "Long-polls that parked.",
                &self.long_poll_parked,
            ),
            (
                "queen_long_poll_woken_total",
                "Parked long-polls woken by a push.",
                &self.long_poll_woken,
            ),
            (
                "queen_retention_passes_total",
                "Retention passes run by this broker.",
                &self.retention_passes,
            ),
            (
                "queen_retention_txns_purged_total",
                "Hash-sidecar rows purged.",
                &self.retention_txns_purged,
            ),
            (
                "queen_retention_segments_deleted_total",
                "Segments deleted by retention.",
                &self.retention_segments_deleted,
            ),
        ];
        for (name, help, value) in counters {
            counter(&mut out, name, help, value.load(Relaxed));
        }
        out.push_str("# HELP queen_acks_total Ack items by the path that answered them.\n");
        out.push_str("# TYPE queen_acks_total counter\n");
        for (path, value) in [
            ("registry", &self.acks_registry),
            ("fusion", &self.acks_fusion),
            ("hash", &self.acks_hash),
            ("positional", &self.acks_positional),
        ] {
            let _ = writeln!(
                out,
                "queen_acks_total{{path=\"{path}\"}} {}",
                value.load(Relaxed)
            );
        }
        extra(&mut out);
        out
    }
}

/// Writes one counter with its HELP and TYPE lines.
pub fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
    );
}

/// Writes one gauge with its HELP and TYPE lines.
pub fn gauge(out: &mut String, name: &str, help: &str, value: f64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
    );
}
