//! The pop engine's counters and their `/metrics` section: how often the hotlist was seeded,
//! how many long-polls the pending gate parked without SQL, how pop fusion batched, and how
//! many segments came from the decoded cache instead of PostgreSQL.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::app::App;
use crate::metrics::{counter, gauge};

#[derive(Default)]
pub struct PopStats {
    pub hotlist_seeds: AtomicU64,
    pub gate_parks: AtomicU64,
    pub sql_wildcards: AtomicU64,
    pub stale_candidates: AtomicU64,
    pub segments_cached: AtomicU64,
    pub segments_shipped: AtomicU64,
}

impl PopStats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }
}

/// Appends the pop engine's series to the exposition.
pub fn render_metrics(app: &App, out: &mut String) {
    let s = &app.pop_stats;
    let flag = |on: bool| f64::from(u8::from(on));
    gauge(
        out,
        "queen_pop_hotlist_enabled",
        "1 when the hotlist is on.",
        flag(app.hotlist.is_some()),
    );
    gauge(
        out,
        "queen_pop_fusion_enabled",
        "1 when pop fusion is on.",
        flag(app.pop_fusion.is_some()),
    );
    let series: [(&str, &str, &AtomicU64); 6] = [
        (
            "queen_pop_hotlist_seeds_total",
            "Candidate lists (re)seeded from PostgreSQL.",
            &s.hotlist_seeds,
        ),
        (
            "queen_pop_gate_parks_total",
            "Long-poll attempts the pending gate answered without SQL.",
            &s.gate_parks,
        ),
        (
            "queen_pop_sql_wildcards_total",
            "Pops that ran the bounded SQL wildcard.",
            &s.sql_wildcards,
        ),
        (
            "queen_pop_stale_candidates_total",
            "Claims of listed candidates that delivered nothing.",
            &s.stale_candidates,
        ),
        (
            "queen_pop_segments_cached_total",
            "Delivered segments served decoded from the cache.",
            &s.segments_cached,
        ),
        (
            "queen_pop_segments_shipped_total",
            "Delivered segments whose blob PostgreSQL shipped.",
            &s.segments_shipped,
        ),
    ];
    for (name, help, value) in series {
        counter(out, name, help, value.load(Relaxed));
    }
    if let Some(f) = &app.pop_fusion {
        let (flushes, jobs) = (f.stats.flushes.load(Relaxed), f.stats.jobs.load(Relaxed));
        counter(
            out,
            "queen_pop_fusion_flushes_total",
            "Pop fusion flushes (one commit each).",
            flushes,
        );
        counter(
            out,
            "queen_pop_fusion_jobs_total",
            "Pops claimed through fusion flushes.",
            jobs,
        );
        counter(
            out,
            "queen_pop_fusion_flush_errors_total",
            "Pop flushes that failed as a whole.",
            f.stats.flush_errors.load(Relaxed),
        );
    }
    render_settings(app, out);
    let (segments, bytes) = app.segments.usage();
    gauge(
        out,
        "queen_segment_cache_segments",
        "Decoded segments held.",
        segments as f64,
    );
    gauge(
        out,
        "queen_segment_cache_bytes",
        "Bytes the decoded segments hold.",
        bytes as f64,
    );
}

/// The engine's switches and sizes as `queen_engine_setting{name="VARIABLE"}`, so a results
/// document records which engine each cell ran (the load generator keeps them as gauges).
fn render_settings(app: &App, out: &mut String) {
    let c = &app.config;
    let flag = |on: bool| u64::from(on);
    let settings: [(&str, u64); 14] = [
        ("QUEEN_HOTLIST", flag(c.hotlist)),
        ("QUEEN_HOTLIST_RESEED_MS", c.hotlist_reseed_ms),
        ("QUEEN_POP_PENDING_GATE", flag(c.pop_pending_gate)),
        ("QUEEN_POP_FUSION", flag(c.pop_fusion)),
        ("QUEEN_POP_FUSION_SHARDS", c.pop_fusion_shards as u64),
        ("QUEEN_POP_FUSION_HOLD_MS", c.pop_fusion_hold_ms),
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
        ("DB_POOL_SIZE", c.pool_size as u64),
    ];
    out.push_str("# HELP queen_engine_setting The broker's engine settings, by variable.\n");
    out.push_str("# TYPE queen_engine_setting gauge\n");
    for (name, value) in settings {
        out.push_str(&format!(
            "queen_engine_setting{{name=\"{name}\"}} {value}\n"
        ));
    }
}
