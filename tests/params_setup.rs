//! cuzk's own Groth16 setup (`params_gen::setup`, fresh secrets: NOT the ceremony's
//! parameters) at 2 KiB: cuzk proves a C1 output with the parameters it wrote, filecoin-proofs'
//! `verify_seal` accepts the proof with the `.vk` it wrote, and refuses a tampered one.

use std::sync::Arc;

use cuzk::params_gen::setup::{generate_fresh, Device};
use cuzk::pipeline::{JobControl, ProvingService};
use cuzk::proofs::porep::satisfiable::c1_output;
use cuzk::proofs::{PoRepRequest, ProofKind, ProofRequest};
use cuzk::prover::cpu::CpuBackend;
use cuzk::sealing::verify_c1_proof;

/// A directory for this test's fresh parameters (1.1 GB), removed when the test ends (a static
/// would never be dropped, and each run left its copy behind); filecoin-proofs reads
/// `FIL_PROOFS_PARAMETER_CACHE` once per process, so it is set before anything else reads it
/// (this binary's only test).
fn fresh_dir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("cuzk-fresh-params-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", d.path());
    d
}

#[test]
fn fresh_2kib_parameters_prove_and_filecoin_proofs_verifies() {
    let held = fresh_dir();
    let dir = held.path().to_path_buf();
    let mut log = |m: &str| eprintln!("setup: {m}");
    let seed: [u8; 32] = rand::random();
    let r = generate_fresh(&dir, ProofKind::PoRep, 2048, seed, &Device::Cpu, &mut log)
        .expect("fresh parameters");
    eprintln!(
        "2 KiB fresh setup on the CPU: record {:.1} s, scalars {:.1} s, points and files {:.1} s, \
         {:.1} MB",
        r.record.as_secs_f64(),
        r.scalars.as_secs_f64(),
        r.points.as_secs_f64(),
        r.bytes as f64 / 1e6
    );
    assert!(r
        .params
        .ends_with(r.id.params_file(std::path::Path::new(""))));

    let s = c1_output(2048, 1000, 3, 11).unwrap();
    let svc = ProvingService::new(dir.clone(), Arc::new(CpuBackend::default()));
    let req = ProofRequest::PoRep(PoRepRequest {
        c1: s.c1_json.clone(),
        miner_id: 1000,
        sector_number: Some(3),
    });
    let out = svc
        .prove(&req, &JobControl::new())
        .expect("C2 with fresh parameters");
    assert!(
        verify_c1_proof(&s.c1_json, 1000, 3, &out.proof).unwrap(),
        "filecoin-proofs refuses a proof made with the fresh parameters"
    );
    // A and C swapped: valid points, a wrong proof, refused by the pairing check itself.
    let mut swapped = out.proof.clone();
    swapped[..48].copy_from_slice(&out.proof[144..]);
    swapped[144..].copy_from_slice(&out.proof[..48]);
    assert!(!verify_c1_proof(&s.c1_json, 1000, 3, &swapped).unwrap());
    // A flipped bit: refused (mostly as a point off the curve).
    let mut flipped = out.proof.clone();
    flipped[100] ^= 1;
    assert!(!verify_c1_proof(&s.c1_json, 1000, 3, &flipped).unwrap_or(false));
}
