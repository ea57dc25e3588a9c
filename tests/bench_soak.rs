//! `cuzk bench soak` end to end: a freshly sealed 2 KiB sector's inputs, three real proofs
//! (two PoRep C2, one WinningPoSt) through a real `cuzkd` on the CPU backend; the report's
//! table is printed, the CSV written, and the run exits 0. A smoke test of the benchmark,
//! not a measurement: it asserts no figures.
//!
//! Needs the 2 KiB PoRep and WinningPoSt test parameters in `$CUZK_TEST_PARAMS` (default
//! /var/tmp/filecoin-proof-parameters); they are generated if missing. About a minute on
//! two CPU cores.

mod common;

use std::process::Command;
use std::time::Instant;

use cuzk::proofs::ProofKind;

const CUZK: &str = env!("CARGO_BIN_EXE_cuzk");
const CUZKD: &str = env!("CARGO_BIN_EXE_cuzkd");

#[test]
fn soak_of_three_proofs_prints_its_table_and_exits_0() {
    let params = common::init(&[ProofKind::PoRep, ProofKind::WinningPoSt]);
    let dir = tempfile::tempdir().unwrap();
    common::sample_inputs(dir.path(), 7);

    let csv = dir.path().join("samples.csv");
    let start = Instant::now();
    let out = Command::new(CUZK)
        .arg("bench")
        .arg("--param-dir")
        .arg(&params)
        .args([
            "soak",
            "--proofs",
            "3",
            "--winning-every",
            "3",
            "--sector-number",
            "7",
        ])
        .arg("--sample")
        .arg(dir.path())
        .arg("--daemon")
        .arg(CUZKD)
        .arg("--csv")
        .arg(&csv)
        .args(["--set", "proving.backend=\"cpu\""])
        .output()
        .expect("running cuzk bench soak");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    eprintln!(
        "cuzk bench soak took {:?}\n{stdout}\n{stderr}",
        start.elapsed()
    );
    assert!(out.status.success(), "{}", out.status);
    assert!(
        stdout.contains("cuzk bench soak: 3 proofs (2 PoRep C2, 1 WinningPoSt)"),
        "{stdout}"
    );
    assert!(stdout.contains(", 0 failed,"), "{stdout}");
    for row in [
        "| measure |",
        "| daemon RSS:",
        "| RSS drift |",
        "| open fds:",
        "| fd growth",
    ] {
        assert!(stdout.contains(row), "no {row:?} in {stdout}");
    }
    let samples = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = samples.lines().collect();
    assert_eq!(lines.first(), Some(&"proofs,seconds,rss_bytes,open_fds"));
    assert_eq!(lines.len(), 5, "{samples}");
    assert!(
        lines.last().is_some_and(|l| l.starts_with("3,")),
        "{samples}"
    );
}
