//! Multi-scalar multiplication on the CPU, exploiting Filecoin's bit-heavy witnesses.
//!
//! Most of a Filecoin witness is 0 or 1 (the boolean gadgets of SHA-256 and the Merkle
//! paths). Scalars are classified first: zeros are dropped, the points of ones are summed by
//! a tree of batched affine additions ([`pippenger::sum_indexed`]), and only the remaining scalars go through a Pippenger
//! multiplication: ours (`super::pippenger`, batch-affine buckets) from
//! [`pippenger::MIN_POINTS`] on, blst's below. On a PoRep partition this removes most of the
//! work of the A, B and L queries.

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine, MultiPoint};

use super::pippenger;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::Group;
use rayon::prelude::*;

/// Below this many points Pippenger's set-up costs more than double-and-add.
const NAIVE_LIMIT: usize = 16;

/// How the scalars of one MSM split.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScalarClasses {
    /// Scalars equal to zero.
    pub zeros: usize,
    /// Scalars equal to one.
    pub ones: usize,
    /// All others.
    pub full: usize,
}

/// Indices of the ones and of the full scalars (zeros dropped), in order.
fn classify(scalars: &[Scalar]) -> (Vec<usize>, Vec<usize>) {
    let chunks: Vec<(Vec<usize>, Vec<usize>)> = scalars
        .par_chunks(1 << 16)
        .enumerate()
        .map(|(k, chunk)| {
            let base = k << 16;
            let (mut ones, mut full) = (Vec::new(), Vec::new());
            for (i, s) in chunk.iter().enumerate() {
                if *s == Scalar::ONE {
                    ones.push(base + i);
                } else if !bool::from(s.is_zero()) {
                    full.push(base + i);
                }
            }
            (ones, full)
        })
        .collect();
    let mut ones = Vec::with_capacity(chunks.iter().map(|c| c.0.len()).sum());
    let mut full = Vec::with_capacity(chunks.iter().map(|c| c.1.len()).sum());
    for (o, f) in chunks {
        ones.extend(o);
        full.extend(f);
    }
    (ones, full)
}

/// Counts zeros, ones and full scalars (for logs and benchmarks).
pub fn scalar_classes(scalars: &[Scalar]) -> ScalarClasses {
    let (ones, full) = classify(scalars);
    ScalarClasses {
        zeros: scalars.len() - ones.len() - full.len(),
        ones: ones.len(),
        full: full.len(),
    }
}

/// The canonical limbs of the selected scalars (all of them when `idx` is `None`).
fn scalar_limbs(scalars: &[Scalar], idx: Option<&[usize]>) -> Vec<[u64; 4]> {
    match idx {
        Some(idx) => idx
            .par_iter()
            .map(|&i| pippenger::scalar_limbs(&scalars[i]))
            .collect(),
        None => scalars.par_iter().map(pippenger::scalar_limbs).collect(),
    }
}

macro_rules! cpu_msm {
    ($name:ident, $affine:ty, $proj:ty, $raw_affine:ty, $raw_proj:ty, $curve:ty) => {
        /// Σ scalars[i]·bases[i] on the CPU.
        pub fn $name(bases: &[$affine], scalars: &[Scalar]) -> $proj {
            assert_eq!(
                bases.len(),
                scalars.len(),
                "bases and scalars differ in length"
            );
            if bases.len() <= NAIVE_LIMIT {
                return bases.iter().zip(scalars).map(|(p, s)| *p * s).sum();
            }
            let (ones, full) = classify(scalars);
            tracing::trace!(
                n = scalars.len(),
                ones = ones.len(),
                full = full.len(),
                "msm scalars"
            );
            let gather = |idx: &[usize]| -> Vec<$raw_affine> {
                // SAFETY: the blstrs affine type is `#[repr(transparent)]` over blst's raw
                // affine point, so the reference cast reads the same bytes.
                idx.par_iter()
                    .map(|&i| unsafe { *(&bases[i] as *const $affine as *const $raw_affine) })
                    .collect()
            };
            let mut acc = <$proj>::identity();
            if !ones.is_empty() {
                // SAFETY: transparent wrapper, as above; the slice keeps its length.
                let raw_bases = unsafe {
                    std::slice::from_raw_parts(bases.as_ptr() as *const $raw_affine, bases.len())
                };
                let raw: $raw_proj = pippenger::sum_indexed::<$curve>(raw_bases, &ones);
                // SAFETY: the blstrs projective type is `#[repr(transparent)]` over blst's raw
                // projective point.
                acc += unsafe { std::mem::transmute::<$raw_proj, $proj>(raw) };
            }
            if full.len() <= NAIVE_LIMIT {
                acc += full.iter().map(|&i| bases[i] * scalars[i]).sum::<$proj>();
            } else if full.len() < pippenger::MIN_POINTS {
                let bytes: Vec<u8> = full
                    .iter()
                    .flat_map(|&i| scalars[i].to_bytes_le())
                    .collect();
                let raw: $raw_proj = gather(&full).as_slice().mult(&bytes, 255);
                // SAFETY: as above, a transparent wrapper over the same raw point.
                acc += unsafe { std::mem::transmute::<$raw_proj, $proj>(raw) };
            } else if full.len() == bases.len() {
                // Every scalar is full-width (the H query): no copy of the bases.
                // SAFETY: transparent wrapper, as above; the slice keeps its length.
                let raw_bases = unsafe {
                    std::slice::from_raw_parts(bases.as_ptr() as *const $raw_affine, bases.len())
                };
                let raw = pippenger::msm::<$curve>(raw_bases, &scalar_limbs(scalars, None));
                // SAFETY: as above, a transparent wrapper over the same raw point.
                acc += unsafe { std::mem::transmute::<$raw_proj, $proj>(raw) };
            } else {
                let raw =
                    pippenger::msm::<$curve>(&gather(&full), &scalar_limbs(scalars, Some(&full)));
                // SAFETY: as above, a transparent wrapper over the same raw point.
                acc += unsafe { std::mem::transmute::<$raw_proj, $proj>(raw) };
            }
            acc
        }
    };
}

