//! The curve operations the batch-affine Pippenger needs, over blst's raw types.
//!
//! blst's own Pippenger keeps its buckets in XYZZ coordinates, paying about ten field
//! products per bucket addition. Adding in affine coordinates costs one inversion per
//! addition instead, which Montgomery's trick shares across a whole batch; what remains is
//! about six products. [`Curve`] exposes what that scheme needs of G1 and G2 (their
//! coordinate fields' arithmetic is [`Coord`], in `coord.rs`) and names the fastest solver of
//! batched additions for the group on this CPU.

use super::batch::AffineBatch;
#[cfg(not(target_arch = "x86_64"))]
use super::batch::ScalarBatch;
use super::coord::Coord;
use blst::{
    blst_fp, blst_fp2, blst_p1, blst_p1_add_or_double, blst_p1_add_or_double_affine,
    blst_p1_affine, blst_p1_double, blst_p2, blst_p2_add_or_double, blst_p2_add_or_double_affine,
    blst_p2_affine, blst_p2_double,
};

/// A short-Weierstrass group (y² = x³ + b) as blst represents it.
pub trait Curve: Send + Sync + 'static {
    /// The coordinate field.
    type F: Coord;
    /// The fastest solver of batched affine additions for this group on this CPU.
    type Batch: AffineBatch<Self::F>;
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
    ($name:ident, $f:ty, $batch:ty, $aff:ident, $proj:ty, $add_aff:ident, $add:ident, $dbl:ident) => {
        /// Marker for blst's group of the same name.
        pub struct $name;

        impl Curve for $name {
            type F = $f;
            type Batch = $batch;
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

#[cfg(target_arch = "x86_64")]
type G1Batch = super::simd_batch::G1Batch;
#[cfg(not(target_arch = "x86_64"))]
type G1Batch = ScalarBatch<blst_fp>;
#[cfg(target_arch = "x86_64")]
type G2Batch = super::simd_batch::G2Batch;
#[cfg(not(target_arch = "x86_64"))]
type G2Batch = ScalarBatch<blst_fp2>;

curve_impl!(
    G1,
    blst_fp,
    G1Batch,
    blst_p1_affine,
    blst_p1,
    blst_p1_add_or_double_affine,
    blst_p1_add_or_double,
    blst_p1_double
);
curve_impl!(
    G2,
    blst_fp2,
    G2Batch,
    blst_p2_affine,
    blst_p2,
    blst_p2_add_or_double_affine,
    blst_p2_add_or_double,
    blst_p2_double
);
