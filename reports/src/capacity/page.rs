//! `capacity.html`: the capacity report's page, laid out from the document alone with the
//! shared chrome (`crate::page::chrome`): the headline and each cell's sentence, the charts,
//! every step of every cell, and the run's facts.

use maud::{html, Markup};

use super::charts::{chart_specs, render_chart};
use super::wording::{all_warnings, amount, cell_sentence, headline};
use super::{CapacityCell, CapacityResults, Step};
use crate::model::format_number;
use crate::page::chrome::{self, document, figure, swatch, th_with_unit, Page};

/// The capacity report's own rules, after the shared ones.
const CSS: &str = r#"
.verdict{border-left:10px solid #0969da}
.verdict .headline{margin:0 0 8px}
.verdict ul{margin:0;padding-left:4px;list-style:none}.verdict li{margin:3px 0}
.warnings li{color:var(--warn)}
table.steps{width:100%}
td.wrap{white-space:normal;min-width:240px;max-width:420px}
td.ok{color:var(--good);font-weight:600}td.bad{color:var(--bad);font-weight:600}
tr.knee td,tr.knee th{background:#fff5f5}
"#;

/// `capacity.html`: one self-contained page (inline CSS and SVG, no scripts).
pub fn render_capacity(r: &CapacityResults) -> Result<String, String> {
    let m = &r.meta;
    let title = format!("ackbench capacity: {}", m.scenario.name);
    let revision = m.git_revision.as_deref().unwrap_or("unknown");
    let subtitle = html! {
        (m.started_at) " · " (m.machine.cores) " cores · " (m.machine.hostname) " · git " (revision)
    };
    let body = html! {
        @if !r.complete {
            div class="banner incomplete" id="incomplete" {
                "INTERRUPTED: this capacity run did not complete; cells or steps are missing."
            }
        }
        (verdict(r))
        (chrome::warnings(&all_warnings(r)))
        (charts(r)?)
        (steps(r))
        (run_facts(r))
    };
    Ok(document(Page {
        title: &title,
        subtitle,
        css: CSS,
        body,
        footer: html! { "from capacity.json alone." },
    }))
}

fn verdict(r: &CapacityResults) -> Markup {
    let cr = &r.criteria;
    html! {
        section class="verdict" id="verdict" {
            p class="headline" { (headline(r)) }
            ul { @for c in &r.cells {
                li class="sentence" data-cell=(c.name)
                    data-sustained=[c.sustained_rate.map(|v| v.to_string())] {
                    (swatch(&c.name)) (cell_sentence(c, cr))
                }
            } }
            (knees_table(r))
            p class="help" {
                "A step is sustained when pushes reach " (amount(cr.min_achieved_ratio * 100.0))
                "% of the offered rate, answers reach " (amount(cr.min_answered_ratio * 100.0))
                "% of it per consumer group, the backlog grows by at most "
                (amount(cr.max_backlog_growth_ratio * 100.0))
                "% of what was offered, and ack and end-to-end p99 stay at or under "
                (amount(cr.slo_p99_ms)) " ms. A cell's capacity is its highest sustained rate \
                 below the first failing step. The search starts at " (amount(r.plan.start_rate))
                " msg/s, steps ×" (amount(r.plan.step_factor)) " up from a sustained rate or down \
                 from a failing one until it brackets the knee, then bisects the bracket until \
                 the two rates are within " (amount(r.plan.precision * 100.0)) "%."
            }
        }
    }
}

fn charts(r: &CapacityResults) -> Result<Markup, String> {
    let names: Vec<String> = r.cells.iter().map(|c| c.name.clone()).collect();
    let mut figures = Vec::new();
    for spec in chart_specs(r) {
        let svg = render_chart(&spec, &names)?;
        figures.push(figure(
            &spec.id,
            &spec.title,
            &spec.how_to_read,
            false,
            &svg,
        ));
    }
    Ok(html! {
        section id="charts" {
            h2 { "Throughput, latency and commits against offered rate" }
            div class="charts" { @for f in &figures { (f) } }
        }
    })
}

/// A rate with its share of the step's offered rate under it.
fn rate_with_share(v: f64, offered: f64) -> Markup {
    html! {
        (format_number(v))
        @if v.is_finite() && offered > 0.0 {
            span class="sp" { (format_number(v / offered * 100.0)) "%" }
        }
    }
}

fn step_verdict(s: &Step) -> String {
    if s.sustained {
        return "sustained".to_string();
    }
    let details: Vec<&str> = s.failed.iter().map(|f| f.detail.as_str()).collect();
    format!("failed: {}", details.join("; "))
}

fn step_row(s: &Step, knee: bool) -> Markup {
    html! {
        tr data-offered=(s.offered_rate.to_string()) data-sustained=(s.sustained)
            class=[knee.then_some("knee")] {
            td { (s.index) @if knee { span class="sp" { "knee" } } }
            td { (amount(s.offered_rate)) }
            td { (rate_with_share(s.achieved_push_rate, s.offered_rate)) }
            td { (rate_with_share(s.answered_per_group(), s.offered_rate)) }
            td { (amount(s.backlog_growth.round())) }
            td { (format_number(s.ack_p50_ms)) }
            td { (format_number(s.ack_p99_ms)) }
            td { (format_number(s.judged_e2e_p99_ms())) }
            td { (format_number(s.charted_commits())) }
            td { (format_number(s.loadgen_cpu_cores)) }
            td { (format_number(s.schedule_lag_p99_ms)) }
            td class=(if s.sustained { "l wrap ok" } else { "l wrap bad" }) {
                (step_verdict(s))
                @if !s.loadgen_warnings.is_empty() {
                    span class="sp" { "load generator: " (s.loadgen_warnings.join("; ")) }
                }
            }
        }
    }
}

/// The knee of every cell: the highest sustained rate, the first failing one, what failed
/// there, and why the search ended.
fn knees_table(r: &CapacityResults) -> Markup {
    let rate = |v: Option<f64>| v.map(amount).unwrap_or_else(|| "—".into());
    html! {
        div class="scroll" { table class="knees" {
            thead { tr {
                th class="l" { "cell" }
                th { (th_with_unit("sustained", "msg/s")) }
                th { (th_with_unit("knee", "msg/s, first failing")) }
                th class="l" { "limited by" }
                th class="l" { "search ended" }
            } }
            tbody { @for c in &r.cells {
                tr data-cell=(c.name) {
                    th scope="row" { (swatch(&c.name)) (c.name) }
                    td data-key="sustained" { (rate(c.sustained_rate)) }
                    td data-key="knee" { (rate(c.knee_rate)) }
                    td class="l" data-key="limited_by" {
                        (c.limited_by().iter().map(|x| x.label()).collect::<Vec<_>>().join(", "))
                    }
                    td class="l wrap" { (c.stopped) }
                }
            } }
        } }
    }
}

fn steps_table(c: &CapacityCell) -> Markup {
    let knee = c.knee().map(|k| k.index);
    html! {
        h3 id=(format!("steps-{}", c.name)) { (swatch(&c.name)) (c.name) }
        div class="scroll" { table class="steps" data-cell=(c.name) {
            thead { tr {
                th { "step" }
                th { (th_with_unit("offered", "msg/s")) }
                th { (th_with_unit("pushed", "msg/s")) }
                th { (th_with_unit("answered", "msg/s per group")) }
                th { "backlog Δ" }
                th { (th_with_unit("ack p50", "ms")) }
                th { (th_with_unit("ack p99", "ms")) }
                th title="end-to-end p99 of messages acked on their first delivery (retries the workload asked for wait out their backoff by design)" { (th_with_unit("first-delivery e2e p99", "ms")) }
                th { (th_with_unit("commits", "/s")) }
                th { (th_with_unit("loadgen CPU", "cores")) }
                th { (th_with_unit("schedule lag p99", "ms")) }
                th class="l" { "verdict" }
            } }
            tbody { @for s in &c.steps { (step_row(s, knee == Some(s.index))) } }
        } }
        p class="help" { "Stopped: " (c.stopped) "." }
        @if let Some(note) = super::wording::remeasured_note(c) {
            p class="help remeasured" { (note) }
        }
    }
}

fn steps(r: &CapacityResults) -> Markup {
    html! {
        section id="steps" {
            h2 { "Every step" }
            p class="help" {
                "Figures over each step's measured window (its warm-up excluded). Answered: \
                 (message, group) obligations acked, dead-lettered or dropped, per second and per \
                 consumer group. Backlog Δ: obligations outstanding at the window's end minus at \
                 its start. Commits: writing transactions per second."
            }
            @for c in &r.cells { (steps_table(c)) }
        }
    }
}

fn plan_facts(r: &CapacityResults) -> Vec<(String, String)> {
    let p = &r.plan;
    let rates: Vec<String> = p.rates.iter().map(|x| amount(*x)).collect();
    let prefill = if p.prefill_per_partition > 0 {
        format!(
            "; prefill {} per partition per step",
            p.prefill_per_partition
        )
    } else {
        String::new()
    };
    vec![
        (
            "Search".into(),
            format!(
                "from {} msg/s, ×{} per step while bracketing, within {}..{} msg/s, bisected to {}%; upward ladder {} msg/s",
                amount(p.start_rate),
                amount(p.step_factor),
                amount(p.min_rate),
                amount(p.max_rate),
                amount(p.precision * 100.0),
                rates.join(", ")
            ),
        ),
        (
            "Each step".into(),
            format!(
                "fresh queue, warm-up {} s, window {} s, not drained",
                amount(p.warmup_secs),
                amount(p.step_secs)
            ),
        ),
        (
            "Load".into(),
            format!(
                "{} open-loop producer(s), {} message(s) per push; {} consumer(s) × {} group(s){prefill}",
                p.producers, p.producer_batch, p.consumers, p.consumer_groups
            ),
        ),
    ]
}

fn where_facts(r: &CapacityResults) -> Vec<(String, String)> {
    let m = &r.meta;
    let postgres = if m.postgres.embedded {
        format!("{} (throwaway cluster)", m.postgres.version)
    } else {
        m.postgres.version.clone()
    };
    let broker = if m.broker.external {
        format!("external at {}", m.broker.url.clone().unwrap_or_default())
    } else {
        format!("ackbench-broker {}", m.broker.version)
    };
    let machine = format!(
        "{} · {} cores · {}",
        m.machine.hostname, m.machine.cores, m.machine.os
    );
    vec![
        ("Machine".into(), machine),
        ("PostgreSQL".into(), postgres),
        ("Broker".into(), broker),
        ("Tool".into(), format!("ackbench {}", m.tool_version)),
    ]
}

/// The run's facts, in the order the page lists them.
fn facts(r: &CapacityResults) -> Vec<(String, String)> {
    let m = &r.meta;
    let mut facts: Vec<(String, String)> = vec![
        (
            "Scenario".into(),
            format!("{} ({})", m.scenario.name, m.scenario.path),
        ),
        ("Started".into(), m.started_at.clone()),
        ("Finished".into(), m.finished_at.clone()),
        ("Seed".into(), m.seed.to_string()),
    ];
    facts.extend(plan_facts(r));
    facts.extend(where_facts(r));
    if !m.scenario.overrides.is_empty() {
        facts.push(("Flags".into(), m.scenario.overrides.join(" ")));
    }
    facts
}

fn run_facts(r: &CapacityResults) -> Markup {
    let m = &r.meta;
    html! {
        section id="run" {
            h2 { "The run" }
            (chrome::facts(&facts(r), html! {}))
            (chrome::notes_and_scenario(&m.notes, &m.scenario.name, &m.scenario.text))
        }
    }
}
