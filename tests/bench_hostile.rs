//! `cuzk bench hostile` end to end: a real `cuzkd` on the CPU backend attacked by 8 clients
//! sending 20,000 fuzzed frames, while real WinningPoSt proofs of a freshly sealed 2 KiB
//! sector go through it. A smoke test of the benchmark, not the goal run (10^7 frames from
//! 100 clients, recorded in docs/benchmarks.md): it asserts the outcome (no panic, no failed
//! proof, every frame sent and answers read), not figures.
//!
//! Needs the 2 KiB PoRep and WinningPoSt test parameters in `$CUZK_TEST_PARAMS` (default
//! /var/tmp/filecoin-proof-parameters); they are generated if missing.

mod common;

use std::process::Command;

use cuzk::proofs::ProofKind;

const CUZK: &str = env!("CARGO_BIN_EXE_cuzk");
const CUZKD: &str = env!("CARGO_BIN_EXE_cuzkd");

#[test]
fn hostile_clients_do_not_stop_honest_proofs() {
    let params = common::init(&[ProofKind::PoRep, ProofKind::WinningPoSt]);
    let dir = tempfile::tempdir().unwrap();
    common::sample_inputs(dir.path(), 9);

    let out = Command::new(CUZK)
        .arg("bench")
        .arg("--param-dir")
        .arg(&params)
        .args([
            "hostile",
            "--clients",
            "8",
            "--frames",
            "20000",
            "--proofs",
            "2",
            "--winning-every",
            "1",
            "--sector-number",
            "9",
        ])
        .arg("--sample")
        .arg(dir.path())
        .arg("--daemon")
        .arg(CUZKD)
        .args(["--set", "proving.backend=\"cpu\""])
        .output()
        .expect("running cuzk bench hostile");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    eprintln!("{stdout}\n{stderr}");
    assert!(out.status.success(), "{}", out.status);
    assert!(
        stdout.contains("| fuzzed frames sent | 20000 in "),
        "{stdout}"
    );
    assert!(
        stdout.contains("| daemon crashes, panics in its log | 0, 0 | 0 | met |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| honest proofs failed | 0 of "),
        "{stdout}"
    );
    let answers = stdout
        .lines()
        .find_map(|l| l.strip_prefix("| answers read (bytes) | "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .expect("an answers row");
    // Most frames are answered one by one; connections closed for a frame over the limit or
    // cut off answer fewer.
    assert!(answers > 10_000, "{answers} answers for 20000 frames");
}
