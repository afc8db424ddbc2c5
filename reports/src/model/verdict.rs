//! The run's facts (what ran, when, where) and its verdict: the audit, interruptions, warnings
//! and the gates, summed up in one headline.

use super::format::{format_number, gib, group_thousands, secs};
use crate::results::{CellResults, GateOutcome, Results, RunMeta};

/// A run's facts: what ran, when, where.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Header {
    pub scenario_name: String,
    pub scenario_text: String,
    /// (label, value) lines, in the order shown.
    pub facts: Vec<(String, String)>,
    /// PostgreSQL settings as recorded (the loadgen records the ones that matter).
    pub pg_settings: Vec<(String, String)>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Passed,
    Failed,
    /// Interrupted, or a round did not finish: figures are partial.
    Incomplete,
    /// Worth a look, not a failure (a drain that did not finish, request errors).
    Warning,
    /// Neither good nor bad news.
    Info,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub status: Status,
    /// One line: `PASSED: ...`, `FAILED: ...` or `INCOMPLETE: ...`.
    pub headline: String,
    pub items: Vec<(Status, String)>,
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn scenario_fact(m: &RunMeta) -> String {
    if m.scenario.path.is_empty() {
        m.scenario.name.clone()
    } else {
        format!("{} ({})", m.scenario.name, m.scenario.path)
    }
}

fn hash_fact(m: &RunMeta) -> String {
    let mut hash = m.scenario.hash.clone();
    if !m.scenario.overrides.is_empty() {
        hash.push_str(&format!("; overrides: {}", m.scenario.overrides.join(", ")));
    }
    hash
}

fn rounds_fact(r: &Results) -> String {
    let m = &r.meta;
    format!(
        "{} round{} × {} cell{}, {} s measured per cell and round (+{} s warm-up, excluded)",
        m.rounds,
        plural(m.rounds as usize),
        r.cells.len(),
        plural(r.cells.len()),
        secs(m.duration_secs),
        secs(m.warmup_secs)
    )
}

fn cell_order_fact(r: &Results) -> String {
    if r.meta.cell_order.is_empty() {
        let names: Vec<&str> = r.cells.iter().map(|c| c.name.as_str()).collect();
        names.join(", ")
    } else {
        r.meta.cell_order.join(", ")
    }
}

fn postgres_fact(m: &RunMeta) -> String {
    let origin = if m.postgres.embedded {
        "throwaway cluster started by ackbench"
    } else {
        "existing server"
    };
    format!("{} ({origin})", m.postgres.version)
}

fn broker_fact(m: &RunMeta) -> String {
    if !m.broker.external {
        return format!("ackbench-broker {} (started per cell)", m.broker.version);
    }
    let version = if m.broker.version.is_empty() {
        String::new()
    } else {
        format!(", version {}", m.broker.version)
    };
    let kind = match &m.broker.target_kind {
        Some(k) => format!(", target {k}"),
        None => String::new(),
    };
    format!(
        "external at {}{version}{kind}",
        m.broker.url.as_deref().unwrap_or("?")
    )
}

