//! Solving a batch of affine additions with one shared inversion (Montgomery's trick).
//!
//! The bucket code queues additions (x₁, y₁) + (x₂, y₂) into a solver and asks for all the
//! sums at once. [`ScalarBatch`] works for any coordinate field; G1 and G2 use eight-lane
//! AVX-512 IFMA solvers where the CPU has them (`simd_batch`).

use super::coord::Coord;

/// Solves batches of affine additions of points that are not the identity.
///
/// For each addition the slope is λ = (y₂ − y₁)/(x₂ − x₁), or 3x₁²/2y₁ for a doubling, and
/// the sum is x₃ = λ² − x₁ − x₂, y₃ = λ·(x₁ − x₃) − y₁. Two points with x₁ = x₂ that are not
/// equal (or have y = 0) cancel.
pub trait AffineBatch<F>: Send {
    /// A solver for batches of up to `cap` additions; `simd` allows the eight-lane solver
    /// where the CPU has it ([`crate::prover::cpu::CpuOptions::vector_paths`]).
    fn new(cap: usize, simd: bool) -> Self;
    /// Queues (x₁, y₁) + (x₂, y₂). At most `cap` additions may wait for [`Self::solve`].
    fn push(&mut self, x1: &F, y1: &F, x2: &F, y2: &F);
    /// Solves the queued additions and empties the queue: `sink(k, Some((x₃, y₃)))` for the
    /// k-th addition queued, or `sink(k, None)` when its points cancel, each k once, in any
    /// order.
    fn solve(&mut self, sink: impl FnMut(usize, Option<(F, F)>));
}

/// The slope's denominator and numerator for (x₁, y₁) + (x₂, y₂), and whether the points
/// cancel (then the denominator is one, which keeps the batch's product invertible).
#[inline(always)]
pub fn slope_parts<F: Coord>(x1: &F, y1: &F, x2: &F, y2: &F, one: &F) -> (F, F, bool) {
    if !x1.eq(x2) {
        (x2.sub(x1), y2.sub(y1), false)
    } else if y1.eq(y2) && !y1.is_zero() {
        let xx = x1.sqr();
        (y1.add(y1), xx.add(&xx).add(&xx), false)
    } else {
        (*one, F::default(), true)
    }
}

/// The portable solver: Montgomery's trick with one field operation at a time.
pub struct ScalarBatch<F> {
    /// The queued operands (x₁, y₁, x₂, y₂).
    ops: Vec<[F; 4]>,
    den: Vec<F>,
    num: Vec<F>,
    prefix: Vec<F>,
    cancels: Vec<bool>,
    one: F,
}

impl<F: Coord> AffineBatch<F> for ScalarBatch<F> {
    /// The portable solver whatever `simd` says.
    fn new(cap: usize, _simd: bool) -> Self {
        ScalarBatch {
            ops: Vec::with_capacity(cap),
            den: vec![F::default(); cap],
            num: vec![F::default(); cap],
            prefix: vec![F::default(); cap],
            cancels: vec![false; cap],
            one: F::one(),
        }
    }

    #[inline]
    fn push(&mut self, x1: &F, y1: &F, x2: &F, y2: &F) {
        debug_assert!(self.ops.len() < self.den.len());
        self.ops.push([*x1, *y1, *x2, *y2]);
    }

    fn solve(&mut self, mut sink: impl FnMut(usize, Option<(F, F)>)) {
        let mut running = self.one;
        for (k, [x1, y1, x2, y2]) in self.ops.iter().enumerate() {
            let (den, num, cancels) = slope_parts(x1, y1, x2, y2, &self.one);
            (self.den[k], self.num[k], self.cancels[k]) = (den, num, cancels);
            self.prefix[k] = running;
            running = running.mul(&den);
        }
        let mut inv = running.inverse();
        for (k, [x1, y1, x2, _]) in self.ops.iter().enumerate().rev() {
            let den_inv = inv.mul(&self.prefix[k]);
            inv = inv.mul(&self.den[k]);
            if self.cancels[k] {
                sink(k, None);
                continue;
            }
            let lambda = self.num[k].mul(&den_inv);
            let x3 = lambda.sqr().sub(x1).sub(x2);
            let y3 = lambda.mul(&x1.sub(&x3)).sub(y1);
            sink(k, Some((x3, y3)));
        }
        self.ops.clear();
    }
}
