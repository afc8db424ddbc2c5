//! Semantic checks after deserialisation: ranges, shares, cross-key rules. Each section has one
//! function; every error names the key's dotted name and its line (via `Locator`).

use std::collections::BTreeMap;
use std::fmt::Display;

use super::error::ScenarioError;
use super::fault::faults_from_file;
use super::gate::{gate_from_file, Gate};
use super::locate::Locator;
use super::schema::{
    Broker, Cell, Consumers, LoopMode, Outcomes, PopRoute, Prefill, Producers, Queue, Run,
    ScenarioFile,
};
use super::Scenario;

type Check = Result<(), ScenarioError>;

/// Largest message count, batch and the like: the wire's pop and push limits.
const MAX_BATCH: u32 = 10_000;
/// Largest payload: 1 MiB.
const MAX_PAYLOAD: u32 = 1 << 20;
/// Longest lease: 7 days.
const MAX_LEASE: u32 = 7 * 24 * 3600;
/// Most brokers one cell starts.
const MAX_INSTANCES: u32 = 16;
/// Longest warm-up, window or drain: one day.
const MAX_SECS: f64 = 86_400.0;
/// Environment the harness sets itself, with what to use instead.
const RESERVED_ENV: [(&str, &str); 11] = [
    ("QUEEN_ACK_REGISTRY", "run.cells selects the accelerators"),
    ("QUEEN_ACK_FUSION", "run.cells selects the accelerators"),
    ("DB_POOL_SIZE", "use broker.pool_size"),
    ("DATABASE_URL", "use --database-url"),
    ("PG_HOST", "use --database-url"),
    ("PG_PORT", "use --database-url"),
    ("PG_USER", "use --database-url"),
    ("PG_PASSWORD", "use --database-url"),
    ("PG_DB", "use --database-url"),
    ("PORT", "the load generator picks the port"),
    ("QUEEN_LISTEN", "the load generator picks the address"),
];

/// Checks every section of `file` and builds the `Scenario`.
pub(crate) fn validate(
    mut file: ScenarioFile,
    loc: &Locator,
    text: &str,
) -> Result<Scenario, ScenarioError> {
    let name = file
        .name
        .clone()
        .unwrap_or_else(|| default_name(loc.file()));
    check_name(loc, "name", &name)?;
    check_queue(&file.queue, loc)?;
    check_prefill(&file.prefill, loc)?;
    check_producers(&file.producers, &file.prefill, loc)?;
    check_consumers(&file.consumers, &file.queue, loc)?;
    file.consumers.outcomes = normalised_outcomes(&file.consumers.outcomes, loc)?;
    check_run(&file.run, loc)?;
    fold_peers(&mut file.run, loc)?;
    check_peers_can_run(&file, loc)?;
    check_stall_fits(&file, loc)?;
    check_broker(&file.broker, loc)?;
    check_gates_fit_topologies(&file, loc)?;
    if let Some(slo) = file.capacity.slo_p99_ms {
        positive(loc, "capacity.slo_p99_ms", slo, 3_600_000.0)?;
    }
    let gates = file
        .gates
        .iter()
        .enumerate()
        .map(|(i, g)| gate_from_file(g, i, &file.run.cells, loc))
        .collect::<Result<Vec<Gate>, _>>()?;
    let faults = faults_from_file(&file.faults, &file.postgres, file.run.duration_secs, loc)?;
    let sweep = super::sweep::from_file(file.sweep.as_ref(), text, loc)?;
    Ok(Scenario {
        name,
        description: file.description,
        queue: file.queue,
        prefill: file.prefill,
        producers: file.producers,
        consumers: file.consumers,
        run: file.run,
        broker: file.broker,
        postgres: file.postgres,
        gates,
        faults,
        capacity: file.capacity,
        sweep,
        source_name: loc.file().to_string(),
        source_text: text.to_string(),
    })
}

/// The file stem of the source name (`scenarios/smoke.toml` -> `smoke`), with characters a
/// name may not hold replaced by `-`.
fn default_name(file: &str) -> String {
    let stem = std::path::Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let name: String = stem
        .chars()
        .map(|c| if ok_char(c) { c } else { '-' })
        .take(128)
        .collect();
    if name.is_empty() {
        "scenario".into()
    } else {
        name
    }
}

