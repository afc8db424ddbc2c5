//! The "Guarantees" table: per cell, each guarantee the audit judged over the client's history
//! of deliveries (what it checks, whether the target promises it, the count, whether it held)
//! with the first examples of what broke it, and the verdict's line about them.

use crate::results::Results;

use super::verdict::Status;

/// One guarantee of one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct GuaranteeRow {
    pub cell: String,
    pub name: &'static str,
    pub checks: &'static str,
    /// A count above zero fails the run.
    pub promised: bool,
    pub count: u64,
    /// `held`, `BROKEN` (promised and above zero) or `counted` (not promised, above zero).
    pub verdict: &'static str,
    pub examples: Vec<String>,
}

/// Every judged guarantee of every cell whose history was checked (none for older results or
/// cells without one, such as the peers).
pub(super) fn guarantee_rows(r: &Results) -> Vec<GuaranteeRow> {
    r.cells
        .iter()
        .filter(|c| c.summary.audit.history_checked)
        .flat_map(|c| {
            let a = &c.summary.audit;
            a.guarantees().into_iter().map(move |g| GuaranteeRow {
                cell: c.name.clone(),
                name: g.name,
                checks: g.checks,
                promised: g.promised,
                count: g.count,
                verdict: match (g.count, g.promised) {
                    (0, _) => "held",
                    (_, true) => "BROKEN",
                    (_, false) => "counted",
                },
                examples: a.examples.get(g.name).cloned().unwrap_or_default(),
            })
        })
        .collect()
}

/// The promised guarantees (besides loss, which the audit's own line judges) broken, as
/// `cell: name count` words.
pub(super) fn broken_words(r: &Results) -> Vec<String> {
    r.cells
        .iter()
        .flat_map(|c| {
            c.summary
                .audit
                .broken()
                .into_iter()
                .filter(|(name, _)| *name != "lost")
                .map(move |(name, n)| format!("{}: {name} {n}", c.name))
        })
        .collect()
}

/// The verdict's line on the guarantees; `None` when no cell's history was checked.
pub(super) fn guarantees_item(r: &Results) -> Option<(Status, String)> {
    if !r.cells.iter().any(|c| c.summary.audit.history_checked) {
        return None;
    }
    let broken = broken_words(r);
    Some(match broken.is_empty() {
        true => (
            Status::Passed,
            "Guarantees held: order within a lease, one consumer per lease, fenced acks and durable acks, as far as each target promises them.".to_string(),
        ),
        false => (
            Status::Failed,
            format!("Guarantees FAILED: {}.", broken.join(", ")),
        ),
    })
}
