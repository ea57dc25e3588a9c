//! A real 2 KiB PoRep partition proved on the GPU under memory limits that force every form of
//! the device memory plan (`gpu.memory_limit`, `cuzk::gpu::plan`): the quotient parked in
//! host memory, the recorded shape streamed in pieces of rows, the assignment reloaded, the
//! points of every query streamed from host memory and MSMs cut into pieces. Under each limit
//! the proofs from host evaluations and from the recorded shape equal, byte for byte, those
//! the device makes without a limit (fixed randomness), the device never held more than the
//! limit, and whole proofs through the proving service verify with filecoin-proofs.
//!
//! They need a CUDA device, so they are `#[ignore]`d: without one they are reported as
//! ignored, never as passed; `scripts/gpu-device-run.sh tests` runs them with `--ignored`
//! (carried as carry/gpu_small), where a missing device fails them. They need the 2 KiB PoRep
//! test parameters in `$CUZK_TEST_PARAMS` and seal a sector.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use blstrs::Scalar;
use cuzk::gpu::plan::{self, Plan, Quotient, Sizes};
use cuzk::gpu::{GpuOptions, MsmTuning};
use cuzk::proofs::porep::{record_partition_by, CircuitCode};
use cuzk::proofs::{
    registry, Device, JobControl, PipelineOptions, PoRepRequest, ProofKind, ProofRequest,
    ProvingService,
};
use cuzk::prover::{
    prove_with_randomness, prove_witness_with_randomness, Backend, WitnessPartition,
};
use cuzk::sealing::seal_sector;
use cuzk::srs::load_srs;
use cuzk::synth::{Recorded, Recording};
use filecoin_proofs_api::RegisteredSealProof;

fn gpu(limit: Option<u64>) -> Arc<dyn Backend> {
    let options = GpuOptions {
        kernel_cache: std::env::var_os("CUZK_GPU_CACHE").map(Into::into),
        memory_limit: limit,
        ..GpuOptions::default()
    };
    cuzk::gpu::try_backend(&options).unwrap_or_else(|e| {
        panic!("no usable CUDA device, but the GPU tests were asked for (--ignored): {e}")
    })
}

/// What tells plans apart for this test: the forms of every stage, whether any query is
/// streamed, and whether the MSMs are cut.
fn form(p: &Plan, s: &Sizes) -> (bool, bool, bool, bool, bool, bool) {
    (
        p.quotient == Quotient::Parked,
        p.shape_resident,
        p.keep_assignment,
        p.resident == plan::Queries::ALL,
        p.resident == plan::Queries::NONE,
        p.piece_g1 < s.longest(false),
    )
}

