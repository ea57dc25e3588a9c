//! GPU kernels against CPU references on fresh random inputs and edge cases: blst's own
//! Pippenger (`prover::msm::blst_msm_*`) in the `*_matches_blst` tests and at large sizes,
//! our CPU prover's MSM (`cpu_msm::msm_*`) where a test says so, the CPU NTT. Every test needs a CUDA device, so every one is `#[ignore]`d: a machine without one
//! reports them as ignored, never as passed. Where a device is expected they run with
//! `--ignored` (`scripts/gpu-device-run.sh tests`), and a missing device fails them.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk::gpu::bytes::bytes;
use cuzk::gpu::device::Gpu;
use cuzk::gpu::msm as gpu_msm;
use cuzk::gpu::r1cs::{self, Csr, DeviceShape, ShapeTerm, INPUT_BIT};
use cuzk::gpu::{test_backend, GpuBackend, GpuError, GpuOptions};
use cuzk::prover::{msm as cpu_msm, ntt as cpu_ntt};
use ff::{Field, PrimeField};
use group::{prime::PrimeCurveAffine, Curve, Group};
use rand::{rngs::StdRng, Rng, SeedableRng};
use rayon::prelude::*;

/// The GPU options of these tests: the default tuning, with the kernel cache that
/// scripts/gpu-device-run.sh names in `CUZK_GPU_CACHE` (a test may read the environment; the
/// library takes options).
fn gpu_options() -> GpuOptions {
    // CUZK_TEST_NVRTC_DEFINES (comma-separated) runs the suite on a kernel variant, e.g.
    // CUZK_MSM_DFMA, as `debug.nvrtc_defines` would build it.
    let defines = std::env::var("CUZK_TEST_NVRTC_DEFINES").unwrap_or_default();
    GpuOptions {
        kernel_cache: std::env::var_os("CUZK_GPU_CACHE").map(Into::into),
        nvrtc_defines: defines
            .split(',')
            .filter(|d| !d.is_empty())
            .map(str::to_owned)
            .collect(),
        ..GpuOptions::default()
    }
}

/// What a missing device means here: these tests only run (with `--ignored`) where one is
/// expected.
const NO_DEVICE: &str = "no usable CUDA device, but the GPU tests were asked for (--ignored)";

/// The backend on device 0; a test run with `--ignored` expects one, so none is a failure.
fn backend() -> GpuBackend {
    test_backend(&gpu_options()).unwrap_or_else(|e| panic!("{NO_DEVICE}: {e}"))
}

/// The device itself (for tests below the backend); none is a failure, as for [`backend`].
fn raw_gpu() -> Gpu {
    Gpu::open(&gpu_options()).unwrap_or_else(|e| panic!("{NO_DEVICE}: {e}"))
}

fn fresh_rng() -> StdRng {
    let seed: u64 = rand::thread_rng().gen();
    println!("seed {seed}");
    StdRng::seed_from_u64(seed)
}

fn scalars(rng: &mut StdRng, n: usize) -> Vec<Scalar> {
    let seed: u64 = rng.gen();
    let mut v = vec![Scalar::ZERO; n];
    v.par_chunks_mut(4096).enumerate().for_each(|(k, c)| {
        let mut r = StdRng::seed_from_u64(seed ^ k as u64);
        c.iter_mut().for_each(|s| *s = Scalar::random(&mut r));
    });
    v
}

/// Random scalars with 0, 1 and r−1 sprinkled in.
fn edgy_scalars(rng: &mut StdRng, n: usize) -> Vec<Scalar> {
    let mut v = scalars(rng, n);
    for s in v.iter_mut() {
        match rng.gen_range(0..8) {
            0 => *s = Scalar::ZERO,
            1 => *s = Scalar::ONE,
            2 => *s = -Scalar::ONE,
            _ => {}
        }
    }
    v
}

/// Mostly 0s and 1s, about one scalar in eight a full one (half of those r−1): few enough that
/// the MSM redoes the digits with the window width for their count (REDIGIT_SHARE).
fn sparse_scalars(rng: &mut StdRng, n: usize) -> Vec<Scalar> {
    let mut v = scalars(rng, n);
    for s in v.iter_mut() {
        match rng.gen_range(0..16) {
            0 => {}
            1 => *s = -Scalar::ONE,
            2..=8 => *s = Scalar::ZERO,
            _ => *s = Scalar::ONE,
        }
    }
    v
}

fn g1_bases(rng: &mut StdRng, n: usize, distinct: usize) -> Vec<G1Affine> {
    let p: Vec<G1Projective> = (0..distinct.min(n).max(1))
        .map(|_| G1Projective::random(&mut *rng))
        .collect();
    let mut a = vec![G1Affine::identity(); p.len()];
    G1Projective::batch_normalize(&p, &mut a);
    (0..n).map(|i| a[i % a.len()]).collect()
}