/// A name used in URLs and file names: 1..128 of letters, digits, `-`, `_`, `.`.
fn check_name(loc: &Locator, key: &str, value: &str) -> Check {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if value.is_empty() || value.len() > 128 || !value.chars().all(ok_char) {
        return Err(loc.invalid(
            key,
            format!("{key} must be 1 to 128 letters, digits, `-`, `_` or `.`, got `{value}`"),
        ));
    }
    Ok(())
}

/// `lo <= value <= hi` for integers.
fn between<T: PartialOrd + Display>(loc: &Locator, key: &str, value: T, lo: T, hi: T) -> Check {
    if value < lo || value > hi {
        return Err(loc.invalid(
            key,
            format!("{key} must be between {lo} and {hi}, got {value}"),
        ));
    }
    Ok(())
}

/// `lo <= value <= hi` for numbers that may be fractional (and must be finite).
fn number_between(loc: &Locator, key: &str, value: f64, lo: f64, hi: f64) -> Check {
    if !value.is_finite() || value < lo || value > hi {
        return Err(loc.invalid(
            key,
            format!("{key} must be a number between {lo} and {hi}, got {value}"),
        ));
    }
    Ok(())
}

/// `0 < value <= hi`.
fn positive(loc: &Locator, key: &str, value: f64, hi: f64) -> Check {
    if !value.is_finite() || value <= 0.0 || value > hi {
        return Err(loc.invalid(
            key,
            format!("{key} must be positive and at most {hi}, got {value}"),
        ));
    }
    Ok(())
}

fn check_queue(q: &Queue, loc: &Locator) -> Check {
    check_name(loc, "queue.name", &q.name)?;
    between(loc, "queue.partitions", q.partitions, 1, 100_000)?;
    let o = &q.options;
    let max = i32::MAX as u32;
    between(loc, "queue.options.lease_time", o.lease_time, 1, MAX_LEASE)?;
    between(loc, "queue.options.retry_limit", o.retry_limit, 0, 1000)?;
    between(
        loc,
        "queue.options.max_size",
        o.max_size,
        0,
        1_000_000_000_000,
    )?;
    between(
        loc,
        "queue.options.priority",
        o.priority,
        -1_000_000,
        1_000_000,
    )?;
    let windows = [
        ("queue.options.dedup_window_seconds", o.dedup_window_seconds),
        (
            "queue.options.completed_retention_seconds",
            o.completed_retention_seconds,
        ),
        ("queue.options.retention_seconds", o.retention_seconds),
        ("queue.options.delayed_processing", o.delayed_processing),
        ("queue.options.window_buffer", o.window_buffer),
    ];
    windows
        .into_iter()
        .try_for_each(|(key, v)| between(loc, key, v, 0, max))
}

fn check_prefill(p: &Prefill, loc: &Locator) -> Check {
    let max_messages = 100_000_000;
    between(
        loc,
        "prefill.messages_per_partition",
        p.messages_per_partition,
        0,
        max_messages,
    )?;
    between(loc, "prefill.batch", p.batch, 1, MAX_BATCH)?;
    between(
        loc,
        "prefill.payload_bytes",
        p.payload_bytes,
        1,
        MAX_PAYLOAD,
    )?;
    between(loc, "prefill.concurrency", p.concurrency, 1, 256)
}

fn check_producers(p: &Producers, prefill: &Prefill, loc: &Locator) -> Check {
    between(loc, "producers.count", p.count, 0, 10_000)?;
    between(loc, "producers.batch", p.batch, 1, MAX_BATCH)?;
    between(
        loc,
        "producers.payload_bytes",
        p.payload_bytes,
        1,
        MAX_PAYLOAD,
    )?;
    check_loop(p, loc)?;
    if p.count == 0 && prefill.messages_per_partition == 0 {
        return Err(loc.invalid(
            "producers.count",
            "producers.count is 0 and there is no prefill: nothing to consume \
             (set producers.count or prefill.messages_per_partition)"
                .into(),
        ));
    }
    Ok(())
}

