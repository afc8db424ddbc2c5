//! `ackbench run --external NAME=BROKER_URL,DATABASE_URL`: a second instance of the workspace's
//! broker, started here on its own throwaway database, runs as a cell beside the run's own
//! broker cell, interleaved round by round, audited like it, its figures read from its own
//! database, and shown in the report's peer tables.

use std::ffi::OsStr;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{a_run_judged_by_its_audit, ackbench, temp_dir, written_results};

/// The broker started for the test, stopped when dropped.
struct Broker(Child);

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The workspace's broker on `database_url`, once its `/health` answers.
fn start_broker(database_url: &str, port: u16) -> Broker {
    let bin = ackbench::target::broker_binary::locate(None).expect("the broker binary");
    let child = Command::new(bin)
        .env("DATABASE_URL", database_url)
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the broker starts");
    let broker = Broker(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return broker;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the external broker did not listen on {port} within 60 s");
}

const SCENARIO: &str = r#"
name = "external"
[queue]
name = "external"
partitions = 4
[prefill]
messages_per_partition = 25
batch = 25
[producers]
count = 2
batch = 10
mode = "open"
rate = 200
[consumers]
count = 4
pop_batch = 10
[run]
warmup_secs = 1
duration_secs = 2
drain_timeout_secs = 20
rounds = 2
cells = ["none"]
seed = 11
"#;

#[test]
fn an_external_broker_is_a_cell_interleaved_and_audited_beside_the_others() {
    let _real_run = a_run_judged_by_its_audit();
    let cluster = throwaway_pg::shared();
    let database_url = cluster.create_database("external_cell_own").unwrap();
    let port = free_port();
    let _broker = start_broker(&database_url, port);
    let dir = temp_dir("external", "interleaved");
    let out_dir = dir.join("out");
    let external = format!("other=http://127.0.0.1:{port},{database_url}");
    let args = [
        OsStr::new("--out"),
        out_dir.as_os_str(),
        OsStr::new("--cells"),
        OsStr::new("none"),
        OsStr::new("--external"),
        OsStr::new(&external),
    ];
    let o = ackbench(&dir, "run", SCENARIO, &args);
    assert_eq!(o.code, 0, "stdout:\n{}\nstderr:\n{}", o.stdout, o.stderr);
    let results = written_results(&out_dir, &o.stderr);
    let names: Vec<&str> = results.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["none", "other"]);
    // Rounds are the outer loop and cells the inner: each round runs both, in this order.
    assert_eq!(results.meta.cell_order, ["none", "other"]);
    for c in &results.cells {
        let a = &c.summary.audit;
        let rounds: Vec<u32> = c.rounds.iter().map(|r| r.round).collect();
        assert_eq!(rounds, [1, 2], "{}: a round of it in every round", c.name);
        assert_eq!((a.lost, a.pushed), (0, a.acked), "{}: {a:?}", c.name);
        assert!(a.pushed >= 200, "{}: {a:?}", c.name);
        assert!(
            a.history_checked && a.broken().is_empty(),
            "{}: {a:?}",
            c.name
        );
        assert!(
            c.rounds.iter().all(|r| r.figures.commits.is_finite()),
            "{}: PostgreSQL read from its own database",
            c.name
        );
    }
    let other = results.cell("other").unwrap();
    assert!(other.external && !results.cell("none").unwrap().external);
    // Its queues are tagged with the run, since its database outlives it.
    let queues = cluster
        .psql(
            "external_cell_own",
            "SELECT string_agg(name, ',') FROM queen.queues",
        )
        .unwrap_or_default();
    for round in ["_r1", "_r2"] {
        assert!(
            queues
                .split(',')
                .any(|q| q.starts_with("external-other_t") && q.ends_with(round)),
            "{queues}"
        );
    }
    let report = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(report.contains("other"), "the report's peer tables gain it");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A malformed `--external`, or one beside `--broker-url`, is refused before anything starts:
/// exit 2, naming what is wrong.
#[test]
fn a_bad_external_is_refused_naming_why() {
    let dir = temp_dir("external", "refused");
    let out_dir = dir.join("out");
    for (flags, why) in [
        (vec!["--external", "other"], "NAME=BROKER_URL,DATABASE_URL"),
        (
            vec!["--external", "none=http://127.0.0.1:1,postgres://x/y"],
            "already named `none`",
        ),
        (
            vec![
                "--external",
                "q=http://127.0.0.1:1,postgres://x/y",
                "--broker-url",
                "http://127.0.0.1:1",
            ],
            "--broker-url",
        ),
    ] {
        let mut args = vec![OsStr::new("--out"), out_dir.as_os_str()];
        args.extend(flags.iter().map(OsStr::new));
        let o = ackbench(&dir, "run", SCENARIO, &args);
        assert_eq!(o.code, 2, "{flags:?}: {}", o.stderr);
        assert!(o.stderr.contains(why), "{flags:?}: {}", o.stderr);
        assert!(!out_dir.exists(), "{flags:?}: nothing written");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
