//! Pippenger's multi-scalar multiplication with batch-affine bucket accumulation.
//!
//! Used by the CPU backend for the full-width scalars (the H query, and the Poseidon-heavy
//! witnesses of PoSt and SnapDeals). Compared with blst's Pippenger (XYZZ buckets, about ten
//! field products per addition), affine buckets with batched inversions need about six.
//!
//! Work is split into independent tasks, one per (window, chunk of points): each task
//! recodes its window's digits on its own (see [`digits`]), fills its buckets and reduces
//! them, and the window sums are combined by doubling at the end.

mod batch;
mod buckets;
mod coord;
pub mod curve;
mod digits;
mod fp;
mod fp52;
mod simd_batch;
mod sum;

pub use sum::{sum_groups, sum_indexed};

use rayon::prelude::*;

use super::options::CpuOptions;
use buckets::Buckets;
use curve::Curve;
use digits::{window_count, WindowDigits};

/// Below this many points blst's Pippenger is as fast, and the CPU backend uses it there.
///
/// Measured on the 2-core box, CPU time against blst: with the eight-lane IFMA solver ours is
/// 0.73× at G1 2^10, 0.54× at 2^11, 0.49× at 2^12 (G2: 0.55×, 0.42×, 0.37×); with the
/// portable solver it was 1.26× at 2^12, 0.89–1.03× at 2^14 and 0.8× from 2^16.
pub fn min_points(options: &CpuOptions) -> usize {
    if options.vector_paths() {
        1 << 10
    } else {
        1 << 13
    }
}

/// The smallest chunk of points worth its own buckets when an MSM is split for more tasks
/// (log2). Measured on 16 cores (H200 host), 2 KiB PoSt proofs and 2^16–2^18 MSMs: 2^13
/// with four tasks per thread beat 2^15 with two (medians of 3: WindowPoSt 0.378 → 0.359×,
/// WinningPoSt 0.270 → 0.256× of filecoin-proofs' time; G1 2^18 wall 0.71 → 0.51× blst's);
/// 2^12, or eight tasks per thread, gained nothing more.
const MIN_CHUNK_LOG: u32 = 13;

/// Tasks per thread an MSM aims for: enough that threads finishing early find work.
const TASKS_PER_THREAD: usize = 4;

/// Relative cost of one batch-affine bucket addition and of one bucket in the final running
/// sum (two projective additions), in field products; only their ratio matters.
const COST_ADD: usize = 7;
const COST_BUCKET: usize = 27;

/// The window width for `n` points in one chunk: the one forced by
/// [`CpuOptions::msm_window_bits`] (for sweeps; clamped to [`CpuOptions::WINDOW_BITS`]), else
/// the one that minimises the estimated work.
fn window_width(n: usize, options: &CpuOptions) -> u32 {
    if let Some(c) = options.msm_window_bits {
        return c.clamp(
            *CpuOptions::WINDOW_BITS.start(),
            *CpuOptions::WINDOW_BITS.end(),
        );
    }
    (2u32..=20)
        .min_by_key(|&c| {
            window_count(c) as usize * (n * COST_ADD + (1usize << (c - 1)) * COST_BUCKET)
        })
        .unwrap_or(8)
}

/// Into how many chunks to split `n` points so that `threads` have enough tasks.
///
/// Windows are the natural unit of parallel work. With fewer than about
/// [`TASKS_PER_THREAD`] windows per thread (small MSMs on many cores) the points are split as
/// well, but never into chunks below 2^[`MIN_CHUNK_LOG`] points, where each chunk's own
/// bucket reduction would start to cost more than the better balance saves.
fn chunk_count(n: usize, threads: usize, options: &CpuOptions) -> usize {
    let windows = window_count(window_width(n, options)) as usize;
    (TASKS_PER_THREAD * threads)
        .div_ceil(windows)
        .min(n >> MIN_CHUNK_LOG)
        .max(1)
}

