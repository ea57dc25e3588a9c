//! Satisfiable C1 outputs made without sealing (`proofs::porep::satisfiable`): storage-proofs'
//! vanilla verifier accepts them, they have the structure of a sealed sector's C1 output, and
//! at 2 KiB cuzk proves one into a proof filecoin-proofs' `verify_seal` accepts.

mod common;

use std::sync::Arc;
use std::time::Instant;

use cuzk::pipeline::{JobControl, ProvingService};
use cuzk::proofs::porep::satisfiable::{c1_output, SatisfiableC1};
use cuzk::proofs::{PoRepRequest, ProofKind, ProofRequest};
use cuzk::prover::cpu::CpuBackend;
use cuzk::sealing::{seal_sector, verify_c1_proof};
use filecoin_proofs_api::RegisteredSealProof;
use serde_json::Value;

const MINER: u64 = 1000;

fn request(s: &SatisfiableC1, c1: Vec<u8>) -> ProofRequest {
    ProofRequest::PoRep(PoRepRequest {
        c1,
        miner_id: s.miner_id,
        sector_number: Some(s.sector_number),
    })
}

/// The commitment filecoin-proofs gives a sector-sized piece of zeros (the CC sector's comm_d;
/// its `compute_comm_d` of no pieces would hash the whole sector's zeros).
fn cc_comm_d(size: u64) -> [u8; 32] {
    let unpadded =
        filecoin_proofs::UnpaddedBytesAmount::from(filecoin_proofs::PaddedBytesAmount(size));
    filecoin_proofs::pieces::zero_padding(unpadded)
        .unwrap()
        .commitment
}

/// Where `a` and `b` differ in structure: object keys, array lengths, kinds of value (the
/// numbers themselves may differ).
fn structure_diff(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let (kx, ky): (Vec<_>, Vec<_>) = (x.keys().collect(), y.keys().collect());
            if kx != ky {
                return Some(format!("{at}: keys {kx:?} against {ky:?}"));
            }
            x.iter()
                .find_map(|(k, v)| structure_diff(v, &y[k], &format!("{at}.{k}")))
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(format!("{at}: {} elements against {}", x.len(), y.len()));
            }
            x.iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (v, w))| structure_diff(v, w, &format!("{at}[{i}]")))
        }
        (Value::Number(_), Value::Number(_))
        | (Value::String(_), Value::String(_))
        | (Value::Bool(_), Value::Bool(_))
        | (Value::Null, Value::Null) => None,
        _ => Some(format!("{at}: {a} against {b}")),
    }
}

/// A copy of the C1 JSON with the first column row of the first challenge changed.
fn with_changed_label(c1: &[u8]) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(c1).unwrap();
    let row = v["vanilla_proofs"]["StackedDrg2KiBV1"][0][0]["replica_column_proofs"]["c_x"]
        ["column"]["rows"][0]
        .as_array_mut()
        .expect("a row's bytes");
    row[0] = Value::from((row[0].as_u64().unwrap() + 1) % 256);
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn a_2kib_satisfiable_c1_verifies_has_a_sealed_c1s_structure_and_proves() {
    let params = common::init(&[ProofKind::PoRep]);
    let s = c1_output(2048, MINER, 5, 42).expect("a satisfiable C1 output");
    assert_eq!(s.c1.comm_d, cc_comm_d(2048), "comm_d is the CC sector's");
    request(&s, s.c1_json.clone())
        .check()
        .expect("the input check");
    request(&s, s.c1_json.clone())
        .check_vanilla()
        .expect("storage-proofs' vanilla verifier accepts it");
    // Deterministic from the seed; another seed gives another output.
    assert_eq!(c1_output(2048, MINER, 5, 42).unwrap().c1_json, s.c1_json);
    assert_ne!(
        c1_output(2048, MINER, 5, 43).unwrap().c1.comm_r,
        s.c1.comm_r
    );
    // A changed label is caught, and so is another miner.
    let bad = request(&s, with_changed_label(&s.c1_json)).check_vanilla();
    assert!(bad.is_err(), "a changed column verified");
    let other = ProofRequest::PoRep(PoRepRequest {
        c1: s.c1_json.clone(),
        miner_id: MINER + 1,
        sector_number: Some(5),
    });
    assert!(other.check().is_err());

    // The structure of a really sealed sector's C1 output.
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal_sector(
        dir.path(),
        RegisteredSealProof::StackedDrg2KiBV1_1,
        MINER,
        5,
    )
    .expect("sealing a 2 KiB sector");
    let (ours, theirs): (Value, Value) = (
        serde_json::from_slice(&s.c1_json).unwrap(),
        serde_json::from_slice(&sealed.c1_json).unwrap(),
    );
    assert_eq!(structure_diff(&ours, &theirs, "c1"), None);

    // cuzk proves it, and filecoin-proofs' verifier accepts the proof (it could not, were
    // the circuit not satisfied); a tampered proof is refused.
    let svc = ProvingService::new(params.clone(), Arc::new(CpuBackend::default()));
    let out = svc
        .prove(&request(&s, s.c1_json.clone()), &JobControl::new())
        .expect("C2 of the satisfiable C1 output");
    assert!(verify_c1_proof(&s.c1_json, MINER, 5, &out.proof).unwrap());
    let mut tampered = out.proof.clone(); // A and C swapped: valid points, a wrong proof
    tampered[..48].copy_from_slice(&out.proof[144..]);
    tampered[144..].copy_from_slice(&out.proof[..48]);
    assert!(!verify_c1_proof(&s.c1_json, MINER, 5, &tampered).unwrap());
    assert!(!verify_c1_proof(&s.c1_json, MINER, 6, &out.proof).unwrap_or(false));
}

/// 4-12 s on the 2-core dev machine (built in 1.7-3.0 s, verified in 2.6-9.1 s, by load;
/// 38 MB of JSON).
#[test]
fn a_32gib_satisfiable_c1_passes_the_vanilla_verifier() {
    let size = 32u64 << 30;
    let start = Instant::now();
    let s = c1_output(size, MINER, 9, 7).expect("a 32 GiB satisfiable C1 output");
    let built = start.elapsed();
    assert_eq!(s.c1.comm_d, cc_comm_d(size));
    let start = Instant::now();
    request(&s, s.c1_json.clone())
        .check_vanilla()
        .expect("storage-proofs' vanilla verifier accepts it");
    eprintln!(
        "32 GiB satisfiable C1: built in {:.1} s ({:.1} MB of JSON), vanilla-verified in {:.1} s",
        built.as_secs_f64(),
        s.c1_json.len() as f64 / 1e6,
        start.elapsed().as_secs_f64()
    );
}
