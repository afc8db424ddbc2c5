//! The sections of a run's report, laid out from its `RunModel`: the interruption banner, the
//! verdict, the run's facts, the "at a glance" and summary tables, the broker topologies, the
//! peers, the audit and the gates.

use maud::{html, Markup};

use crate::results::GateOutcome;

use super::chrome::{facts, notes_and_scenario, swatch, th_with_unit, warnings};
use super::compare;
use crate::model::{
    format_count, format_number, format_value, AuditRow, FigureCell, Format, Pace, PeerTable,
    ReportModel, RunModel, Status, SummaryRow, Tone, BASELINE, MIN_ROUNDS_TO_COLOUR, PEER_NOTE,
    SUMMARY_FIGURES, SUMMARY_SPLIT, TOPOLOGY_NOTE,
};

/// The line under the title: when and where, or which two runs are compared.
pub(super) fn subtitle(m: &ReportModel) -> Markup {
    if let [a, b] = m.runs.as_slice() {
        return html! { "A (baseline): " (a.label) " · B: " (b.label) " · ratios are B/A" };
    }
    let fact = |k: &str| {
        m.runs[0]
            .header
            .facts
            .iter()
            .find(|(l, _)| l == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    html! { (fact("Started")) " · " (fact("Machine")) " · git " (fact("Git revision")) }
}

/// Everything between the header and the footer.
pub(super) fn body(m: &ReportModel, charts: &[Markup]) -> Markup {
    let compared = m.comparison.is_some();
    html! {
        @for run in &m.runs { (banner(run)) }
        (side_by_side(m, verdict))
        @if !compared { (glance(&m.runs[0])) }
        (warnings(&m.warnings))
        (side_by_side(m, run_facts))
        @match &m.comparison {
            None => {
                (summary(&m.runs[0], "summary", "Summary"))
                (topology(&m.runs[0]))
                (peers(&m.runs[0]))
            }
            Some(c) => { (compare::table(m, c)) }
        }
        @for c in charts { (c) }
        @for run in &m.runs { (audit(run)) }
        @for run in &m.runs { (guarantees(run)) }
        @for run in &m.runs { (faults(run)) }
        @for run in &m.runs { (super::minutes::section(run)) }
        @for run in &m.runs { (gates(run)) }
        @if compared {
            @for run in &m.runs { (collapsed_summary(run)) }
        }
    }
}

/// One section per run: alone, or the runs of a comparison side by side.
fn side_by_side(m: &ReportModel, section: fn(&RunModel) -> Markup) -> Markup {
    html! {
        @if m.runs.len() == 1 {
            (section(&m.runs[0]))
        } @else {
            div class="runs" { @for run in &m.runs { (section(run)) } }
        }
    }
}

fn status_class(s: Status) -> &'static str {
    match s {
        Status::Passed => "passed",
        Status::Failed => "failed",
        Status::Incomplete => "incomplete",
        Status::Warning => "warning",
        Status::Info => "info",
    }
}

pub(super) fn tone_class(t: Tone) -> &'static str {
    match t {
        Tone::Better => "better",
        Tone::Worse => "worse",
        Tone::Same => "",
    }
}

/// `Run A: ` before a heading of a comparison; nothing in a single report.
fn tag_prefix(run: &RunModel) -> String {
    if run.tag.is_empty() {
        String::new()
    } else {
        format!("Run {}: ", run.tag)
    }
}

/// An element id, suffixed by the run's tag in a comparison (`verdict-a`).
fn run_id(base: &str, run: &RunModel) -> String {
    if run.tag.is_empty() {
        base.to_string()
    } else {
        format!("{base}-{}", run.tag.to_lowercase())
    }
}

fn banner(run: &RunModel) -> Markup {
    html! {
        @if !run.complete {
            div class="banner incomplete" id=(format!("incomplete{}", run.tag)) {
                (tag_prefix(run))
                "INTERRUPTED: this run did not complete. The figures below cover only the rounds \
                 that finished; do not read them as a full run."
            }
        }
    }
}

fn verdict(run: &RunModel) -> Markup {
    let v = &run.verdict;
    html! {
        section class=(format!("verdict {}", status_class(v.status))) id=(run_id("verdict", run)) {
            p class="headline" { (tag_prefix(run)) (v.headline) }
            ul { @for (s, text) in &v.items { li class=(status_class(*s)) { (text) } } }
        }
    }
}