/// The canonical little-endian 64-bit limbs of `s`, the form [`msm`] takes its scalars in.
pub fn scalar_limbs(s: &blstrs::Scalar) -> [u64; 4] {
    let b = s.to_bytes_le();
    std::array::from_fn(|k| {
        let mut limb = [0u8; 8];
        limb.copy_from_slice(&b[8 * k..8 * k + 8]);
        u64::from_le_bytes(limb)
    })
}

/// Selected scalars grouped by value: group g is `indices[bounds[g]..bounds[g + 1]]`, all with
/// scalar `limbs[g]`.
pub struct Grouped {
    /// Point indices, grouped.
    pub indices: Vec<usize>,
    /// Group boundaries in `indices` (one more than there are groups).
    pub bounds: Vec<usize>,
    /// Each group's scalar.
    pub limbs: Vec<[u64; 4]>,
}

/// Most selected scalars worth sorting to find repeats (2^22: a 32-byte key each).
const MAX_GROUPED: usize = 1 << 22;

/// Groups the selected scalars (`limbs[k]` for point `idx[k]`) by value when repeats are
/// common, so that each distinct scalar multiplies the sum of its points once.
///
/// PoSt witnesses repeat values heavily: a WinningPoSt MSM of 66,132 full-width
/// scalars has 3,690 distinct ones. Without grouping, the copies of one value land in the same
/// bucket of every window, where only one per batch can be added and the rest overflow into
/// slow projective spill buckets. Returns `None` when fewer than a quarter of the scalars are
/// repeats (or there are too many to sort).
pub fn group_equal(idx: &[usize], limbs: &[[u64; 4]]) -> Option<Grouped> {
    if idx.len() > MAX_GROUPED || idx.len() < 2 {
        return None;
    }
    let mut order: Vec<u32> = (0..idx.len() as u32).collect();
    order.par_sort_unstable_by_key(|&k| limbs[k as usize]);
    let distinct = 1 + order
        .windows(2)
        .filter(|w| limbs[w[0] as usize] != limbs[w[1] as usize])
        .count();
    if 4 * distinct > 3 * idx.len() {
        return None;
    }
    let mut grouped = Grouped {
        indices: Vec::with_capacity(idx.len()),
        bounds: Vec::with_capacity(distinct + 1),
        limbs: Vec::with_capacity(distinct),
    };
    for &k in &order {
        let value = limbs[k as usize];
        if grouped.limbs.last() != Some(&value) {
            grouped.bounds.push(grouped.indices.len());
            grouped.limbs.push(value);
        }
        grouped.indices.push(idx[k as usize]);
    }
    grouped.bounds.push(grouped.indices.len());
    Some(grouped)
}

/// Σ scalars[i]·points[i], scalars as canonical little-endian limbs below 2^255, computed as
/// `options` say (solver, window width).
///
/// # Panics
/// When the lengths differ.
pub fn msm<C: Curve>(points: &[C::Affine], scalars: &[[u64; 4]], options: &CpuOptions) -> C::Proj {
    assert_eq!(
        points.len(),
        scalars.len(),
        "points and scalars differ in length"
    );
    let n = points.len();
    if n == 0 {
        return C::Proj::default();
    }
    let threads = rayon::current_num_threads().max(1);
    let chunks = chunk_count(n, threads, options);
    let chunk_len = n.div_ceil(chunks);
    let c = window_width(chunk_len, options);
    let simd = options.vector_paths();
    let windows = window_count(c);

    let tasks: Vec<(u32, usize)> = (0..windows)
        .flat_map(|j| (0..chunks).map(move |k| (j, k)))
        .collect();
    let partial: Vec<(u32, C::Proj)> = tasks
        .par_iter()
        .map(|&(j, k)| {
            let lo = k * chunk_len;
            let hi = (lo + chunk_len).min(n);
            (
                j,
                window_sum::<C>(&points[lo..hi], &scalars[lo..hi], c, j, simd),
            )
        })
        .collect();

    let mut per_window = vec![C::Proj::default(); windows as usize];
    for (j, s) in &partial {
        C::add(&mut per_window[*j as usize], s);
    }
    let mut acc = C::Proj::default();
    for s in per_window.iter().rev() {
        for _ in 0..c {
            C::double(&mut acc);
        }
        C::add(&mut acc, s);
    }
    acc
}