/// One limit per form the planner picks between the smallest budget that fits and one that
/// holds everything, smallest first, and `None` (no limit) last.
fn limits_of_every_form(sizes: &Sizes) -> Vec<Option<u64>> {
    let tuning = MsmTuning::default();
    let bits = |n: u64, g2: bool| {
        let curve = if g2 {
            cuzk::gpu::msm::Curve::G2
        } else {
            cuzk::gpu::msm::Curve::G1
        };
        tuning.window_bits(n as usize, curve)
    };
    let need = plan::plan(1 << 20, sizes, &bits)
        .expect_err("a MiB is too small")
        .need;
    let mut forms = BTreeMap::new();
    let mut budget = need;
    loop {
        let p = plan::plan(budget, sizes, &bits).expect("the smallest need fits");
        forms.entry(form(&p, sizes)).or_insert(budget);
        if p.is_all_resident(sizes) {
            break;
        }
        budget += budget / 16;
    }
    let mut limits: Vec<u64> = forms.into_values().collect();
    limits.sort();
    println!("{} forms between {need} and {budget} bytes", limits.len());
    limits.into_iter().map(Some).chain([None]).collect()
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn every_memory_plan_proves_the_same_bytes_and_verifies() {
    let params = common::init(&[ProofKind::PoRep]);
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal_sector(dir.path(), RegisteredSealProof::StackedDrg2KiBV1_1, 1000, 5)
        .expect("sealing a 2 KiB sector");
    let id = registry::params_id(ProofKind::PoRep, 2048).unwrap();
    let srs = Arc::new(load_srs(&id.params_file(&params)).expect("the 2 KiB PoRep parameters"));
    let sizes = Sizes::from_queries(
        srs.h.len() as u64,
        srs.l.len() as u64,
        srs.a.len() as u64,
        srs.b_g1.len() as u64,
    );
    let c1 = &sealed.c1_json[..];
    let Recorded::Evaluations(partition) =
        record_partition_by(c1, 0, 2, Recording::Evaluations, CircuitCode::Ours).unwrap()
    else {
        panic!("evaluations expected");
    };
    let Recorded::Shape(shape, witness) =
        record_partition_by(c1, 0, 2, Recording::Shape, CircuitCode::Ours).unwrap()
    else {
        panic!("a shape expected");
    };
    let shape = Arc::new(shape);
    let (r, s) = (Scalar::from(5u64), Scalar::from(7u64));

    let limits = limits_of_every_form(&sizes);
    // The device without a limit gives the reference bytes (its paths are checked against
    // bellperson's by gpu_prepared).
    let prove = |backend: &Arc<dyn Backend>| {
        let prepared = backend.prepare(srs.clone()).unwrap();
        let from_evaluations = prove_with_randomness(prepared.as_ref(), partition.clone(), r, s)
            .expect("proof from host evaluations")
            .0;
        let w = WitnessPartition::new(witness.clone(), shape.clone()).unwrap();
        let from_shape = prove_witness_with_randomness(prepared.as_ref(), w, r, s)
            .expect("proof from the recorded shape")
            .0;
        (from_evaluations, from_shape, prepared.memory_plan())
    };
    let (want, want_shaped, _) = prove(&gpu(None));
    assert_eq!(want, want_shaped, "both paths give the same proof");

    let request = ProofRequest::PoRep(PoRepRequest {
        c1: sealed.c1_json.clone(),
        miner_id: 1000,
        sector_number: Some(sealed.sector_number),
    });
    for limit in limits {
        let backend = gpu(limit);
        backend.reset_memory_peak();
        let (ours, ours_shaped, plan) = prove(&backend);
        let memory = backend.memory().expect("a device accounts for its memory");
        println!(
            "limit {limit:?}: {}; peak {} of {} bytes",
            plan.as_deref().unwrap_or("-"),
            memory.peak,
            memory.budget
        );
        assert_eq!(ours, want, "from host evaluations under {limit:?}");
        assert_eq!(ours_shaped, want, "from the shape under {limit:?}");
        assert!(memory.peak <= memory.budget, "{memory:?}");

        // Whole proofs through the service, which records the shape with the first and proves
        // the second from it; both verify.
        let svc = ProvingService::with_devices(
            params.clone(),
            vec![Device::new(backend)],
            &PipelineOptions::default(),
        )
        .expect("the device workers start");
        for round in 0..2 {
            let out = svc
                .prove(&request, &JobControl::new())
                .unwrap_or_else(|e| panic!("proof {round} under {limit:?}: {e}"));
            assert!(
                sealed.verify_porep(&out.proof, &params).unwrap(),
                "proof {round} under {limit:?} verifies"
            );
        }
    }
}

/// A limit below the smallest form's need: the device refuses the set's proofs with an error
/// naming both sizes, and the service proves them on the CPU instead, verified.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn a_device_too_small_for_the_set_hands_its_partitions_to_the_cpu() {
    let params = common::init(&[ProofKind::PoRep]);
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal_sector(dir.path(), RegisteredSealProof::StackedDrg2KiBV1_1, 1000, 6)
        .expect("sealing a 2 KiB sector");
    let backend = gpu(Some(64 << 20));
    let id = registry::params_id(ProofKind::PoRep, 2048).unwrap();
    let srs = Arc::new(load_srs(&id.params_file(&params)).unwrap());
    let plan = backend.prepare(srs).unwrap().memory_plan().unwrap();
    assert!(plan.contains("cannot hold"), "{plan}");
    let svc = ProvingService::with_devices(
        params.clone(),
        vec![Device::new(backend)],
        &PipelineOptions::default(),
    )
    .expect("the device workers start");
    let request = ProofRequest::PoRep(PoRepRequest {
        c1: sealed.c1_json.clone(),
        miner_id: 1000,
        sector_number: Some(sealed.sector_number),
    });
    let out = svc
        .prove(&request, &JobControl::new())
        .expect("proved on the CPU");
    assert!(sealed.verify_porep(&out.proof, &params).unwrap());
    assert_eq!(svc.pipeline().fallback_proved, 1);
}