fn run_facts(run: &RunModel) -> Markup {
    let hd = &run.header;
    let title = if run.tag.is_empty() {
        "The run".to_string()
    } else {
        format!("Run {}", run.tag)
    };
    let settings: Vec<String> = hd
        .pg_settings
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    let extra = html! {
        @if !settings.is_empty() { dt { "PostgreSQL settings" } dd { (settings.join(" · ")) } }
    };
    // Folded: the verdict and "At a glance" come first; the facts are there when wanted.
    html! {
        section id=(run_id("run", run)) {
            details class="run-facts" {
                summary { h2 class="inline" { (title) ": scenario, machine, versions and notes" } }
                (facts(&hd.facts, extra))
                (notes_and_scenario(&hd.notes, &hd.scenario_name, &hd.scenario_text))
            }
        }
    }
}

/// A figure's value, its range over rounds and (optionally) its ratio to the baseline.
pub(super) fn value(f: &FigureCell, with_ratio: bool) -> Markup {
    html! {
        span class="v" { (f.text) }
        @if let Some(sp) = &f.spread_text { span class="sp" { (sp) } }
        @if let (true, Some(r)) = (with_ratio, &f.ratio_text) {
            span class=(format!("ra {}", tone_class(f.tone)).trim_end())
                title=(format!("ratio to {BASELINE}, round by round")) {
                (r)
                @if let Some(rs) = &f.ratio_spread_text { small { (rs) } }
            }
        }
    }
}

/// A table cell of a figure, its key and numbers in data attributes for tools and tests.
fn figure_td(f: &FigureCell) -> Markup {
    html! {
        td data-key=(f.key) data-median=[f.value.map(|v| v.median.to_string())]
            data-ratio=[f.ratio.map(|r| r.median.to_string())] title=[f.why_none] {
            (value(f, true))
        }
    }
}

/// "By broker topology": the registry's hit rate and the ack path's cost per topology.
fn topology(run: &RunModel) -> Markup {
    html! {
        @if let Some(t) = &run.topology {
            section id="topology" {
                h2 { "By broker topology" }
                p class="help" { (TOPOLOGY_NOTE) }
                div class="scroll" { table {
                    thead { tr {
                        th class="l" { "cell" }
                        th class="l" { "brokers" }
                        th class="l" { "routing" }
                        @for d in &t.figures {
                            th { (th_with_unit(d.label, &format!("{}, × vs first topology", d.column))) }
                        }
                        th class="l" { "requests per broker" }
                        th class="l" { "registry hit rate per broker" }
                        th class="l" { "peer notifications per broker" }
                    } }
                    tbody { @for r in &t.rows {
                        tr data-cell=(r.cell) data-topology=(r.topology) {
                            th scope="row" { (swatch(&r.cell)) (r.cell) }
                            td class="l" { (r.instances) }
                            td class="l" { (r.routing) }
                            @for f in &r.figures { (figure_td(f)) }
                            td class="l wrap" { (r.brokers_text) }
                            td class="l wrap" {
                                (r.brokers.iter().map(|b| format_value(b.registry_hit_rate, Format::Percent)).collect::<Vec<_>>().join(" · "))
                            }
                            td class="l wrap" { (r.peers_text) }
                        }
                    } }
                } }
            }
        }
    }
}

/// "Against the peers": one table per peer, the broker cells' ratios to it.
fn peers(run: &RunModel) -> Markup {
    html! {
        @if !run.peers.is_empty() {
            section id="peers" {
                h2 { "Against the peers" }
                p class="help" {
                    (PEER_NOTE) " Medians over rounds; × is a broker cell's ratio to the peer, \
                     taken round by round."
                }
                @for t in &run.peers { (peer_table(t)) }
            }
        }
    }
}

fn peer_table(t: &PeerTable) -> Markup {
    html! {
        div class="scroll" { table data-peer=(t.peer) {
            thead { tr {
                th class="l" { "cell" }
                @for d in &t.figures {
                    th { (th_with_unit(d.label, &format!("{}, × vs {}", d.column, t.peer))) }
                }
            } }
            tbody { @for r in &t.rows {
                tr data-cell=(r.cell) class=[r.is_peer.then_some("total")] {
                    th scope="row" { (swatch(&r.cell)) (r.cell) }
                    @for f in &r.figures { (figure_td(f)) }
                }
            } }
        } }
    }
}

