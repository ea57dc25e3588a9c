//! Multi-scalar multiplication on the CPU, exploiting Filecoin's bit-heavy witnesses.
//!
//! Most of a Filecoin witness is 0 or 1 (the boolean gadgets of SHA-256 and the Merkle
//! paths). Scalars are classified first: zeros are dropped, the points of ones are summed by
//! a tree of batched affine additions ([`pippenger::sum_indexed`]); where other values repeat
//! often (PoSt witnesses) the points of each value are summed first
//! ([`pippenger::group_equal`], [`pippenger::sum_groups`]); only the remaining scalars go
//! through a Pippenger multiplication: ours (`super::pippenger`, batch-affine buckets) from
//! [`pippenger::min_points`] on, blst's below. On a PoRep partition this removes most of the
//! work of the A, B and L queries.

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine, MultiPoint};

use super::options::CpuOptions;
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
    ($name:ident, $with:ident, $affine:ty, $proj:ty, $raw_affine:ty, $raw_proj:ty, $curve:ty) => {
        /// Σ scalars[i]·bases[i] on the CPU with the default [`CpuOptions`]: our CPU
        /// prover's MSM (blst's Pippenger only below `min_points` full scalars). The
        /// independent reference is [`blst_msm_g1`] / [`blst_msm_g2`].
        pub fn $name(bases: &[$affine], scalars: &[Scalar]) -> $proj {
            $with(&CpuOptions::default(), bases, scalars)
        }

        /// Σ scalars[i]·bases[i] on the CPU, computed as `options` say.
        pub fn $with(options: &CpuOptions, bases: &[$affine], scalars: &[Scalar]) -> $proj {
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
            // SAFETY: the blstrs affine type is `#[repr(transparent)]` over blst's raw affine
            // point; the slice keeps its length.
            let raw_bases = unsafe {
                std::slice::from_raw_parts(bases.as_ptr() as *const $raw_affine, bases.len())
            };
            let mut acc = <$proj>::identity();
            if !ones.is_empty() {
                let raw: $raw_proj =
                    pippenger::sum_indexed::<$curve>(raw_bases, &ones, options.vector_paths());
                // SAFETY: the blstrs projective type is `#[repr(transparent)]` over blst's raw
                // projective point.
                acc += unsafe { std::mem::transmute::<$raw_proj, $proj>(raw) };
            }
            // blst's Pippenger below `min_points` (faster there), ours from it on.
            // (Only reached with more than NAIVE_LIMIT full scalars, so `points` is never empty,
            // which blst's `mult` needs.)
            let full_msm = |points: &[$raw_affine], limbs: &[[u64; 4]]| -> $raw_proj {
                if points.len() < pippenger::min_points(options) {
                    let bytes: Vec<u8> = limbs
                        .iter()
                        .flatten()
                        .flat_map(|w| w.to_le_bytes())
                        .collect();
                    points.mult(&bytes, 255)
                } else {
                    pippenger::msm::<$curve>(points, limbs, options)
                }
            };
            if full.len() <= NAIVE_LIMIT {
                acc += full.iter().map(|&i| bases[i] * scalars[i]).sum::<$proj>();
            } else if full.len() == bases.len() && full.len() >= pippenger::min_points(options) {
                // Every scalar is full-width (the H query, whose values do not repeat): no
                // copy of the bases.
                let raw =
                    pippenger::msm::<$curve>(raw_bases, &scalar_limbs(scalars, None), options);
                // SAFETY: as above, a transparent wrapper over the same raw point.
                acc += unsafe { std::mem::transmute::<$raw_proj, $proj>(raw) };
            } else {
                let limbs = scalar_limbs(scalars, Some(&full));
                let raw = match pippenger::group_equal(&full, &limbs) {
                    Some(g) => {
                        let sums = pippenger::sum_groups::<$curve>(
                            raw_bases,
                            &g.indices,
                            &g.bounds,
                            options.vector_paths(),
                        );
                        full_msm(&sums, &g.limbs)
                    }
                    None => full_msm(&gather(&full), &limbs),
                };
                // SAFETY: as above, a transparent wrapper over the same raw point.
                acc += unsafe { std::mem::transmute::<$raw_proj, $proj>(raw) };
            }
            acc
        }
    };
}

cpu_msm!(
    msm_g1,
    msm_g1_with,
    G1Affine,
    G1Projective,
    blst_p1_affine,
    blst_p1,
    pippenger::curve::G1
);
cpu_msm!(
    msm_g2,
    msm_g2_with,
    G2Affine,
    G2Projective,
    blst_p2_affine,
    blst_p2,
    pippenger::curve::G2
);

macro_rules! blst_msm {
    ($name:ident, $affine:ty, $proj:ty, $raw_affine:ty, $raw_proj:ty) => {
        /// Σ scalars[i]·bases[i] by blst's own Pippenger (`MultiPoint::mult`, on blst's
        /// threads) over every point, whatever the scalars: the independent reference that
        /// tests and benchmarks name "blst". [`msm_g1`] and [`msm_g2`] are our prover's.
        pub fn $name(bases: &[$affine], scalars: &[Scalar]) -> $proj {
            assert_eq!(
                bases.len(),
                scalars.len(),
                "bases and scalars differ in length"
            );
            if bases.is_empty() {
                // blst's `mult` needs at least one point.
                return <$proj>::identity();
            }
            let bytes: Vec<u8> = scalars
                .par_iter()
                .flat_map_iter(|s| s.to_bytes_le())
                .collect();
            // SAFETY: the blstrs affine type is `#[repr(transparent)]` over blst's raw affine
            // point; the slice keeps its length.
            let raw = unsafe {
                std::slice::from_raw_parts(bases.as_ptr() as *const $raw_affine, bases.len())
            };
            let sum: $raw_proj = raw.mult(&bytes, 255);
            // SAFETY: the blstrs projective type is `#[repr(transparent)]` over blst's raw
            // projective point.
            unsafe { std::mem::transmute::<$raw_proj, $proj>(sum) }
        }
    };
}

