//! The sum of many affine points, as a tree of batched affine additions.
//!
//! Filecoin witnesses are mostly bits, so an MSM first adds up, without any scalar, the
//! bases whose scalar is one. Adding neighbours in pairs level by level makes every level a
//! batch of independent affine additions, which the same solver as the buckets' takes (one
//! inversion per level, eight lanes at a time where the CPU has IFMA).

use rayon::prelude::*;

use super::batch::AffineBatch;
use super::curve::Curve;

/// Most points per independent tree (a rayon task): 4096 G1 points are 384 KiB.
const BLOCK: usize = 1 << 12;

/// Fewest points per tree when a small sum is split for more threads: a tree of m points
/// pays log2(m) inversions, which 1024 points amortise.
const MIN_BLOCK: usize = 1 << 10;

/// Points per rayon task (whole groups of about this many): at most [`BLOCK`], fewer when a
/// small sum must still give every thread two tasks.
fn run_len(points: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    (points / (2 * threads)).clamp(MIN_BLOCK, BLOCK)
}

/// Σ points[i] over `indices` (repeats allowed, identities skipped): [`sum_groups`] over
/// blocks of `indices` that are one task each, the block sums then added up. `simd` allows the
/// eight-lane batch solver.
pub fn sum_indexed<C: Curve>(points: &[C::Affine], indices: &[usize], simd: bool) -> C::Proj {
    let block = run_len(indices.len());
    let bounds: Vec<usize> = (0..indices.len())
        .step_by(block)
        .chain([indices.len()])
        .collect();
    let mut acc = C::Proj::default();
    for p in sum_groups::<C>(points, indices, &bounds, simd) {
        C::add_affine(&mut acc, &p);
    }
    acc
}

/// Σ points[i] for each group of `indices`: group g is `indices[bounds[g]..bounds[g + 1]]`.
/// Returns one affine point per group (the identity, (0, 0), where a group sums to zero).
///
/// All groups advance a level at a time together, so the pairs of many small groups share one
/// batch and one inversion. `simd` allows the eight-lane batch solver.
pub fn sum_groups<C: Curve>(
    points: &[C::Affine],
    indices: &[usize],
    bounds: &[usize],
    simd: bool,
) -> Vec<C::Affine> {
    // Runs of whole groups of about `run_len` points each, one rayon task per run.
    let len = run_len(indices.len());
    let mut runs = Vec::new();
    let mut first = 0;
    for g in 1..bounds.len() {
        if bounds[g] - bounds[first] >= len || g + 1 == bounds.len() {
            runs.push((first, g));
            first = g;
        }
    }
    runs.par_iter()
        .map(|&(g0, g1)| run_sums::<C>(points, indices, &bounds[g0..=g1], simd))
        .collect::<Vec<_>>()
        .concat()
}

