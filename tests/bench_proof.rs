//! `cuzk bench <kind>` end to end on a freshly sealed 2 KiB sector's WindowPoSt and
//! WinningPoSt inputs, on the CPU backend: cuzk's runs, then filecoin-proofs' prover in a
//! process of its own, verified by filecoin-proofs' verifier; the table says what each side
//! ran. A check of what the benchmark measures and labels, not a measurement: it asserts no
//! times.
//!
//! Needs the 2 KiB WindowPoSt and WinningPoSt test parameters in `$CUZK_TEST_PARAMS`
//! (default /var/tmp/filecoin-proof-parameters); they are generated if missing. About half
//! a minute on two CPU cores.

mod common;

use std::process::Command;

use cuzk::proofs::ProofKind;

const CUZK: &str = env!("CARGO_BIN_EXE_cuzk");

/// Runs `cuzk bench --cpu --runs 1 KIND --input INPUT` and returns its stdout.
fn bench(params: &std::path::Path, kind: &str, input: &std::path::Path) -> String {
    let out = Command::new(CUZK)
        .arg("bench")
        .arg("--cpu")
        .arg("--param-dir")
        .arg(params)
        .args(["--runs", "1", kind, "--input"])
        .arg(input)
        .output()
        .expect("running cuzk bench");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr),
    );
    eprintln!("cuzk bench {kind}:\n{stdout}\n{stderr}");
    assert!(out.status.success(), "{kind}: {}", out.status);
    stdout
}

/// The row of `stdout` whose label starts with `label`.
fn row<'a>(stdout: &'a str, label: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no row {label:?} in\n{stdout}"))
}

/// The peak RSS column of a row, in GB.
fn peak_gb(row: &str) -> f64 {
    row.split_whitespace()
        .find_map(|w| w.strip_suffix("GB")?.parse().ok())
        .unwrap_or_else(|| panic!("no peak RSS in {row:?}"))
}

#[test]
fn the_reference_runs_alone_verified_and_is_labelled_so() {
    let params = common::init(&[ProofKind::WindowPoSt, ProofKind::WinningPoSt]);
    let dir = tempfile::tempdir().unwrap();
    let sector = cuzk::sealing::seal_sector(
        &dir.path().join("sector"),
        filecoin_proofs_api::RegisteredSealProof::StackedDrg2KiBV1_1,
        1000,
        3,
    )
    .expect("sealing a 2 KiB sector");
    let inputs = [
        (
            "window-post",
            serde_json::to_vec(&sector.window_post_input([3; 32]).unwrap()).unwrap(),
            "verify_window_post",
        ),
        (
            "winning-post",
            serde_json::to_vec(&sector.winning_post_input([3; 32]).unwrap()).unwrap(),
            "verify_winning_post",
        ),
    ];
    for (kind, json, verifier) in inputs {
        let input = dir.path().join(format!("{kind}.json"));
        std::fs::write(&input, json).unwrap();
        let stdout = bench(&params, kind, &input);
        assert!(
            stdout.contains("reference: filecoin-proofs' CPU prover")
                && stdout.contains("both include proving and verifying"),
            "{stdout}"
        );
        // cuzk's runs name the prover that made the proof and the fallback's share.
        for label in ["cuzk cold (cpu (", "cuzk warm (cpu ("] {
            let r = row(&stdout, label);
            assert!(r.contains("fallback partitions 0"), "{r}");
            assert!(peak_gb(r) > 0.0, "{r}");
        }
        // The reference: its prover and its verifier, timed apart, and a peak RSS of its own
        // process (a few tens of MB for these circuits, far below cuzk's resident set).
        let r = row(&stdout, "filecoin-proofs (CPU, own process)");
        assert!(r.contains(verifier), "{r}");
        assert!(r.contains(" 1.000x "), "{r}");
        let peak = peak_gb(r);
        assert!(peak > 0.0 && peak < 1.0, "{r}");
    }
}
