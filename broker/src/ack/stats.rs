//! A point-in-time copy of the ack accelerators' counters (registry and fusion), for
//! `metrics.rs` to render and `lib.rs` to summarise. Plain numbers: no rendering here.

use super::fusion::{AckFusion, FusionCounts};
use super::registry::{AckRegistry, RegistryCounts};
use crate::lanes::LaneCounts;

/// The ack registry's counters and size.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RegistrySnapshot {
    pub counts: RegistryCounts,
    pub entries: usize,
    pub bytes: usize,
}

/// Ack fusion's counters, with its lanes'.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FusionSnapshot {
    pub counts: FusionCounts,
    /// Flushes the lanes may run at once now.
    pub concurrency: usize,
    /// The lanes' lingers and probes of one more flush in flight.
    pub lanes: LaneCounts,
}

impl FusionSnapshot {
    /// Rows per flush since start (0 before the first flush).
    pub fn rows_per_commit(&self) -> f64 {
        if self.counts.flushes > 0 {
            self.counts.rows as f64 / self.counts.flushes as f64
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
            counts: r.counters.counts(),
            entries: r.entries(),
            bytes: r.bytes(),
        }
    }
}

impl FusionSnapshot {
    pub fn of(f: &AckFusion) -> FusionSnapshot {
        FusionSnapshot {
            counts: f.stats.counts(),
            concurrency: f.concurrency(),
            lanes: f.gauges().counters.counts(),
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
