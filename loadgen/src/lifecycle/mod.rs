//! One cell's life, shared by `run` and `capacity`: the run's environment the cell's system is
//! installed on (`env`; the systems themselves are `crate::driver`'s), the phases of its
//! workload (`phases`: started by the installed system, warm-up, drain, audit, settled as
//! `settle` says for the whole run or one shard) and the measured window (`window`: edge
//! snapshots and a per-second sampler, with the fault injector of `faults` beside it).
//!
//! `run` drives a cell round through every phase; `capacity` reuses one installed system for a
//! ladder of steps, each a workload with a warm-up and a window but no drain or audit.

pub mod env;
pub mod faults;
pub mod phases;
pub mod settle;
pub mod window;

use crate::scenario::{Cell, Scenario, Topology};
use crate::shard::Shard;

/// Identifies one cell round (or one capacity step) in names and output.
pub struct CellRound<'a> {
    pub scenario: &'a Scenario,
    pub cell: Cell,
    /// The cell's name in results (the cell's own name, or its A/A twin's).
    pub name: String,
    /// How many brokers the cell starts and how clients spread requests over them.
    pub topology: Topology,
    /// The round (or the capacity step), from 1.
    pub round: u32,
    /// How many rounds (or steps) there are.
    pub rounds: u32,
    pub seed: u64,
    /// Makes names unique to this run where a broker outlives runs (`Env::run_tag`; empty
    /// for the broker started per cell).
    pub run_tag: String,
    /// The slice of the scenario this process runs (`Shard::WHOLE` but for `--shard`).
    pub shard: Shard,
}

impl CellRound<'_> {
    /// A name safe in database names, file names and message tags: `<cell slug>_r<round>`
    /// (`<cell slug>_<run tag>_r<round>` against an external broker), lower case (PostgreSQL
    /// folds an unquoted database name to lower case).
    pub fn tag(&self) -> String {
        round_tag(&self.name, &self.run_tag, self.round)
    }

    /// The prefix of progress lines: `[scenario] cell rN/M`.
    pub fn label(&self) -> String {
        format!(
            "[{}] {} r{}/{}",
            self.scenario.name, self.name, self.round, self.rounds
        )
    }

    /// The queue this round runs on (fresh per round).
    pub fn queue(&self) -> String {
        format!("{}-{}", self.scenario.queue.name, self.tag())
    }
}

/// The tag of round `round` of the cell named `name` (see `CellRound::tag`): the merge of
/// shards finds each round's ledger file by it.
pub fn round_tag(name: &str, run_tag: &str, round: u32) -> String {
    let slug: String = name
        .chars()
        .map(|c| match c {
            c if c.is_ascii_alphanumeric() => c.to_ascii_lowercase(),
            _ => '_',
        })
        .collect();
    match run_tag {
        "" => format!("{slug}_r{round}"),
        run => format!("{slug}_{run}_r{round}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_names_its_queue_database_tag_and_progress_label() {
        let scenario = Scenario::parse(
            "name = \"demo\"\n[queue]\nname = \"q\"\n[producers]\ncount = 1\n",
            "demo.toml",
        )
        .unwrap();
        let cr = CellRound {
            scenario: &scenario,
            cell: Cell::RegistryFusion,
            name: "registry+fusion (A/A)".into(),
            topology: Topology::default(),
            round: 2,
            rounds: 3,
            seed: 1,
            run_tag: String::new(),
            shard: Shard::WHOLE,
        };
        assert_eq!(cr.tag(), "registry_fusion__a_a__r2");
        assert_eq!(cr.queue(), "q-registry_fusion__a_a__r2");
        assert_eq!(cr.label(), "[demo] registry+fusion (A/A) r2/3");
        let external = CellRound {
            name: "queen-rows-1.0.0".into(),
            run_tag: "k3x9".into(),
            ..cr
        };
        assert_eq!(external.queue(), "q-queen_rows_1_0_0_k3x9_r2");
    }
}
