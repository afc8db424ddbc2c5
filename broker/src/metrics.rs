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
use crate::pop::stats::PopSnapshot;

/// Everything `/metrics` shows besides the broker's own counters.
pub struct Sections<'a> {
    pub ack: AckSnapshot,
    pub pop: PopSnapshot,
    pub config: &'a Config,
}

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
    /// Full-batch acks that listed their partition ahead of their commit (`QUEEN_ACK_HANDOFF`).
    pub ack_handoffs: AtomicU64,
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
        let counters: [(&str, &str, &AtomicU64); 11] = [
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
                "Parked long-polls woken (by a push, a release, or candidates given back).",
                &self.long_poll_woken,
            ),
            (
                "queen_ack_handoffs_total",
                "Full-batch acks that listed their partition for a pop of the same flush.",
                &self.ack_handoffs,
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
        render_ack(&mut out, &sections.ack);
        render_pop(&mut out, &sections.pop);
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
    let series = [
        (
            "queen_ack_registry_hits_total",
            "Ack groups answered by a registry hit.",
            r.hits,
        ),
        (
            "queen_ack_registry_misses_total",
            "Ack groups that took the SQL path.",
            r.misses,
        ),
        (
            "queen_ack_registry_evictions_total",
            "Entries evicted by the memory bound.",
            r.evictions,
        ),
        (
            "queen_ack_registry_expirations_total",
            "Entries swept by TTL.",
            r.expirations,
        ),
    ];
    for (name, help, value) in series {
        counter(out, name, help, value);
    }
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
    let series = [
        (
            "queen_ack_fusion_flushes_total",
            "Fusion flushes (one commit each).",
            f.flushes,
        ),
        (
            "queen_ack_fusion_rows_total",
            "Folded rows committed by flushes.",
            f.rows,
        ),
        (
            "queen_ack_fusion_requests_total",
            "Registry hits enqueued for fusion.",
            f.requests,
        ),
        (
            "queen_ack_fusion_committed_total",
            "Fused acks answered Committed.",
            f.committed,
        ),
        (
            "queen_ack_fusion_rejected_total",
            "Fused acks answered Rejected (hash path).",
            f.rejected,
        ),
        (
            "queen_ack_fusion_flush_errors_total",
            "Flushes that failed as a whole.",
            f.flush_errors,
        ),
        (
            "queen_ack_fusion_flush_microseconds_total",
            "Wall time of flushes: connection, call and commit.",
            f.flush_us,
        ),
        (
            "queen_lanes_lingers_total",
            "Lingers of an idle lane after a first arrival.",
            f.lingers,
        ),
        (
            "queen_lanes_linger_microseconds_total",
            "Time the lanes' lingers were set to hold their work (one ended early by a full flush counts whole).",
            f.linger_us,
        ),
        (
            "queen_lanes_probes_total",
            "Epochs the lanes tried one more flush in flight.",
            f.probes,
        ),
        (
            "queen_lanes_probes_kept_total",
            "Probes that measured a gain and were kept.",
            f.probes_kept,
        ),
    ];
    for (name, help, value) in series {
        counter(out, name, help, value);
    }
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
    let series = [
        (
            "queen_pop_hotlist_seeds_total",
            "Candidate lists (re)seeded from PostgreSQL.",
            p.hotlist_seeds,
        ),
        (
            "queen_pop_gate_parks_total",
            "Long-poll attempts the pending gate answered without SQL.",
            p.gate_parks,
        ),
        (
            "queen_pop_sql_wildcards_total",
            "Pops that ran the bounded SQL wildcard.",
            p.sql_wildcards,
        ),
        (
            "queen_pop_stale_candidates_total",
            "Claims of listed candidates that delivered nothing.",
            p.stale_candidates,
        ),
        (
            "queen_pop_segments_cached_total",
            "Delivered segments served decoded from the cache.",
            p.segments_cached,
        ),
        (
            "queen_pop_segments_shipped_total",
            "Delivered segments whose blob PostgreSQL shipped.",
            p.segments_shipped,
        ),
    ];
    for (name, help, value) in series {
        counter(out, name, help, value);
    }
    if let Some(f) = &p.fusion {
        let series = [
            (
                "queen_pop_fusion_flushes_total",
                "Pop fusion flushes (one commit each).",
                f.flushes,
            ),
            (
                "queen_pop_fusion_jobs_total",
                "Pops claimed through fusion flushes.",
                f.jobs,
            ),
            (
                "queen_pop_fusion_flush_errors_total",
                "Pop flushes that failed as a whole.",
                f.flush_errors,
            ),
            (
                "queen_pop_fusion_flush_microseconds_total",
                "Wall time of pop flushes: connection, claim and commit.",
                f.flush_us,
            ),
            (
                "queen_pop_fusion_joint_flushes_total",
                "Pop flushes that committed fused acks in the same transaction.",
                f.joint_flushes,
            ),
        ];
        for (name, help, value) in series {
            counter(out, name, help, value);
        }
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
    let settings: [(&str, u64); 19] = [
        ("QUEEN_HOTLIST", flag(c.hotlist)),
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
