//! The figure catalogue: every figure a cell's results carry, declared once with its label,
//! unit, kind (counter or wall-clock), better direction, format, the accelerator it needs and
//! where it is shown. The results schema (`Figures`), the lookups by key, the summaries over
//! rounds, the gate figures, the exports and the report's tables are all derived from it:
//! adding a figure is one line in `scalars!` below, plus its measurement.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::results::{Percentiles, Statement};
use crate::stats::Nan;

/// How noisy a figure is; a baseline gate's default tolerance follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FigureKind {
    /// Counter-based and per acked message: nearly deterministic, held tight.
    Counter,
    /// Depends on wall-clock time (throughput, latency, totals over a window): noisy.
    WallClock,
}

/// Which way a figure is better, for colouring ratios and for a gate's default direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    /// Neither way is news (commits per second); a gate holds it both ways.
    Neither,
}

/// How a figure is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Per second, or a count: thousands grouped above 1000, three significant digits below.
    Number,
    /// A fraction shown as a percentage.
    Percent,
    /// Milliseconds.
    Ms,
}

/// An accelerator a figure only makes sense with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    Registry,
    Fusion,
}

/// A place a figure is shown, beyond the results document and the gates (which take every
/// figure of the catalogue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// A column of the report's summary table and a row of the comparison table.
    Summary,
    /// A bar chart of its own in a comparison.
    KeyChart,
    /// Exported for history tools (github-action-benchmark, Bencher); smaller must be better.
    Export,
    /// A column of the Markdown summary for pull-request comments.
    Markdown,
}

/// One figure of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FigureDef {
    /// The key `Figures::get` reads it by (`ack_throughput`, `latency_ms.ack.p99`).
    pub key: &'static str,
    pub label: &'static str,
    /// What the number counts, as exports write it (`commits/ack`, `ms`).
    pub unit: &'static str,
    /// The line under its column header in the report's tables (`all commits`, `%`).
    pub column: &'static str,
    pub kind: FigureKind,
    pub better: Better,
    pub format: Format,
    pub needs: Needs,
    pub views: &'static [View],
}

impl FigureDef {
    pub fn shown_in(&self, view: View) -> bool {
        self.views.contains(&view)
    }
}