cpu_msm!(
    msm_g1,
    G1Affine,
    G1Projective,
    blst_p1_affine,
    blst_p1,
    pippenger::curve::G1
);
cpu_msm!(
    msm_g2,
    G2Affine,
    G2Projective,
    blst_p2_affine,
    blst_p2,
    pippenger::curve::G2
);

#[cfg(test)]
mod tests {
    use super::*;
    use group::Curve;
    use rand::SeedableRng;

    fn naive(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
        bases.iter().zip(scalars).map(|(p, s)| *p * s).sum()
    }

    #[test]
    fn matches_naive_on_mixed_scalars() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for n in [0usize, 1, 3, 17, 100, 1000] {
            let bases: Vec<G1Affine> = (0..n)
                .map(|_| G1Projective::random(&mut rng).to_affine())
                .collect();
            let scalars: Vec<Scalar> = (0..n)
                .map(|i| match i % 4 {
                    0 => Scalar::ZERO,
                    1 => Scalar::ONE,
                    2 => -Scalar::ONE,
                    _ => Scalar::random(&mut rng),
                })
                .collect();
            assert_eq!(msm_g1(&bases, &scalars), naive(&bases, &scalars), "n = {n}");
        }
    }

    #[test]
    fn g2_matches_naive() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(8);
        let n = 300;
        let bases: Vec<G2Affine> = (0..n)
            .map(|_| G2Projective::random(&mut rng).to_affine())
            .collect();
        let scalars: Vec<Scalar> = (0..n)
            .map(|i| {
                if i % 3 == 0 {
                    Scalar::ONE
                } else {
                    Scalar::random(&mut rng)
                }
            })
            .collect();
        let want: G2Projective = bases.iter().zip(&scalars).map(|(p, s)| *p * s).sum();
        assert_eq!(msm_g2(&bases, &scalars), want);
    }

    #[test]
    fn all_full_scalars_take_the_no_copy_path() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let n = pippenger::MIN_POINTS + 1;
        let bases: Vec<G1Affine> = (0..n)
            .map(|_| G1Projective::random(&mut rng).to_affine())
            .collect();
        let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        assert_eq!(scalar_classes(&scalars).full, n);
        assert_eq!(msm_g1(&bases, &scalars), naive(&bases, &scalars));
    }

    #[test]
    fn large_mixed_msm_takes_our_pippenger_and_matches_blst() {
        // Enough full-width scalars (3/4 of 12,000) for the Pippenger path with gathered bases.
        let mut rng = rand::rngs::StdRng::seed_from_u64(10);
        let n = 12_000;
        let distinct: Vec<G1Affine> = (0..64)
            .map(|_| G1Projective::random(&mut rng).to_affine())
            .collect();
        let bases: Vec<G1Affine> = (0..n).map(|i| distinct[i % 64]).collect();
        let scalars: Vec<Scalar> = (0..n)
            .map(|i| {
                if i % 4 == 0 {
                    Scalar::ONE
                } else {
                    Scalar::random(&mut rng)
                }
            })
            .collect();
        assert!(scalar_classes(&scalars).full >= pippenger::MIN_POINTS);
        let bytes: Vec<u8> = scalars.iter().flat_map(|s| s.to_bytes_le()).collect();
        // SAFETY: transparent wrappers over blst's raw points, as in the code under test.
        let raw = unsafe { std::slice::from_raw_parts(bases.as_ptr() as *const blst_p1_affine, n) };
        let want = raw.mult(&bytes, 255);
        // SAFETY: as above.
        let want = unsafe { std::mem::transmute::<blst_p1, G1Projective>(want) };
        assert_eq!(msm_g1(&bases, &scalars), want);
    }

    #[test]
    fn classes_count_every_scalar() {
        let s = [Scalar::ZERO, Scalar::ONE, Scalar::ONE, Scalar::from(5u64)];
        assert_eq!(
            scalar_classes(&s),
            ScalarClasses {
                zeros: 1,
                ones: 2,
                full: 1
            }
        );
    }
}
