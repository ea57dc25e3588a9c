//! Solving a batch of affine additions with one shared inversion (Montgomery's trick).
//!
//! The bucket code reduces each queued addition (x₁, y₁) + (x₂, y₂) to an [`Addition`]: the
//! slope's numerator and denominator and the coordinates the result needs. A batch solver
//! turns a slice of them into the sums. [`ScalarBatch`] works for any coordinate field; a
//! field may provide a faster one (G1's Fp uses eight-lane AVX-512 IFMA products where the
//! CPU has them, see `fp52`).

use super::curve::Coord;

/// One affine addition, reduced to what the slope λ = num / den and the sum need.
#[derive(Clone, Copy, Debug, Default)]
pub struct Addition<F> {
    /// x₂ − x₁; 2·y₁ for a doubling; one for a cancellation (any invertible value will do).
    pub den: F,
    /// y₂ − y₁; 3·x₁² for a doubling; zero for a cancellation.
    pub num: F,
    /// x₁ + x₂.
    pub sum_x: F,
    /// The first point's coordinates.
    pub x1: F,
    pub y1: F,
}

/// Solves batches of affine additions: `out[k] = (x₃, y₃)` with λ = num/den,
/// x₃ = λ² − (x₁ + x₂) and y₃ = λ·(x₁ − x₃) − y₁. Cancellations yield garbage that the caller
/// ignores.
pub trait AffineBatch<F>: Send {
    /// A solver for batches of up to `cap` additions.
    fn new(cap: usize) -> Self;
    /// Solves `adds` into `out` (same length, at most `cap`).
    fn solve(&mut self, adds: &[Addition<F>], out: &mut [(F, F)]);
}

/// The portable solver: Montgomery's trick with one field operation at a time.
pub struct ScalarBatch<F> {
    prefix: Vec<F>,
}

impl<F: Coord> AffineBatch<F> for ScalarBatch<F> {
    fn new(cap: usize) -> Self {
        ScalarBatch {
            prefix: vec![F::default(); cap],
        }
    }

    fn solve(&mut self, adds: &[Addition<F>], out: &mut [(F, F)]) {
        let n = adds.len();
        debug_assert!(n <= self.prefix.len() && out.len() == n);
        if n == 0 {
            return;
        }
        let mut running = adds[0].den;
        self.prefix[0] = F::one();
        for (prefix, a) in self.prefix[1..n].iter_mut().zip(&adds[1..]) {
            *prefix = running;
            running = running.mul(&a.den);
        }
        let mut inv = running.inverse();
        for k in (0..n).rev() {
            let a = &adds[k];
            let den_inv = inv.mul(&self.prefix[k]);
            inv = inv.mul(&a.den);
            out[k] = sum(a, &a.num.mul(&den_inv));
        }
    }
}

/// (x₃, y₃) from the slope.
#[inline(always)]
fn sum<F: Coord>(a: &Addition<F>, lambda: &F) -> (F, F) {
    let x3 = lambda.sqr().sub(&a.sum_x);
    let y3 = lambda.mul(&a.x1.sub(&x3)).sub(&a.y1);
    (x3, y3)
}
