//! `ackbench history add | analyze | report`: the subcommands and what each does; each returns
//! the process exit code (0 done, 2 bad input: a missing or foreign file, an unreachable store,
//! an unknown option value). Finding change points is not a failure: `analyze` exits 0.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::analysis;
use super::chart;
use super::record::{commit_of, RunRecord};
use super::stats::Settings;
use super::store::Store;

#[derive(Subcommand)]
pub enum HistoryCommand {
    /// Keep a run's figures (per cell, its gated and headline figures) in a history store.
    Add {
        /// The results file of the run.
        results: PathBuf,
        /// A directory (one JSON file per run) or a postgres:// URL (table ackbench_history).
        #[arg(long)]
        store: String,
        /// The commit the run measured (default: the one in the results, else `git rev-parse HEAD`).
        #[arg(long)]
        commit: Option<String>,
    },
    /// Find change points per cell and gated figure over the runs, in the order they were added.
    Analyze {
        #[arg(long)]
        store: String,
        /// Output: table (default), json, markdown.
        #[arg(long, default_value = "table")]
        format: String,
        /// The scenario whose runs to analyse (needed when the store holds several).
        #[arg(long)]
        scenario: Option<String>,
        #[command(flatten)]
        detection: DetectionArgs,
    },
    /// Draw each gated figure's history per cell, change points marked, as an HTML page.
    Report {
        #[arg(long)]
        store: String,
        /// Where to write the page.
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        scenario: Option<String>,
        #[command(flatten)]
        detection: DetectionArgs,
    },
}

/// How change points are judged (see docs/spec/loadgen.md, "History and change points").
#[derive(clap::Args)]
pub struct DetectionArgs {
    /// A change is significant when its permutation p-value is below this.
    #[arg(long, default_value_t = Settings::default().max_p_value)]
    pub max_p_value: f64,
    /// The fewest runs on either side of a change (so a spike is not a change).
    #[arg(long, default_value_t = Settings::default().min_segment)]
    pub min_segment: usize,
    /// The smallest relative change of the median worth reporting (0.05: 5 %).
    #[arg(long, default_value_t = Settings::default().min_change)]
    pub min_change: f64,
    /// Search every kept figure, not only the gated ones.
    #[arg(long)]
    pub all_figures: bool,
}

impl DetectionArgs {
    fn settings(&self) -> Result<Settings, String> {
        if !(self.max_p_value > 0.0 && self.max_p_value <= 1.0) {
            return Err(format!(
                "--max-p-value {} is not in (0, 1]",
                self.max_p_value
            ));
        }
        if self.min_segment < 2 {
            return Err(format!("--min-segment {} is below 2", self.min_segment));
        }
        if !(self.min_change >= 0.0 && self.min_change.is_finite()) {
            return Err(format!(
                "--min-change {} is not a fraction >= 0",
                self.min_change
            ));
        }
        Ok(Settings {
            max_p_value: self.max_p_value,
            min_segment: self.min_segment,
            min_change: self.min_change,
            ..Settings::default()
        })
    }
}

/// Runs one `history` subcommand.
pub async fn run(command: HistoryCommand) -> u8 {
    let store = match &command {
        HistoryCommand::Add { store, .. }
        | HistoryCommand::Analyze { store, .. }
        | HistoryCommand::Report { store, .. } => store,
    };
    if store.trim().is_empty() {
        eprintln!("ackbench: --store is empty: give a directory or a postgres:// URL");
        return 2;
    }
    let done = match command {
        HistoryCommand::Add {
            results,
            store,
            commit,
        } => add(&results, &Store::parse(&store), commit.as_deref()).await,
        HistoryCommand::Analyze {
            store,
            format,
            scenario,
            detection,
        } => {
            analyze(
                &Store::parse(&store),
                &format,
                scenario.as_deref(),
                &detection,
            )
            .await
        }
        HistoryCommand::Report {
            store,
            out,
            scenario,
            detection,
        } => report(&Store::parse(&store), &out, scenario.as_deref(), &detection).await,
    };
    match done {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            eprintln!("ackbench: {e}");
            2
        }
    }
}

async fn add(results: &Path, store: &Store, commit: Option<&str>) -> Result<String, String> {
    let r = ackbench_reports::results::read(results)
        .map_err(|e| format!("{e} (expected the results.json of an `ackbench run`)"))?;
    let commit = commit_of(commit, &r)?;
    let record = RunRecord::from_results(&r, commit, crate::run::now_iso())
        .map_err(|e| format!("{}: {e}", results.display()))?;
    let place = store.add(&record).await?;
    Ok(format!(
        "added {} ({}, commit {}, {} figures) as {place}\n",
        results.display(),
        record.scenario,
        record.commit.as_deref().unwrap_or("unknown"),
        record.figures.len()
    ))
}

async fn analyze(
    store: &Store,
    format: &str,
    scenario: Option<&str>,
    detection: &DetectionArgs,
) -> Result<String, String> {
    if !["table", "json", "markdown"].contains(&format) {
        return Err(format!(
            "--format: `{format}` is not one of table, json, markdown"
        ));
    }
    let settings = detection.settings()?;
    let all = store.load().await?;
    let (name, runs) = analysis::runs_of(&all, scenario)?;
    let findings = analysis::analyze(&runs, &settings, detection.all_figures);
    let searched = analysis::series(&runs)
        .values()
        .filter(|s| s.gated || detection.all_figures)
        .count();
    let scope = analysis::scope(&name, runs.len(), searched, &settings);
    Ok(match format {
        "json" => format!("{}\n", analysis::json(&findings)),
        "markdown" => analysis::markdown(&findings, &scope),
        _ => analysis::table(&findings, &scope),
    })
}

async fn report(
    store: &Store,
    out: &Path,
    scenario: Option<&str>,
    detection: &DetectionArgs,
) -> Result<String, String> {
    let settings = detection.settings()?;
    let all = store.load().await?;
    let (name, runs) = analysis::runs_of(&all, scenario)?;
    let html = chart::page(&name, &runs, &settings, detection.all_figures)?;
    ackbench_reports::write_report(out, &html)?;
    Ok(format!("{}\n", out.display()))
}
