//! The pop engine's counters (how often the hotlist was seeded, how many long-polls the pending
//! gate parked without SQL, how pop fusion batched, how many segments came from the decoded
//! cache instead of PostgreSQL) and a point-in-time copy of them for `metrics.rs` to render.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::fusion::PopFusion;
use crate::segment_cache::SegmentCache;

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

/// Pop fusion's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PopFusionSnapshot {
    pub flushes: u64,
    pub jobs: u64,
    pub flush_errors: u64,
    pub flush_us: u64,
    pub joint_flushes: u64,
}

/// The pop engine's counters at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PopSnapshot {
    pub hotlist_enabled: bool,
    pub hotlist_seeds: u64,
    pub gate_parks: u64,
    pub sql_wildcards: u64,
    pub stale_candidates: u64,
    pub segments_cached: u64,
    pub segments_shipped: u64,
    /// `None` when pop fusion is off.
    pub fusion: Option<PopFusionSnapshot>,
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
            hotlist_seeds: s.hotlist_seeds.load(Relaxed),
            gate_parks: s.gate_parks.load(Relaxed),
            sql_wildcards: s.sql_wildcards.load(Relaxed),
            stale_candidates: s.stale_candidates.load(Relaxed),
            segments_cached: s.segments_cached.load(Relaxed),
            segments_shipped: s.segments_shipped.load(Relaxed),
            fusion: fusion.map(|f| PopFusionSnapshot {
                flushes: f.stats.flushes.load(Relaxed),
                jobs: f.stats.jobs.load(Relaxed),
                flush_errors: f.stats.flush_errors.load(Relaxed),
                flush_us: f.stats.flush_us.load(Relaxed),
                joint_flushes: f.stats.joint_flushes.load(Relaxed),
            }),
            cache_segments,
            cache_bytes,
        }
    }
}