/// Declares the scalar figures: the `ScalarFigure` names, their catalogue entries (`SCALARS`)
/// and the `Figures` struct of the results document that holds them, in this order.
macro_rules! scalars {
    ($(
        $(#[$meta:meta])*
        $variant:ident $field:ident ($label:literal, $unit:literal, $column:literal,
            $kind:ident, $better:ident, $format:ident, $needs:ident, [$($view:ident),*]);
    )+) => {
        /// A figure with a plain name, e.g. `ack_commits_per_ack`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ScalarFigure { $($variant),+ }

        impl ScalarFigure {
            /// Every scalar figure, in catalogue order.
            pub const ALL: &'static [ScalarFigure] = &[$(ScalarFigure::$variant),+];
        }

        /// The scalar figures' entries, in `ScalarFigure` order.
        pub static SCALARS: &[FigureDef] = &[$(FigureDef {
            key: stringify!($field),
            label: $label,
            unit: $unit,
            column: $column,
            kind: FigureKind::$kind,
            better: Better::$better,
            format: Format::$format,
            needs: Needs::$needs,
            views: &[$(View::$view),*],
        }),+];

        /// Every figure of a cell, as numbers in a round (`T = f64`) or spreads in a summary.
        #[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
        #[serde(bound(deserialize = "T: serde::Deserialize<'de> + Nan"))]
        pub struct Figures<T: Nan> {
            $(
                $(#[$meta])*
                #[serde(deserialize_with = "crate::stats::nullable")]
                pub $field: T,
            )+
            /// `pg_exec_ms_per_ack` split by procedure (the ack procedures, push, pop, ...).
            #[serde(deserialize_with = "crate::stats::nullable_map")]
            pub pg_exec_ms_per_ack_by_procedure: BTreeMap<String, T>,
            /// Client-side latency (open loop: from the intended send time).
            pub latency_ms: BTreeMap<String, Percentiles<T>>,
            /// Open loop only: latency from the actual send time (coordinated omission not
            /// corrected).
            #[serde(default)]
            pub latency_uncorrected_ms: BTreeMap<String, Percentiles<T>>,
            /// Per procedure of `storage.md`, keyed without the schema (`log_ack_multi_v1`):
            /// top-level calls, execution ms, rows, WAL bytes.
            pub statements: BTreeMap<String, Statement<T>>,
        }

        impl<T: Nan> Figures<T> {
            /// A scalar figure's value.
            pub fn scalar(&self, figure: ScalarFigure) -> &T {
                match figure { $(ScalarFigure::$variant => &self.$field),+ }
            }

            pub fn scalar_mut(&mut self, figure: ScalarFigure) -> &mut T {
                match figure { $(ScalarFigure::$variant => &mut self.$field),+ }
            }
        }
    };
}

scalars! {
    AckedMessages acked_messages ("Acked messages", "msg", "", WallClock, Higher, Number, Nothing, []);
    AckRequests ack_requests ("Ack requests", "requests", "", WallClock, Higher, Number, Nothing, []);
    PushedMessages pushed_messages ("Pushed messages", "msg", "", WallClock, Higher, Number, Nothing, []);
    PushRequests push_requests ("Push requests", "requests", "", WallClock, Neither, Number, Nothing, []);
    PoppedMessages popped_messages ("Popped messages", "msg", "", WallClock, Higher, Number, Nothing, []);
    PopRequests pop_requests ("Pop requests", "requests", "", WallClock, Neither, Number, Nothing, []);
    /// Acked messages per second of the measured window.
    AckThroughput ack_throughput ("Ack throughput", "msg/s", "msg/s", WallClock, Higher, Number, Nothing, [Summary, KeyChart, Markdown]);
    PushThroughput push_throughput ("Push throughput", "msg/s", "msg/s", WallClock, Higher, Number, Nothing, [Summary]);
    /// `pg_stat_database.xact_commit` delta of the benchmark database.
    Commits commits ("Commits", "commits", "", WallClock, Neither, Number, Nothing, []);
    /// Writing transactions (`pg_snapshot_xmax` delta): lag-free, excludes read-only commits.
    WriteCommits write_commits ("Writing commits", "commits", "", WallClock, Neither, Number, Nothing, []);
    CommitsPerSec commits_per_sec ("Commits", "commits/s", "/s", WallClock, Neither, Number, Nothing, [Summary, KeyChart]);
    /// All of the database's commits per acked message.
    CommitsPerAck commits_per_ack ("Commits per acked msg", "commits/ack", "all commits", Counter, Lower, Number, Nothing, [Summary, KeyChart, Export, Markdown]);
    /// Top-level calls of the ack procedures (each its own transaction) per acked message.
    AckCommitsPerAck ack_commits_per_ack ("Ack commits per acked msg", "commits/ack", "ack procedures", Counter, Lower, Number, Nothing, [Summary, Export, Markdown]);
    CommitsPerAckRequest commits_per_ack_request ("Commits per ack request", "commits/request", "", Counter, Lower, Number, Nothing, []);
    WalRecords wal_records ("WAL records", "records", "", WallClock, Neither, Number, Nothing, []);
    WalBytes wal_bytes ("WAL bytes", "bytes", "", WallClock, Neither, Number, Nothing, []);
    WalSyncs wal_syncs ("WAL syncs", "syncs", "", WallClock, Neither, Number, Nothing, []);
    WalSyncsPerAck wal_syncs_per_ack ("WAL syncs per acked msg", "syncs/ack", "", Counter, Lower, Number, Nothing, [Summary, KeyChart, Export]);
    WalSyncsPerCommit wal_syncs_per_commit ("WAL syncs per commit", "syncs/commit", "group commit", Counter, Neither, Number, Nothing, [Summary]);
    WalBytesPerAck wal_bytes_per_ack ("WAL bytes per acked msg", "bytes/ack", "bytes", Counter, Lower, Number, Nothing, [Summary, Export]);
    /// `pg_stat_statements` total execution ms of the broker's procedures per acked message.
    PgExecMsPerAck pg_exec_ms_per_ack ("PostgreSQL time per acked msg", "ms/ack", "ms", WallClock, Lower, Ms, Nothing, [Summary, KeyChart, Export, Markdown]);
    /// Registry hits / (hits + misses) over the window, from the broker's `/metrics`.
    RegistryHitRate registry_hit_rate ("Registry hit rate", "share", "%", Counter, Higher, Percent, Registry, [Summary, KeyChart]);
    /// Fusion rows per flush commit over the window, from the broker's `/metrics`.
    FusionRowsPerCommit fusion_rows_per_commit ("Fusion rows per commit", "rows/commit", "rows", Counter, Higher, Number, Fusion, [Summary, KeyChart]);
    /// Redeliveries (deliveries beyond the first of a transactionId) in the window.
    Redeliveries redeliveries ("Redeliveries", "deliveries", "", WallClock, Lower, Number, Nothing, []);
    Errors errors ("Errors", "errors", "", WallClock, Lower, Number, Nothing, []);
    /// CPU microseconds of the load generator itself per HTTP request it sent in the window
    /// (push, pop, empty pops included, and ack requests).
    LoadgenCpuUsPerOp loadgen_cpu_us_per_op ("Load generator CPU per request", "µs/request", "µs", WallClock, Lower, Number, Nothing, []);
    /// CPU of the broker process over the window, in cores (embedded brokers only).
    BrokerCpuCores broker_cpu_cores ("Broker CPU", "cores", "cores", WallClock, Neither, Number, Nothing, []);
    /// CPU microseconds of the broker process per HTTP request it served in the window
    /// (embedded brokers only; absent before schema version 2).
    #[serde(default = "crate::stats::absent")]
    BrokerCpuUsPerRequest broker_cpu_us_per_request ("Broker CPU per request", "µs/request", "µs", WallClock, Lower, Number, Nothing, []);
    /// The share of the machine's CPU time the host took from it over the window (`/proc/stat`
    /// steal): a round measured under steal is slower for reasons outside the systems under
    /// test (NaN where the kernel does not account it, and in older documents).
    #[serde(default = "crate::stats::absent")]
    HostStealShare host_steal_share ("Host steal", "share", "% steal", WallClock, Lower, Percent, Nothing, [Summary]);
}

/// Declares a small closed set of names (operations, percentiles) with their text.
macro_rules! named {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            /// Every value, in documentation order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The name used in keys, scenario files and results.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            pub fn from_name(text: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.name() == text)
            }
        }
    };
}