fn g2_bases(rng: &mut StdRng, n: usize, distinct: usize) -> Vec<G2Affine> {
    let p: Vec<G2Projective> = (0..distinct.min(n).max(1))
        .map(|_| G2Projective::random(&mut *rng))
        .collect();
    let mut a = vec![G2Affine::identity(); p.len()];
    G2Projective::batch_normalize(&p, &mut a);
    (0..n).map(|i| a[i % a.len()]).collect()
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn msm_g1_matches_blst() {
    let gpu = backend();
    let mut rng = fresh_rng();
    for n in [
        1usize,
        2,
        3,
        4,
        5,
        7,
        8,
        9,
        15,
        16,
        17,
        31,
        33,
        255,
        257,
        1023,
        1025,
        4097,
        (1 << 16) + 1,
    ] {
        let mut bases = g1_bases(&mut rng, n, 64);
        if n > 3 {
            bases[1] = G1Affine::identity();
            bases[n - 2] = G1Affine::identity();
        }
        let s = edgy_scalars(&mut rng, n);
        let got = gpu.msm_g1_gpu(&bases, &s).expect("gpu msm");
        assert_eq!(got, cpu_msm::blst_msm_g1(&bases, &s), "G1 MSM of {n}");
    }
}

fn point_bytes<T>(v: &[T]) -> &[u8] {
    // SAFETY: blstrs affine points are plain u64 limbs without padding; a byte view is valid.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Large uploads from pageable memory go through the page-locked staging buffers (32 MiB
/// pieces, two in turn); from pinned memory they go directly. Both must arrive byte for byte,
/// with a short last piece and with whole pieces only.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn staged_uploads_round_trip() {
    let gpu = raw_gpu();
    let mut rng = fresh_rng();
    const MIB: usize = 1 << 20;
    for len in [64 * MIB, 96 * MIB, 5 * 32 * MIB + 12_345] {
        let mut src = vec![0u8; len];
        src.par_chunks_mut(MIB).enumerate().for_each(|(k, c)| {
            let mut r = StdRng::seed_from_u64(len as u64 ^ k as u64);
            r.fill(c);
        });
        src[len - 1] = rng.gen();
        let mut dst = gpu.alloc(len + 7).unwrap();
        assert!(!gpu.is_pinned(&src), "a Vec is pageable");
        gpu.upload(&mut dst, &src).unwrap();
        assert!(
            gpu.staging_ready(),
            "the pageable upload went through the staging buffers"
        );
        let mut back = vec![0u8; len];
        gpu.download(&dst, &mut back).unwrap();
        assert!(back == src, "pageable upload of {len} bytes");
        let mut pinned = gpu.pinned(len).unwrap();
        pinned.as_mut_slice().unwrap().copy_from_slice(&src);
        assert!(
            gpu.is_pinned(pinned.as_slice().unwrap()),
            "pinned memory is recognised"
        );
        let mut dst2 = gpu.alloc(len).unwrap();
        gpu.upload(&mut dst2, pinned.as_slice().unwrap()).unwrap();
        gpu.download(&dst2, &mut back).unwrap();
        assert!(back == src, "pinned upload of {len} bytes");
    }
}

/// The scalars uploaded in pieces (`msm_chunked`, on a device handle of its own): one piece,
/// pieces of one scalar, several pieces with a shorter last one, from pageable and from pinned
/// host memory; edge-heavy scalars (0, 1, r−1 mixed in: digits as the pieces arrive), sparse
/// ones (the digits redone for their count), all 0s and all 1s. The default piece size
/// (2^20) is covered by msm_g1_large_sizes: 2^24 − 1 points are 16 pieces, the last one short.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn msm_upload_pieces() {
    let gpu = raw_gpu();
    let mut rng = fresh_rng();
    for (n, chunk) in [
        (1usize, 1usize),
        (1, 4),
        (2, 1),
        (2, 2),
        (3, 2),
        (5, 1),
        (257, 256),
        (1000, 64),
        (4097, 1024),
        (100_003, 4096),
        ((1 << 16) + 1, 1 << 16),
        ((1 << 16) + 1, 1 << 20),
    ] {
        let bases = g1_bases(&mut rng, n, 64);
        let dev = gpu.upload_new(point_bytes(&bases)).expect("bases");
        let mut cases = vec![edgy_scalars(&mut rng, n), sparse_scalars(&mut rng, n)];
        if n == 1000 {
            cases.push(vec![Scalar::ZERO; n]);
            cases.push(vec![Scalar::ONE; n]);
            cases.push(vec![-Scalar::ONE; n]);
        }
        for s in cases {
            let parts = gpu_msm::msm_chunked(&gpu, gpu_msm::Curve::G1, &dev, n, bytes(&s), chunk)
                .expect("gpu msm");
            assert_eq!(
                gpu_msm::finish_g1(&parts),
                cpu_msm::msm_g1(&bases, &s),
                "G1 MSM of {n} in pieces of {chunk}"
            );
        }
    }
    // Pinned host memory, as `cuzk bench gpu` passes it; and G2.
    let n = 3 * 4096 + 5;
    let s = edgy_scalars(&mut rng, n);
    let mut pinned = gpu.pinned(n * 32).expect("pinned");
    pinned
        .as_mut_slice()
        .expect("pinned")
        .copy_from_slice(bytes(&s));
    let bases = g1_bases(&mut rng, n, 256);
    let dev = gpu.upload_new(point_bytes(&bases)).expect("bases");
    let sc = pinned.as_slice().expect("pinned");
    let parts = gpu_msm::msm_chunked(&gpu, gpu_msm::Curve::G1, &dev, n, sc, 4096).unwrap();
    assert_eq!(
        gpu_msm::finish_g1(&parts),
        cpu_msm::msm_g1(&bases, &s),
        "G1 from pinned"
    );
    let bases = g2_bases(&mut rng, n, 64);
    let dev = gpu.upload_new(point_bytes(&bases)).expect("bases");
    let parts = gpu_msm::msm_chunked(&gpu, gpu_msm::Curve::G2, &dev, n, sc, 1000).unwrap();
    assert_eq!(
        gpu_msm::finish_g2(&parts),
        cpu_msm::msm_g2(&bases, &s),
        "G2 from pinned"
    );
}

/// The bucket sums launched in pieces (`MsmRun`'s steps, on a device handle whose pieces hold
/// `piece` list entries): one piece, pieces of one chunk, many pieces with a shorter last one;
/// G1 and G2 (a G2 piece holds a third of the entries); random, edge-heavy and sparse scalars;
/// against blst's Pippenger. The steps are counted, and a run stepped past its end stays done.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn msm_bucket_sums_in_pieces() {
    let mut rng = fresh_rng();
    for piece in [1u64 << 40, 1, 3000, 100_000] {
        let mut options = gpu_options();
        options.msm.accumulate_piece = piece;
        let gpu = Gpu::open(&options).unwrap_or_else(|e| panic!("{NO_DEVICE}: {e}"));
        for n in [1usize, 2, 1000, 4097, 100_003] {
            let cases = [
                scalars(&mut rng, n),
                edgy_scalars(&mut rng, n),
                sparse_scalars(&mut rng, n),
            ];
            let g1 = g1_bases(&mut rng, n, 64);
            let g1_dev = gpu.upload_new(point_bytes(&g1)).expect("bases");
            let g2 = g2_bases(&mut rng, n.min(4097), 64);
            let g2_dev = gpu.upload_new(point_bytes(&g2)).expect("bases");
            for s in &cases {
                let parts = stepped(&gpu, gpu_msm::Curve::G1, &g1_dev, s, piece);
                assert_eq!(
                    gpu_msm::finish_g1(&parts),
                    cpu_msm::blst_msm_g1(&g1, s),
                    "G1 MSM of {n} in pieces of {piece} entries"
                );
                let s2 = &s[..g2.len()];
                let parts = stepped(&gpu, gpu_msm::Curve::G2, &g2_dev, s2, piece);
                assert_eq!(
                    gpu_msm::finish_g2(&parts),
                    cpu_msm::blst_msm_g2(&g2, s2),
                    "G2 MSM of {} in pieces of {piece} entries",
                    g2.len()
                );
            }
        }
    }
}