/// The groups of one run, `bounds` being that run's slice of group boundaries.
fn run_sums<C: Curve>(
    points: &[C::Affine],
    indices: &[usize],
    bounds: &[usize],
    simd: bool,
) -> Vec<C::Affine> {
    let groups = bounds.len() - 1;
    // The current level: each group's points side by side, group g at
    // level[starts[g]..starts[g + 1]].
    let mut level = Vec::with_capacity(bounds[groups] - bounds[0]);
    let mut starts = Vec::with_capacity(groups + 1);
    for g in 0..groups {
        starts.push(level.len());
        let members = indices[bounds[g]..bounds[g + 1]].iter().map(|&i| points[i]);
        level.extend(members.filter(|p| !C::is_identity(p)));
    }
    starts.push(level.len());
    let mut solver = C::Batch::new(level.len() / 2, simd);
    let mut sums: Vec<Option<C::Affine>> = vec![None; level.len() / 2];
    let (mut next, mut next_starts) = (
        Vec::with_capacity(level.len()),
        Vec::with_capacity(groups + 1),
    );
    loop {
        let mut pairs = 0;
        for g in 0..groups {
            for pair in level[starts[g]..starts[g + 1]].chunks_exact(2) {
                let (x1, y1) = C::xy(&pair[0]);
                let (x2, y2) = C::xy(&pair[1]);
                solver.push(x1, y1, x2, y2);
                pairs += 1;
            }
        }
        if pairs == 0 {
            break;
        }
        solver.solve(|k, sum| sums[k] = sum.map(|(x, y)| C::from_xy(x, y)));
        // Group g's sums are the next (len / 2) entries of `sums`, in order; a cancelled pair
        // drops out and an odd point moves up unchanged.
        next.clear();
        next_starts.clear();
        let mut k = 0;
        for g in 0..groups {
            next_starts.push(next.len());
            let members = &level[starts[g]..starts[g + 1]];
            let half = members.len() / 2;
            next.extend(sums[k..k + half].iter().flatten());
            k += half;
            if members.len() % 2 == 1 {
                next.push(members[members.len() - 1]);
            }
        }
        next_starts.push(next.len());
        std::mem::swap(&mut level, &mut next);
        std::mem::swap(&mut starts, &mut next_starts);
    }
    let identity = C::from_xy(C::F::default(), C::F::default());
    (0..groups)
        .map(|g| {
            if starts[g + 1] > starts[g] {
                level[starts[g]]
            } else {
                identity
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::curve::{G1, G2};
    use super::*;
    use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine};
    use blstrs::{G1Affine, G1Projective, G2Projective};
    use group::{prime::PrimeCurveAffine, Curve as _, Group};
    use rand::{Rng, SeedableRng};

    /// Random points with repeats (doublings), negations (cancellations) and identities.
    fn points<P: Group + group::Curve>(n: usize, rng: &mut rand::rngs::StdRng) -> Vec<P::AffineRepr>
    where
        P::AffineRepr: PrimeCurveAffine + std::ops::Neg<Output = P::AffineRepr>,
    {
        let mut out: Vec<P::AffineRepr> = Vec::with_capacity(n);
        for i in 0..n {
            let p = match (i, rng.gen_range(0..6)) {
                (0, _) | (_, 0..=2) => P::random(&mut *rng).to_affine(),
                (_, 3) => out[rng.gen_range(0..i)],
                (_, 4) => -out[rng.gen_range(0..i)],
                _ => P::AffineRepr::identity(),
            };
            out.push(p);
        }
        out
    }

    #[test]
    fn g1_tree_sum_matches_the_naive_sum() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(31);
        for n in [0usize, 1, 2, 3, 17, BLOCK + 5, 3 * BLOCK] {
            let pts = points::<G1Projective>(n, &mut rng);
            let idx: Vec<usize> = (0..n).chain((0..n).step_by(7)).collect();
            let want: G1Projective = idx.iter().map(|&i| pts[i]).map(G1Projective::from).sum();
            // SAFETY: blstrs' G1Affine is a transparent wrapper over blst_p1_affine.
            let raw =
                unsafe { std::slice::from_raw_parts(pts.as_ptr() as *const blst_p1_affine, n) };
            for simd in [true, false] {
                let got: blst_p1 = sum_indexed::<G1>(raw, &idx, simd);
                // SAFETY: blstrs' G1Projective is a transparent wrapper over blst_p1.
                let got = unsafe { std::mem::transmute::<blst_p1, G1Projective>(got) };
                assert_eq!(got, want, "n = {n}, simd {simd}");
            }
        }
    }

    #[test]
    fn g2_tree_sum_matches_the_naive_sum() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(32);
        for n in [0usize, 1, 5, 300] {
            let pts = points::<G2Projective>(n, &mut rng);
            let idx: Vec<usize> = (0..n).collect();
            let want: G2Projective = pts.iter().map(G2Projective::from).sum();
            // SAFETY: blstrs' G2Affine is a transparent wrapper over blst_p2_affine.
            let raw =
                unsafe { std::slice::from_raw_parts(pts.as_ptr() as *const blst_p2_affine, n) };
            for simd in [true, false] {
                let got: blst_p2 = sum_indexed::<G2>(raw, &idx, simd);
                // SAFETY: blstrs' G2Projective is a transparent wrapper over blst_p2.
                let got = unsafe { std::mem::transmute::<blst_p2, G2Projective>(got) };
                assert_eq!(got, want, "n = {n}, simd {simd}");
            }
        }
    }

    #[test]
    fn all_cancelling_pairs_sum_to_the_identity() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(33);
        let p = G1Projective::random(&mut rng).to_affine();
        let pts: Vec<G1Affine> = vec![p, -p, p, -p];
        // SAFETY: as above.
        let raw = unsafe { std::slice::from_raw_parts(pts.as_ptr() as *const blst_p1_affine, 4) };
        for simd in [true, false] {
            let got: blst_p1 = sum_indexed::<G1>(raw, &[0, 1, 2, 3], simd);
            // SAFETY: as above.
            let got = unsafe { std::mem::transmute::<blst_p1, G1Projective>(got) };
            assert_eq!(got, G1Projective::identity());
        }
    }

    #[test]
    fn grouped_sums_match_the_naive_sums() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(34);
        let n = 3 * BLOCK;
        let pts = points::<G1Projective>(n, &mut rng);
        // Groups of 1 to 40 members (with repeats), some of them a point and its negation.
        let (mut indices, mut bounds) = (Vec::new(), vec![0]);
        while indices.len() < 2 * n {
            let size = rng.gen_range(1..=40);
            indices.extend((0..size).map(|_| rng.gen_range(0..n)));
            bounds.push(indices.len());
        }
        // SAFETY: blstrs' G1Affine is a transparent wrapper over blst_p1_affine.
        let raw = unsafe { std::slice::from_raw_parts(pts.as_ptr() as *const blst_p1_affine, n) };
        for simd in [true, false] {
            let got = sum_groups::<G1>(raw, &indices, &bounds, simd);
            assert_eq!(got.len(), bounds.len() - 1);
            for (g, p) in got.iter().enumerate() {
                let want: G1Projective = indices[bounds[g]..bounds[g + 1]]
                    .iter()
                    .map(|&i| G1Projective::from(pts[i]))
                    .sum();
                // SAFETY: as above, for one point.
                let p = unsafe { std::mem::transmute::<blst_p1_affine, G1Affine>(*p) };
                assert_eq!(G1Projective::from(p), want, "group {g}, simd {simd}");
            }
        }
    }
}
