//! GPU kernels against the CPU reference (blst / the CPU NTT) on fresh random inputs and edge
//! cases. Every test needs a CUDA device, so every one is `#[ignore]`d: a machine without one
//! reports them as ignored, never as passed. Where a device is expected they run with
//! `--ignored` (`scripts/gpu-device-run.sh tests`), and a missing device fails them.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk::gpu::device::Gpu;
use cuzk::gpu::msm as gpu_msm;
use cuzk::gpu::ntt::scalar_bytes;
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
    GpuOptions {
        kernel_cache: std::env::var_os("CUZK_GPU_CACHE").map(Into::into),
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
        assert_eq!(got, cpu_msm::msm_g1(&bases, &s), "G1 MSM of {n}");
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
            let parts =
                gpu_msm::msm_chunked(&gpu, gpu_msm::Curve::G1, &dev, n, scalar_bytes(&s), chunk)
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
        .copy_from_slice(scalar_bytes(&s));
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
            assert_eq!(got, cpu_msm::msm_g1(&bases, &s), "G1 MSM of {n}");
            if lg == 24 {
                break;
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA device: run with --ignored on a GPU host (scripts/gpu-device-run.sh)"]
fn msm_special_patterns() {
    let gpu = backend();
    let mut rng = fresh_rng();
    let n = 5000;
    // Repeated base, equal scalars: every bucket addition doubles.
    let bases = g1_bases(&mut rng, n, 1);
    let s = vec![Scalar::from(12345u64); n];
    assert_eq!(
        gpu.msm_g1_gpu(&bases, &s).unwrap(),
        cpu_msm::msm_g1(&bases, &s),
        "equal scalars"
    );
    // s and r−s on the same base cancel inside buckets: the sum is the identity.
    let mut s = scalars(&mut rng, n);
    for i in (0..n).step_by(2) {
        s[i + 1] = -s[i];
    }
    assert_eq!(
        gpu.msm_g1_gpu(&bases, &s).unwrap(),
        G1Projective::identity(),
        "cancelling scalars"
    );
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
        assert_eq!(got, cpu_msm::msm_g2(&bases, &s), "G2 MSM of {n}");
    }
    let bases = g2_bases(&mut rng, 3000, 1);
    let s = vec![Scalar::from(77u64); 3000];
    assert_eq!(
        gpu.msm_g2_gpu(&bases, &s).unwrap(),
        cpu_msm::msm_g2(&bases, &s),
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
        let src = gpu.upload_new(scalar_bytes(&v)).unwrap();
        let dst = gpu_msm::compact(&gpu, &src, &flags, want.len()).unwrap();
        let mut got = vec![Scalar::ZERO; want.len()];
        gpu.download(&dst, cuzk::gpu::ntt::scalar_bytes_mut(&mut got))
            .unwrap();
        assert_eq!(got, want, "compaction of {n} at {p}");
        // A count that disagrees with the flags is refused, not written past the buffer.
        let err = gpu_msm::compact(&gpu, &src, &flags, want.len() + 1);
        assert!(
            matches!(err, Err(GpuError::Input(_))),
            "{n}: {:?}",
            err.err()
        );
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
