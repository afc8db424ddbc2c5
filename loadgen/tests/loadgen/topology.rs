//! Several brokers per cell (issue 18): `[broker] instances`, `routing` and `topologies` are read
//! and refused like every other key, cells multiply by topology, and a real run on three brokers
//! spreads its requests over all of them, round robin losing the registry's hits that sticky
//! routing keeps, with the report's topology table built from what it measured.

use std::ffi::OsStr;

use ackbench::run::cell_list;
use ackbench::scenario::{Cell, Routing, Scenario, ScenarioError, Topology};
use ackbench_reports::results::{CellResults, Results};

use crate::common::{ackbench, one_real_run_at_a_time, temp_dir, written_results, Outcome};

const BASE: &str = "name = \"t\"\n[producers]\ncount = 1\n";

fn parse(extra: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(&format!("{BASE}{extra}"), "topo.toml")
}

/// The error of `extra`, which must name `key` and come from `line` (1-based, of the whole text).
fn refused(extra: &str, key: &str, line: usize, words: &[&str]) {
    let err = parse(extra).expect_err("must be refused");
    let text = err.to_string();
    assert_eq!(err.line(), Some(line), "line of: {text}");
    assert!(text.contains(key), "`{key}` missing from: {text}");
    for w in words {
        assert!(text.contains(w), "`{w}` missing from: {text}");
    }
}

#[test]
fn one_broker_round_robin_is_the_default_and_keeps_the_cell_names() {
    let s = parse("").unwrap();
    assert_eq!(
        (s.broker.instances, s.broker.routing),
        (1, Routing::RoundRobin)
    );
    assert_eq!(s.broker.topologies(), [Topology::default()]);
    let names: Vec<String> = cell_list(&s, None, None)
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["registry+fusion", "registry", "fusion", "none"]);
    let three = parse("[broker]\ninstances = 3\nrouting = \"sticky\"\n").unwrap();
    let planned = cell_list(&three, None, None);
    assert_eq!(
        planned[0].name, "registry+fusion",
        "one topology: names unchanged"
    );
    assert_eq!(planned[0].topology.instances, 3);
    assert_eq!(planned[0].topology.routing, Routing::Sticky);
}

#[test]
fn several_topologies_multiply_the_broker_cells_cell_by_cell() {
    let s = parse(
        "[run]\ncells = [\"registry\", \"none\"]\n[broker]\ntopologies = [{ instances = 1 }, \
         { instances = 3 }, { instances = 3, routing = \"sticky\" }]\n",
    )
    .unwrap();
    let planned = cell_list(&s, None, None);
    let names: Vec<&str> = planned.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "registry@1",
            "registry@3rr",
            "registry@3sticky",
            "none@1",
            "none@3rr",
            "none@3sticky"
        ]
    );
    assert!(planned
        .iter()
        .all(|c| c.cell == Cell::Registry || c.cell == Cell::None));
    let aa = cell_list(&s, Some(Cell::None), None);
    assert_eq!(
        aa.len(),
        2,
        "A/A runs one cell twice, on the first topology"
    );
    assert_eq!(aa[1].topology, Topology::default());
    let shipped = Scenario::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/multi-broker.toml"
    ))
    .unwrap();
    let labels: Vec<String> = shipped
        .broker
        .topologies()
        .iter()
        .map(Topology::label)
        .collect();
    assert_eq!(labels, ["1", "3rr", "3sticky"]);
}

#[test]
fn bad_topology_keys_and_values_name_the_key_and_line() {
    // Lines: 1-3 are BASE, 4 is [broker].
    refused(
        "[broker]\ninstances = 0\n",
        "broker.instances",
        5,
        &["between 1 and 16"],
    );
    refused(
        "[broker]\ninstances = 17\n",
        "broker.instances",
        5,
        &["got 17"],
    );
    refused(
        "[broker]\nrouting = \"random\"\n",
        "routing",
        5,
        &["round_robin", "sticky"],
    );
    refused(
        "[broker]\ninstance = 3\n",
        "instance",
        5,
        &["instances", "topologies"],
    );
    refused(
        "[broker]\ntopologies = [\n  { instances = 1 },\n  { instances = 3, route = \"sticky\" },\n]\n",
        "route",
        7,
        &["instances", "routing"],
    );
    refused(
        "[broker]\ntopologies = [\n  { instances = 1 },\n  { instances = 0 },\n]\n",
        "broker.topologies[1].instances",
        7,
        &["between 1 and 16"],
    );
    refused(
        "[broker]\ntopologies = [\n  { instances = 3 },\n  { instances = 3, routing = \"round_robin\" },\n]\n",
        "broker.topologies[1]",
        7,
        &["`3rr` is listed twice"],
    );
    refused(
        "[broker]\ntopologies = [{ instances = 1 }, { instances = 1, routing = \"sticky\" }]\n",
        "broker.topologies[1]",
        5,
        &["`1` is listed twice"],
    );
    refused(
        "[broker]\ntopologies = []\n",
        "broker.topologies",
        5,
        &["at least one"],
    );
    refused(
        "[broker]\ninstances = 3\ntopologies = [{ instances = 1 }]\n",
        "broker.topologies",
        6,
        &["leave out broker.instances"],
    );
    refused(
        "[broker]\ntopologies = [{ instances = 1 }, { instances = 2 }]\n\
         [[gates]]\nkind = \"ratio\"\nfigure = \"commits_per_ack\"\nnumerator = \"registry\"\n\
         denominator = \"none\"\nmax = 1.0\n",
        "gates",
        6,
        &["cannot say which"],
    );
}