/// `rate` is required, positive, for an open loop and refused for a closed one.
fn check_loop(p: &Producers, loc: &Locator) -> Check {
    match (p.mode, p.rate) {
        (LoopMode::Open, None) => Err(loc.invalid_at(
            loc.first_line_of(&["producers.mode", "producers"]),
            "producers.rate",
            "producers.rate (messages/s in total) is required when producers.mode = \"open\""
                .into(),
        )),
        (LoopMode::Open, Some(_)) if p.count == 0 => Err(loc.invalid(
            "producers.count",
            "producers.count must be at least 1 when producers.mode = \"open\"".into(),
        )),
        (LoopMode::Open, Some(rate)) => positive(loc, "producers.rate", rate, 10_000_000.0),
        (LoopMode::Closed, Some(_)) => Err(loc.invalid(
            "producers.rate",
            "producers.rate applies only to producers.mode = \"open\" \
             (a closed loop pushes as fast as it is answered)"
                .into(),
        )),
        (LoopMode::Closed, None) => Ok(()),
    }
}

fn check_consumers(c: &Consumers, q: &Queue, loc: &Locator) -> Check {
    between(loc, "consumers.count", c.count, 1, 10_000)?;
    check_groups(c, loc)?;
    between(loc, "consumers.pop_batch", c.pop_batch, 1, MAX_BATCH)?;
    check_partitions_per_pop(c, q, loc)?;
    between(
        loc,
        "consumers.long_poll_timeout_ms",
        c.long_poll_timeout_ms,
        1,
        600_000,
    )?;
    if let Some(lease) = c.lease_seconds {
        between(loc, "consumers.lease_seconds", lease, 1, MAX_LEASE)?;
    }
    check_processing(c, q, loc)?;
    between(
        loc,
        "consumers.empty_backoff_ms",
        c.empty_backoff_ms,
        0,
        60_000,
    )?;
    number_between(loc, "consumers.lease_less", c.lease_less, 0.0, 1.0)?;
    number_between(loc, "consumers.stall", c.stall, 0.0, 1.0)?;
    between(
        loc,
        "consumers.stall_extra_ms",
        c.stall_extra_ms,
        1,
        600_000,
    )
}

fn check_groups(c: &Consumers, loc: &Locator) -> Check {
    if let Some(group) = &c.group {
        check_name(loc, "consumers.group", group)?;
        if group == ackbench_wire::QUEUE_MODE_GROUP {
            return Err(loc.invalid(
                "consumers.group",
                "consumers.group must not be the queue-mode group: leave it out for queue mode"
                    .into(),
            ));
        }
    }
    match c.groups {
        Some(n) => between(loc, "consumers.groups", n, 1, 64),
        None => Ok(()),
    }
}

fn check_partitions_per_pop(c: &Consumers, q: &Queue, loc: &Locator) -> Check {
    let key = "consumers.partitions_per_pop";
    between(loc, key, c.partitions_per_pop, 1, MAX_BATCH)?;
    if c.partitions_per_pop > q.partitions {
        return Err(loc.invalid(
            key,
            format!(
                "{key} must be at most queue.partitions ({}), got {}",
                q.partitions, c.partitions_per_pop
            ),
        ));
    }
    if c.partitions_per_pop > 1 && c.pop_route == PopRoute::Partition {
        return Err(loc.invalid(
            key,
            format!("{key} above 1 needs consumers.pop_route = \"wildcard\""),
        ));
    }
    Ok(())
}

/// The lease a pop takes, in seconds: `consumers.lease_seconds` or the queue's `lease_time`.
pub(crate) fn effective_lease(c: &Consumers, q: &Queue) -> u32 {
    c.lease_seconds.unwrap_or(q.options.lease_time)
}

/// Simulated work must end inside the lease, or every batch would expire.
fn check_processing(c: &Consumers, q: &Queue, loc: &Locator) -> Check {
    let key = "consumers.processing_ms";
    let lease_ms = u64::from(effective_lease(c, q)) * 1000;
    if c.processing_ms >= lease_ms {
        return Err(loc.invalid(
            key,
            format!(
                "{key} must be shorter than the lease ({lease_ms} ms), got {}; \
                 use consumers.stall to hold batches past the lease",
                c.processing_ms
            ),
        ));
    }
    Ok(())
}