/// Σ d_j(scalars[i])·points[i] for window `j` of width `c`; `simd` allows the eight-lane
/// batch solver.
fn window_sum<C: Curve>(
    points: &[C::Affine],
    scalars: &[[u64; 4]],
    c: u32,
    j: u32,
    simd: bool,
) -> C::Proj {
    let digits = WindowDigits::new(c, j);
    let mut buckets = Buckets::<C>::new(points, 1 << (c - 1), simd);
    for (i, s) in scalars.iter().enumerate() {
        let d = digits.digit(s);
        if d != 0 {
            buckets.add((d.unsigned_abs() - 1) as usize, i, d < 0);
        }
    }
    buckets.finish();
    buckets.weighted_sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine};
    use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
    use ff::Field;
    use group::{prime::PrimeCurveAffine, Curve as _, Group};
    use rand::SeedableRng;

    /// The portable path, the eight-lane one (where the CPU has it) and a forced window width.
    fn every_option() -> [CpuOptions; 3] {
        let portable = CpuOptions {
            simd: false,
            ..CpuOptions::default()
        };
        let forced = CpuOptions {
            msm_window_bits: Some(7),
            ..CpuOptions::default()
        };
        [CpuOptions::default(), portable, forced]
    }

    fn g1_msm(points: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
        let results: Vec<G1Projective> = every_option()
            .iter()
            .map(|o| g1_msm_with(points, scalars, o))
            .collect();
        assert!(results.windows(2).all(|w| w[0] == w[1]), "options disagree");
        results[0]
    }

    fn g2_msm(points: &[G2Affine], scalars: &[Scalar]) -> G2Projective {
        let results: Vec<G2Projective> = every_option()
            .iter()
            .map(|o| g2_msm_with(points, scalars, o))
            .collect();
        assert!(results.windows(2).all(|w| w[0] == w[1]), "options disagree");
        results[0]
    }

    fn g1_msm_with(points: &[G1Affine], scalars: &[Scalar], options: &CpuOptions) -> G1Projective {
        // SAFETY: blstrs' G1Affine is a transparent wrapper over blst_p1_affine.
        let raw = unsafe {
            std::slice::from_raw_parts(points.as_ptr() as *const blst_p1_affine, points.len())
        };
        let limbs: Vec<[u64; 4]> = scalars.iter().map(scalar_limbs).collect();
        let out: blst_p1 = msm::<curve::G1>(raw, &limbs, options);
        // SAFETY: blstrs' G1Projective is a transparent wrapper over blst_p1.
        unsafe { std::mem::transmute::<blst_p1, G1Projective>(out) }
    }

    fn g2_msm_with(points: &[G2Affine], scalars: &[Scalar], options: &CpuOptions) -> G2Projective {
        // SAFETY: blstrs' G2Affine is a transparent wrapper over blst_p2_affine.
        let raw = unsafe {
            std::slice::from_raw_parts(points.as_ptr() as *const blst_p2_affine, points.len())
        };
        let limbs: Vec<[u64; 4]> = scalars.iter().map(scalar_limbs).collect();
        let out: blst_p2 = msm::<curve::G2>(raw, &limbs, options);
        // SAFETY: blstrs' G2Projective is a transparent wrapper over blst_p2.
        unsafe { std::mem::transmute::<blst_p2, G2Projective>(out) }
    }

    /// Scalars with the edge cases mixed in: 0, 1, −1 (r − 1), 2, and random ones.
    fn scalars(n: usize, rng: &mut rand::rngs::StdRng) -> Vec<Scalar> {
        (0..n)
            .map(|i| match i % 7 {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                2 => -Scalar::ONE,
                3 => Scalar::from(2u64),
                _ => Scalar::random(&mut *rng),
            })
            .collect()
    }

    #[test]
    fn g1_matches_the_naive_sum_on_random_and_edge_inputs() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for n in [1usize, 2, 3, 63, 64, 65, 1000, 5000] {
            let points: Vec<G1Affine> = (0..n)
                .map(|_| G1Projective::random(&mut rng).to_affine())
                .collect();
            let s = scalars(n, &mut rng);
            let want: G1Projective = points.iter().zip(&s).map(|(p, k)| *p * k).sum();
            assert_eq!(g1_msm(&points, &s), want, "n = {n}");
        }
    }

    #[test]
    fn repeated_negated_and_identity_points_take_the_special_cases() {
        // Few distinct points and many equal scalars make the same bucket receive the same
        // point (doubling) and its negation (cancellation) within one batch.
        let mut rng = rand::rngs::StdRng::seed_from_u64(12);
        let p = G1Projective::random(&mut rng).to_affine();
        let q = G1Projective::random(&mut rng).to_affine();
        let n = 4000;
        let points: Vec<G1Affine> = (0..n)
            .map(|i| match i % 5 {
                0 | 1 => p,
                2 => -p,
                3 => G1Affine::identity(),
                _ => q,
            })
            .collect();
        let small: Vec<Scalar> = (0..n).map(|i| Scalar::from((i % 3 + 1) as u64)).collect();
        let want: G1Projective = points.iter().zip(&small).map(|(p, k)| *p * k).sum();
        assert_eq!(g1_msm(&points, &small), want);
        let big: Vec<Scalar> = (0..n).map(|i| -Scalar::from((i % 2) as u64)).collect();
        let want: G1Projective = points.iter().zip(&big).map(|(p, k)| *p * k).sum();
        assert_eq!(g1_msm(&points, &big), want);
    }

    #[test]
    fn g2_matches_the_naive_sum() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(13);
        for n in [5usize, 100, 700] {
            let mut points: Vec<G2Affine> = (0..n)
                .map(|_| G2Projective::random(&mut rng).to_affine())
                .collect();
            points[1] = points[0];
            points[2] = -points[0];
            let s = scalars(n, &mut rng);
            let want: G2Projective = points.iter().zip(&s).map(|(p, k)| *p * k).sum();
            assert_eq!(g2_msm(&points, &s), want, "n = {n}");
        }
    }

    #[test]
    fn split_into_chunks_on_many_threads_matches_blst() {
        // 16 threads and 2^16 + 3 points make two chunks per window (and a short last one).
        let n = (1 << 16) + 3;
        assert!(chunk_count(n, 16, &CpuOptions::default()) > 1);
        let mut rng = rand::rngs::StdRng::seed_from_u64(14);
        let distinct: Vec<G1Affine> = (0..256)
            .map(|_| G1Projective::random(&mut rng).to_affine())
            .collect();
        let points: Vec<G1Affine> = (0..n).map(|i| distinct[i % 256]).collect();
        let s = scalars(n, &mut rng);
        let bytes: Vec<u8> = s.iter().flat_map(|k| k.to_bytes_le()).collect();
        // SAFETY: blstrs' G1Affine is a transparent wrapper over blst_p1_affine.
        let raw = unsafe {
            std::slice::from_raw_parts(points.as_ptr() as *const blst_p1_affine, points.len())
        };
        let want: blst_p1 = blst::MultiPoint::mult(raw, &bytes, 255);
        // SAFETY: blstrs' G1Projective is a transparent wrapper over blst_p1.
        let want = unsafe { std::mem::transmute::<blst_p1, G1Projective>(want) };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(16)
            .build()
            .unwrap();
        assert_eq!(pool.install(|| g1_msm(&points, &s)), want);
    }
}
