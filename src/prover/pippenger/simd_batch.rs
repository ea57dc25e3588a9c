//! The batch of affine additions solved eight at a time in AVX-512 IFMA registers.
//!
//! Addition k of a batch goes to lane k mod 8 of group k / 8. Each lane keeps its own running
//! product of denominators (Montgomery's trick, eight chains side by side); the eight lane
//! totals are inverted together with one scalar inversion; the backward walk then yields
//! every denominator's inverse, the slope and the sum, a group of eight per step. Values in
//! registers are kept below 2p; what leaves for blst or the buckets is fully reduced. The
//! denominators and numerators are formed in the vector registers too; doublings and
//! cancellations (x₁ = x₂) are found with a vector compare and blended in.

#![cfg(target_arch = "x86_64")]

use super::batch::{AffineBatch, ScalarBatch};
use super::coord::Coord;
use super::fp52::{detected, Fp2x8, Fp8, Packed, LANES};

/// The G1 solver.
pub type G1Batch = SimdBatch<Fp8>;
/// The G2 solver.
pub type G2Batch = SimdBatch<Fp2x8>;

/// Eight lanes where the CPU has IFMA, else [`ScalarBatch`].
pub enum SimdBatch<P: Packed> {
    /// The vector path, with its scratch space.
    Vector(Box<Scratch<P>>),
    /// No IFMA on this CPU, or the `simd` option unset.
    Scalar(ScalarBatch<P::Elem>),
}

/// One batch in groups of eight lanes: the operands, what the forward walk derives from
/// them, and the sums.
pub struct Scratch<P: Packed> {
    len: usize,
    x1: Vec<P::Store>,
    y1: Vec<P::Store>,
    x2: Vec<P::Store>,
    y2: Vec<P::Store>,
    den: Vec<P::Store>,
    num: Vec<P::Store>,
    prefix: Vec<P::Store>,
    out_x: Vec<P::Store>,
    out_y: Vec<P::Store>,
    /// Per group, the lanes whose points cancel.
    cancels: Vec<u8>,
    /// Eight copies of one and of zero.
    ones: P::Store,
    zeros: P::Store,
}

impl<P: Packed + Send> AffineBatch<P::Elem> for SimdBatch<P> {
    fn new(cap: usize, simd: bool) -> Self {
        // `detected()` is checked here whatever the caller found: it is what makes the
        // `Vector` variant's unsafe calls sound.
        if !(simd && detected()) {
            return SimdBatch::Scalar(ScalarBatch::new(cap, false));
        }
        let groups = cap.div_ceil(LANES);
        let rows = || vec![P::Store::default(); groups];
        let mut ones = P::Store::default();
        for lane in 0..LANES {
            P::set(&mut ones, lane, &P::Elem::one());
        }
        SimdBatch::Vector(Box::new(Scratch {
            len: 0,
            x1: rows(),
            y1: rows(),
            x2: rows(),
            y2: rows(),
            den: rows(),
            num: rows(),
            prefix: rows(),
            out_x: rows(),
            out_y: rows(),
            cancels: vec![0; groups],
            ones,
            zeros: P::Store::default(),
        }))
    }

    #[inline]
    fn push(&mut self, x1: &P::Elem, y1: &P::Elem, x2: &P::Elem, y2: &P::Elem) {
        match self {
            SimdBatch::Scalar(s) => s.push(x1, y1, x2, y2),
            SimdBatch::Vector(v) => v.push(x1, y1, x2, y2),
        }
    }

    fn solve(&mut self, mut sink: impl FnMut(usize, Option<(P::Elem, P::Elem)>)) {
        let v = match self {
            SimdBatch::Scalar(s) => return s.solve(sink),
            SimdBatch::Vector(v) => v,
        };
        if v.len == 0 {
            return;
        }
        v.pad();
        let groups = v.len.div_ceil(LANES);
        // SAFETY: `Vector` is built only when `detected()` found AVX-512F and IFMA.
        let totals = unsafe { forward(v, groups) };
        let inverses = lane_inverses::<P>(&totals);
        // SAFETY: as above.
        unsafe { backward(v, groups, &inverses) };
        for k in 0..v.len {
            let (g, lane) = (k / LANES, k % LANES);
            if v.cancels[g] >> lane & 1 != 0 {
                sink(k, None);
            } else {
                sink(
                    k,
                    Some((P::get(&v.out_x[g], lane), P::get(&v.out_y[g], lane))),
                );
            }
        }
        v.len = 0;
    }
}