blst_msm!(blst_msm_g1, G1Affine, G1Projective, blst_p1_affine, blst_p1);
blst_msm!(blst_msm_g2, G2Affine, G2Projective, blst_p2_affine, blst_p2);

#[cfg(test)]
mod tests {
    use super::*;
    use group::prime::PrimeCurveAffine;
    use group::Curve;
    use rand::SeedableRng;

    fn naive(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
        bases.iter().zip(scalars).map(|(p, s)| *p * s).sum()
    }

    /// The options every test runs with: production's (the eight lanes where the CPU has
    /// AVX-512 IFMA) and the portable paths, chosen by value so that both run on every CPU.
    fn both() -> [CpuOptions; 2] {
        let portable = CpuOptions {
            simd: false,
            ..CpuOptions::default()
        };
        [CpuOptions::default(), portable]
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
            for o in both() {
                let got = msm_g1_with(&o, &bases, &scalars);
                assert_eq!(got, naive(&bases, &scalars), "n = {n}, {o:?}");
            }
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
        for o in both() {
            assert_eq!(msm_g2_with(&o, &bases, &scalars), want, "{o:?}");
        }
    }

    #[test]
    fn all_full_scalars_take_the_no_copy_path() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        for o in both() {
            let n = pippenger::min_points(&o) + 1;
            let bases: Vec<G1Affine> = (0..n)
                .map(|_| G1Projective::random(&mut rng).to_affine())
                .collect();
            let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            assert_eq!(scalar_classes(&scalars).full, n);
            let got = msm_g1_with(&o, &bases, &scalars);
            assert_eq!(got, blst_msm_g1(&bases, &scalars), "{o:?}");
        }
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
        let want = blst_msm_g1(&bases, &scalars);
        for o in both() {
            assert!(scalar_classes(&scalars).full >= pippenger::min_points(&o));
            assert_eq!(msm_g1_with(&o, &bases, &scalars), want, "{o:?}");
        }
    }

    #[test]
    fn repeated_scalars_are_grouped_and_match_blst() {
        // 20,000 scalars drawn from 500 values (plus zeros and ones), as PoSt witnesses repeat
        // theirs, take the grouped path (500 group sums, then blst's Pippenger); 16,000 drawn
        // from 15,000 values have too few repeats and take our Pippenger directly.
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let distinct: Vec<G1Affine> = (0..64)
            .map(|_| G1Projective::random(&mut rng).to_affine())
            .collect();
        for (n, values) in [(20_000usize, 500usize), (16_000, 15_000)] {
            let bases: Vec<G1Affine> = (0..n).map(|i| distinct[i % 64]).collect();
            let pool: Vec<Scalar> = (0..values).map(|_| Scalar::random(&mut rng)).collect();
            let scalars: Vec<Scalar> = (0..n)
                .map(|i| match i % 50 {
                    0 => Scalar::ZERO,
                    1 => Scalar::ONE,
                    _ => pool[(i * 7919) % values],
                })
                .collect();
            let classes = scalar_classes(&scalars);
            let idx: Vec<usize> = (0..n).filter(|&i| i % 50 > 1).collect();
            let limbs: Vec<[u64; 4]> = idx
                .iter()
                .map(|&i| pippenger::scalar_limbs(&scalars[i]))
                .collect();
            assert_eq!(
                pippenger::group_equal(&idx, &limbs).is_some(),
                values < n / 2,
                "n = {n}, {classes:?}"
            );
            let want = blst_msm_g1(&bases, &scalars);
            for o in both() {
                assert_eq!(msm_g1_with(&o, &bases, &scalars), want, "n = {n}, {o:?}");
            }
        }
    }

    #[test]
    fn repeated_scalars_in_g2_match_the_naive_sum() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(12);
        let n = 600;
        let bases: Vec<G2Affine> = (0..n)
            .map(|_| G2Projective::random(&mut rng).to_affine())
            .collect();
        let pool: Vec<Scalar> = (0..20).map(|_| Scalar::random(&mut rng)).collect();
        let scalars: Vec<Scalar> = (0..n).map(|i| pool[i % 20]).collect();
        let want: G2Projective = bases.iter().zip(&scalars).map(|(p, s)| *p * s).sum();
        assert_eq!(blst_msm_g2(&bases, &scalars), want, "blst");
        for o in both() {
            assert_eq!(msm_g2_with(&o, &bases, &scalars), want, "{o:?}");
        }
    }

    #[test]
    fn blsts_reference_matches_the_naive_sum() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(13);
        for n in [0usize, 1, 2, 40] {
            let bases: Vec<G1Affine> = (0..n)
                .map(|i| match i {
                    1 => G1Affine::identity(),
                    _ => G1Projective::random(&mut rng).to_affine(),
                })
                .collect();
            let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            assert_eq!(
                blst_msm_g1(&bases, &scalars),
                naive(&bases, &scalars),
                "n = {n}"
            );
        }
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
