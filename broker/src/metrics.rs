//! The broker's own counters, and the Prometheus text of `GET /metrics`: these counters, the
//! domains' snapshots (`ack::stats`, `pop::stats`) and the engine settings, all rendered here.
//!
//! Plain atomics: every hot path bumps a counter without a lock. Requests by (route, status)
//! sit behind one mutex because their label set is open; that lock is held for one increment.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use crate::ack::stats::{AckSnapshot, FusionSnapshot, RegistrySnapshot};
use crate::config::Config;
use crate::counters::counters;
use crate::peers::stats::PeerCounts;
use crate::pop::stats::PopSnapshot;

/// Everything `/metrics` shows besides the broker's own counters.
pub struct Sections<'a> {
    pub ack: AckSnapshot,
    pub pop: PopSnapshot,
    /// The peer notifications' counters (zero when `QUEEN_PEER_NOTIFY` is off).
    pub peers: PeerCounts,
    /// Push fusion's counters, when it is on.
    pub push_fusion: Option<&'a crate::push::fusion::PushFusionStats>,
    pub config: &'a Config,
}

counters! {
    /// The broker's own counters (the domains' sets are rendered from their snapshots).
    BrokerCounters,
    /// The broker's own counters at one instant.
    BrokerCounts {
        messages_pushed: "queen_messages_pushed_total", "Messages written by push.";
        messages_duplicate: "queen_messages_duplicate_total", "Pushed messages refused as duplicates.";
        messages_delivered: "queen_messages_delivered_total", "Messages handed out by pop.";
        messages_acked: "queen_messages_acked_total", "Offsets committed by acks (cursor advance).";
        pops_empty: "queen_pops_empty_total", "Pops answered 204.";
        long_poll_parked: "queen_long_poll_parked_total", "Long-polls that parked.";
        long_poll_woken: "queen_long_poll_woken_total", "Parked long-polls woken (by a push, a release, or candidates given back).";
        /// Full-batch acks that listed their partition ahead of their commit (`QUEEN_ACK_HANDOFF`).
        ack_handoffs: "queen_ack_handoffs_total", "Full-batch acks that listed their partition for a pop of the same flush.";
        retention_passes: "queen_retention_passes_total", "Retention passes run by this broker.";
        retention_txns_purged: "queen_retention_txns_purged_total", "Hash-sidecar rows purged.";
        retention_segments_deleted: "queen_retention_segments_deleted_total", "Segments deleted by retention.";
    }
}

/// The family of ack items by the path that answered them, `queen_acks_total{path=...}`.
const ACKS_BY_PATH: (&str, &str) = (
    "queen_acks_total",
    "Ack items by the path that answered them.",
);

/// Counters the broker exposes.
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    pub counters: BrokerCounters,
    /// Ack items answered by the hash path (`log_ack_by_hash_v1`).
    pub acks_hash: AtomicU64,
    /// Ack items answered by a positional advance (`log_ack_at_v1`).
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

    /// Renders the Prometheus text exposition: these counters, then `sections`.
    pub fn render(&self, sections: &Sections<'_>) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP queen_requests_total HTTP requests by route and status.\n");
        out.push_str("# TYPE queen_requests_total counter\n");
        for ((route, status), n) in self.requests.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                out,
                "queen_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        self.counters.counts().render(&mut out);
        let (family, help) = ACKS_BY_PATH;
        let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} counter");
        for (path, value) in [
            ("registry", &self.acks_registry),
            ("fusion", &self.acks_fusion),
            ("hash", &self.acks_hash),
            ("positional", &self.acks_positional),
        ] {
            let _ = writeln!(out, "{family}{{path=\"{path}\"}} {}", value.load(Relaxed));
        }
        render_ack(&mut out, &sections.ack);
        render_pop(&mut out, &sections.pop);
        sections.peers.render(&mut out);
        if let Some(push) = sections.push_fusion {
            push.render(&mut out);
        }
        render_settings(&mut out, sections.config);
        render_cache(&mut out, &sections.pop);
        out
    }
}

