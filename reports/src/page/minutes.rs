//! The "Per minute" section of a run's report: each minute of the long windows (achieved
//! rates, p50 / p99 per operation, backlog, errors, the load generator's resident memory).

use maud::{html, Markup};

use super::chrome::swatch;
use crate::model::{format_number, MinuteRow, RunModel, MINUTE_OPERATIONS};

/// The section, or nothing when no window was long enough to record minutes.
pub(super) fn section(run: &RunModel) -> Markup {
    html! {
        @if !run.minutes.is_empty() {
            section id={ "minutes" (run.tag) } {
                h2 { "Per minute" }
                p class="help" {
                    "Each minute of a measured window longer than two minutes: the rates \
                     achieved over the minute, each operation's p50 / p99 over that minute's \
                     requests alone (ms), the backlog at its end, the requests that failed in \
                     it, and the load generator's resident memory at its end."
                }
                div class="scroll" { table class="minutes" {
                    thead { tr {
                        th class="l" { "cell" } th { "round" } th { "minute" } th { "t (s)" }
                        th { "push/s" } th { "pop/s" } th { "ack/s" }
                        @for op in MINUTE_OPERATIONS { th { (op) " p50 / p99" } }
                        th { "backlog" } th { "errors" } th { "RSS (MiB)" }
                    } }
                    tbody { @for m in &run.minutes { (row(m)) } }
                } }
            }
        }
    }
}

fn row(m: &MinuteRow) -> Markup {
    html! {
        tr data-cell=(m.cell) {
            th scope="row" { (swatch(&m.cell)) (m.cell) }
            td { (m.round) }
            td { (m.minute) }
            td { (format_number(m.t)) }
            td { (format_number(m.pushed)) }
            td { (format_number(m.popped)) }
            td { (format_number(m.acked)) }
            @for (p50, p99) in m.latency {
                td { (format_number(p50)) " / " (format_number(p99)) }
            }
            td { (format_number(m.backlog)) }
            td { (format_number(m.errors)) }
            td { (format_number(m.rss_mib)) }
        }
    }
}
