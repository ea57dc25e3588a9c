//! The batch of affine additions solved eight at a time in AVX-512 IFMA registers.
//!
//! Addition k of a batch goes to lane k mod 8 of group k / 8. Each lane keeps its own running
//! product of denominators (Montgomery's trick, eight chains side by side); the eight lane
//! totals are inverted together with one scalar inversion; the backward walk then yields
//! every denominator's inverse, the slope and the sum, a group of eight per step.

#![cfg(target_arch = "x86_64")]

use super::batch::{Addition, AffineBatch, ScalarBatch};
use super::curve::Coord;
use super::fp52::{available, Fp2x8, Fp8, Packed, LANES};

/// The G1 solver.
pub type G1Batch = SimdBatch<Fp8>;
/// The G2 solver.
pub type G2Batch = SimdBatch<Fp2x8>;

/// Eight lanes where the CPU has IFMA, else [`ScalarBatch`].
pub enum SimdBatch<P: Packed> {
    /// The vector path, with its scratch space.
    Vector(Box<Scratch<P>>),
    /// No IFMA on this CPU (or `CUZK_CPU_SIMD=off`).
    Scalar(ScalarBatch<P::Elem>),
}

/// Staged inputs and outputs of one batch in groups of eight, and the prefix products.
pub struct Scratch<P: Packed> {
    den: Vec<P::Store>,
    num: Vec<P::Store>,
    sum_x: Vec<P::Store>,
    x1: Vec<P::Store>,
    y1: Vec<P::Store>,
    prefix: Vec<P::Store>,
    out_x: Vec<P::Store>,
    out_y: Vec<P::Store>,
}

impl<P: Packed + Send> AffineBatch<P::Elem> for SimdBatch<P> {
    fn new(cap: usize) -> Self {
        if !available() {
            return SimdBatch::Scalar(ScalarBatch::new(cap));
        }
        let rows = || vec![P::Store::default(); cap.div_ceil(LANES)];
        SimdBatch::Vector(Box::new(Scratch {
            den: rows(),
            num: rows(),
            sum_x: rows(),
            x1: rows(),
            y1: rows(),
            prefix: rows(),
            out_x: rows(),
            out_y: rows(),
        }))
    }

    fn solve(&mut self, adds: &[Addition<P::Elem>], out: &mut [(P::Elem, P::Elem)]) {
        match self {
            SimdBatch::Scalar(s) => s.solve(adds, out),
            SimdBatch::Vector(v) => {
                v.stage(adds);
                let groups = adds.len().div_ceil(LANES);
                // SAFETY: `Vector` is built only when `available()` found AVX-512F and IFMA.
                let totals = unsafe { prefix_products(v, groups) };
                let inverses = lane_inverses::<P>(&totals);
                // SAFETY: as above.
                unsafe { backward(v, groups, &inverses) };
                v.unstage(out);
            }
        }
    }
}

impl<P: Packed> Scratch<P> {
    /// Copies the additions into groups of eight; the lanes past the end get denominator
    /// one, so every lane's product stays invertible.
    fn stage(&mut self, adds: &[Addition<P::Elem>]) {
        let one = P::Elem::one();
        let groups = adds.len().div_ceil(LANES);
        for k in adds.len()..groups * LANES {
            P::set(&mut self.den[k / LANES], k % LANES, &one);
        }
        for (k, a) in adds.iter().enumerate() {
            let (g, lane) = (k / LANES, k % LANES);
            P::set(&mut self.den[g], lane, &a.den);
            P::set(&mut self.num[g], lane, &a.num);
            P::set(&mut self.sum_x[g], lane, &a.sum_x);
            P::set(&mut self.x1[g], lane, &a.x1);
            P::set(&mut self.y1[g], lane, &a.y1);
        }
    }

    fn unstage(&self, out: &mut [(P::Elem, P::Elem)]) {
        for (k, o) in out.iter_mut().enumerate() {
            let (g, lane) = (k / LANES, k % LANES);
            *o = (P::get(&self.out_x[g], lane), P::get(&self.out_y[g], lane));
        }
    }
}

/// Running products of the denominators per lane, each group's value before its own factor
/// kept in `prefix`; returns the eight lane totals.
///
/// # Safety
/// The CPU must have AVX-512F and IFMA.
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn prefix_products<P: Packed>(s: &mut Scratch<P>, groups: usize) -> P::Store {
    let one = P::Elem::one();
    let mut ones = P::Store::default();
    for lane in 0..LANES {
        P::set(&mut ones, lane, &one);
    }
    let mut running = P::load(&ones);
    for g in 0..groups {
        running.store(&mut s.prefix[g]);
        running = P::mul(&running, &P::load(&s.den[g]));
    }
    let mut totals = P::Store::default();
    running.store(&mut totals);
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
        let x3 = P::sub(&P::sqr(&lambda), &P::load(&s.sum_x[g]));
        let dx = P::sub(&P::load(&s.x1[g]), &x3);
        let y3 = P::sub(&P::mul(&lambda, &dx), &P::load(&s.y1[g]));
        x3.store(&mut s.out_x[g]);
        y3.store(&mut s.out_y[g]);
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
    use rand::SeedableRng;

    fn fp(x: Fp) -> blst_fp {
        // SAFETY: blstrs' Fp is a transparent wrapper over blst_fp.
        unsafe { std::mem::transmute::<Fp, blst_fp>(x) }
    }

    fn fp2(x: Fp2) -> blst_fp2 {
        // SAFETY: blstrs' Fp2 is a transparent wrapper over blst_fp2.
        unsafe { std::mem::transmute::<Fp2, blst_fp2>(x) }
    }

    /// Random batches of every awkward length through both solvers.
    fn agree<P: Packed + Send>(random: impl Fn(&mut rand::rngs::StdRng) -> P::Elem)
    where
        P::Elem: PartialEq + std::fmt::Debug,
    {
        let mut rng = rand::rngs::StdRng::seed_from_u64(53);
        for n in [1usize, 7, 8, 9, 100, 1024] {
            let adds: Vec<Addition<P::Elem>> = (0..n)
                .map(|_| Addition {
                    den: random(&mut rng),
                    num: random(&mut rng),
                    sum_x: random(&mut rng),
                    x1: random(&mut rng),
                    y1: random(&mut rng),
                })
                .collect();
            let zero = (P::Elem::default(), P::Elem::default());
            let mut want = vec![zero; n];
            ScalarBatch::new(n).solve(&adds, &mut want);
            let mut solver = SimdBatch::<P>::new(n);
            if matches!(solver, SimdBatch::Scalar(_)) {
                eprintln!("skipped: no AVX-512 IFMA on this CPU; the vector batch was not run");
                return;
            }
            let mut got = vec![zero; n];
            solver.solve(&adds, &mut got);
            assert_eq!(got, want, "n = {n}");
        }
    }

    #[test]
    fn g1_vector_and_scalar_batches_agree() {
        agree::<Fp8>(|rng| fp(Fp::random(rng)));
    }

    #[test]
    fn g2_vector_and_scalar_batches_agree() {
        agree::<Fp2x8>(|rng| fp2(Fp2::random(rng)));
    }
}