fn glance(run: &RunModel) -> Markup {
    let open_loop = run.glance.iter().any(|g| g.pace != Pace::NotJudged);
    html! {
        section id="glance" {
            h2 { "At a glance: what each accelerator does" }
            p class="help" {
                "Medians over rounds. × is the ratio to the " b { (BASELINE) }
                " cell (both accelerators off) taken round by round, with its range over rounds; green where every round improved, red where every round got worse (with at least " (MIN_ROUNDS_TO_COLOUR) " rounds). Fusion's gate judges ack commits per acked message, the registry's PostgreSQL time per acked message."
                @if open_loop {
                    " Producers offer a fixed rate (open loop), so throughput is judged against it, not against another cell: a cell that drained a bigger warm-up backlog in its window acks faster without being faster."
                }
            }
            (colour_note(&run.colour_note))
            div class="scroll" { table {
                thead { tr {
                    th class="l" { "cell" }
                    th { (th_with_unit("ack commits per acked message", "fusion's figure, × vs none")) }
                    th { (th_with_unit("PostgreSQL time per acked message", "ms, the registry's figure, × vs none")) }
                    th { (th_with_unit("commits per acked message", "all, × vs none")) }
                    th class="l" { "commits saved" }
                    th { (th_with_unit("ack latency p99", "ms, × vs none")) }
                    th { (th_with_unit("ack throughput", "msg/s")) }
                    th class="l" { "kept up?" }
                    th { "audit" }
                } }
                tbody { @for g in &run.glance {
                    tr data-cell=(g.cell) {
                        th scope="row" { (swatch(&g.cell)) (g.cell) }
                        (figure_td(&g.ack_commits_per_ack))
                        (figure_td(&g.pg_ms_per_ack))
                        (figure_td(&g.commits_per_ack))
                        td class="l wrap" { (g.commits_saved_text) }
                        (figure_td(&g.ack_p99))
                        (figure_td(&g.ack_throughput))
                        td class=(match g.pace {
                            Pace::KeptUp => "l wrap ok",
                            Pace::FellBehind => "l wrap bad",
                            Pace::NotJudged => "l wrap",
                        }) data-pace=(format!("{:?}", g.pace)) { (g.pace_text) }
                        td class=(if g.lost == 0 { "ok" } else { "bad" }) {
                            (g.lost_text)
                            @if g.duplicates > 0 {
                                span class="sp" {
                                    (format_count(g.duplicates)) " duplicates"
                                }
                            }
                        }
                    }
                } }
            } }
        }
    }
}

