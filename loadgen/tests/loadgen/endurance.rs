//! The endurance fault, `hold_xmin`: the shipped `scenarios/endurance.toml` shortened by
//! `--duration` keeps its shape (the fault is placed by shares of the window), and a short run
//! of it holds the xmin horizon back (the holder's `backend_xmin` shows while held, dead tuples
//! pile up) and releases it; the share keys are refused where they do not fit.

use std::path::{Path, PathBuf};

use ackbench::scenario::{FaultKind, Overrides, Scenario};

use crate::common::{ackbench, one_real_run_at_a_time, temp_dir, written_results};

fn endurance_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("scenarios/endurance.toml")
}

#[test]
fn endurance_holds_the_middle_of_its_window_and_a_shorter_window_keeps_the_shape() {
    let mut scenario = Scenario::load(endurance_file()).unwrap();
    let hold = scenario.faults[0];
    assert_eq!(hold.kind, FaultKind::HoldXmin);
    assert_eq!(scenario.run.duration_secs, 3000.0);
    assert_eq!((hold.at_secs, hold.length_ms), (600.0, 1_800_000));
    let shorter = Overrides {
        duration_secs: Some(60.0),
        ..Default::default()
    };
    scenario.apply_overrides(&shorter).unwrap();
    let hold = scenario.faults[0];
    assert_eq!((hold.at_secs, hold.length_ms), (12.0, 36_000));
}

/// A scenario around one `[[faults]]` entry written as `fault`.
fn with_fault(fault: &str) -> String {
    format!(
        "name = \"f\"\n[queue]\nname = \"f\"\n[producers]\ncount = 1\n[run]\nduration_secs = 10\n\
         [[faults]]\n{fault}\n"
    )
}

#[test]
fn window_shares_are_refused_where_they_do_not_fit() {
    let refused = [
        (
            "kind = \"hold_xmin\"\nat_secs = 1\nat_share = 0.1\nduration_ms = 1000",
            "not both",
        ),
        (
            "kind = \"hold_xmin\"\nat_secs = 1\nduration_share = 0.5",
            "needs at_share",
        ),
        (
            "kind = \"kill_pg_backends\"\nat_share = 0.5\nduration_share = 0.1",
            "does not apply",
        ),
        (
            "kind = \"hold_xmin\"\nat_share = 1.5\nduration_ms = 1000",
            "share of the window",
        ),
        (
            "kind = \"hold_xmin\"\nat_share = 0.5\nduration_share = 0.6",
            "must end inside the measured window",
        ),
        ("kind = \"hold_xmin\"\nduration_ms = 1000", "is required"),
        (
            "kind = \"hold_xmin\"\nat_secs = 1",
            "duration_ms is required",
        ),
    ];
    for (fault, says) in refused {
        let e = Scenario::parse(&with_fault(fault), "f.toml")
            .expect_err(fault)
            .to_string();
        assert!(e.contains(says), "{fault}: {e}");
    }
    let placed = Scenario::parse(
        &with_fault("kind = \"hold_xmin\"\nat_share = 0.25\nduration_ms = 2000"),
        "f.toml",
    )
    .unwrap();
    assert_eq!(
        (placed.faults[0].at_secs, placed.faults[0].length_ms),
        (2.5, 2000)
    );
    // A fault moved by a longer window may not run into one placed in seconds.
    let two = with_fault(
        "kind = \"hold_xmin\"\nat_share = 0.1\nduration_share = 0.3\n\
         [[faults]]\nkind = \"kill_pg_backends\"\nat_secs = 5",
    );
    let mut s = Scenario::parse(&two, "f.toml").unwrap();
    let longer = Overrides {
        duration_secs: Some(40.0),
        ..Default::default()
    };
    let e = s.apply_overrides(&longer).unwrap_err().to_string();
    assert!(
        e.contains("--duration") && e.contains("would start before"),
        "{e}"
    );
}

#[test]
fn a_held_snapshot_holds_back_the_horizon_while_held_and_releases_it() {
    let _real_run = one_real_run_at_a_time();
    let dir = temp_dir("endurance", "hold");
    let out = dir.join("out");
    let text = std::fs::read_to_string(endurance_file()).unwrap();
    // A 7 s window: 1.4 s clean, 4.2 s held, 1.4 s after.
    let args = [
        "--duration",
        "7",
        "--warmup",
        "1",
        "--peers",
        "none",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = ackbench(&dir, "run", &text, &args);
    assert_eq!(o.code, 0, "the run passes; stderr:\n{}", o.stderr);
    let results = written_results(&out, &o.stderr);
    let round = &results.cells[0].rounds[0];
    assert_eq!(round.audit.lost, 0);
    let [hold] = round.faults.as_slice() else {
        panic!("one fault: {:?}", round.faults);
    };
    assert_eq!(hold.kind, "hold_xmin");
    assert!(
        (hold.at_secs - 1.4).abs() < 0.5,
        "placed by share: {hold:?}"
    );
    assert!(
        hold.note.contains("backend_xmin") && hold.note.contains("then released"),
        "the holder's xmin showed while held and was gone after: {}",
        hold.note
    );
    let samples = &hold.vacuum;
    assert!(samples.len() >= 6, "a sample each second: {samples:?}");
    assert!(samples
        .iter()
        .all(|s| s.table_bytes > 0.0 && s.index_bytes > 0.0));
    assert!(samples.iter().all(|s| s.bystander_ms.is_finite()));
    let at = |t: f64| samples.iter().rev().find(|s| s.t <= t).unwrap();
    let (began, ended) = (at(hold.at_secs), at(hold.ended_secs));
    // Every ack updates the broker's rows: with the horizon held, none of the old versions can
    // go, so dead tuples only pile up.
    assert!(
        ended.dead_tuples > began.dead_tuples + 100.0,
        "dead tuples piled up while held: {began:?} -> {ended:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
