//! The command line as a user meets it, through the binary: a subset of cells runs and says
//! which gates it could not judge; an interrupted run gives the same verdicts in its terminal
//! output, results.json and report; a connection that fails names its cause and leaves no run
//! directory; scenario names resolve; the output fits 100 columns and ends with the report.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ackbench_reports::results::{GateOutcome, Results};

use crate::common::{
    a_run_judged_by_its_audit, ackbench, one_real_run_at_a_time, temp_dir, written_results,
};

/// The shipped smoke scenario's text.
fn smoke() -> String {
    std::fs::read_to_string(workspace().join("scenarios/smoke.toml")).unwrap()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The outcome of every gate of `results` by name.
fn outcomes(results: &Results) -> Vec<(String, GateOutcome)> {
    results
        .gates
        .iter()
        .map(|g| (g.gate.clone(), g.outcome()))
        .collect()
}

#[test]
fn a_subset_of_cells_runs_and_reports_the_gates_it_needs_as_not_judged() {
    let _real_run = one_real_run_at_a_time();
    let dir = temp_dir("cli", "subset");
    let out = dir.join("out");
    let short = ["--duration", "2", "--warmup", "1", "--rounds", "1"];
    let mut args = vec!["--cells", "registry", "--out", out.to_str().unwrap()];
    args.extend(short);
    let o = ackbench(&dir, "run", &smoke(), &args);
    assert_eq!(o.code, 0, "a subset runs; stderr:\n{}", o.stderr);
    let results = written_results(&out, &o.stderr);
    let gates = outcomes(&results);
    for name in ["fusion cuts ack commits", "registry cuts PostgreSQL time"] {
        assert!(
            gates.contains(&(name.to_string(), GateOutcome::NotJudged)),
            "{name} is not judged: {gates:?}"
        );
    }
    let why = &results.gates.iter().find(|g| g.not_judged).unwrap().detail;
    assert!(why.contains("--cells left it out"), "{why}");
    assert!(o.stdout.contains("not judged"), "{}", o.stdout);
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        report.contains("1/3 gates held, 2 not judged"),
        "the report agrees"
    );
    let wide: Vec<&str> = o
        .stdout
        .lines()
        .filter(|l| l.chars().count() > 100)
        .collect();
    assert!(wide.is_empty(), "stdout fits 100 columns: {wide:?}");
    let last = o.stdout.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!("report: {}", out.join("report.html").display())
    );

    // `gate --baseline` with no baseline gate says the baseline is unused.
    let baseline = dir.join("baseline.json");
    let results_path = out.join("results.json");
    let run = |args: &[&Path]| {
        Command::new(env!("CARGO_BIN_EXE_ackbench"))
            .args(args)
            .output()
            .unwrap()
    };
    let made = run(&[
        Path::new("baseline"),
        &results_path,
        Path::new("--out"),
        &baseline,
    ]);
    assert!(made.status.success(), "{made:?}");
    let gated = run(&[
        Path::new("gate"),
        &results_path,
        Path::new("--baseline"),
        &baseline,
    ]);
    let stderr = String::from_utf8_lossy(&gated.stderr);
    assert!(stderr.contains("is unused"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_interrupted_run_gives_the_same_verdicts_in_the_terminal_results_and_report() {
    let _real_run = a_run_judged_by_its_audit();
    let dir = temp_dir("cli", "interrupted");
    let out = dir.join("out");
    let file = dir.join("smoke.toml");
    std::fs::write(&file, smoke()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .args([
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .args(["--duration", "2", "--warmup", "1", "--rounds", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ctrl-C once the first cell's round is done: the cells after it never run.
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    for line in stderr.lines().map_while(Result::ok) {
        if line.starts_with("[smoke] registry+fusion r1:") {
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
        }
        seen.push_str(&line);
        seen.push('\n');
    }
    let done = child.wait_with_output().unwrap();
    assert_eq!(done.status.code(), Some(130), "stderr:\n{seen}");
    let stdout = String::from_utf8_lossy(&done.stdout);
    let results = written_results(&out, &seen);
    assert!(!results.complete);
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    for g in &results.gates {
        let row = format!("{:<12}  {}", g.word(), &g.gate);
        assert!(
            stdout.contains(row.trim_end()),
            "terminal row `{row}`:\n{stdout}"
        );
    }
    let judged = outcomes(&results);
    assert!(
        judged.iter().any(|(_, o)| *o == GateOutcome::NotJudged),
        "the ratio gates need cells that never ran: {judged:?}"
    );
    let held = judged
        .iter()
        .filter(|(_, o)| *o == GateOutcome::Held)
        .count();
    let not_judged = judged.len() - held;
    let headline = format!(
        "{held}/{} gates held, {not_judged} not judged",
        judged.len()
    );
    assert!(report.contains(&headline), "report says `{headline}`");
    let a = &results.cells[0].summary.audit;
    let counts = format!("undrained {}", a.undrained);
    assert!(
        stdout.contains(&counts),
        "terminal audit `{counts}`:\n{stdout}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_connection_failure_names_its_cause_exits_2_and_leaves_no_run_directory() {
    let free_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cluster = throwaway_pg::shared();
    let existing = cluster.create_database("cli_connect").unwrap();
    let missing_db = existing.replace("cli_connect", "no_such_database");
    let refused = format!("postgres://postgres@127.0.0.1:{free_port}/postgres");
    let cases = [
        (
            refused.as_str(),
            "connection refused",
            "leave out --database-url",
        ),
        (missing_db.as_str(), "does not exist", "createdb"),
        (
            "postgres://postgres@no-such-host.invalid:5432/postgres",
            "unknown host",
            "host name",
        ),
    ];
    let dir = temp_dir("cli", "connect");
    for (url, cause, what_to_do) in cases {
        let out = dir.join("out");
        let args = ["--database-url", url, "--out", out.to_str().unwrap()];
        let o = ackbench(&dir, "run", &smoke(), &args);
        assert_eq!(o.code, 2, "{url}: {}", o.stderr);
        assert!(
            o.stderr.contains(cause),
            "{url}: names `{cause}`: {}",
            o.stderr
        );
        assert!(
            o.stderr.contains(what_to_do),
            "{url}: says `{what_to_do}`: {}",
            o.stderr
        );
        assert!(
            !out.exists(),
            "{url}: a failed start leaves no run directory"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_bare_scenario_name_is_looked_up_in_scenarios_and_a_typo_gets_a_suggestion() {
    let o = Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .args(["run", "smoek"])
        .current_dir(workspace())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr.contains("did you mean scenarios/smoke.toml"),
        "{stderr}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .args(["capacity", "smoke", "--cells", "nonsense"])
        .current_dir(workspace())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("--cells") && !stderr.contains("no such scenario"),
        "`smoke` was found, then --cells refused: {stderr}"
    );
}

#[test]
fn comparing_runs_of_different_scenarios_warns_on_the_command_line() {
    let dir = temp_dir("cli", "compare");
    let fixture = workspace().join("reports/tests/fixtures/small-results.json");
    let text = std::fs::read_to_string(&fixture).unwrap();
    let mut other = Results::from_json(&text).unwrap();
    other.meta.scenario.name = "other".into();
    other.meta.scenario.hash = "0000000000000000".into();
    let other_path = dir.join("other.json");
    ackbench_reports::results::write(&other, &other_path).unwrap();
    let compare = |against: &Path| {
        Command::new(env!("CARGO_BIN_EXE_ackbench"))
            .args(["report", fixture.to_str().unwrap(), "--compare"])
            .arg(against)
            .arg("--out")
            .arg(dir.join("compare.html"))
            .output()
            .unwrap()
    };
    let o = compare(&other_path);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("different scenario files"), "{stderr}");
    let o = compare(&fixture);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !stderr.contains("different scenario"),
        "the same scenario: {stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_server_that_asks_for_a_password_gets_told_the_url_lacks_one_or_has_a_wrong_one() {
    // A cluster of its own whose TCP logins need a password (the shared one trusts).
    let cluster = throwaway_pg::Cluster::start().unwrap();
    cluster
        .psql("postgres", "ALTER USER postgres PASSWORD 'right'")
        .unwrap();
    let hba = cluster.data_dir().join("pg_hba.conf");
    std::fs::write(
        &hba,
        "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n",
    )
    .unwrap();
    // This session logs in under the old rules and makes the server read the new ones.
    cluster.psql("postgres", "SELECT pg_reload_conf()").unwrap();
    let no_password = cluster.url("postgres");
    let wrong = no_password.replace("postgres@", "postgres:wrong@");
    let dir = temp_dir("cli", "password");
    for (url, cause) in [
        (
            no_password.as_str(),
            "the server asks for a password and the URL has none",
        ),
        (wrong.as_str(), "the server refused the login"),
    ] {
        let out = dir.join("out");
        let args = ["--database-url", url, "--out", out.to_str().unwrap()];
        let o = ackbench(&dir, "run", &smoke(), &args);
        assert_eq!(o.code, 2, "{url}: {}", o.stderr);
        assert!(
            o.stderr.contains(cause),
            "{url}: names `{cause}`: {}",
            o.stderr
        );
        assert!(
            !o.stderr.contains("wrong"),
            "the password is hidden: {}",
            o.stderr
        );
        assert!(!out.exists(), "{url}: no run directory");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_reader_that_goes_away_ends_gate_quietly_without_a_panic() {
    let fixture = workspace().join("reports/tests/fixtures/small-results.json");
    // The reader is gone before the child starts, so its first line meets a closed pipe, as
    // behind `| head -1` once head has its line.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_ackbench"))
        .args(["gate", fixture.to_str().unwrap(), "--format", "markdown"])
        .arg("--gates")
        .arg(workspace().join("scenarios/smoke.toml"))
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(o.status.code(), Some(101), "{stderr}");
}
