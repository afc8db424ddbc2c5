//! The names of the figures a gate may judge (`Figure`), how noisy each one is (`FigureKind`)
//! and which way is better (`Direction`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A figure measured per cell and round, by its name in the results JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Figure {
    /// A figure with a plain name, e.g. `ack_commits_per_ack`.
    Scalar(ScalarFigure),
    /// A client-side latency percentile in milliseconds, e.g. `latency_ms.ack.p99`.
    Latency(LatencyOp, Percentile),
}

macro_rules! named_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            /// Every value, in documentation order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The name used in scenario files and results.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            fn from_name(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }
    };
}

named_enum!(
    /// The figures with a plain name (see `loadgen.md`, "Derived").
    ScalarFigure {
        AckedMessages = "acked_messages",
        AckRequests = "ack_requests",
        AckThroughput = "ack_throughput",
        PushThroughput = "push_throughput",
        Commits = "commits",
        CommitsPerSec = "commits_per_sec",
        CommitsPerAck = "commits_per_ack",
        AckCommitsPerAck = "ack_commits_per_ack",
        CommitsPerAckRequest = "commits_per_ack_request",
        WalSyncsPerAck = "wal_syncs_per_ack",
        WalBytesPerAck = "wal_bytes_per_ack",
        PgExecMsPerAck = "pg_exec_ms_per_ack",
        RegistryHitRate = "registry_hit_rate",
        FusionRowsPerCommit = "fusion_rows_per_commit",
    }
);

named_enum!(
    /// The operation a latency figure is about; `e2e` is push to ack.
    LatencyOp { Push = "push", Pop = "pop", Ack = "ack", E2e = "e2e" }
);

named_enum!(
    /// A latency percentile.
    Percentile { P50 = "p50", P90 = "p90", P99 = "p99", P999 = "p999", Max = "max" }
);

/// How noisy a figure is, which sets the default tolerance of a baseline gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FigureKind {
    /// Counter-based and per acked message: nearly deterministic, held tight.
    Counter,
    /// Depends on wall-clock time (throughput, latency, totals over a window): noisy.
    WallClock,
}

/// Which way a figure moving is an improvement; a baseline gate fails on the other way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// A rise beyond the tolerance fails (commits per ack, latency, ...).
    LowerIsBetter,
    /// A fall beyond the tolerance fails (throughput, hit rate, ...).
    HigherIsBetter,
    /// A move beyond the tolerance either way fails.
    TwoSided,
}

impl Figure {
    /// The figure's name, e.g. `ack_commits_per_ack` or `latency_ms.ack.p99`.
    pub fn name(&self) -> String {
        match self {
            Figure::Scalar(s) => s.name().to_string(),
            Figure::Latency(op, p) => format!("latency_ms.{}.{}", op.name(), p.name()),
        }
    }

    /// Counter-based or wall-clock.
    pub fn kind(&self) -> FigureKind {
        use ScalarFigure::*;
        match self {
            Figure::Scalar(
                CommitsPerAck | AckCommitsPerAck | CommitsPerAckRequest | WalSyncsPerAck
                | WalBytesPerAck | RegistryHitRate | FusionRowsPerCommit,
            ) => FigureKind::Counter,
            _ => FigureKind::WallClock,
        }
    }

    /// Which way is better, the default `direction` of a baseline gate.
    pub fn better(&self) -> Direction {
        use ScalarFigure::*;
        match self {
            Figure::Latency(..) => Direction::LowerIsBetter,
            Figure::Scalar(
                AckedMessages | AckRequests | AckThroughput | PushThroughput | RegistryHitRate
                | FusionRowsPerCommit,
            ) => Direction::HigherIsBetter,
            Figure::Scalar(Commits | CommitsPerSec) => Direction::TwoSided,
            Figure::Scalar(_) => Direction::LowerIsBetter,
        }
    }

    /// The default tolerance of a baseline gate on this figure: counters tight, wall-clock wide.
    pub fn default_tolerance(&self) -> f64 {
        match self.kind() {
            FigureKind::Counter => 0.10,
            FigureKind::WallClock => 0.50,
        }
    }

    /// A one-line description of every accepted name, for error messages.
    pub fn accepted_names() -> String {
        let scalars: Vec<&str> = ScalarFigure::ALL.iter().map(|s| s.name()).collect();
        let ops: Vec<&str> = LatencyOp::ALL.iter().map(|s| s.name()).collect();
        let pcts: Vec<&str> = Percentile::ALL.iter().map(|s| s.name()).collect();
        format!(
            "{}, or latency_ms.<{}>.<{}>",
            scalars.join(", "),
            ops.join("|"),
            pcts.join("|")
        )
    }
}

impl FromStr for Figure {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Some(scalar) = ScalarFigure::from_name(text) {
            return Ok(Figure::Scalar(scalar));
        }
        let mut parts = text.split('.');
        let latency = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("latency_ms"), Some(op), Some(p), None) => {
                LatencyOp::from_name(op).zip(Percentile::from_name(p))
            }
            _ => None,
        };
        latency
            .map(|(op, p)| Figure::Latency(op, p))
            .ok_or_else(|| {
                format!(
                    "must be a known figure ({}), got `{text}`",
                    Figure::accepted_names()
                )
            })
    }
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for Figure {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Figure {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
