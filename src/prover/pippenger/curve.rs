//! The field and curve operations the batch-affine Pippenger needs, over blst's raw types.
//!
//! blst's own Pippenger keeps its buckets in XYZZ coordinates, paying about ten field
//! products per bucket addition. Adding in affine coordinates costs one inversion per
//! addition instead, which Montgomery's trick shares across a whole batch; what remains is
//! about six products. The traits below expose exactly the operations that scheme uses, for
//! G1 (coordinates in Fp) and G2 (coordinates in Fp2), on blst's Montgomery-form values.

use super::batch::AffineBatch;
#[cfg(not(target_arch = "x86_64"))]
use super::batch::ScalarBatch;
use super::fp;
use blst::{
    blst_fp, blst_fp2, blst_p1, blst_p1_add_or_double, blst_p1_add_or_double_affine,
    blst_p1_affine, blst_p1_double, blst_p2, blst_p2_add_or_double, blst_p2_add_or_double_affine,
    blst_p2_affine, blst_p2_double,
};

/// Arithmetic in a coordinate field (Fp or Fp2), values in blst's Montgomery form.
///
/// blst keeps every result fully reduced, so equal field elements have equal limbs.
pub trait Coord: Copy + Default + Send + Sync {
    /// The fastest solver of batched affine additions for this field on this CPU.
    type Batch: AffineBatch<Self>;
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
    #[cfg(target_arch = "x86_64")]
    type Batch = super::simd_batch::G1Batch;
    #[cfg(not(target_arch = "x86_64"))]
    type Batch = ScalarBatch<blst_fp>;
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
    #[cfg(target_arch = "x86_64")]
    type Batch = super::simd_batch::G2Batch;
    #[cfg(not(target_arch = "x86_64"))]
    type Batch = ScalarBatch<blst_fp2>;
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

/// A short-Weierstrass group (y² = x³ + b) as blst represents it.
pub trait Curve: Send + Sync + 'static {
    /// The coordinate field.
    type F: Coord;
    /// blst's affine point; the identity is encoded as (0, 0).
    type Affine: Copy + Send + Sync;
    /// blst's Jacobian point.
    type Proj: Copy + Default + Send + Sync;

    /// The coordinates of `p`.
    fn xy(p: &Self::Affine) -> (&Self::F, &Self::F);
    /// The affine point (x, y); the caller guarantees it is on the curve.
    fn from_xy(x: Self::F, y: Self::F) -> Self::Affine;
    /// Whether `p` is the identity.
    fn is_identity(p: &Self::Affine) -> bool;
    /// `acc += p` (any inputs, identity included).
    fn add_affine(acc: &mut Self::Proj, p: &Self::Affine);
    /// `acc += p` (any inputs, identity included).
    fn add(acc: &mut Self::Proj, p: &Self::Proj);
    /// `acc = 2·acc`.
    fn double(acc: &mut Self::Proj);
}

macro_rules! curve_impl {
    ($name:ident, $f:ty, $aff:ident, $proj:ty, $add_aff:ident, $add:ident, $dbl:ident) => {
        /// Marker for blst's group of the same name.
        pub struct $name;

        impl Curve for $name {
            type F = $f;
            type Affine = $aff;
            type Proj = $proj;

            #[inline(always)]
            fn xy(p: &$aff) -> (&$f, &$f) {
                (&p.x, &p.y)
            }
            #[inline(always)]
            fn from_xy(x: $f, y: $f) -> $aff {
                $aff { x, y }
            }
            #[inline(always)]
            fn is_identity(p: &$aff) -> bool {
                // blst encodes the affine identity as all-zero coordinates, and no point
                // of the curve has x = y = 0 (b ≠ 0).
                p.x.is_zero() && p.y.is_zero()
            }
            #[inline(always)]
            fn add_affine(acc: &mut $proj, p: &$aff) {
                let a = *acc;
                // SAFETY: valid points; blst allows the output to differ from the inputs,
                // which it does here since `a` is a copy.
                unsafe { $add_aff(acc, &a, p) };
            }
            #[inline(always)]
            fn add(acc: &mut $proj, p: &$proj) {
                let a = *acc;
                // SAFETY: as in `add_affine`.
                unsafe { $add(acc, &a, p) };
            }
            #[inline(always)]
            fn double(acc: &mut $proj) {
                let a = *acc;
                // SAFETY: as in `add_affine`.
                unsafe { $dbl(acc, &a) };
            }
        }
    };
}

curve_impl!(
    G1,
    blst_fp,
    blst_p1_affine,
    blst_p1,
    blst_p1_add_or_double_affine,
    blst_p1_add_or_double,
    blst_p1_double
);
curve_impl!(
    G2,
    blst_fp2,
    blst_p2_affine,
    blst_p2,
    blst_p2_add_or_double_affine,
    blst_p2_add_or_double,
    blst_p2_double
);
