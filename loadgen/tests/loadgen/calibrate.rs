//! `ackbench calibrate` through the binary: smoke's gates, one run per condition with a short
//! warm-up, against a throwaway PostgreSQL and the workspace's broker. The calibration must
//! be written in its documented shape, and the gate on fusion must catch fusion capped at one
//! row per flush (and raise no false alarm on the broker as built).

use serde_json::Value;

use crate::common::{ackbench, one_real_run_at_a_time, temp_dir, Outcome};

const FUSION_GATE: &str = "fusion cuts ack commits";

/// The gate named `name` in calibration.json.
fn gate<'a>(calibration: &'a Value, name: &str) -> &'a Value {
    calibration["gates"]
        .as_array()
        .expect("gates")
        .iter()
        .find(|g| g["gate"] == name)
        .unwrap_or_else(|| panic!("no gate `{name}` in {calibration:#}"))
}

#[test]
fn calibrating_smoke_counts_false_alarms_and_catches_a_broken_fusion() {
    let _real_run = one_real_run_at_a_time();
    let dir = temp_dir("calibrate", "smoke");
    let smoke = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/smoke.toml");
    let text = std::fs::read_to_string(smoke).unwrap();
    let out = dir.join("out");
    let out_arg = out.to_str().unwrap();
    let Outcome {
        code,
        stdout,
        stderr,
    } = ackbench(
        &dir,
        "calibrate",
        &text,
        // --confirm as CI would run the gates: a window whose seconds happen to be noisy gets
        // another round before its verdict counts.
        &[
            "--runs",
            "1",
            "--warmup",
            "1",
            "--confirm",
            "2",
            "--out",
            out_arg,
        ],
    );
    let file = out.join("calibration.json");
    let c: Value = serde_json::from_str(
        &std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{}: {e}\n{stdout}\n{stderr}", file.display())),
    )
    .unwrap();
    assert_eq!(c["calibration_version"], 1);
    assert_eq!(c["scenario"], "smoke");
    assert_eq!(
        (c["runs"].as_u64(), c["duration_secs"].as_f64()),
        (Some(1), Some(6.0))
    );
    assert_eq!(c["gates"].as_array().unwrap().len(), 2, "{c:#}");

    let fusion = gate(&c, FUSION_GATE);
    assert_eq!(fusion["figure"], "ack_commits_per_ack");
    assert_eq!(fusion["regression"], "fusion-one-row");
    assert_eq!(fusion["aa"]["runs"], 1);
    assert_eq!(fusion["aa"]["false_alarms"], 0, "{c:#}");
    let own = fusion["regressions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["targets"] == true)
        .expect("the gate's own regression");
    assert_eq!(own["regression"], "fusion-one-row");
    assert_eq!(own["setting"], "QUEEN_TEST_ACK_FUSION_MAX_ROWS=1");
    assert_eq!(
        (own["runs"].as_u64(), own["caught"].as_u64()),
        (Some(1), Some(1)),
        "{c:#}"
    );
    let estimate = own["estimates"][0].as_array().expect("an interval");
    assert!(estimate[1].as_f64().unwrap() > 0.9, "{estimate:?}");

    let registry = gate(&c, "registry cuts PostgreSQL time");
    assert_eq!(registry["regression"], "registry-miss");
    assert_eq!(registry["regressions"].as_array().unwrap().len(), 2);

    // Every run's results are kept, and the table is printed.
    for run in ["aa-1", "fusion-one-row-1", "registry-miss-1"] {
        assert!(out.join(run).join("results.json").exists(), "{run}");
    }
    assert!(
        stdout.contains("| gate | bound | A/A false alarms"),
        "{stdout}"
    );
    assert!(
        code == 0 || code == 1,
        "calibration ran to its end (exit {code}):\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