/// Why no ratio is coloured, as a visible note, when the rounds are too few.
pub(super) fn colour_note(note: &Option<String>) -> Markup {
    html! {
        @if let Some(n) = note { p class="colour-note" { (n) } }
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn summary_row(row: &SummaryRow, range: std::ops::Range<usize>, with_audit: bool) -> Markup {
    html! {
        tr data-cell=(row.cell) {
            th scope="row" {
                (swatch(&row.cell)) (row.cell)
                span class="flags" {
                    "registry " (on_off(row.registry)) " · fusion " (on_off(row.fusion))
                }
            }
            @for f in &row.figures[range] { (figure_td(f)) }
            @if with_audit {
                td class=(if row.audit_passed { "l ok" } else { "l bad" }) data-key="audit" {
                    (row.audit_text)
                }
            }
        }
    }
}

fn summary_part(
    run: &RunModel,
    id: &str,
    part: usize,
    caption: &str,
    range: std::ops::Range<usize>,
) -> Markup {
    let with_audit = part == 2;
    html! {
        h3 { (caption) }
        div class="scroll" { table class="summary" id=(format!("{id}-{part}")) {
            thead { tr {
                th class="l" { "cell" }
                @for d in &SUMMARY_FIGURES[range.clone()] {
                    th data-key=(d.key) { (th_with_unit(d.label, d.column)) }
                }
                @if with_audit { th class="l" { "audit" } }
            } }
            tbody { @for row in &run.summary { (summary_row(row, range.clone(), with_audit)) } }
        } }
    }
}

fn summary(run: &RunModel, id: &str, title: &str) -> Markup {
    let rounds = run.summary.iter().map(|r| r.rounds).max().unwrap_or(0);
    let split = *SUMMARY_SPLIT;
    html! {
        section id=(id) {
            h2 { (title) }
            p class="help" {
                "One row per cell. Each figure is the median over " (rounds) " round"
                @if rounds != 1 { "s" }
                @if rounds > 1 { ", with min–max under it" }
                "; × is its ratio to " b { (BASELINE) }
                ", computed within each round and then summarised; coloured where its range over \
                 rounds excludes 1. \"off\": the figure needs an accelerator the cell runs without."
            }
            (colour_note(&run.colour_note))
            (summary_part(run, id, 1, "Throughput and what an acked message costs", 0..split))
            (summary_part(run, id, 2, "Accelerators, ack latency and the audit",
                split..SUMMARY_FIGURES.len()))
        }
    }
}

/// A comparison's per-run summary tables, collapsed under the charts.
fn collapsed_summary(run: &RunModel) -> Markup {
    let id = format!("summary-{}", run.tag.to_lowercase());
    let title = format!("Summary of run {}: {}", run.tag, run.label);
    html! { details { summary { (title) } (summary(run, &id, &title)) } }
}

fn audit_row(r: &AuditRow) -> Markup {
    let a = &r.audit;
    let n = format_count;
    let lost_class = if a.lost == 0 { "ok" } else { "bad" };
    html! {
        tr data-cell=(r.cell) class=[r.round.is_none().then_some("total")] {
            th scope="row" { (swatch(&r.cell)) (r.cell) }
            td { @if let Some(x) = r.round { (x) } @else { "all" } }
            td data-key="pushed" { (n(a.pushed)) }
            td data-key="acked" { (n(a.acked)) }
            td data-key="dead_lettered" { (n(a.dead_lettered)) }
            td data-key="dropped" { (n(a.dropped)) }
            td data-key="lost" class=(lost_class) { (n(a.lost)) }
            td data-key="undrained" { (n(a.undrained)) }
            td data-key="duplicates" { (n(a.duplicates)) }
            td { (if a.drained { "yes" } else { "no" }) }
            td class=(format!("l {lost_class}")) { (r.verdict) }
        }
    }
}

fn audit_table(class: &str, rows: &[&AuditRow]) -> Markup {
    html! {
        div class="scroll" { table class=(class) {
            thead { tr {
                th class="l" { "cell" } th { "round" } th { "pushed" } th { "acked" }
                th { "dead-lettered" } th { "dropped" } th { "lost" } th { "undrained" }
                th { "duplicates" }
                th { "drained" } th class="l" { "verdict" }
            } }
            tbody { @for r in rows { (audit_row(r)) } }
        } }
    }
}

/// The guarantees judged over each cell's history of deliveries (absent when none was checked).
fn guarantees(run: &RunModel) -> Markup {
    html! {
        @if !run.guarantees.is_empty() {
            section id=(run_id("guarantees", run)) {
                h2 { (tag_prefix(run)) "Guarantees" }
                p class="help" {
                    "Judged over the client's history of every delivery (consumer, lease, pop and \
                     ack times, the ack's answer), with bounds a correct broker cannot fail: a lease \
                     is certainly held from its pop's answer until the first ack under it is sent \
                     or the pop's send plus the lease time (less 100 ms); an ack is certainly \
                     applied once answered. A promised guarantee broken fails the run; the others \
                     are counted."
                }
                div class="scroll" { table class="guarantees" {
                    thead { tr {
                        th class="l" { "cell" } th class="l" { "guarantee" }
                        th class="l" { "what is checked" } th { "promised" } th { "count" }
                        th class="l" { "verdict" } th class="l" { "first examples" }
                    } }
                    tbody { @for g in &run.guarantees {
                        @let class = match g.verdict { "BROKEN" => "l bad", "held" => "l ok", _ => "l" };
                        tr data-cell=(g.cell) data-key=(g.name) {
                            th scope="row" { (swatch(&g.cell)) (g.cell) }
                            td class="l" { code { (g.name) } }
                            td class="l wrap" { (g.checks) }
                            td { (if g.promised { "yes" } else { "no" }) }
                            td { (format_count(g.count)) }
                            td class=(class) { (g.verdict) }
                            td class="l wrap" {
                                @for e in &g.examples { div { (e) } }
                            }
                        }
                    } }
                } }
            }
        }
    }
}

/// The fault steps injected and how long each took to recover from (absent without faults).
fn faults(run: &RunModel) -> Markup {
    let secs = |s: f64| format!("{} s", format_number(s));
    html! {
        @if !run.faults.is_empty() {
            section id=(run_id("faults", run)) {
                h2 { (tag_prefix(run)) "Faults" }
                p class="help" {
                    "Fault steps fired in the measured window (seconds from its start; shaded on                      the charts over time). Recovery: from the fault's end until the per-second                      ack rate is back within 10 % of its level over the 5 s before the fault.                      The audit above judges every faulted run: nothing may be lost."
                }
                div class="scroll" { table class="faults" {
                    thead { tr {
                        th class="l" { "cell" } th { "round" } th class="l" { "fault" }
                        th { "fired" } th { "ended" } th { "recovery" } th class="l" { "note" }
                    } }
                    tbody { @for f in &run.faults {
                        tr data-cell=(f.cell) {
                            th scope="row" { (swatch(&f.cell)) (f.cell) }
                            td { (f.round) }
                            td class="l" { (f.kind) }
                            td { (secs(f.at_secs)) }
                            td { (secs(f.ended_secs)) }
                            td data-key="recovery" { (f.recovery_text) }
                            td class="l wrap" { (f.note) }
                        }
                    } }
                } }
                (vacuum(run))
            }
        }
    }
}

/// The vacuum state of the cell database over the window of each `hold_xmin` fault (absent
/// without one).
fn vacuum(run: &RunModel) -> Markup {
    let mb = |b: f64| format_number(b / 1_048_576.0);
    html! {
        @if !run.vacuum.is_empty() {
            h3 { "While the xmin horizon was held" }
            p class="help" {
                "The cell database's user tables each second of a window with hold_xmin (a \
                 REPEATABLE READ snapshot held open), thinned to a few rows: dead tuples pile \
                 up while the horizon is held, and the bystander query (counting up to \
                 10 000 rows of the busiest table) reads through them."
            }
            div class="scroll" { table class="vacuum" {
                thead { tr {
                    th class="l" { "cell" } th { "round" } th { "t (s)" } th class="l" { "hold" }
                    th { "dead tuples" } th { "tables (MB)" } th { "indexes (MB)" }
                    th { "autovacuums" } th { "bystander (ms)" }
                } }
                tbody { @for v in &run.vacuum {
                    tr data-cell=(v.cell) {
                        th scope="row" { (swatch(&v.cell)) (v.cell) }
                        td { (v.round) }
                        td { (format_number(v.t)) }
                        td class="l" { (v.phase) }
                        td { (format_number(v.dead_tuples)) }
                        td { (mb(v.table_bytes)) }
                        td { (mb(v.index_bytes)) }
                        td { (format_number(v.autovacuums)) }
                        td { (format_number(v.bystander_ms)) }
                    }
                } }
            } }
        }
    }
}

fn audit(run: &RunModel) -> Markup {
    let (totals, rounds): (Vec<&AuditRow>, Vec<&AuditRow>) =
        run.audit.iter().partition(|r| r.round.is_none());
    html! {
        section id=(run_id("audit", run)) {
            h2 { (tag_prefix(run)) "Audit" }
            p class="help" {
                "After the measured window every cell drains; each pushed transactionId must end \
                 acked, dead-lettered, or dropped by an exhausted no-DLQ policy. Lost must be \
                 zero; duplicates are at-least-once redeliveries, counted, not failures."
            }
            (audit_table("audit", &totals))
            @if !rounds.is_empty() {
                details { summary { "Audit of every round" } (audit_table("audit-rounds", &rounds)) }
            }
        }
    }
}

fn gates(run: &RunModel) -> Markup {
    html! {
        @if !run.gates.is_empty() {
            section id=(run_id("gates", run)) {
                h2 { (tag_prefix(run)) "Gates" }
                div class="scroll" { table class="gates" {
                    thead { tr {
                        th class="l" { "gate" } th class="l" { "kind" }
                        th { (th_with_unit("measured", "median (min–max)")) }
                        th { (th_with_unit("interval", "estimate [95%]")) }
                        th { "threshold" } th class="l" { "verdict" } th class="l" { "detail" }
                    } }
                    tbody { @for g in &run.gates {
                        tr {
                            td class="l" { (g.gate) }
                            td class="l" { (g.kind) }
                            td { (g.measured) }
                            td { (g.interval) }
                            td { (g.threshold) }
                            td class=(match g.outcome {
                                GateOutcome::Held => "l ok",
                                GateOutcome::Failed => "l bad",
                                GateOutcome::Inconclusive => "l warn",
                                GateOutcome::NotJudged => "l",
                            }) {
                                (g.verdict)
                            }
                            td class="l detail" { (g.detail) }
                        }
                    } }
                } }
            }
        }
    }
}