/// How the broker's answers departed from this workspace's wire, with answer counts.
fn wire_variants_fact(m: &RunMeta) -> String {
    if m.broker.wire_variants.is_empty() {
        return "none: every answer as wire.md writes it".into();
    }
    m.broker
        .wire_variants
        .iter()
        .map(|(what, n)| format!("{what} ({n} answers)"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The run's facts, in the order the page lists them.
fn facts(r: &Results) -> Vec<(String, String)> {
    let m = &r.meta;
    let machine = format!(
        "{}: {} cores, {}, {}",
        m.machine.hostname,
        m.machine.cores,
        gib(m.machine.memory_bytes),
        m.machine.os
    );
    let tool = format!(
        "ackbench {}, results schema {}, seed {}",
        m.tool_version, r.schema_version, m.seed
    );
    let revision = m.git_revision.as_deref().unwrap_or("unknown").to_string();
    [
        ("Scenario", scenario_fact(m)),
        ("Scenario hash", hash_fact(m)),
        ("Started", m.started_at.clone()),
        ("Finished", m.finished_at.clone()),
        ("Load generation", load_generation_fact(m)),
        ("Rounds", rounds_fact(r)),
        ("Cell order in a round", cell_order_fact(r)),
        ("Machine", machine),
        ("PostgreSQL", postgres_fact(m)),
        ("Broker", broker_fact(m)),
        ("Wire variants seen", wire_variants_fact(m)),
        ("Git revision", revision),
        ("Tool", tool),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// One process, one shard of a sharded run, or the merge of all its shards.
fn load_generation_fact(m: &RunMeta) -> String {
    match &m.shards {
        None => "one process".into(),
        Some(s) => s.words(),
    }
}

pub(super) fn header(r: &Results) -> Header {
    let m = &r.meta;
    Header {
        scenario_name: m.scenario.name.clone(),
        scenario_text: m.scenario.text.clone(),
        facts: facts(r),
        pg_settings: m
            .postgres
            .settings
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        notes: m.notes.clone(),
    }
}

/// The run, or any of its rounds, did not finish.
fn incomplete_items(r: &Results) -> Vec<(Status, String)> {
    let mut items = Vec::new();
    if !r.complete {
        items.push((
            Status::Incomplete,
            "The run did not complete (interrupted, or a cell could not finish): figures cover only what was measured.".to_string(),
        ));
    }
    for c in &r.cells {
        for round in c.rounds.iter().filter(|x| !x.complete) {
            items.push((
                Status::Incomplete,
                format!("{} round {} did not complete.", c.name, round.round),
            ));
        }
    }
    items
}

fn lost(r: &Results) -> u64 {
    r.cells.iter().map(|c| c.summary.audit.lost).sum()
}

/// The audit over every cell: failed when any message was lost.
fn audit_item(r: &Results) -> (Status, String) {
    let lost = lost(r);
    if lost > 0 {
        let losing: Vec<String> = r
            .cells
            .iter()
            .filter(|c| c.summary.audit.lost > 0)
            .map(|c| {
                format!(
                    "{} lost {}",
                    c.name,
                    group_thousands(c.summary.audit.lost as f64)
                )
            })
            .collect();
        let text = format!(
            "Audit FAILED: {} message{} lost ({}).",
            group_thousands(lost as f64),
            plural(lost as usize),
            losing.join(", ")
        );
        return (Status::Failed, text);
    }
    if r.cells.is_empty() {
        return (Status::Incomplete, "No cell was measured.".to_string());
    }
    if let Some(item) = undrained_item(r) {
        return item;
    }
    let pushed: u64 = r.cells.iter().map(|c| c.summary.audit.pushed).sum();
    let dups: u64 = r.cells.iter().map(|c| c.summary.audit.duplicates).sum();
    let mut text = format!(
        "Audit passed: every one of {} pushed messages was acked, dead-lettered or dropped by policy; {} duplicate deliveries.",
        group_thousands(pushed as f64),
        group_thousands(dups as f64)
    );
    for c in r.cells.iter().filter(|c| c.summary.audit.dlq_unchecked) {
        text.push_str(&format!(
            " Not checked in {}: {}.",
            c.name,
            c.summary.audit.unchecked_words()
        ));
    }
    (Status::Passed, text)
}

/// The audit when nothing was lost but some cell did not drain: a complete run whose drain did
/// not finish proves nothing (failed); an interrupted run's undrained messages were in flight.
fn undrained_item(r: &Results) -> Option<(Status, String)> {
    let undrained: u64 = r.cells.iter().map(|c| c.summary.audit.undrained).sum();
    if undrained == 0 {
        return None;
    }
    let n = group_thousands(undrained as f64);
    let s = plural(undrained as usize);
    Some(if r.complete {
        (
            Status::Failed,
            format!("Audit FAILED: the drain did not finish; {n} message{s} undrained, so loss is neither proven nor ruled out."),
        )
    } else {
        (
            Status::Incomplete,
            format!("Audit incomplete: the run was interrupted with {n} message{s} still in flight (undrained, not lost); none was lost."),
        )
    })
}

/// A round whose host took at least this share of the machine's CPU time (steal) is flagged:
/// steal comes in stalls of whole CPUs, which slow a latency-bound chain (a flush, a commit, a
/// consumer's round trip) far more than their share.
pub const HOST_STEAL_WARN: f64 = 0.05;

/// Worth a look per cell: a drain that did not finish, request errors, rounds the host slowed.
fn cell_warnings(r: &Results) -> Vec<(Status, String)> {
    let mut items = Vec::new();
    for c in &r.cells {
        items.extend(steal_warning(c));
        let a = &c.summary.audit;
        if !a.drained {
            let text = if a.undrained == 0 && a.still_queued > 0 {
                format!(
                    "{}: the drain did not finish; the {} messages it left were seen still queued in its own table (not lost).",
                    c.name,
                    format_number(a.still_queued as f64)
                )
            } else {
                format!(
                    "{}: the drain did not finish, so the audit may be incomplete.",
                    c.name
                )
            };
            items.push((Status::Warning, text));
        }
        let errors = c.summary.figures.errors.median;
        if errors > 0.0 {
            let text = format!(
                "{}: {} request errors per round (median).",
                c.name,
                format_number(errors)
            );
            items.push((Status::Warning, text));
        }
    }
    items
}

/// The rounds of `c` measured while the host took at least `HOST_STEAL_WARN` of the machine's
/// CPU, if any.
fn steal_warning(c: &CellResults) -> Option<(Status, String)> {
    let stolen: Vec<String> = c
        .rounds
        .iter()
        .filter(|r| r.figures.host_steal_share >= HOST_STEAL_WARN)
        .map(|r| {
            let share = 100.0 * r.figures.host_steal_share;
            format!("round {} ({share:.0} %)", r.round)
        })
        .collect();
    if stolen.is_empty() {
        return None;
    }
    let text = format!(
        "{}: the host took CPU time from this machine (steal) in {}: the timings of such a round are slowed by the host's other guests, not only by what ran here; compare them with care, or run again.",
        c.name,
        stolen.join(", ")
    );
    Some((Status::Warning, text))
}

/// How many gates held, failed, were inconclusive and were not judged, and the names of those
/// that failed or were inconclusive.
struct GateCount<'a> {
    held: usize,
    failed: Vec<&'a str>,
    inconclusive: Vec<&'a str>,
    not_judged: usize,
}

fn gate_count(r: &Results) -> GateCount<'_> {
    let outcome = |o: GateOutcome| r.gates.iter().filter(move |g| g.outcome() == o);
    GateCount {
        held: outcome(GateOutcome::Held).count(),
        failed: outcome(GateOutcome::Failed)
            .map(|g| g.gate.as_str())
            .collect(),
        inconclusive: outcome(GateOutcome::Inconclusive)
            .map(|g| g.gate.as_str())
            .collect(),
        not_judged: outcome(GateOutcome::NotJudged).count(),
    }
}

/// `, 2 not judged` when some gate was not judged.
fn not_judged_words(n: usize) -> String {
    match n {
        0 => String::new(),
        n => format!(", {n} not judged"),
    }
}

fn gates_item(r: &Results) -> (Status, String) {
    let c = gate_count(r);
    let n = r.gates.len();
    let judged = n - c.not_judged;
    let rest = not_judged_words(c.not_judged);
    if n == 0 {
        let text = "No gates were evaluated (the scenario has none).";
        (Status::Info, text.to_string())
    } else if !c.failed.is_empty() {
        let text = format!(
            "Gates FAILED: {} of {n} do not hold ({}){rest}.",
            c.failed.len(),
            c.failed.join("; ")
        );
        (Status::Failed, text)
    } else if !c.inconclusive.is_empty() {
        let text = format!(
            "Gates inconclusive: {} of {n} have an interval straddling the bound ({}); {} held{rest}. More rounds (`ackbench run --confirm N`) can settle them.",
            c.inconclusive.len(),
            c.inconclusive.join("; "),
            c.held
        );
        (Status::Warning, text)
    } else if judged == 0 {
        let text = format!("Gates: none of {n} could be judged (see the Gates table).");
        (Status::Info, text)
    } else if c.not_judged > 0 {
        let text = format!(
            "Gates: {} of {n} held{rest} (see the Gates table for why).",
            c.held
        );
        (Status::Passed, text)
    } else if n == 1 {
        (Status::Passed, "Gates: the one gate held.".to_string())
    } else {
        (Status::Passed, format!("Gates: all {n} held."))
    }
}

/// The one line at the top: status, audit and gates in short.
fn headline(r: &Results, status: Status) -> String {
    let c = gate_count(r);
    let n = r.gates.len();
    let rest = not_judged_words(c.not_judged);
    let gates = match (n, c.failed.len()) {
        (0, _) => "no gates".to_string(),
        (n, 0) if !c.inconclusive.is_empty() => format!(
            "{}/{n} gates held, {} inconclusive{rest}",
            c.held,
            c.inconclusive.len()
        ),
        (n, 0) => format!("{}/{n} gates held{rest}", c.held),
        (n, failed) => format!("{failed}/{n} gates FAILED{rest}"),
    };
    let undrained: u64 = r.cells.iter().map(|c| c.summary.audit.undrained).sum();
    let broken = !super::guarantees::broken_words(r).is_empty();
    let audit = match (lost(r), undrained) {
        (0, 0) if broken => "audit FAILED, guarantees broken".to_string(),
        (0, 0) => "audit passed, 0 lost".to_string(),
        (0, n) if r.complete => format!("audit FAILED, {} undrained", group_thousands(n as f64)),
        (0, n) => format!("0 lost, {} undrained", group_thousands(n as f64)),
        (lost, _) => format!("audit FAILED, {} lost", group_thousands(lost as f64)),
    };
    match status {
        Status::Failed if !r.complete => {
            format!("FAILED: {audit}; {gates}; the run was interrupted")
        }
        Status::Failed => format!("FAILED: {audit}; {gates}"),
        Status::Incomplete => format!("INCOMPLETE: the run was interrupted; {audit}; {gates}"),
        _ => format!("PASSED: {audit}; {gates}"),
    }
}

pub(super) fn verdict(r: &Results) -> Verdict {
    let mut items = incomplete_items(r);
    items.push(audit_item(r));
    items.extend(super::guarantees::guarantees_item(r));
    items.extend(cell_warnings(r));
    items.push(gates_item(r));
    let status = if items.iter().any(|(s, _)| *s == Status::Failed) {
        Status::Failed
    } else if !r.complete || items.iter().any(|(s, _)| *s == Status::Incomplete) {
        Status::Incomplete
    } else {
        Status::Passed
    };
    Verdict {
        status,
        headline: headline(r, status),
        items,
    }
}