named!(
    /// The operation a latency figure is about; `e2e` is push to ack.
    LatencyOp { Push = "push", Pop = "pop", Ack = "ack", E2e = "e2e" }
);

named!(
    /// A latency percentile a figure names.
    Percentile { P50 = "p50", P90 = "p90", P99 = "p99", P999 = "p999", Max = "max" }
);

/// The entry of one latency percentile: milliseconds, wall-clock, lower is better.
macro_rules! latency {
    ($op:literal, $op_label:literal, $pct:literal, $pct_label:literal, [$($view:ident),*]) => {
        FigureDef {
            key: concat!("latency_ms.", $op, ".", $pct),
            label: concat!($op_label, " ", $pct_label),
            unit: "ms",
            column: "ms",
            kind: FigureKind::WallClock,
            better: Better::Lower,
            format: Format::Ms,
            needs: Needs::Nothing,
            views: &[$(View::$view),*],
        }
    };
}

/// The latency figures, operation by operation in `LatencyOp` order, each in `Percentile` order.
pub static LATENCY: [FigureDef; 20] = [
    latency!("push", "Push", "p50", "p50", []),
    latency!("push", "Push", "p90", "p90", []),
    latency!("push", "Push", "p99", "p99", []),
    latency!("push", "Push", "p999", "p99.9", []),
    latency!("push", "Push", "max", "max", []),
    latency!("pop", "Pop", "p50", "p50", []),
    latency!("pop", "Pop", "p90", "p90", []),
    latency!("pop", "Pop", "p99", "p99", []),
    latency!("pop", "Pop", "p999", "p99.9", []),
    latency!("pop", "Pop", "max", "max", []),
    latency!("ack", "Ack", "p50", "p50", [Summary, KeyChart, Export]),
    latency!("ack", "Ack", "p90", "p90", []),
    latency!(
        "ack",
        "Ack",
        "p99",
        "p99",
        [Summary, KeyChart, Export, Markdown]
    ),
    latency!("ack", "Ack", "p999", "p99.9", [Summary, KeyChart]),
    latency!("ack", "Ack", "max", "max", []),
    latency!("e2e", "End-to-end", "p50", "p50", []),
    latency!("e2e", "End-to-end", "p90", "p90", []),
    latency!("e2e", "End-to-end", "p99", "p99", [Export]),
    latency!("e2e", "End-to-end", "p999", "p99.9", []),
    latency!("e2e", "End-to-end", "max", "max", []),
];

