//! Arithmetic in the coordinate fields of the batch-affine Pippenger (Fp for G1, Fp2 for
//! G2), on blst's Montgomery-form values: the operations the batched affine additions
//! (`batch`, `simd_batch`) and the bucket code use, and nothing of the curve.

use super::fp;
use blst::{blst_fp, blst_fp2};

/// Arithmetic in a coordinate field (Fp or Fp2), values in blst's Montgomery form.
///
/// blst keeps every result fully reduced, so equal field elements have equal limbs.
pub trait Coord: Copy + Default + Send + Sync {
    /// The multiplicative identity.
    fn one() -> Self;
    /// `self + b`.
    fn add(&self, b: &Self) -> Self;
    /// `self − b`.
    fn sub(&self, b: &Self) -> Self;
    /// `self · b`.
    fn mul(&self, b: &Self) -> Self;
    /// `self²`.
    fn sqr(&self) -> Self;
    /// `−self` when `flag`, else `self`.
    fn cneg(&self, flag: bool) -> Self;
    /// `self⁻¹` (zero maps to zero).
    fn inverse(&self) -> Self;
    /// `self == b`.
    fn eq(&self, b: &Self) -> bool;
    /// `self == 0`.
    fn is_zero(&self) -> bool;
}

/// Calls a blst field function `f(out, inputs…)` and returns `out`.
macro_rules! blst_call {
    ($t:ty, $f:ident($($arg:expr),*)) => {{
        let mut r = <$t>::default();
        // SAFETY: the inputs are valid, initialised field elements that live for the call,
        // and blst writes only to the separate output `r`.
        unsafe { blst::$f(&mut r, $($arg),*) };
        r
    }};
}

/// One in Montgomery form: R mod p, which blst produces from the integer 1.
fn fp_one() -> blst_fp {
    let one = [1u64, 0, 0, 0, 0, 0];
    blst_call!(blst_fp, blst_fp_from_uint64(one.as_ptr()))
}

impl Coord for blst_fp {
    fn one() -> Self {
        fp_one()
    }
    #[inline(always)]
    fn add(&self, b: &Self) -> Self {
        fp::add(self, b)
    }
    #[inline(always)]
    fn sub(&self, b: &Self) -> Self {
        fp::sub(self, b)
    }
    #[inline(always)]
    fn mul(&self, b: &Self) -> Self {
        blst_call!(blst_fp, blst_fp_mul(self, b))
    }
    #[inline(always)]
    fn sqr(&self) -> Self {
        blst_call!(blst_fp, blst_fp_sqr(self))
    }
    #[inline(always)]
    fn cneg(&self, flag: bool) -> Self {
        fp::cneg(self, flag)
    }
    fn inverse(&self) -> Self {
        blst_call!(blst_fp, blst_fp_eucl_inverse(self))
    }
    #[inline(always)]
    fn eq(&self, b: &Self) -> bool {
        fp::eq(self, b)
    }
    #[inline(always)]
    fn is_zero(&self) -> bool {
        fp::is_zero(self)
    }
}

/// Applies an Fp operation to both components of Fp2 elements.
macro_rules! fp2_map {
    ($a:expr, $b:expr, $f:path) => {
        blst_fp2 {
            fp: [$f(&$a.fp[0], &$b.fp[0]), $f(&$a.fp[1], &$b.fp[1])],
        }
    };
}

impl Coord for blst_fp2 {
    fn one() -> Self {
        blst_fp2 {
            fp: [fp_one(), blst_fp::default()],
        }
    }
    #[inline(always)]
    fn add(&self, b: &Self) -> Self {
        fp2_map!(self, b, fp::add)
    }
    #[inline(always)]
    fn sub(&self, b: &Self) -> Self {
        fp2_map!(self, b, fp::sub)
    }
    #[inline(always)]
    fn mul(&self, b: &Self) -> Self {
        blst_call!(blst_fp2, blst_fp2_mul(self, b))
    }
    #[inline(always)]
    fn sqr(&self) -> Self {
        blst_call!(blst_fp2, blst_fp2_sqr(self))
    }
    #[inline(always)]
    fn cneg(&self, flag: bool) -> Self {
        blst_fp2 {
            fp: [fp::cneg(&self.fp[0], flag), fp::cneg(&self.fp[1], flag)],
        }
    }
    fn inverse(&self) -> Self {
        blst_call!(blst_fp2, blst_fp2_eucl_inverse(self))
    }
    #[inline(always)]
    fn eq(&self, b: &Self) -> bool {
        fp::eq(&self.fp[0], &b.fp[0]) && fp::eq(&self.fp[1], &b.fp[1])
    }
    #[inline(always)]
    fn is_zero(&self) -> bool {
        fp::is_zero(&self.fp[0]) && fp::is_zero(&self.fp[1])
    }
}