/// Three brokers, registry on, fusion off (every hit is one positional commit), in both
/// routings; open-loop producers keep acks flowing through the window (a prefill alone can be
/// drained before the window opens), consumers ack whole batches.
const RUN: &str = r#"
name = "topo"
[queue]
name = "topo"
partitions = 12
[queue.options]
lease_time = 30
dedup_window_seconds = 0
[prefill]
messages_per_partition = 20
batch = 20
[producers]
count = 3
batch = 5
mode = "open"
rate = 600
[consumers]
count = 6
pop_batch = 5
[run]
warmup_secs = 1
duration_secs = 3
drain_timeout_secs = 30
rounds = 1
cells = ["registry"]
seed = 11
[broker]
pool_size = 4
topologies = [{ instances = 3, routing = "round_robin" }, { instances = 3, routing = "sticky" }]
"#;

fn cell<'a>(r: &'a Results, name: &str) -> &'a CellResults {
    r.cell(name)
        .unwrap_or_else(|| panic!("no cell {name} in {:?}", r.meta.cell_order))
}

#[test]
fn three_brokers_round_robin_or_sticky_serve_every_request_and_hit_the_registry() {
    let _one = one_real_run_at_a_time();
    let dir = temp_dir("topology", "rr-sticky");
    let out = dir.join("out");
    let Outcome { code, stderr, .. } =
        ackbench(&dir, "run", RUN, &[OsStr::new("--out"), out.as_os_str()]);
    let results = written_results(&out, &stderr);
    assert_eq!(code, 0, "stderr:\n{stderr}");
    let (rr, sticky) = (
        cell(&results, "registry@3rr"),
        cell(&results, "registry@3sticky"),
    );
    for c in [rr, sticky] {
        assert!(
            c.summary.audit.proven(),
            "{}: {:?}",
            c.name,
            c.summary.audit
        );
        let t = c.topology.as_ref().expect("a topology is recorded");
        assert_eq!((t.instances, t.accelerators.as_str()), (3, "registry"));
        let brokers = &c.rounds[0].brokers;
        assert_eq!(brokers.len(), 3, "{}: one entry per broker", c.name);
        for b in brokers {
            assert!(
                b.requests > 10.0,
                "{}: {} served {}",
                c.name,
                b.url,
                b.requests
            );
        }
    }
    // Round robin sends two acks in three to a broker whose pop did not lease the batch: it
    // hits the registry only through the lessor's sealed delivery (without it, about 1/3).
    let rate = |c: &CellResults| c.rounds[0].figures.registry_hit_rate;
    assert!(
        rate(rr) > 0.7 && rate(sticky) > 0.9,
        "round robin {} against sticky {}",
        rate(rr),
        rate(sticky)
    );
    for b in &rr.rounds[0].brokers {
        // Peer notifications (on by default): every broker tells the others and hears them.
        assert!(
            b.peer_notifications_sent > 0.0 && b.peer_events_applied > 0.0,
            "{}: sent {} applied {}",
            b.url,
            b.peer_notifications_sent,
            b.peer_events_applied
        );
        assert_eq!(b.peer_notifications_dropped, 0.0, "{}", b.url);
    }
    let model = ackbench_reports::model::build(&results);
    let table = model.runs[0].topology.as_ref().expect("the topology table");
    let rows: Vec<(&str, &str)> = table
        .rows
        .iter()
        .map(|r| (r.cell.as_str(), r.routing.as_str()))
        .collect();
    assert_eq!(
        rows,
        [
            ("registry@3rr", "round_robin"),
            ("registry@3sticky", "sticky")
        ]
    );
    let sticky_row = &table.rows[1];
    assert_eq!(sticky_row.compared_with.as_deref(), Some("registry@3rr"));
    let hit = sticky_row
        .figures
        .iter()
        .find(|f| f.key == "registry_hit_rate")
        .unwrap();
    // Sticky is compared with round robin; with the deliveries they hit alike (without them
    // sticky hit about three times as often).
    assert!(
        hit.ratio.is_some_and(|r| r.median > 0.8 && r.median < 1.5),
        "{hit:?}"
    );
    assert_eq!(sticky_row.brokers.len(), 3);
    assert!(
        table.rows[0].peers_text.starts_with("sent "),
        "{}",
        table.rows[0].peers_text
    );
    let _ = std::fs::remove_dir_all(&dir);
}