/// Every figure of the catalogue: the scalars, then the latency percentiles.
pub fn all() -> impl Iterator<Item = &'static FigureDef> {
    SCALARS.iter().chain(LATENCY.iter())
}

/// The figures shown in `view`, in catalogue order.
pub fn shown_in(view: View) -> Vec<&'static FigureDef> {
    all().filter(|d| d.shown_in(view)).collect()
}

/// A figure's entry by key.
pub fn def(key: &str) -> Option<&'static FigureDef> {
    all().find(|d| d.key == key)
}

impl ScalarFigure {
    pub fn def(self) -> &'static FigureDef {
        &SCALARS[self as usize]
    }

    /// The name used in scenario files and results.
    pub fn name(self) -> &'static str {
        self.def().key
    }

    pub fn from_name(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| s.name() == text)
    }
}

/// A catalogue figure by name, as gates and exports address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Figure {
    /// A figure with a plain name, e.g. `ack_commits_per_ack`.
    Scalar(ScalarFigure),
    /// A client-side latency percentile in milliseconds, e.g. `latency_ms.ack.p99`.
    Latency(LatencyOp, Percentile),
}

impl Figure {
    pub fn def(&self) -> &'static FigureDef {
        match self {
            Figure::Scalar(s) => s.def(),
            Figure::Latency(op, p) => &LATENCY[*op as usize * Percentile::ALL.len() + *p as usize],
        }
    }

    /// The figure's name, e.g. `ack_commits_per_ack` or `latency_ms.ack.p99`.
    pub fn name(&self) -> String {
        self.def().key.to_string()
    }

    /// Counter-based or wall-clock.
    pub fn kind(&self) -> FigureKind {
        self.def().kind
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

fn parse_latency(text: &str) -> Option<Figure> {
    let mut parts = text.split('.');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("latency_ms"), Some(op), Some(p), None) => Some(Figure::Latency(
            LatencyOp::from_name(op)?,
            Percentile::from_name(p)?,
        )),
        _ => None,
    }
}

impl FromStr for Figure {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ScalarFigure::from_name(text)
            .map(Figure::Scalar)
            .or_else(|| parse_latency(text))
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
        f.write_str(self.def().key)
    }
}

impl Serialize for Figure {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.def().key)
    }
}

impl<'de> Deserialize<'de> for Figure {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_parses_back_from_its_key() {
        for d in all() {
            let f: Figure = d.key.parse().unwrap();
            assert_eq!(f.def(), d, "{}", d.key);
        }
        assert!("latency_ms.ack.p42".parse::<Figure>().is_err());
    }

    #[test]
    fn exported_figures_are_smaller_is_better() {
        // github-action-benchmark reads every export as `customSmallerIsBetter`.
        for d in shown_in(View::Export) {
            assert_eq!(d.better, Better::Lower, "{}", d.key);
        }
    }

    #[test]
    fn keys_are_unique() {
        let mut keys: Vec<&str> = all().map(|d| d.key).collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n);
    }

    #[test]
    fn the_summary_lists_throughput_then_costs_then_accelerators_then_latency() {
        let keys: Vec<&str> = shown_in(View::Summary).iter().map(|d| d.key).collect();
        assert_eq!(keys[0], "ack_throughput");
        assert_eq!(keys[9], "registry_hit_rate");
        assert_eq!(keys.last(), Some(&"latency_ms.ack.p999"));
    }
}