impl<P: Packed> Scratch<P> {
    #[inline]
    fn push(&mut self, x1: &P::Elem, y1: &P::Elem, x2: &P::Elem, y2: &P::Elem) {
        let (g, lane) = (self.len / LANES, self.len % LANES);
        P::set(&mut self.x1[g], lane, x1);
        P::set(&mut self.y1[g], lane, y1);
        P::set(&mut self.x2[g], lane, x2);
        P::set(&mut self.y2[g], lane, y2);
        self.len += 1;
    }

    /// Fills the last group's unused lanes with (0, 0) + (1, 0): x₁ ≠ x₂, so the lane takes
    /// the ordinary path with denominator one and its garbage sum is never read.
    fn pad(&mut self) {
        let one = P::Elem::one();
        let zero = P::Elem::default();
        for k in self.len..self.len.div_ceil(LANES) * LANES {
            let (g, lane) = (k / LANES, k % LANES);
            P::set(&mut self.x1[g], lane, &zero);
            P::set(&mut self.y1[g], lane, &zero);
            P::set(&mut self.x2[g], lane, &one);
            P::set(&mut self.y2[g], lane, &zero);
        }
    }
}

/// Forms each group's denominators and numerators and the running products of the
/// denominators per lane (each group's value before its own factor kept in `prefix`);
/// returns the eight lane totals.
///
/// # Safety
/// The CPU must have AVX-512F and IFMA.
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn forward<P: Packed>(s: &mut Scratch<P>, groups: usize) -> P::Store {
    let one = P::load(&s.ones);
    let mut running = one;
    for g in 0..groups {
        let (x1, y1) = (P::load(&s.x1[g]), P::load(&s.y1[g]));
        let (x2, y2) = (P::load(&s.x2[g]), P::load(&s.y2[g]));
        let mut den = P::sub(&x2, &x1);
        let mut num = P::sub(&y2, &y1);
        let same_x = P::eq_mask(&x1, &x2);
        s.cancels[g] = 0;
        if same_x != 0 {
            // Rare: the same point (doubling: 3x²/2y) or its negation (the sum is the
            // identity; denominator one keeps the lane's product invertible).
            let zero = P::load(&s.zeros);
            let doubles = same_x & P::eq_mask(&y1, &y2) & !P::eq_mask(&y1, &zero);
            let cancels = same_x & !doubles;
            let xx = P::sqr(&x1);
            den = P::blend(doubles, &den, &P::add(&y1, &y1));
            num = P::blend(doubles, &num, &P::add(&P::add(&xx, &xx), &xx));
            den = P::blend(cancels, &den, &one);
            s.cancels[g] = cancels;
        }
        den.store(&mut s.den[g]);
        num.store(&mut s.num[g]);
        running.store(&mut s.prefix[g]);
        running = P::mul(&running, &den);
    }
    let mut totals = P::Store::default();
    P::canonical(&running).store(&mut totals);
    totals
}

/// Walks the groups backwards: each denominator's inverse from the lane's running inverse
/// and prefix, then the slope λ, x₃ = λ² − (x₁ + x₂) and y₃ = λ(x₁ − x₃) − y₁.
///
/// # Safety
/// The CPU must have AVX-512F and IFMA.
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn backward<P: Packed>(s: &mut Scratch<P>, groups: usize, inverses: &P::Store) {
    let mut inv = P::load(inverses);
    for g in (0..groups).rev() {
        let den_inv = P::mul(&inv, &P::load(&s.prefix[g]));
        inv = P::mul(&inv, &P::load(&s.den[g]));
        let lambda = P::mul(&P::load(&s.num[g]), &den_inv);
        let x1 = P::load(&s.x1[g]);
        let sum_x = P::add(&x1, &P::load(&s.x2[g]));
        let x3 = P::sub(&P::sqr(&lambda), &sum_x);
        let y3 = P::sub(&P::mul(&lambda, &P::sub(&x1, &x3)), &P::load(&s.y1[g]));
        P::canonical(&x3).store(&mut s.out_x[g]);
        P::canonical(&y3).store(&mut s.out_y[g]);
    }
}