/// Checks the outcome shares and returns them as fractions summing to 1; an absent `completed`
/// takes what the others leave.
fn normalised_outcomes(o: &Outcomes, loc: &Locator) -> Result<Outcomes, ScenarioError> {
    let given_completed = loc.has("consumers.outcomes.completed");
    for (name, share) in o.shares() {
        if name == "completed" && !given_completed {
            continue;
        }
        let key = format!("consumers.outcomes.{name}");
        if !share.is_finite() || share < 0.0 {
            return Err(loc.invalid(
                &key,
                format!("{key} must be a non-negative number, got {share}"),
            ));
        }
    }
    let others = o.failed + o.retry + o.dlq;
    if !given_completed {
        return rest_is_completed(o, others, loc);
    }
    let sum = o.completed + others;
    let scale = if (sum - 1.0).abs() <= 1e-6 {
        1.0
    } else if (sum - 100.0).abs() <= 1e-4 {
        100.0
    } else {
        return Err(loc.invalid(
            "consumers.outcomes",
            format!(
                "consumers.outcomes must sum to 1 (fractions) or 100 (percentages), \
                 got {} (completed {} + failed {} + retry {} + dlq {})",
                short(sum),
                o.completed,
                o.failed,
                o.retry,
                o.dlq
            ),
        ));
    };
    Ok(Outcomes {
        completed: o.completed / scale,
        failed: o.failed / scale,
        retry: o.retry / scale,
        dlq: o.dlq / scale,
    })
}

fn rest_is_completed(o: &Outcomes, others: f64, loc: &Locator) -> Result<Outcomes, ScenarioError> {
    if others > 1.0 + 1e-9 {
        return Err(loc.invalid(
            "consumers.outcomes",
            format!(
                "consumers.outcomes: failed + retry + dlq sum to {}, more than 1; \
                 without `completed` the shares are fractions (give completed too to use \
                 percentages summing to 100)",
                short(others)
            ),
        ));
    }
    Ok(Outcomes {
        completed: (1.0 - others).max(0.0),
        ..o.clone()
    })
}

