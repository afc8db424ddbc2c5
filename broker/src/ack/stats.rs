//! A point-in-time copy of the ack accelerators' counters (registry and fusion), for
//! `metrics.rs` to render and `lib.rs` to summarise. Plain numbers: no rendering here.

use std::sync::atomic::Ordering::Relaxed;

use super::fusion::AckFusion;
use super::registry::AckRegistry;

/// The ack registry's counters and size.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RegistrySnapshot {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub expirations: u64,
    pub entries: usize,
    pub bytes: usize,
}

/// Ack fusion's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FusionSnapshot {
    pub flushes: u64,
    pub rows: u64,
    pub requests: u64,
    pub committed: u64,
    pub rejected: u64,
    pub flush_errors: u64,
    pub flush_us: u64,
    /// Flushes the lanes may run at once now.
    pub concurrency: usize,
    /// The lanes' lingers: how many, their total wait, and probes of one more flush in flight.
    pub lingers: u64,
    pub linger_us: u64,
    pub probes: u64,
    pub probes_kept: u64,
}

impl FusionSnapshot {
    /// Rows per flush since start (0 before the first flush).
    pub fn rows_per_commit(&self) -> f64 {
        if self.flushes > 0 {
            self.rows as f64 / self.flushes as f64
        } else {
            0.0
        }
    }
}

/// Both accelerators; `None` for one that is off.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AckSnapshot {
    pub registry: Option<RegistrySnapshot>,
    pub fusion: Option<FusionSnapshot>,
}

impl RegistrySnapshot {
    pub fn of(r: &AckRegistry) -> RegistrySnapshot {
        RegistrySnapshot {
            hits: r.hits.load(Relaxed),
            misses: r.misses.load(Relaxed),
            evictions: r.evictions.load(Relaxed),
            expirations: r.expirations.load(Relaxed),
            entries: r.entries(),
            bytes: r.bytes(),
        }
    }
}

impl FusionSnapshot {
    pub fn of(f: &AckFusion) -> FusionSnapshot {
        let (s, lanes) = (&f.stats, &f.lanes().gauges);
        FusionSnapshot {
            flushes: s.flushes.load(Relaxed),
            rows: s.rows.load(Relaxed),
            requests: s.requests.load(Relaxed),
            committed: s.committed.load(Relaxed),
            rejected: s.rejected.load(Relaxed),
            flush_errors: s.flush_errors.load(Relaxed),
            flush_us: s.flush_us.load(Relaxed),
            concurrency: f.concurrency(),
            lingers: lanes.lingers.load(Relaxed),
            linger_us: lanes.linger_us.load(Relaxed),
            probes: lanes.probes.load(Relaxed),
            probes_kept: lanes.probes_kept.load(Relaxed),
        }
    }
}

impl AckSnapshot {
    pub fn of(registry: Option<&AckRegistry>, fusion: Option<&AckFusion>) -> AckSnapshot {
        AckSnapshot {
            registry: registry.map(RegistrySnapshot::of),
            fusion: fusion.map(FusionSnapshot::of),
        }
    }
}
