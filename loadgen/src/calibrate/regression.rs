//! The regressions calibration injects, each through a test-only broker setting
//! (`broker/src/config.rs`, `QUEEN_TEST_*`, off by default), and which gate exists to catch
//! which: a gate is mapped by what it judges.
//!
//! - Latency and throughput gates (wall-clock figures of the client) catch a slower ack path:
//!   a fixed extra cost on every ack request.
//! - Gates on commit counts (ack commits, all commits, WAL syncs per message, rows per flush)
//!   whose numerator runs fusion catch a fusion that stopped coalescing: one row per flush.
//! - Gates whose numerator runs the registry (PostgreSQL time per ack, hit rate, and any other
//!   figure of a registry cell without fusion) catch a registry that stopped hitting: every
//!   lookup misses.

use crate::scenario::{Gate, GateCheck};

/// The extra cost per ack request injected for latency gates, in µs, unless told otherwise.
pub const DEFAULT_EXTRA_COST_US: u64 = 5_000;

/// One injectable regression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Regression {
    /// `QUEEN_TEST_ACK_FUSION_MAX_ROWS=1`: fusion commits one row per flush.
    FusionOneRow,
    /// `QUEEN_TEST_REGISTRY_MISS=1`: the registry misses every lookup.
    RegistryMiss,
    /// `QUEEN_TEST_ACK_EXTRA_COST_US=N`: every ack request waits N µs first.
    AckExtraCost(u64),
}

impl Regression {
    /// Its short name, in calibration.json and the output directories.
    pub fn name(self) -> &'static str {
        match self {
            Regression::FusionOneRow => "fusion-one-row",
            Regression::RegistryMiss => "registry-miss",
            Regression::AckExtraCost(_) => "ack-extra-cost",
        }
    }

    /// The broker environment variable and its value.
    pub fn setting(self) -> (&'static str, String) {
        match self {
            Regression::FusionOneRow => ("QUEEN_TEST_ACK_FUSION_MAX_ROWS", "1".into()),
            Regression::RegistryMiss => ("QUEEN_TEST_REGISTRY_MISS", "1".into()),
            Regression::AckExtraCost(us) => ("QUEEN_TEST_ACK_EXTRA_COST_US", us.to_string()),
        }
    }

    /// What it does, in words.
    pub fn words(self) -> String {
        match self {
            Regression::FusionOneRow => "fusion capped at one row per flush".into(),
            Regression::RegistryMiss => "the registry misses every lookup".into(),
            Regression::AckExtraCost(us) => format!("{us} µs extra on every ack request"),
        }
    }
}

/// The regression `gate` exists to catch (see the module's rules).
pub fn for_gate(gate: &Gate, extra_cost_us: u64) -> Regression {
    let figure = gate.figure.name();
    let numerator = match &gate.check {
        GateCheck::Ratio { numerator, .. } => *numerator,
        GateCheck::Baseline { cell, .. } => *cell,
    };
    let wall_clock = figure.starts_with("latency_ms.") || figure.ends_with("_throughput");
    let counts_commits = matches!(
        figure.as_str(),
        "ack_commits_per_ack"
            | "commits_per_ack"
            | "commits_per_ack_request"
            | "commits_per_sec"
            | "commits"
            | "wal_syncs_per_ack"
            | "wal_bytes_per_ack"
            | "fusion_rows_per_commit"
    );
    if wall_clock {
        Regression::AckExtraCost(extra_cost_us)
    } else if counts_commits && numerator.fusion() {
        Regression::FusionOneRow
    } else if numerator.registry() {
        Regression::RegistryMiss
    } else if numerator.fusion() {
        Regression::FusionOneRow
    } else {
        Regression::AckExtraCost(extra_cost_us)
    }
}

/// The distinct regressions the gates exist to catch, in gate order.
pub fn for_gates(gates: &[Gate], extra_cost_us: u64) -> Vec<Regression> {
    let mut out: Vec<Regression> = Vec::new();
    for g in gates {
        let r = for_gate(g, extra_cost_us);
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    fn gate(figure: &str, numerator: &str) -> Gate {
        let text = format!(
            "[producers]\ncount = 1\n[[gates]]\nkind = \"ratio\"\nfigure = \"{figure}\"\nnumerator = \"{numerator}\"\ndenominator = \"none\"\nmax = 0.5\n"
        );
        Scenario::parse(&text, "t.toml").unwrap().gates.remove(0)
    }

    #[test]
    fn each_gate_maps_to_the_regression_it_exists_to_catch() {
        let r = |f, n| for_gate(&gate(f, n), 100);
        assert_eq!(
            r("ack_commits_per_ack", "registry+fusion"),
            Regression::FusionOneRow
        );
        assert_eq!(
            r("commits_per_ack", "registry+fusion"),
            Regression::FusionOneRow
        );
        assert_eq!(
            r("pg_exec_ms_per_ack", "registry"),
            Regression::RegistryMiss
        );
        assert_eq!(
            r("pg_exec_ms_per_ack", "registry+fusion"),
            Regression::RegistryMiss
        );
        assert_eq!(r("registry_hit_rate", "registry"), Regression::RegistryMiss);
        assert_eq!(
            r("latency_ms.ack.p99", "registry+fusion"),
            Regression::AckExtraCost(100)
        );
        assert_eq!(r("ack_throughput", "fusion"), Regression::AckExtraCost(100));
        let gates = [
            gate("ack_commits_per_ack", "registry+fusion"),
            gate("commits_per_ack", "registry+fusion"),
            gate("pg_exec_ms_per_ack", "registry"),
        ];
        assert_eq!(
            for_gates(&gates, 100),
            vec![Regression::FusionOneRow, Regression::RegistryMiss]
        );
        assert_eq!(
            Regression::AckExtraCost(250).setting(),
            ("QUEEN_TEST_ACK_EXTRA_COST_US", "250".to_string())
        );
    }
}