fn flag(on: bool) -> f64 {
    f64::from(u8::from(on))
}

/// The ack accelerators' section.
fn render_ack(out: &mut String, ack: &AckSnapshot) {
    gauge(
        out,
        "queen_ack_registry_enabled",
        "1 when the ack registry is on.",
        flag(ack.registry.is_some()),
    );
    gauge(
        out,
        "queen_ack_fusion_enabled",
        "1 when ack fusion is on.",
        flag(ack.fusion.is_some()),
    );
    if let Some(r) = &ack.registry {
        render_registry(out, r);
    }
    if let Some(f) = &ack.fusion {
        render_ack_fusion(out, f);
    }
}

fn render_registry(out: &mut String, r: &RegistrySnapshot) {
    r.counts.render(out);
    gauge(
        out,
        "queen_ack_registry_entries",
        "Live registry entries.",
        r.entries as f64,
    );
    gauge(
        out,
        "queen_ack_registry_bytes",
        "Estimated registry memory.",
        r.bytes as f64,
    );
}

fn render_ack_fusion(out: &mut String, f: &FusionSnapshot) {
    f.counts.render(out);
    f.lanes.render(out);
    gauge(
        out,
        "queen_ack_fusion_rows_per_commit",
        "Rows per flush since start.",
        f.rows_per_commit(),
    );
    gauge(
        out,
        "queen_ack_fusion_shards",
        "Flushes the lanes may run at once now (adaptive unless QUEEN_ACK_FUSION_SHARDS is set).",
        f.concurrency as f64,
    );
}

/// The pop engine's section.
fn render_pop(out: &mut String, p: &PopSnapshot) {
    gauge(
        out,
        "queen_pop_hotlist_enabled",
        "1 when the hotlist is on.",
        flag(p.hotlist_enabled),
    );
    gauge(
        out,
        "queen_pop_fusion_enabled",
        "1 when pop fusion is on.",
        flag(p.fusion.is_some()),
    );
    p.counts.render(out);
    if let Some(f) = &p.fusion {
        f.render(out);
    }
}

fn render_cache(out: &mut String, p: &PopSnapshot) {
    gauge(
        out,
        "queen_segment_cache_segments",
        "Decoded segments held.",
        p.cache_segments as f64,
    );
    gauge(
        out,
        "queen_segment_cache_bytes",
        "Bytes the decoded segments hold.",
        p.cache_bytes as f64,
    );
}

/// The engine's switches and sizes as `queen_engine_setting{name="VARIABLE"}`, so a results
/// document records which engine each cell ran (the load generator keeps them as gauges).
fn render_settings(out: &mut String, c: &Config) {
    let flag = |on: bool| u64::from(on);
    let settings: [(&str, u64); 20] = [
        ("QUEEN_HOTLIST", flag(c.hotlist)),
        ("QUEEN_PEER_NOTIFY", flag(c.peer_notify)),
        ("QUEEN_HOTLIST_RESEED_MS", c.hotlist_reseed_ms),
        ("QUEEN_POP_PENDING_GATE", flag(c.pop_pending_gate)),
        ("QUEEN_POP_FUSION", flag(c.pop_fusion)),
        ("QUEEN_POP_FUSION_SHARDS", c.pop_fusion_shards as u64),
        ("QUEEN_POP_FUSION_HOLD_MS", c.pop_fusion_hold_ms),
        ("QUEEN_FUSION_JOINT", flag(c.fusion_joint)),
        ("QUEEN_ACK_HANDOFF", flag(c.ack_handoff)),
        ("QUEEN_FUSION_LINGER_MS", c.fusion_linger_ms),
        ("QUEEN_FUSION_LINGER_MIN_RATE", c.fusion_linger_min_rate),
        ("QUEEN_SEGMENT_CACHE_MB", c.segment_cache_mb as u64),
        ("QUEEN_PUSH_FUSION", flag(c.push_fusion)),
        ("QUEEN_PUSH_FUSION_SHARDS", c.push_fusion_shards as u64),
        ("QUEEN_PUSH_BUNDLE_MAX", c.push_bundle_max as u64),
        (
            "QUEEN_PUSH_FUSION_MAX_INFLIGHT",
            c.push_fusion_max_inflight as u64,
        ),
        ("QUEEN_PUSH_FUSION_HOLD_MS", c.push_fusion_hold_ms),
        ("QUEEN_ACK_FUSION_SHARDS", c.ack_fusion_shards as u64),
        ("QUEEN_ACK_FUSION_HOLD_MS", c.ack_fusion_hold_ms),
        ("DB_POOL_SIZE", c.pool_size as u64),
    ];
    out.push_str("# HELP queen_engine_setting The broker's engine settings, by variable.\n");
    out.push_str("# TYPE queen_engine_setting gauge\n");
    for (name, value) in settings {
        let _ = writeln!(out, "queen_engine_setting{{name=\"{name}\"}} {value}");
    }
}

