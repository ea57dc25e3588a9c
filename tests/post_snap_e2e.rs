//! WinningPoSt, WindowPoSt and SnapDeals at 2 KiB through the same core as PoRep: real
//! vanilla proofs from filecoin-proofs for a freshly sealed sector, proved by cuzk, checked by
//! filecoin-proofs' own verifiers.

mod common;

use std::sync::Arc;

use cuzk::pipeline::{JobControl, ProveError, ProvingService};
use cuzk::proofs::{ProofKind, ProofRequest};
use cuzk::prover::cpu::CpuBackend;
use cuzk::sealing::{
    seal_sector, verify_snap, verify_window_post_deadline, window_post_deadline_input,
};
use filecoin_proofs_api::RegisteredSealProof;

fn random32() -> [u8; 32] {
    let mut r: [u8; 32] = rand::random();
    r[31] &= 0x3f;
    r
}

fn expect_invalid(svc: &ProvingService, req: ProofRequest, what: &str) {
    // The cheap check made at Submit catches it too.
    assert!(
        matches!(req.check(), Err(ProveError::InvalidInput(_))),
        "{what}: the check let it through"
    );
    match svc.prove(&req, &JobControl::new()) {
        Err(ProveError::InvalidInput(_)) => {}
        other => panic!(
            "{what}: expected InvalidInput, got {:?}",
            other.map(|o| o.proof.len())
        ),
    }
}

/// Vanilla proofs that do not fit the input's public values: the input check lets them
/// through (they decode), and the job fails with InvalidInput, never proved again without
/// its devices: PoSt's partitioning verifies them before proving, the SnapDeals circuit
/// refuses them in synthesis, and after a failed verification the vanilla proofs' check
/// would name the input as the cause (checked here on its own).
fn expect_rejected(svc: &ProvingService, req: ProofRequest, what: &str) {
    req.check().expect("mismatched vanilla proofs still decode");
    match req.check_vanilla() {
        Err(ProveError::InvalidInput(why)) => assert!(why.contains("verify"), "{why}"),
        other => panic!("{what}: the vanilla check gave {other:?}"),
    }
    match svc.prove(&req, &JobControl::new()) {
        Err(ProveError::InvalidInput(_)) => {}
        other => panic!(
            "{what}: expected InvalidInput, got {:?}",
            other.map(|o| o.proof.len())
        ),
    }
}

