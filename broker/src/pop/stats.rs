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