/// Writes one gauge with its HELP and TYPE lines.
pub fn gauge(out: &mut String, name: &str, help: &str, value: f64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ack::fusion::FusionStats;
    use crate::ack::registry::RegistryCounters;
    use crate::counters::Counter;
    use crate::lanes::LaneCounters;
    use crate::peers::stats::PeerStats;
    use crate::pop::fusion::PopFusionStats;
    use crate::pop::stats::PopStats;

    /// Every counter set the broker declares.
    fn catalogue() -> Vec<Counter> {
        [
            BrokerCounters::CATALOGUE,
            RegistryCounters::CATALOGUE,
            FusionStats::CATALOGUE,
            LaneCounters::CATALOGUE,
            PopStats::CATALOGUE,
            PopFusionStats::CATALOGUE,
            PeerStats::CATALOGUE,
        ]
        .concat()
    }

    /// `/metrics` with every section on; the first broker counter holds 1, the last one the
    /// number of broker counters.
    fn exposition() -> String {
        let metrics = Metrics::default();
        Metrics::add(&metrics.counters.messages_pushed, 1);
        let last = BrokerCounters::CATALOGUE.len() as u64;
        Metrics::add(&metrics.counters.retention_segments_deleted, last);
        let lookup = |_: &str| None;
        let config = Config::from_lookup(lookup).expect("defaults");
        let push = crate::push::fusion::PushFusionStats::default();
        let sections = Sections {
            ack: AckSnapshot {
                registry: Some(RegistrySnapshot::default()),
                fusion: Some(FusionSnapshot::default()),
            },
            pop: PopSnapshot {
                fusion: Some(Default::default()),
                ..PopSnapshot::default()
            },
            peers: Default::default(),
            push_fusion: Some(&push),
            config: &config,
        };
        metrics.render(&sections)
    }

    #[test]
    fn every_declared_counter_is_rendered_once_with_its_help_and_type() {
        let text = exposition();
        for c in catalogue() {
            let typed = format!("# TYPE {} counter", c.name);
            let help = format!("# HELP {} {}", c.name, c.help);
            let samples = text
                .lines()
                .filter(|l| l.split(' ').next() == Some(c.name))
                .count();
            assert_eq!(text.matches(&typed).count(), 1, "{}", c.name);
            assert_eq!(text.matches(&help).count(), 1, "{}", c.name);
            assert_eq!(samples, 1, "{}: one sample line", c.name);
        }
    }

    #[test]
    fn a_counters_value_reaches_its_line() {
        let text = exposition();
        assert!(text.contains("\nqueen_messages_pushed_total 1\n"), "{text}");
        let last = BrokerCounters::CATALOGUE.len();
        let line = format!("\nqueen_retention_segments_deleted_total {last}\n");
        assert!(text.contains(&line), "{text}");
    }

    #[test]
    fn counter_names_are_unique_and_follow_the_naming_rule() {
        let all = catalogue();
        let mut names: Vec<&str> = all.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len(), "a counter is declared twice");
        for c in &all {
            assert!(c.name.starts_with("queen_"), "{}", c.name);
            assert!(c.name.ends_with("_total"), "{}", c.name);
            assert!(!c.help.is_empty(), "{}", c.name);
        }
    }
}