/// `MsmRun` over `s` (uploaded) and `bases`, stepped to its end; where pieces are small and
/// the scalars many, more than one piece of bucket sums must have run.
fn stepped(
    gpu: &Gpu,
    curve: gpu_msm::Curve,
    bases: &cuzk::gpu::device::DevBuf,
    s: &[Scalar],
    piece: u64,
) -> gpu_msm::MsmParts {
    let scalars = gpu.upload_new(bytes(s)).expect("scalars");
    let mut run = gpu_msm::MsmRun::new(gpu, curve, bases, s.len(), scalars).expect("start");
    let mut steps = 0;
    while run.step(gpu, bases).expect("step") {
        steps += 1;
    }
    assert!(!run.step(gpu, bases).expect("step after the end"));
    let full = s
        .iter()
        .filter(|x| !bool::from(x.is_zero()) && **x != Scalar::ONE)
        .count();
    if piece <= 3000 && full >= 500 {
        assert!(steps > 1, "{} scalars in {steps} steps of {piece}", s.len());
    }
    run.finish().expect("finish")
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn msm_g1_large_sizes() {
    let gpu = backend();
    let mut rng = fresh_rng();
    for lg in [20u32, 24] {
        for n in [(1usize << lg) - 1, 1 << lg] {
            let bases = g1_bases(&mut rng, n, 4096);
            let s = if lg == 24 {
                scalars(&mut rng, n)
            } else {
                edgy_scalars(&mut rng, n)
            };
            let got = gpu.msm_g1_gpu(&bases, &s).expect("gpu msm");
            assert_eq!(got, cpu_msm::blst_msm_g1(&bases, &s), "G1 MSM of {n}");
            if lg == 24 {
                break;
            }
        }
    }
}

/// 5000 copies of one base: equal scalars (every bucket addition doubles) against our CPU MSM,
/// then s and r−s in turn (they cancel inside buckets: the sum is the identity).
fn one_base_doubles_and_cancels(gpu: &GpuBackend, rng: &mut StdRng, label: &str) {
    let n = 5000;
    let bases = g1_bases(rng, n, 1);
    let s = vec![Scalar::from(12345u64); n];
    assert_eq!(
        gpu.msm_g1_gpu(&bases, &s).unwrap(),
        cpu_msm::msm_g1(&bases, &s),
        "equal scalars{label}"
    );
    let mut s = scalars(rng, n);
    for i in (0..n).step_by(2) {
        s[i + 1] = -s[i];
    }
    assert_eq!(
        gpu.msm_g1_gpu(&bases, &s).unwrap(),
        G1Projective::identity(),
        "cancelling scalars{label}"
    );
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn msm_special_patterns() {
    let gpu = backend();
    let mut rng = fresh_rng();
    let n = 5000;
    one_base_doubles_and_cancels(&gpu, &mut rng, "");
    // All ones (batch addition only), all zeros.
    let bases = g1_bases(&mut rng, n, 97);
    let ones = vec![Scalar::ONE; n];
    assert_eq!(
        gpu.msm_g1_gpu(&bases, &ones).unwrap(),
        cpu_msm::msm_g1(&bases, &ones),
        "ones"
    );
    let zeros = vec![Scalar::ZERO; n];
    assert_eq!(
        gpu.msm_g1_gpu(&bases, &zeros).unwrap(),
        G1Projective::identity(),
        "zeros"
    );
    // Empty.
    assert_eq!(gpu.msm_g1_gpu(&[], &[]).unwrap(), G1Projective::identity());
}

/// The batch-affine walk of G1 bucket sums (`debug.gpu_msm_batch_affine`,
/// `cuda/msm_affine.cu`) on every G1 MSM whatever its size: random, edge-heavy and sparse
/// scalars over bases with repeats and points at infinity against blst; one base with equal
/// scalars (after the first, every addition in a bucket doubles or adds a multiple of the
/// same point) against our CPU MSM, and with cancelling ones (P and −P in one bucket) against
/// the identity; the walk in one piece, a step per piece, and a few steps per piece; then
/// 2^20 random points against blst.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn msm_g1_batch_affine_matches_blst() {
    let mut rng = fresh_rng();
    for piece in [1u64 << 40, 1, 50_000] {
        let mut options = gpu_options();
        options.msm.batch_affine_min_chains = Some(1);
        options.msm.accumulate_piece = piece;
        let gpu = test_backend(&options).unwrap_or_else(|e| panic!("{NO_DEVICE}: {e}"));
        for n in [1usize, 2, 3, 33, 1025, 4097, 100_003] {
            let mut bases = g1_bases(&mut rng, n, 64);
            if n > 3 {
                bases[1] = G1Affine::identity();
                bases[n - 2] = G1Affine::identity();
            }
            for s in [
                scalars(&mut rng, n),
                edgy_scalars(&mut rng, n),
                sparse_scalars(&mut rng, n),
            ] {
                let got = gpu.msm_g1_gpu(&bases, &s).expect("gpu msm");
                assert_eq!(
                    got,
                    cpu_msm::blst_msm_g1(&bases, &s),
                    "G1 MSM of {n}, pieces of {piece}"
                );
            }
        }
        one_base_doubles_and_cancels(&gpu, &mut rng, &format!(", pieces of {piece}"));
    }
    let mut options = gpu_options();
    options.msm.batch_affine_min_chains = Some(1);
    let gpu = test_backend(&options).unwrap_or_else(|e| panic!("{NO_DEVICE}: {e}"));
    let n = 1 << 20;
    let bases = g1_bases(&mut rng, n, 4096);
    let s = scalars(&mut rng, n);
    let got = gpu.msm_g1_gpu(&bases, &s).expect("gpu msm");
    assert_eq!(got, cpu_msm::blst_msm_g1(&bases, &s), "G1 MSM of 2^20");
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn msm_g2_matches_blst() {
    let gpu = backend();
    let mut rng = fresh_rng();
    for n in [1usize, 2, 3, 17, 255, 1025, (1 << 12) + 1, (1 << 18) - 1] {
        let mut bases = g2_bases(&mut rng, n, 64);
        if n > 3 {
            bases[2] = G2Affine::identity();
        }
        let s = edgy_scalars(&mut rng, n);
        let got = gpu.msm_g2_gpu(&bases, &s).expect("gpu msm");
        assert_eq!(got, cpu_msm::blst_msm_g2(&bases, &s), "G2 MSM of {n}");
    }
    let bases = g2_bases(&mut rng, 3000, 1);
    let s = vec![Scalar::from(77u64); 3000];
    assert_eq!(
        gpu.msm_g2_gpu(&bases, &s).unwrap(),
        cpu_msm::blst_msm_g2(&bases, &s),
        "G2 equal scalars"
    );
}

fn cpu_transform(v: &[Scalar], inverse: bool, coset: bool) -> Vec<Scalar> {
    let n = v.len();
    let lg = n.trailing_zeros();
    let w = cpu_ntt::root_of_unity(lg);
    let g = Scalar::MULTIPLICATIVE_GENERATOR;
    let mut out = v.to_vec();
    if !inverse {
        if coset {
            let mut p = Scalar::ONE;
            for x in out.iter_mut() {
                *x *= p;
                p *= g;
            }
        }
        cpu_ntt::ntt_in_place(&mut out, w);
    } else {
        cpu_ntt::ntt_in_place(&mut out, w.invert().unwrap());
        let ninv = Scalar::from(n as u64).invert().unwrap();
        let gi = if coset {
            g.invert().unwrap()
        } else {
            Scalar::ONE
        };
        let mut p = ninv;
        for x in out.iter_mut() {
            *x *= p;
            p *= gi;
        }
    }
    out
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn ntt_matches_cpu() {
    let gpu = backend();
    let mut rng = fresh_rng();
    for lg in (0u32..=12).chain([16, 20]) {
        let v = scalars(&mut rng, 1 << lg);
        for (inverse, coset) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut g = v.clone();
            gpu.ntt(&mut g, inverse, coset).expect("gpu ntt");
            assert_eq!(
                g,
                cpu_transform(&v, inverse, coset),
                "2^{lg} inverse={inverse} coset={coset}"
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn ntt_round_trips() {
    let gpu = backend();
    let mut rng = fresh_rng();
    for lg in [1u32, 9, 10, 18, 19, 24] {
        let v = scalars(&mut rng, 1 << lg);
        for coset in [false, true] {
            let mut g = v.clone();
            gpu.ntt(&mut g, false, coset).unwrap();
            assert_ne!(g, v);
            gpu.ntt(&mut g, true, coset).unwrap();
            assert_eq!(g, v, "round trip 2^{lg} coset={coset}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn quotient_matches_cpu() {
    let gpu = backend();
    let mut rng = fresh_rng();
    for n in [1usize, 2, 3, 5, 1000, 1024, (1 << 16) + 1, 1 << 20] {
        let a = scalars(&mut rng, n);
        let b = scalars(&mut rng, n);
        let c = scalars(&mut rng, n);
        let want = cpu_ntt::quotient(a.clone(), b.clone(), c.clone()).unwrap();
        let got = gpu.quotient_gpu(a, b, c).unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "quotient of {n}");
    }
}

/// The fused quotient and H query (H stays on the device between the transforms and the MSM)
/// against the CPU quotient and the CPU MSM; a wrong number of H bases is a typed error.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn quotient_h_query_matches_cpu() {
    let gpu = backend();
    let mut rng = fresh_rng();
    for n in [1usize, 3, 1000, 1024, (1 << 16) + 1] {
        let a = scalars(&mut rng, n);
        let b = scalars(&mut rng, n);
        let c = edgy_scalars(&mut rng, n);
        let m = n.next_power_of_two().max(2);
        let bases = g1_bases(&mut rng, m - 1, 512);
        let h = cpu_ntt::quotient(a.clone(), b.clone(), c.clone()).unwrap();
        let want = cpu_msm::msm_g1(&bases, &h);
        let got = gpu
            .quotient_h_query_gpu(a.clone(), b.clone(), c.clone(), &bases)
            .unwrap();
        assert_eq!(got, want, "H query of {n}");
        let err = gpu.quotient_h_query_gpu(a, b, c, &bases[1..]);
        assert!(matches!(err, Err(GpuError::Input(_))), "{n}: {err:?}");
    }
}

fn fp_limbs(p: &G1Affine) -> ([u64; 6], [u64; 6]) {
    // SAFETY: G1Affine is repr(transparent) over blst_p1_affine = two blst_fp of six u64 limbs.
    let raw: [u64; 12] = unsafe { std::mem::transmute(*p) };
    let mut x = [0u64; 6];
    let mut y = [0u64; 6];
    x.copy_from_slice(&raw[..6]);
    y.copy_from_slice(&raw[6..]);
    (x, y)
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn field_and_curve_ops_match_blst() {
    use blst::*;
    let gpu = backend();
    let mut rng = fresh_rng();
    let pts = g1_bases(&mut rng, 256, 256);
    let mut a: Vec<[u64; 6]> = pts.iter().map(|p| fp_limbs(p).0).collect();
    let mut b: Vec<[u64; 6]> = pts.iter().map(|p| fp_limbs(p).1).collect();
    // edge cases: 0, 1 (Montgomery R), p−1 (−1)
    let one = blst_fp {
        l: fp_limbs(&G1Affine::generator()).0,
    };
    let mut r1 = blst_fp::default();
    let mut m1 = blst_fp::default();
    // SAFETY: blst functions on valid, initialised field elements.
    unsafe {
        blst_fp_from_uint64(&mut r1, [1u64, 0, 0, 0, 0, 0].as_ptr());
        blst_fp_cneg(&mut m1, &r1, true);
    }
    let _ = one;
    for (x, y) in [
        ([0u64; 6], r1.l),
        (r1.l, m1.l),
        (m1.l, m1.l),
        ([0u64; 6], [0u64; 6]),
        (m1.l, [0u64; 6]),
    ] {
        a.push(x);
        b.push(y);
    }
    let got = gpu.selftest_fp(&a, &b).unwrap();
    for i in 0..a.len() {
        let (x, y) = (blst_fp { l: a[i] }, blst_fp { l: b[i] });
        let mut want = [blst_fp::default(); 4];
        // SAFETY: as above.
        unsafe {
            blst_fp_mul(&mut want[0], &x, &y);
            blst_fp_add(&mut want[1], &x, &y);
            blst_fp_sub(&mut want[2], &x, &y);
            blst_fp_cneg(&mut want[3], &x, true);
        }
        for k in 0..4 {
            assert_eq!(got[4 * i + k], want[k].l, "fp op {k} on input {i}");
        }
    }
    let mut s = scalars(&mut rng, 256);
    s.extend([Scalar::ZERO, Scalar::ONE, -Scalar::ONE]);
    let canon = gpu.selftest_fr_from_mont(&s).unwrap();
    for (i, v) in s.iter().enumerate() {
        let bytes = v.to_bytes_le();
        let want: Vec<u64> = bytes
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(canon[i].to_vec(), want, "from_mont {i}");
    }
    let q = g1_bases(&mut rng, 256, 256);
    let got = gpu.selftest_g1(&pts, &q).unwrap();
    for i in 0..pts.len() {
        let p = G1Projective::from(pts[i]);
        let want = [
            p.double(),
            p + q[i],
            p + q[i],
            p.double(),
            G1Projective::identity(),
        ];
        for k in 0..5 {
            assert_eq!(got[5 * i + k], want[k], "g1 op {k} on point {i}");
        }
    }
}

/// Flags set with probability `p_set`, else clear.
fn density(rng: &mut StdRng, n: usize, p_set: f64) -> Vec<bool> {
    (0..n).map(|_| rng.gen_bool(p_set)).collect()
}

/// The device's selection of flagged scalars (msm::compact), across one block of 1024, many,
/// and more than 1024 blocks (a scan of the block counts in two levels).
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn compaction_keeps_flagged_scalars_in_order() {
    let gpu = raw_gpu();
    let mut rng = fresh_rng();
    for (n, p) in [
        (1usize, 1.0),
        (5, 0.0),
        (1000, 0.5),
        (4096, 0.97),
        ((1 << 20) + 3001, 0.25),
    ] {
        let v = edgy_scalars(&mut rng, n);
        let flags = density(&mut rng, n, p);
        let want = cuzk::prover::dense(&v, &flags);
        let src = gpu.upload_new(bytes(&v)).unwrap();
        let dst = gpu_msm::compact(&gpu, &src, &flags, want.len()).unwrap();
        let mut got = vec![Scalar::ZERO; want.len()];
        gpu.download(&dst, cuzk::gpu::bytes::bytes_mut(&mut got))
            .unwrap();
        assert_eq!(got, want, "compaction of {n} at {p}");
        // A count that disagrees with the flags is refused, not written past the buffer.
        let err = gpu_msm::compact(&gpu, &src, &flags, want.len() + 1);
        assert!(
            matches!(err, Err(GpuError::Input(_))),
            "{n}: {:?}",
            err.err()
        );
        // The counted form trusts its count: the same selection; with a count one short of
        // the flags, the first scalars. (That the scatter writes nothing past the count is
        // not observable from here: the buffer has exactly `short` scalars.)
        let dst = gpu_msm::compact_counted(&gpu, &src, &flags, want.len()).unwrap();
        gpu.download(&dst, cuzk::gpu::bytes::bytes_mut(&mut got))
            .unwrap();
        assert_eq!(got, want, "counted compaction of {n} at {p}");
        if want.len() > 1 {
            let short = want.len() - 1;
            let head = gpu_msm::compact_counted(&gpu, &src, &flags, short).unwrap();
            gpu.download(&head, cuzk::gpu::bytes::bytes_mut(&mut got[..short]))
                .unwrap();
            assert_eq!(got[..short], want[..short], "{n}: a short count's head");
        }
    }
}

/// The four aux MSMs in one call (assignment uploaded once, A and B selected on the device)
/// against blst on the host selections; empty queries give the identity; lengths that do not
/// fit the densities are a typed error.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn aux_msms_match_cpu() {
    use cuzk::gpu::backend::AuxQueries;
    let gpu = backend();
    let mut rng = fresh_rng();
    for (n, pa, pb) in [
        (1usize, 1.0, 0.0),
        (1000, 0.997, 0.254),
        (70_001, 0.997, 0.254),
        (3000, 0.0, 1.0),
    ] {
        let aux = sparse_scalars(&mut rng, n);
        let a_density = density(&mut rng, n, pa);
        let b_density = density(&mut rng, n, pb);
        let (a_sel, b_sel) = (
            cuzk::prover::dense(&aux, &a_density),
            cuzk::prover::dense(&aux, &b_density),
        );
        let l = g1_bases(&mut rng, n, 512);
        let a = g1_bases(&mut rng, a_sel.len(), 512);
        let b_g1 = g1_bases(&mut rng, b_sel.len(), 512);
        let b_g2 = g2_bases(&mut rng, b_sel.len(), 64);
        let q = AuxQueries {
            aux: &aux,
            a_density: &a_density,
            b_density: &b_density,
            l: &l,
            a: &a,
            b_g1: &b_g1,
            b_g2: &b_g2,
        };
        let got = gpu.aux_msms_gpu(&q).expect("the GPU takes the aux MSMs");
        assert_eq!(got.l, cpu_msm::msm_g1(&l, &aux), "L of {n}");
        assert_eq!(got.a, cpu_msm::msm_g1(&a, &a_sel), "A of {n}");
        assert_eq!(got.b_g1, cpu_msm::msm_g1(&b_g1, &b_sel), "B G1 of {n}");
        assert_eq!(got.b_g2, cpu_msm::msm_g2(&b_g2, &b_sel), "B G2 of {n}");
        let short = AuxQueries { l: &l[1..], ..q };
        let err = gpu.aux_msms_gpu(&short);
        assert!(
            matches!(err, Err(GpuError::Input(_))),
            "{n}: {:?}",
            err.err()
        );
        // A query that does not match its density's count is refused before any upload.
        if !b_g1.is_empty() {
            let short_b = AuxQueries {
                b_g1: &b_g1[1..],
                b_g2: &b_g2[1..],
                ..q
            };
            let err = gpu.aux_msms_gpu(&short_b);
            assert!(
                matches!(err, Err(GpuError::Input(_))),
                "{n}: {:?}",
                err.err()
            );
        }
    }
}

// ---- R1CS rows (cuda/r1cs.cu, gpu::r1cs) ---------------------------------------------------

/// A matrix in CSR form, owned.
struct HostCsr {
    starts: Vec<u32>,
    terms: Vec<ShapeTerm>,
}

impl HostCsr {
    fn csr(&self) -> Csr<'_> {
        Csr {
            starts: &self.starts,
            terms: &self.terms,
        }
    }

    /// Row after row of terms.
    fn from_rows(rows: &[Vec<ShapeTerm>]) -> Self {
        let mut starts = vec![0u32];
        for r in rows {
            starts.push(starts.last().unwrap() + r.len() as u32);
        }
        HostCsr {
            starts,
            terms: rows.concat(),
        }
    }
}

/// An assignment's values as in a PoRep partition: about half 0, 45% 1, the rest random
/// (a fifth of those −1, i.e. r − 1).
fn r1cs_values(rng: &mut StdRng, n: usize) -> Vec<Scalar> {
    let mut v = scalars(rng, n);
    for s in v.iter_mut() {
        match rng.gen_range(0..100) {
            0..=49 => *s = Scalar::ZERO,
            50..=94 => *s = Scalar::ONE,
            95 => *s = -Scalar::ONE,
            _ => {}
        }
    }
    v
}

/// The coefficient table: ONE, −1, then random ones (`n` in all, at least 2).
fn r1cs_coeffs(rng: &mut StdRng, n: usize) -> Vec<Scalar> {
    let mut c = vec![Scalar::ONE, -Scalar::ONE];
    c.extend(scalars(rng, n.max(2) - 2));
    c
}

/// A random term: an input one time in twenty, coefficient ONE 60% of the time, −1 10%.
fn r1cs_term(rng: &mut StdRng, inputs: usize, aux: usize, coeffs: usize) -> ShapeTerm {
    let coeff = match rng.gen_range(0..10) {
        0..=5 => 0,
        6 => 1,
        _ => rng.gen_range(0..coeffs as u32),
    };
    if aux == 0 || rng.gen_range(0..20) == 0 {
        ShapeTerm::input(rng.gen_range(0..inputs as u32), coeff)
    } else {
        ShapeTerm::aux(rng.gen_range(0..aux as u32), coeff)
    }
}

/// A random matrix of `rows` rows: lengths 0 to 12 (the kernel's thread path), rows of 300
/// terms (its warp path) at `long`, and edge rows near the start: row 0 empty, row 1 the first
/// input (ONE in a Groth16 assignment) alone, row 2 −1 · (value −1) = 1 twice, row 3 a value
/// minus itself (0), row 4 32 terms (the longest on the thread path) and row 5 33 (the
/// shortest on the warp path).
fn r1cs_matrix(
    rng: &mut StdRng,
    rows: usize,
    long: &[usize],
    (inputs, aux, coeffs): (usize, usize, usize),
    minus_one_aux: u32,
) -> HostCsr {
    let mut m: Vec<Vec<ShapeTerm>> = (0..rows)
        .map(|r| {
            let len = if long.contains(&r) {
                300
            } else {
                rng.gen_range(0..=12)
            };
            (0..len)
                .map(|_| r1cs_term(rng, inputs, aux, coeffs))
                .collect()
        })
        .collect();
    let edge: [Vec<ShapeTerm>; 6] = [
        vec![],
        vec![ShapeTerm::input(0, 0)],
        vec![ShapeTerm::aux(minus_one_aux, 1); 2],
        vec![
            ShapeTerm::aux(minus_one_aux, 0),
            ShapeTerm::aux(minus_one_aux, 1),
        ],
        (0..32)
            .map(|_| r1cs_term(rng, inputs, aux, coeffs))
            .collect(),
        (0..33)
            .map(|_| r1cs_term(rng, inputs, aux, coeffs))
            .collect(),
    ];
    for (r, e) in edge.into_iter().enumerate().take(rows) {
        m[r] = e;
    }
    HostCsr::from_rows(&m)
}

/// Σ coeffs[t.coeff] · value(t.var) per row, on the host with blstrs.
fn cpu_rows(m: &HostCsr, coeffs: &[Scalar], input: &[Scalar], aux: &[Scalar]) -> Vec<Scalar> {
    m.starts
        .par_windows(2)
        .map(|w| cpu_row(&m.terms[w[0] as usize..w[1] as usize], coeffs, input, aux))
        .collect()
}

fn cpu_row(terms: &[ShapeTerm], coeffs: &[Scalar], input: &[Scalar], aux: &[Scalar]) -> Scalar {
    terms
        .iter()
        .map(|t| {
            let v = if t.var & INPUT_BIT != 0 {
                input[(t.var & !INPUT_BIT) as usize]
            } else {
                aux[t.var as usize]
            };
            coeffs[t.coeff as usize] * v
        })
        .sum()
}

/// A, B and C evaluated on the device from a resident shape, against blstrs on the host:
/// shapes of 0 rows to more than a thousand blocks, long rows alone, several in one warp, a
/// whole warp of them and in the last, partial warp; the edge rows of [`r1cs_matrix`]; one
/// shape evaluated on several assignments, through host and device vectors. Shapes and
/// assignments that do not fit are typed errors.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn r1cs_rows_match_cpu() {
    let gpu = raw_gpu();
    let mut rng = fresh_rng();
    for (rows, inputs, aux, coeffs) in [
        (0usize, 1usize, 0usize, 1usize),
        (1, 1, 0, 2),
        (6, 2, 10, 3),
        (31, 2, 50, 40),
        (1000, 5, 3000, 200),
        (100_003, 20, 150_000, 1500),
    ] {
        // Long rows: isolated, at a warp's first and last lane, two and three in one warp, a
        // whole warp of them (rows 64..96), and the last row (in a partial warp when rows is
        // not a multiple of 32).
        let mut long: Vec<usize> = [7, 31, 32, 40, 41, 50, 51, 52, 999, rows.saturating_sub(1)]
            .into_iter()
            .chain(64..96)
            .chain((0..rows / 5000).map(|_| rng.gen_range(0..rows.max(1))))
            .filter(|&r| r >= 6 && r < rows)
            .collect();
        long.sort_unstable();
        let c = r1cs_coeffs(&mut rng, coeffs);
        let mut input = r1cs_values(&mut rng, inputs);
        input[0] = Scalar::ONE;
        let mut a_vals = r1cs_values(&mut rng, aux);
        let minus_one = if aux > 0 {
            let k = rng.gen_range(0..aux);
            a_vals[k] = -Scalar::ONE;
            k as u32
        } else {
            0
        };
        let dims = (inputs, aux, coeffs.max(2));
        // Without aux variables the edge rows that use one are left out (rows < 2).
        let mats: Vec<HostCsr> = (0..3)
            .map(|_| r1cs_matrix(&mut rng, rows, &long, dims, minus_one))
            .collect();
        let shape = DeviceShape::upload(&gpu, mats[0].csr(), mats[1].csr(), mats[2].csr(), &c)
            .expect("upload the shape");
        // A matrix without terms holds a buffer of one byte for them.
        let held: usize = mats
            .iter()
            .map(|m| 4 * m.starts.len() + (8 * m.terms.len()).max(1))
            .sum::<usize>()
            + 32 * c.len();
        assert_eq!(
            shape.device_bytes(),
            held as u64,
            "bytes held for {rows} rows"
        );
        assert_eq!(shape.rows(), rows);
        for round in 0..2 {
            if round == 1 {
                // Another assignment on the same shape.
                a_vals = r1cs_values(&mut rng, aux);
                input = r1cs_values(&mut rng, inputs);
            }
            let got = shape
                .evaluate_host(&gpu, &input, &a_vals)
                .expect("evaluate");
            for (k, m) in mats.iter().enumerate() {
                let want = cpu_rows(m, &c, &input, &a_vals);
                assert_eq!(got[k].len(), rows);
                if let Some(r) = (0..rows).find(|&r| got[k][r] != want[r]) {
                    panic!(
                        "{} row {r} of {rows} ({} terms), round {round}: got {:?}, want {:?}",
                        ["A", "B", "C"][k],
                        m.starts[r + 1] - m.starts[r],
                        got[k][r],
                        want[r]
                    );
                }
            }
        }
        // From device vectors, into buffers longer than the rows (the tail left alone).
        let (din, daux) = (
            r1cs::upload_scalars(&gpu, &input).unwrap(),
            r1cs::upload_scalars(&gpu, &a_vals).unwrap(),
        );
        let (a, b, cc) = shape.evaluate(&gpu, &din, &daux).expect("evaluate");
        for (k, buf) in [a, b, cc].iter().enumerate() {
            let got = r1cs::download_scalars(&gpu, buf, rows).unwrap();
            assert!(
                got == cpu_rows(&mats[k], &c, &input, &a_vals),
                "device vectors, matrix {k} of {rows} rows"
            );
        }
        let mut outs: Vec<_> = (0..3)
            .map(|_| r1cs::upload_scalars(&gpu, &vec![Scalar::from(7u64); rows + 3]).unwrap())
            .collect();
        let [o0, o1, o2] = &mut outs[..] else {
            unreachable!()
        };
        shape
            .evaluate_into(&gpu, &din, &daux, [o0, o1, o2])
            .expect("evaluate into");
        let got = r1cs::download_scalars(&gpu, &outs[2], rows + 3).unwrap();
        assert!(got[..rows] == cpu_rows(&mats[2], &c, &input, &a_vals)[..]);
        assert!(got[rows..].iter().all(|s| *s == Scalar::from(7u64)), "tail");
        // An assignment shorter than the shape's indices is refused, not read past.
        if shape.min_aux() > 0 {
            let err = shape.evaluate_host(&gpu, &input, &a_vals[..shape.min_aux() - 1]);
            assert!(matches!(err, Err(GpuError::Input(_))), "{rows}: {err:?}");
            let short = r1cs::upload_scalars(&gpu, &a_vals[..shape.min_aux() - 1]).unwrap();
            let err = shape.evaluate(&gpu, &din, &short);
            assert!(
                matches!(err, Err(GpuError::Input(_))),
                "{rows}: device vector"
            );
        }
        if rows > 1 {
            let [o0, o1, _] = &mut outs[..] else {
                unreachable!()
            };
            let mut small = gpu.alloc(32 * (rows - 1)).unwrap();
            let err = shape.evaluate_into(&gpu, &din, &daux, [o0, o1, &mut small]);
            assert!(matches!(err, Err(GpuError::Input(_))), "short output");
        }
    }
    // A term whose coefficient is past the table is refused before anything runs.
    let m = HostCsr::from_rows(&[vec![ShapeTerm::aux(0, 2)]]);
    let err = DeviceShape::upload(&gpu, m.csr(), m.csr(), m.csr(), &[Scalar::ONE, Scalar::ONE]);
    assert!(matches!(err, Err(GpuError::Input(_))), "bad coefficient");
    // So is a shape used with another device handle.
    let other = raw_gpu();
    let m = HostCsr::from_rows(&[vec![ShapeTerm::aux(0, 0)]]);
    let shape = DeviceShape::upload(&gpu, m.csr(), m.csr(), m.csr(), &[Scalar::ONE]).unwrap();
    let v = r1cs::upload_scalars(&other, &[Scalar::ONE]).unwrap();
    assert!(
        matches!(shape.evaluate(&other, &v, &v), Err(GpuError::Input(_))),
        "another handle"
    );
}

/// Rows of each matrix of a 32 GiB PoRep partition, and (about) its aux variables.
const PARTITION_ROWS: usize = 130_278_869;
const PARTITION_AUX: usize = 130_000_000;
/// Rows generated from one seed, in parallel.
const GEN_ROWS: usize = 1 << 16;

/// A synthetic matrix with a partition's size and (assumed) statistics: row lengths 0 to 8,
/// 1.83 terms on average (about 717 M terms over A, B and C, the partition has ~724 M), a row
/// of 300 terms every 2^16; coefficient ONE 70% of the time, −1 10%, else one of 1,500; an
/// input one term in a thousand. `local`: aux indices within ±512 of the row's proportional
/// position (99%; 1% anywhere), as synthesis order tends to place a constraint's variables;
/// otherwise uniform over the aux vector, the worst case for the gathers.
fn partition_matrix(seed: u64, local: bool, inputs: u32, coeffs: u32) -> HostCsr {
    const LENGTHS: [(u32, u16); 6] = [(17, 0), (52, 1), (77, 2), (87, 3), (96, 4), (100, 8)];
    let rows = PARTITION_ROWS;
    let chunk_rng = |k: usize| StdRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9) ^ k as u64);
    let lengths: Vec<Vec<u16>> = (0..rows.div_ceil(GEN_ROWS))
        .into_par_iter()
        .map(|k| {
            let mut rng = chunk_rng(k);
            (k * GEN_ROWS..rows.min((k + 1) * GEN_ROWS))
                .map(|r| {
                    if r % GEN_ROWS == 12_345 {
                        return 300;
                    }
                    let u = rng.gen_range(0..100);
                    LENGTHS.iter().find(|(p, _)| u < *p).map_or(0, |l| l.1)
                })
                .collect()
        })
        .collect();
    let mut starts = Vec::with_capacity(rows + 1);
    starts.push(0u32);
    for l in lengths.iter().flatten() {
        starts.push(starts.last().unwrap() + *l as u32);
    }
    let mut terms = vec![ShapeTerm::default(); *starts.last().unwrap() as usize];
    let mut parts = Vec::new();
    let mut rest = &mut terms[..];
    for k in 0..lengths.len() {
        let (from, to) = (k * GEN_ROWS, rows.min((k + 1) * GEN_ROWS));
        let (part, tail) = rest.split_at_mut((starts[to] - starts[from]) as usize);
        parts.push(part);
        rest = tail;
    }
    parts.into_par_iter().enumerate().for_each(|(k, part)| {
        let mut rng = chunk_rng(k ^ (1 << 40));
        let mut out = part.iter_mut();
        for (i, &len) in lengths[k].iter().enumerate() {
            let center = ((k * GEN_ROWS + i) as u64 * PARTITION_AUX as u64 / rows as u64) as i64;
            for _ in 0..len {
                let coeff = match rng.gen_range(0..10) {
                    0..=6 => 0,
                    7 => 1,
                    _ => rng.gen_range(2..coeffs),
                };
                let t = if rng.gen_range(0..1000) == 0 {
                    ShapeTerm::input(rng.gen_range(0..inputs), coeff)
                } else if local && rng.gen_range(0..100) != 0 {
                    let v = (center + rng.gen_range(-512..512)).clamp(0, PARTITION_AUX as i64 - 1);
                    ShapeTerm::aux(v as u32, coeff)
                } else {
                    ShapeTerm::aux(rng.gen_range(0..PARTITION_AUX as u32), coeff)
                };
                *out.next().unwrap() = t;
            }
        }
    });
    HostCsr { starts, terms }
}

/// The kernel's time at a 32 GiB partition's size, to check the prediction in
/// docs/gpu-notes.md ("R1CS rows on the device"): a synthetic shape (see [`partition_matrix`])
/// with local and with uniform aux indices, an assignment of 51% zeros and 47% ones; three
/// matrices evaluated, median of 5 after a warm-up, printed; 2,000 sampled rows of each
/// matrix checked against blstrs. For a clean time run it alone:
/// `gpu_kernels --include-ignored --exact r1cs_rows_at_partition_scale --nocapture`. Needs
/// about 12 GB of host memory and 25 GB on the device.
#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn r1cs_rows_at_partition_scale() {
    let gpu = raw_gpu();
    let mut rng = fresh_rng();
    let (n_inputs, n_coeffs) = (32u32, 1500u32);
    let coeffs = r1cs_coeffs(&mut rng, n_coeffs as usize);
    let mut input = r1cs_values(&mut rng, n_inputs as usize);
    input[0] = Scalar::ONE;
    let seed: u64 = rng.gen();
    let mut aux = vec![Scalar::ZERO; PARTITION_AUX];
    aux.par_chunks_mut(GEN_ROWS).enumerate().for_each(|(k, c)| {
        let mut r = StdRng::seed_from_u64(seed ^ k as u64);
        for s in c.iter_mut() {
            *s = match r.gen_range(0..100) {
                0..=50 => Scalar::ZERO,
                51..=97 => Scalar::ONE,
                _ => Scalar::random(&mut r),
            };
        }
    });
    let din = r1cs::upload_scalars(&gpu, &input).unwrap();
    let daux = r1cs::upload_scalars(&gpu, &aux).unwrap();
    let rows = PARTITION_ROWS;
    let mut outs: Vec<_> = (0..3).map(|_| gpu.alloc(rows * 32).unwrap()).collect();
    for local in [true, false] {
        let t = std::time::Instant::now();
        let mats: Vec<HostCsr> = (0..3)
            .map(|k| partition_matrix(seed ^ (k + 1), local, n_inputs, n_coeffs))
            .collect();
        let gen_s = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let shape = DeviceShape::upload(&gpu, mats[0].csr(), mats[1].csr(), mats[2].csr(), &coeffs)
            .expect("upload the shape");
        let upload_s = t.elapsed().as_secs_f64();
        let mut ms = Vec::new();
        for run in 0..6 {
            let [o0, o1, o2] = &mut outs[..] else {
                unreachable!()
            };
            let t = std::time::Instant::now();
            shape
                .evaluate_into(&gpu, &din, &daux, [o0, o1, o2])
                .expect("evaluate");
            gpu.sync().unwrap();
            if run > 0 {
                ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        ms.sort_by(f64::total_cmp);
        let terms: usize = shape.terms().iter().sum();
        // What must move at least (shape, outputs, the assignment read once) and what moves
        // when no gather hits the cache (a 32-byte value per term instead).
        let least = shape.device_bytes() as f64 + (3 * rows * 32 + PARTITION_AUX * 32) as f64;
        let most = least - (PARTITION_AUX * 32) as f64 + (terms * 32) as f64;
        println!(
            "r1cs rows at partition scale, {} aux indices: {rows} rows, {terms} terms \
             (A {} B {} C {}), shape {:.2} GB (generated in {gen_s:.1} s, uploaded in \
             {upload_s:.2} s); evaluate A, B, C: median {:.2} ms (min {:.2}, max {:.2}); \
             {:.1}–{:.1} GB to move, {:.2}–{:.2} TB/s",
            if local { "local" } else { "uniform" },
            shape.terms()[0],
            shape.terms()[1],
            shape.terms()[2],
            shape.device_bytes() as f64 / 1e9,
            ms[2],
            ms[0],
            ms[4],
            least / 1e9,
            most / 1e9,
            least / ms[2] / 1e9,
            most / ms[2] / 1e9,
        );
        for (k, m) in mats.iter().enumerate() {
            for _ in 0..2000 {
                let r = rng.gen_range(0..rows);
                let mut got = [Scalar::ZERO];
                gpu.download_at(&outs[k], r * 32, cuzk::gpu::bytes::bytes_mut(&mut got))
                    .unwrap();
                let t = &m.terms[m.starts[r] as usize..m.starts[r + 1] as usize];
                assert_eq!(got[0], cpu_row(t, &coeffs, &input, &aux), "row {r} of {k}");
            }
        }
    }
}
