//! The Groth16 setup's fixed-base multiplications on the GPU (`cuda/setup.cu`, `gpu::setup`)
//! against blst, and the GPU path's parameter files against the CPU path's. Every test needs
//! a CUDA device, so every one is `#[ignore]`d; `scripts/gpu-device-run.sh tests` runs them
//! with `--include-ignored` (carried as carry/gpu_setup) where a device is expected.

use blstrs::{G1Projective, G2Projective, Scalar};
use cuzk::gpu::setup::{FixedBaseGpu, G1_BYTES, G2_BYTES};
use cuzk::gpu::GpuOptions;
use cuzk::params_gen::setup::{generate_fresh, Device};
use cuzk::proofs::ProofKind;
use ff::Field;
use group::{Curve, Group};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// The default tuning, with the kernel cache scripts/gpu-device-run.sh names.
fn gpu_options() -> GpuOptions {
    GpuOptions {
        kernel_cache: std::env::var_os("CUZK_GPU_CACHE").map(Into::into),
        ..GpuOptions::default()
    }
}

const NO_DEVICE: &str = "no usable CUDA device, but the GPU tests were asked for (--ignored)";

/// Random scalars with the edges 0, 1, 2, r − 1, r − 2 and 2^k among them.
fn scalars(n: usize) -> Vec<Scalar> {
    let seed: u64 = rand::thread_rng().gen();
    println!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut v: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    let edges = [
        Scalar::ZERO,
        Scalar::ONE,
        Scalar::from(2u64),
        -Scalar::ONE,
        -Scalar::from(2u64),
        Scalar::from(255u64),
        Scalar::from(256u64),
        Scalar::from(2u64).pow_vartime([254]),
    ];
    for (i, e) in edges.into_iter().enumerate() {
        v[i * 97 % n] = e;
    }
    v
}

#[test]
#[ignore = "needs a CUDA device; run by scripts/gpu-device-run.sh"]
fn fixed_base_g1_and_g2_equal_blst_on_random_and_edge_scalars() {
    // Bases other than the generators, and more than one chunk's worth of threads per strip.
    let g1 = G1Projective::generator() * Scalar::from(5u64);
    let g2 = G2Projective::generator() * Scalar::from(7u64);
    let gpu =
        FixedBaseGpu::new(&gpu_options(), g1, g2).unwrap_or_else(|e| panic!("{NO_DEVICE}: {e}"));
    let s = scalars(3001);
    let mut out1 = vec![0u8; s.len() * G1_BYTES];
    gpu.g1(&s, &mut out1).unwrap();
    let mut out2 = vec![0u8; s.len() * G2_BYTES];
    gpu.g2(&s, &mut out2).unwrap();
    for (i, k) in s.iter().enumerate() {
        let want1 = (g1 * k).to_affine().to_uncompressed();
        assert_eq!(
            &out1[i * G1_BYTES..(i + 1) * G1_BYTES],
            &want1[..],
            "G1, scalar {i}"
        );
        let want2 = (g2 * k).to_affine().to_uncompressed();
        assert_eq!(
            &out2[i * G2_BYTES..(i + 1) * G2_BYTES],
            &want2[..],
            "G2, scalar {i}"
        );
    }
    // A wrong output length is an error, not a short write.
    assert!(gpu.g1(&s, &mut out1[1..]).is_err());
}

#[test]
#[ignore = "needs a CUDA device; run by scripts/gpu-device-run.sh"]
fn gpu_and_cpu_setups_write_the_same_2kib_files() {
    let (cpu, gpu) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let seed = [3u8; 32];
    let mut log = |m: &str| println!("{m}");
    let a = generate_fresh(
        cpu.path(),
        ProofKind::PoRep,
        2048,
        seed,
        &Device::Cpu,
        &mut log,
    )
    .unwrap();
    let b = generate_fresh(
        gpu.path(),
        ProofKind::PoRep,
        2048,
        seed,
        &Device::Gpu(gpu_options()),
        &mut log,
    )
    .unwrap_or_else(|e| panic!("{NO_DEVICE}: {e}"));
    println!(
        "2 KiB points and files: CPU {:.2} s, GPU {:.2} s",
        a.points.as_secs_f64(),
        b.points.as_secs_f64()
    );
    for path in [a.id.params_file(cpu.path()), a.id.vk_file(cpu.path())] {
        let name = path.file_name().unwrap();
        let (x, y) = (
            std::fs::read(&path).unwrap(),
            std::fs::read(gpu.path().join(name)).unwrap(),
        );
        assert_eq!(x.len(), y.len(), "{name:?}");
        assert!(x == y, "{name:?}: the CPU and GPU files differ");
    }
}