/// The inverses of the eight lane totals with one field inversion (Montgomery's trick again,
/// in scalar code: it runs once per batch).
fn lane_inverses<P: Packed>(totals: &P::Store) -> P::Store {
    let t: [P::Elem; LANES] = std::array::from_fn(|lane| P::get(totals, lane));
    let mut prefix = [P::Elem::one(); LANES];
    for lane in 1..LANES {
        prefix[lane] = prefix[lane - 1].mul(&t[lane - 1]);
    }
    let mut inv = prefix[LANES - 1].mul(&t[LANES - 1]).inverse();
    let mut out = P::Store::default();
    for lane in (0..LANES).rev() {
        P::set(&mut out, lane, &inv.mul(&prefix[lane]));
        inv = inv.mul(&t[lane]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use blst::{blst_fp, blst_fp2};
    use blstrs::{Fp, Fp2};
    use ff::Field;
    use rand::{Rng, SeedableRng};

    fn fp(x: Fp) -> blst_fp {
        // SAFETY: blstrs' Fp is a transparent wrapper over blst_fp.
        unsafe { std::mem::transmute::<Fp, blst_fp>(x) }
    }

    fn fp2(x: Fp2) -> blst_fp2 {
        // SAFETY: blstrs' Fp2 is a transparent wrapper over blst_fp2.
        unsafe { std::mem::transmute::<Fp2, blst_fp2>(x) }
    }

    type Sums<F> = Vec<Option<(F, F)>>;

    fn run<F: Coord, B: AffineBatch<F>>(solver: &mut B, ops: &[[F; 4]]) -> Sums<F> {
        for [x1, y1, x2, y2] in ops {
            solver.push(x1, y1, x2, y2);
        }
        let mut out = vec![None; ops.len()];
        solver.solve(|k, sum| out[k] = sum);
        out
    }

    /// Random operands of every awkward batch length, with doublings (x₁ = x₂, y₁ = y₂),
    /// cancellations (y₂ = −y₁) and y = 0 mixed in, through both solvers twice (the second
    /// time reusing the solver).
    fn agree<P: Packed + Send>(random: impl Fn(&mut rand::rngs::StdRng) -> P::Elem)
    where
        P::Elem: PartialEq + std::fmt::Debug,
    {
        let mut rng = rand::rngs::StdRng::seed_from_u64(53);
        let zero = P::Elem::default();
        for n in [1usize, 7, 8, 9, 100, 1024] {
            let ops: Vec<[P::Elem; 4]> = (0..n)
                .map(|_| {
                    let (x1, y1) = (random(&mut rng), random(&mut rng));
                    match rng.gen_range(0..8) {
                        0 => [x1, y1, x1, y1],
                        1 => [x1, y1, x1, zero.sub(&y1)],
                        2 => [x1, zero, x1, zero],
                        _ => [x1, y1, random(&mut rng), random(&mut rng)],
                    }
                })
                .collect();
            let want = run(&mut ScalarBatch::new(n, false), &ops);
            let mut solver = SimdBatch::<P>::new(n, true);
            assert!(
                !matches!(solver, SimdBatch::Scalar(_)),
                "this CPU lacks AVX-512 IFMA: run the ignored `ifma_` tests where it has it"
            );
            assert!(want.iter().any(|s| s.is_none()) || n < 8);
            assert_eq!(run(&mut solver, &ops), want, "n = {n}");
            assert_eq!(run(&mut solver, &ops), want, "n = {n}, reused");
        }
    }

    #[test]
    #[ignore = "needs AVX-512 IFMA; scripts/test.sh runs the `ifma_` tests with --ignored where the CPU has it"]
    fn ifma_g1_vector_and_scalar_batches_agree() {
        agree::<Fp8>(|rng| fp(Fp::random(rng)));
    }

    #[test]
    #[ignore = "needs AVX-512 IFMA; scripts/test.sh runs the `ifma_` tests with --ignored where the CPU has it"]
    fn ifma_g2_vector_and_scalar_batches_agree() {
        agree::<Fp2x8>(|rng| fp2(Fp2::random(rng)));
    }
}
