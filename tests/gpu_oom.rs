//! Device memory running out: the GPU backend answers with a typed out-of-memory error (after
//! dropping what it caches and trying again), never a panic, which reaches the prover as its
//! retryable `ProverError::OutOfMemory`; and it works again once memory is back. A test binary of its own, so that no other GPU test runs while this one holds the
//! device's memory. It needs a CUDA device, so it is `#[ignore]`d: without one it is reported
//! as ignored, never as passed; `scripts/gpu-device-run.sh tests` runs it with `--ignored`,
//! where a missing device fails it.

use blstrs::{G1Affine, G1Projective, Scalar};
use cuzk::gpu::backend::AuxQueries;
use cuzk::gpu::device::hold_memory;
use cuzk::gpu::{test_backend, GpuOptions};
use cuzk::prover::{msm as cpu_msm, ProverError};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve, Group};
use rand::{rngs::StdRng, Rng, SeedableRng};

fn inputs(rng: &mut StdRng, n: usize) -> (Vec<G1Affine>, Vec<Scalar>) {
    let p: Vec<G1Projective> = (0..256).map(|_| G1Projective::random(&mut *rng)).collect();
    let mut a = vec![G1Affine::identity(); p.len()];
    G1Projective::batch_normalize(&p, &mut a);
    let bases = (0..n).map(|i| a[i % a.len()]).collect();
    let scalars = (0..n).map(|_| Scalar::random(&mut *rng)).collect();
    (bases, scalars)
}

/// The GPU options of these tests: the default tuning, with the kernel cache that
/// scripts/gpu-device-run.sh names in `CUZK_GPU_CACHE` (a test may read the environment; the
/// library takes options).
fn gpu_options() -> GpuOptions {
    GpuOptions {
        kernel_cache: std::env::var_os("CUZK_GPU_CACHE").map(Into::into),
        ..GpuOptions::default()
    }
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn out_of_memory_is_typed_and_recoverable() {
    let gpu = test_backend(&gpu_options()).unwrap_or_else(|e| {
        panic!("no usable CUDA device, but the GPU tests were asked for (--ignored): {e}")
    });
    let seed: u64 = rand::thread_rng().gen();
    println!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let (bases, scalars) = inputs(&mut rng, 1 << 14);
    let want = cpu_msm::msm_g1(&bases, &scalars);
    assert_eq!(gpu.msm_g1_gpu(&bases, &scalars).unwrap(), want);
    // An NTT domain cached as well (its tables are among what an eviction drops).
    let mut v: Vec<Scalar> = (0..1 << 14).map(|_| Scalar::random(&mut rng)).collect();
    gpu.ntt(&mut v, false, true).unwrap();

    // Hold all but about 16 MiB of the device's free memory from a second context, as another
    // program would (a `Gpu` handle could not: its ledger caps it at the free memory less the
    // driver's margin).
    let held = hold_memory(0, 16 << 20).unwrap();
    let (big_bases, big_scalars) = inputs(&mut rng, 1 << 20); // 96 MiB of bases
    let err = gpu.msm_g1_gpu(&big_bases, &big_scalars).unwrap_err();
    assert!(err.is_out_of_memory(), "expected out of memory, got {err}");
    let z = vec![Scalar::ONE; 1 << 22]; // three of them: 384 MiB
    let err = ProverError::from(gpu.quotient_gpu(z.clone(), z.clone(), z).unwrap_err());
    assert!(
        matches!(err, ProverError::OutOfMemory(_)) && err.is_retryable(),
        "expected out of memory, got {err}"
    );

    // The joint aux MSMs do not fit either: an out-of-memory error before anything is
    // uploaded, on which a prepared set runs the MSMs one by one instead of failing the proof.
    let (all, none) = (
        vec![true; big_scalars.len()],
        vec![false; big_scalars.len()],
    );
    let joint = gpu.aux_msms_gpu(&AuxQueries {
        aux: &big_scalars,
        a_density: &all,
        b_density: &none,
        l: &big_bases,
        a: &big_bases,
        b_g1: &[],
        b_g2: &[],
    });
    assert!(
        joint.as_ref().is_err_and(|e| e.is_out_of_memory()),
        "the aux MSMs should have been declined: {:?}",
        joint.err()
    );
    drop(held);
    assert_eq!(gpu.msm_g1_gpu(&bases, &scalars).unwrap(), want);
    let want_big = cpu_msm::msm_g1(&big_bases, &big_scalars);
    assert_eq!(gpu.msm_g1_gpu(&big_bases, &big_scalars).unwrap(), want_big);
}
