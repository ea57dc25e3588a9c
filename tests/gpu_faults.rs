//! Device faults on a real GPU: faults injected on the GPU's prepared sets
//! (`prover::fault::FaultyBackend`, what `debug.fault_*` does in the daemon) while it proves
//! a 2 KiB PoRep. A device error in the H stage (the fused quotient and H MSM) sends the
//! partition to the CPU prover (no other device is left), the GPU is quarantined, and the
//! proof verifies; a wrong witness sum is caught by verification, the job is proved again
//! without the GPU, and only the verified proof is returned. The GPU is used through its
//! shaped path (recorded shapes, A, B, C evaluated on the device), as the daemon uses it.
//!
//! It needs a CUDA device, so it is `#[ignore]`d: without one it is reported as ignored,
//! never as passed; `scripts/gpu-device-run.sh tests` runs it with `--ignored` (carried as
//! carry/gpu_faults), where a missing device fails it. It needs the 2 KiB PoRep test
//! parameters in `$CUZK_TEST_PARAMS` (generated there when missing) and seals a sector.

mod common;

use cuzk::config::{FaultConfig, FaultKind, FaultStage};
use cuzk::gpu::GpuOptions;
use cuzk::pipeline::{
    Device, HealthPolicy, HealthState, JobControl, PipelineOptions, ProvingService,
};
use cuzk::proofs::{PoRepRequest, ProofKind, ProofRequest};
use cuzk::prover::fault::FaultyBackend;
use cuzk::sealing::seal_sector;
use filecoin_proofs_api::RegisteredSealProof;

fn gpu_options() -> GpuOptions {
    GpuOptions {
        kernel_cache: std::env::var_os("CUZK_GPU_CACHE").map(Into::into),
        ..GpuOptions::default()
    }
}

/// A service on the GPU alone, faults injected as `kind` says in `stage`, on every call.
fn faulty_gpu_service(
    params: &std::path::Path,
    stage: FaultStage,
    kind: FaultKind,
) -> ProvingService {
    let gpu = cuzk::gpu::try_backend(&gpu_options()).unwrap_or_else(|e| {
        panic!("no usable CUDA device, but the GPU tests were asked for (--ignored): {e}")
    });
    assert!(gpu.is_accelerator());
    let faulty = FaultyBackend::wrap(
        gpu,
        FaultConfig {
            device: 0,
            stage,
            kind,
            every: 1,
            limit: 0,
        },
    );
    let options = PipelineOptions {
        health: HealthPolicy {
            quarantine_after: 1,
            ..HealthPolicy::default()
        },
        ..PipelineOptions::default()
    };
    ProvingService::with_devices(params.to_path_buf(), vec![Device::new(faulty)], &options)
        .expect("the device workers start")
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn gpu_faults_are_retried_on_the_cpu_and_never_return_an_invalid_proof() {
    let params = common::init(&[ProofKind::PoRep]);
    let dir = tempfile::tempdir().unwrap();
    let sealed = seal_sector(dir.path(), RegisteredSealProof::StackedDrg2KiBV1_1, 1000, 3)
        .expect("sealing a 2 KiB sector");
    let request = ProofRequest::PoRep(PoRepRequest {
        c1: sealed.c1_json.clone(),
        miner_id: 1000,
        sector_number: Some(sealed.sector_number),
    });

    // A device error: the partition goes to the CPU prover, the GPU is quarantined.
    let svc = faulty_gpu_service(&params, FaultStage::H, FaultKind::Error);
    let out = svc
        .prove(&request, &JobControl::new())
        .expect("proved on the CPU");
    assert!(
        sealed.verify_porep(&out.proof, &params).unwrap(),
        "a valid proof"
    );
    let health = svc.health();
    println!("after a device error: {health:?}");
    assert_eq!(health[0].state, HealthState::Quarantined);
    assert_eq!(health[0].failures, 1);
    assert!(health[0]
        .last_error
        .as_deref()
        .is_some_and(|e| e.contains("injected fault")));
    assert_eq!(svc.pipeline().fallback_proved, 1);
    assert_eq!(svc.pipeline().devices[0].partitions_failed, 1);
    drop(svc);

    // A wrong result: verification catches it, the job is proved again without the GPU.
    let svc = faulty_gpu_service(&params, FaultStage::Witness, FaultKind::Wrong);
    let out = svc
        .prove(&request, &JobControl::new())
        .expect("proved again");
    assert!(
        sealed.verify_porep(&out.proof, &params).unwrap(),
        "a valid proof"
    );
    let health = svc.health();
    println!("after a wrong result: {health:?}");
    assert_eq!(health[0].state, HealthState::Quarantined);
    assert_eq!(health[0].failures, 1);
    assert!(health[0]
        .last_error
        .as_deref()
        .is_some_and(|e| e.contains("wrong result")));
    let stats = svc.pipeline();
    assert_eq!(
        (stats.fallback_proved, stats.devices[0].partitions_proved),
        (1, 1)
    );
}
