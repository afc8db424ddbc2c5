//! The pop engine's counters (how often the hotlist was seeded, how many long-polls the pending
//! gate parked without SQL, how pop fusion batched, how many segments came from the decoded
//! cache instead of PostgreSQL) and a point-in-time copy of them for `metrics.rs` to render.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::fusion::{PopFusion, PopFusionCounts};
use crate::counters::counters;
use crate::segment_cache::SegmentCache;

counters! {
    /// The pop engine's counters.
    PopStats,
    /// The pop engine's counters at one instant.
    PopCounts {
        hotlist_seeds: "queen_pop_hotlist_seeds_total", "Candidate lists (re)seeded from PostgreSQL.";
        gate_parks: "queen_pop_gate_parks_total", "Long-poll attempts the pending gate answered without SQL.";
        sql_wildcards: "queen_pop_sql_wildcards_total", "Pops that ran the bounded SQL wildcard.";
        stale_candidates: "queen_pop_stale_candidates_total", "Claims of listed candidates that delivered nothing.";
        segments_cached: "queen_pop_segments_cached_total", "Delivered segments served decoded from the cache.";
        segments_shipped: "queen_pop_segments_shipped_total", "Delivered segments whose blob PostgreSQL shipped.";
    }
}

impl PopStats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }
}

/// The pop engine's counters at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PopSnapshot {
    pub hotlist_enabled: bool,
    pub counts: PopCounts,
    /// `None` when pop fusion is off.
    pub fusion: Option<PopFusionCounts>,
    pub cache_segments: usize,
    pub cache_bytes: usize,
}

impl PopSnapshot {
    pub fn of(
        s: &PopStats,
        hotlist_enabled: bool,
        fusion: Option<&PopFusion>,
        segments: &SegmentCache,
    ) -> PopSnapshot {
        let (cache_segments, cache_bytes) = segments.usage();
        PopSnapshot {
            hotlist_enabled,
            counts: s.counts(),
            fusion: fusion.map(|f| f.stats.counts()),
            cache_segments,
            cache_bytes,
        }
    }
}
