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

/// `cuzk bench hostile --grpc` for a few seconds: 20 HTTP/2 attackers and the refused
/// peers on the gRPC socket of a real CPU-only cuzkd (no parameters: the honest client's
/// Ping and GetStatus need none). Asserts the outcome: the daemon alive with no panic,
/// every honest round served on both sockets, the refused peers and the connections over a
/// uid's limit closed within 1 s.
#[test]
fn grpc_attackers_do_not_crash_the_daemon_or_stop_the_honest_client() {
    if !nix::unistd::geteuid().is_root() {
        panic!("the --grpc benchmark runs its clients under uids of their own: run as root");
    }
    let params = tempfile::tempdir().unwrap();
    let out = Command::new(CUZK)
        .arg("bench")
        .arg("--param-dir")
        .arg(params.path())
        .args(["hostile", "--grpc", "--clients", "20", "--seconds", "5"])
        .arg("--daemon")
        .arg(CUZKD)
        .args(["--set", "proving.backend=\"cpu\""])
        .output()
        .expect("running cuzk bench hostile --grpc");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    eprintln!("{stdout}\n{stderr}");
    assert!(out.status.success(), "{}", out.status);
    let row = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("| {name} | ")))
            .unwrap_or_else(|| panic!("no row {name:?}"))
            .to_string()
    };
    assert!(
        row("daemon crashes, panics in its log").starts_with("0 (alive), 0 | 0, 0 | met |"),
        "{stdout}"
    );
    let honest = row("honest rounds failed");
    assert!(honest.starts_with("0 of "), "{honest}");
    let rounds: u64 = honest[5..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count of honest rounds");
    assert!(rounds >= 5, "{rounds} honest rounds in 5 s");
    let refused = row("refused peers' connections: closed within (slowest), still open after 1 s");
    assert!(refused.ends_with("| met |"), "{refused}");
    let over = row("over-limit connections (a uid past its share, after the attack): refused with GOAWAY, slowest close, still open after 1 s");
    assert!(
        over.starts_with("20 of 20: ") && over.ends_with("| met |"),
        "{over}"
    );
    let opened: u64 = row("hostile gRPC connections opened (connects refused)")
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count of hostile connections");
    assert!(opened >= 20, "{opened} hostile connections");
}
