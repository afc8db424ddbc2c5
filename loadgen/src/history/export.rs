//! A history as JSON lines (`ackbench run --history FILE`): one object per delivery, with the
//! cell and round it belongs to, so checkers other than this load generator's can judge it.
//! Hashes are hexadecimal (the transactionId's xxh3_128, the partitionId's, leaseId's and
//! producer prefix's xxh3_64), times microseconds since the cell round's history began (`null`
//! for an ack never sent or never answered), and `pushed` says what the producers saw of the
//! message's push (`booked`, `failed`, `never`).

use std::io::Write;

use serde::Serialize;

use super::{Delivery, History, Micros, NEVER};
use ackbench_ledger::{Ledger, Pushed};

#[derive(Serialize)]
struct Line<'a> {
    cell: &'a str,
    round: u32,
    group: u16,
    consumer: u32,
    partition: String,
    lease: Option<String>,
    txn: String,
    producer: Option<String>,
    seq: u64,
    index: u32,
    answer: u64,
    position: u32,
    status: &'static str,
    lease_less: bool,
    verdict: &'static str,
    lease_ms: u32,
    pop_sent_us: Micros,
    pop_answered_us: Micros,
    ack_sent_us: Option<Micros>,
    ack_answered_us: Option<Micros>,
    pushed: &'static str,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hash64(h: u64) -> Option<String> {
    (h != 0).then(|| format!("{h:016x}"))
}

fn at(t: Micros) -> Option<Micros> {
    (t != NEVER).then_some(t)
}

/// Writes one JSON line per delivery of `history`, of cell `cell` round `round`.
pub fn write_lines(
    out: &mut impl Write,
    cell: &str,
    round: u32,
    history: &[Delivery],
    pushed: &dyn Fn(&Delivery) -> Pushed,
) -> std::io::Result<()> {
    for d in history {
        let line = Line {
            cell,
            round,
            group: d.group,
            consumer: d.consumer,
            partition: format!("{:016x}", d.partition),
            lease: hash64(d.lease),
            txn: hex(&d.txn),
            producer: hash64(d.producer),
            seq: d.seq,
            index: d.index,
            answer: d.answer,
            position: d.position,
            status: d.status.name(),
            lease_less: d.lease_less,
            verdict: d.verdict.name(),
            lease_ms: d.lease_ms,
            pop_sent_us: d.pop_sent,
            pop_answered_us: d.pop_answered,
            ack_sent_us: at(d.ack_sent),
            ack_answered_us: at(d.ack_answered),
            pushed: match pushed(d) {
                Pushed::Booked => "booked",
                Pushed::Failed => "failed",
                Pushed::Never => "never",
            },
        };
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Appends the history of cell `cell` round `round` to `path` (`--history`).
pub fn append(
    path: &std::path::Path,
    cell: &str,
    round: u32,
    history: &History,
    ledger: &Ledger,
) -> Result<(), String> {
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| format!("--history {}: {e}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let pushed = |d: &Delivery| ledger.push_of_from(&d.txn, super::origin(d).as_ref());
    history
        .inspect(|history| write_lines(&mut out, cell, round, history, &pushed))
        .and_then(|_| out.flush())
        .map_err(|e| format!("--history {}: {e}", path.display()))
}