/// A sum printed without float noise: 0.9500000000000001 -> 0.95.
fn short(x: f64) -> String {
    let text = format!("{x:.6}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn check_run(r: &Run, loc: &Locator) -> Check {
    number_between(loc, "run.warmup_secs", r.warmup_secs, 0.0, MAX_SECS)?;
    positive(loc, "run.duration_secs", r.duration_secs, MAX_SECS)?;
    positive(
        loc,
        "run.drain_timeout_secs",
        r.drain_timeout_secs,
        MAX_SECS,
    )?;
    between(loc, "run.rounds", r.rounds, 1, 1000)?;
    between(loc, "run.confirm", r.confirm, 0, 1000)?;
    check_cells(&r.cells).map_err(|(index, message)| {
        let key = index.map_or("run.cells".to_string(), |i| format!("run.cells[{i}]"));
        loc.invalid(&key, format!("{key}: {message}"))
    })
}

/// `run.peers` names peer cells only; they join `run.cells` (after the broker cells).
fn fold_peers(r: &mut Run, loc: &Locator) -> Check {
    for (i, peer) in r.peers.iter().enumerate() {
        if peer.peer().is_none() {
            let key = format!("run.peers[{i}]");
            let message = format!(
                "{key}: `{peer}` is a broker cell, not a peer ({})",
                crate::driver::peer::listed()
            );
            return Err(loc.invalid(&key, message));
        }
    }
    r.cells.extend(std::mem::take(&mut r.peers));
    check_cells(&r.cells)
        .map_err(|(_, message)| loc.invalid("run.peers", format!("run.peers: {message}")))
}

/// A peer cell runs only a scenario the peer can run as written.
fn check_peers_can_run(file: &ScenarioFile, loc: &Locator) -> Check {
    let asks = asks_of(&file.consumers);
    for cell in &file.run.cells {
        if let Some(reason) = cell.peer().and_then(|p| p.refusal(&asks)) {
            let message = format!("the `{cell}` cell cannot run this scenario: {reason}");
            return Err(loc.invalid("run.cells", message));
        }
    }
    Ok(())
}

/// What the consumers ask of a queue, in the terms a peer is judged by.
pub(crate) fn asks_of(c: &Consumers) -> crate::driver::peer::Asks {
    crate::driver::peer::Asks {
        consumer_groups: c.group_names().len(),
        lease_stalls: c.stall > 0.0,
        dead_letters: c.outcomes.dlq > 0.0,
        failures: c.outcomes.failed > 0.0,
        named_partitions: c.pop_route == PopRoute::Partition,
    }
}

/// A cell list must be non-empty without repeats; on error, the index at fault (if any).
pub(crate) fn check_cells(cells: &[Cell]) -> Result<(), (Option<usize>, String)> {
    if cells.is_empty() {
        return Err((None, "at least one cell is needed".into()));
    }
    for (i, cell) in cells.iter().enumerate() {
        if cells[..i].contains(cell) {
            return Err((Some(i), format!("cell `{cell}` is listed twice")));
        }
    }
    Ok(())
}

/// A stalled batch is held for the lease plus `stall_extra_ms`; the drain must outlast that,
/// or the audit would run before stalled batches are redelivered.
fn check_stall_fits(file: &ScenarioFile, loc: &Locator) -> Check {
    let c = &file.consumers;
    if c.stall == 0.0 {
        return Ok(());
    }
    let lease = f64::from(effective_lease(c, &file.queue));
    let hold = lease + c.stall_extra_ms as f64 / 1000.0;
    if hold >= file.run.drain_timeout_secs {
        return Err(loc.invalid(
            "consumers.stall",
            format!(
                "consumers.stall holds batches for the lease ({lease} s) plus stall_extra_ms, \
                 {hold} s, which does not fit in run.drain_timeout_secs ({} s): shorten the lease \
                 (queue.options.lease_time or consumers.lease_seconds) or raise the drain timeout",
                file.run.drain_timeout_secs
            ),
        ));
    }
    Ok(())
}

fn check_broker(b: &Broker, loc: &Locator) -> Check {
    if let Some(size) = b.pool_size {
        between(loc, "broker.pool_size", size, 1, 10_000)?;
    }
    between(loc, "broker.instances", b.instances, 1, MAX_INSTANCES)?;
    check_topologies(b, loc)?;
    check_env(&b.env, loc)
}

/// `broker.topologies`: non-empty, each within range, no topology twice, and not beside
/// `broker.instances` or `broker.routing` (which say the one topology of a plain run).
fn check_topologies(b: &Broker, loc: &Locator) -> Check {
    if !loc.has("broker.topologies") {
        return Ok(());
    }
    let key = "broker.topologies";
    if let Some(beside) = ["broker.instances", "broker.routing"]
        .into_iter()
        .find(|k| loc.has(k))
    {
        return Err(loc.invalid(
            key,
            format!(
                "{key} lists every topology itself: leave out {beside} \
                 (write it into each entry, e.g. {{ instances = 3, routing = \"sticky\" }})"
            ),
        ));
    }
    if b.topologies.is_empty() {
        return Err(loc.invalid(key, format!("{key} must list at least one topology")));
    }
    for (i, t) in b.topologies.iter().enumerate() {
        let entry = format!("{key}[{i}]");
        between(
            loc,
            &format!("{entry}.instances"),
            t.instances,
            1,
            MAX_INSTANCES,
        )?;
        if b.topologies[..i].iter().any(|o| o.label() == t.label()) {
            return Err(loc.invalid(
                &entry,
                format!(
                    "{entry}: topology `{}` is listed twice (with one broker, routing makes no \
                     difference)",
                    t.label()
                ),
            ));
        }
    }
    Ok(())
}

/// Gates name cells by their accelerator names; once several topologies multiply the cells
/// (`registry+fusion@3rr`), a gate could not say which one it means.
fn check_gates_fit_topologies(file: &ScenarioFile, loc: &Locator) -> Check {
    if file.gates.is_empty() || !file.broker.names_topologies() {
        return Ok(());
    }
    Err(loc.invalid(
        "gates",
        "gates name cells, and with several broker.topologies every cell runs once per \
         topology (`registry+fusion@3rr`), so a gate cannot say which it means: give the \
         gates a scenario of one topology (broker.instances and broker.routing)"
            .into(),
    ))
}

fn check_env(env: &BTreeMap<String, String>, loc: &Locator) -> Check {
    for name in env.keys() {
        let key = format!("broker.env.{name}");
        let ok_start = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        let ok_rest = name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !(ok_start && ok_rest) {
            return Err(loc.invalid(
                &key,
                format!("{key}: `{name}` is not an environment variable name"),
            ));
        }
        if let Some((_, instead)) = RESERVED_ENV.iter().find(|(n, _)| *n == name) {
            return Err(loc.invalid(
                &key,
                format!("{key} is set by the load generator itself: {instead}"),
            ));
        }
    }
    Ok(())
}