#[test]
fn post_proofs_verify_with_filecoin_proofs() {
    let params = common::init(&[ProofKind::WinningPoSt, ProofKind::WindowPoSt]);
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal_sector(
        dir.path(),
        RegisteredSealProof::StackedDrg2KiBV1_1,
        1000,
        11,
    )
    .unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let other = seal_sector(
        other_dir.path(),
        RegisteredSealProof::StackedDrg2KiBV1_1,
        1000,
        12,
    )
    .unwrap();
    let svc = ProvingService::new(params, Arc::new(CpuBackend::default()));
    let randomness = random32();

    // WinningPoSt.
    let input = sealed.winning_post_input(randomness).unwrap();
    let req = ProofRequest::WinningPoSt {
        input: serde_json::to_vec(&input).unwrap(),
    };
    req.check().expect("a valid input passes the check");
    req.check_vanilla()
        .expect("a valid input's vanilla proofs verify");
    let out = svc.prove(&req, &JobControl::new()).expect("WinningPoSt");
    assert_eq!(out.proof.len(), 192);
    assert!(sealed.verify_winning_post(&randomness, &out.proof).unwrap());
    // Vanilla proofs made for other randomness do not prove this randomness.
    let mut stale = sealed.winning_post_input(random32()).unwrap();
    stale.randomness = randomness;
    expect_rejected(
        &svc,
        ProofRequest::WinningPoSt {
            input: serde_json::to_vec(&stale).unwrap(),
        },
        "stale randomness",
    );

    // WindowPoSt.
    let input = sealed.window_post_input(randomness).unwrap();
    let req = ProofRequest::WindowPoSt {
        input: serde_json::to_vec(&input).unwrap(),
    };
    req.check().expect("a valid input passes the check");
    req.check_vanilla()
        .expect("a valid input's vanilla proofs verify");
    let out = svc.prove(&req, &JobControl::new()).expect("WindowPoSt");
    assert!(sealed.verify_window_post(&randomness, &out.proof).unwrap());
    assert!(!other
        .verify_window_post(&randomness, &out.proof)
        .unwrap_or(false));
    // Another sector's vanilla proofs, made for other randomness: rejected. (The miner id is
    // not a public input of PoSt circuits, so it cannot be used to make a proof fail.)
    let mut stale = other.window_post_input(random32()).unwrap();
    stale.randomness = randomness;
    expect_rejected(
        &svc,
        ProofRequest::WindowPoSt {
            input: serde_json::to_vec(&stale).unwrap(),
        },
        "stale randomness",
    );

    // A whole deadline (no partition_index): three sectors, two partitions at 2 KiB (a
    // partition holds two), proved in one job and checked by filecoin-proofs'
    // verify_window_post as one proof.
    let third_dir = tempfile::tempdir().unwrap();
    let third = seal_sector(
        third_dir.path(),
        RegisteredSealProof::StackedDrg2KiBV1_1,
        1000,
        13,
    )
    .unwrap();
    let deadline = [&third, &sealed, &other];
    let mut input = window_post_deadline_input(&deadline, randomness).unwrap();
    assert_eq!(input.partition_index, None);
    input.vanilla_proofs.reverse(); // any order: sorted by sector id
    let req = ProofRequest::WindowPoSt {
        input: serde_json::to_vec(&input).unwrap(),
    };
    req.check().expect("a whole deadline passes the check");
    req.check_vanilla()
        .expect("a whole deadline's vanilla proofs verify");
    let out = svc
        .prove(&req, &JobControl::new())
        .expect("a whole deadline");
    assert_eq!((out.partitions, out.proof.len()), (2, 2 * 192));
    assert!(verify_window_post_deadline(&deadline, &randomness, &out.proof).unwrap());
    // Not a proof of two of the sectors, nor with its partitions swapped.
    assert!(!verify_window_post_deadline(&deadline[..2], &randomness, &out.proof).unwrap_or(false));
    let swapped = [&out.proof[192..], &out.proof[..192]].concat();
    assert!(!verify_window_post_deadline(&deadline, &randomness, &swapped).unwrap_or(false));
    // One sector: a deadline of one partition, the same bytes' shape as a partition's.
    let single = window_post_deadline_input(&[&sealed], randomness).unwrap();
    let out = svc
        .prove(
            &ProofRequest::WindowPoSt {
                input: serde_json::to_vec(&single).unwrap(),
            },
            &JobControl::new(),
        )
        .expect("a deadline of one sector");
    assert_eq!((out.partitions, out.proof.len()), (1, 192));
    assert!(sealed.verify_window_post(&randomness, &out.proof).unwrap());
    // A sector twice is refused at the check, before any proving.
    let mut twice = input.clone();
    twice.vanilla_proofs.push(twice.vanilla_proofs[0].clone());
    expect_invalid(
        &svc,
        ProofRequest::WindowPoSt {
            input: serde_json::to_vec(&twice).unwrap(),
        },
        "a sector twice in a deadline",
    );
    // With a partition_index, three sectors are more than a partition holds.
    let mut too_many = input.clone();
    too_many.partition_index = Some(0);
    expect_invalid(
        &svc,
        ProofRequest::WindowPoSt {
            input: serde_json::to_vec(&too_many).unwrap(),
        },
        "three sectors in one partition",
    );
    let input = sealed.window_post_input(randomness).unwrap();

    // Malformed inputs.
    expect_invalid(
        &svc,
        ProofRequest::WinningPoSt {
            input: b"{".to_vec(),
        },
        "truncated JSON",
    );
    let mut garbage = serde_json::to_value(&input).unwrap();
    garbage["vanilla_proofs"] = serde_json::json!(["AAAA"]);
    expect_invalid(
        &svc,
        ProofRequest::WindowPoSt {
            input: garbage.to_string().into_bytes(),
        },
        "garbage vanilla proof",
    );
    // A WindowPoSt input sent as WinningPoSt.
    expect_invalid(
        &svc,
        ProofRequest::WinningPoSt {
            input: serde_json::to_vec(&input).unwrap(),
        },
        "wrong kind",
    );
}

#[test]
fn snap_deals_proof_verifies_with_filecoin_proofs() {
    let params = common::init(&[ProofKind::SnapDeals]);
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal_sector(
        dir.path(),
        RegisteredSealProof::StackedDrg2KiBV1_1,
        1000,
        13,
    )
    .unwrap();
    let input = sealed.snap_update(&dir.path().join("snap")).unwrap();
    let svc = ProvingService::new(params, Arc::new(CpuBackend::default()));
    let req = ProofRequest::SnapDeals {
        input: serde_json::to_vec(&input).unwrap(),
    };
    req.check().expect("a valid input passes the check");
    req.check_vanilla()
        .expect("a valid input's vanilla proofs verify");
    let out = svc.prove(&req, &JobControl::new()).expect("SnapDeals");
    assert!(verify_snap(&input, &out.proof).unwrap());

    // The update's vanilla proofs against another sector's commitments.
    let mut wrong = input.clone();
    wrong.comm_r_old = sealed_other_comm_r();
    expect_rejected(
        &svc,
        ProofRequest::SnapDeals {
            input: serde_json::to_vec(&wrong).unwrap(),
        },
        "other comm_r_old",
    );
    let mut short = input.clone();
    short.vanilla_proofs.clear();
    expect_invalid(
        &svc,
        ProofRequest::SnapDeals {
            input: serde_json::to_vec(&short).unwrap(),
        },
        "no partitions",
    );
}

fn sealed_other_comm_r() -> [u8; 32] {
    let dir = tempfile::tempdir().unwrap();
    seal_sector(
        dir.path(),
        RegisteredSealProof::StackedDrg2KiBV1_1,
        1000,
        14,
    )
    .unwrap()
    .comm_r
}
