//! Byte views of host slices, for copies to and from the device: the one place where such a
//! view is made, so the one place that argues why it is sound.

use blstrs::{G1Affine, G2Affine, Scalar};

/// A type whose values are plain bytes: no padding, no pointers, no interior mutability, so
/// that every byte of a slice of them is initialised and may be read as a `u8`.
///
/// # Safety
/// Implement only for such types.
pub unsafe trait Plain: Copy + 'static {}

/// A [`Plain`] type of which every byte pattern is a valid value, so that a slice of them may
/// be written through a byte view (a download from the device).
///
/// # Safety
/// Implement only for such types.
pub unsafe trait AnyBits: Plain {}

// SAFETY: integers are plain bytes, every pattern valid.
unsafe impl Plain for u8 {}
// SAFETY: as above.
unsafe impl AnyBits for u8 {}
// SAFETY: as above.
unsafe impl Plain for u32 {}
// SAFETY: as above.
unsafe impl AnyBits for u32 {}
// SAFETY: as above.
unsafe impl Plain for u64 {}
// SAFETY: as above.
unsafe impl AnyBits for u64 {}
// SAFETY: arrays of plain values are plain (no padding between elements), every pattern a
// value where the element's are.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {}
// SAFETY: as above.
unsafe impl<T: AnyBits, const N: usize> AnyBits for [T; N] {}
// SAFETY: a bool is one initialised byte (0 or 1); not AnyBits, since other bytes are invalid.
unsafe impl Plain for bool {}
// SAFETY: blstrs' Scalar is repr(transparent) over blst_fr, four u64 limbs: no padding, and
// any limbs are a value of the type (not necessarily a reduced one: the device writes reduced
// Montgomery forms).
unsafe impl Plain for Scalar {}
// SAFETY: as above.
unsafe impl AnyBits for Scalar {}
// SAFETY: a shape's term is repr(C) of two u32 (8 bytes, asserted in r1cs.rs): no padding,
// every pattern a value.
unsafe impl Plain for crate::synth::Term {}
// SAFETY: blstrs' affine points are repr(transparent) over blst's affine structs, two (G1) or
// four (G2) field elements of six u64 limbs each: no padding. Not AnyBits: only read.
unsafe impl Plain for G1Affine {}
// SAFETY: as above.
unsafe impl Plain for G2Affine {}

/// The bytes of `v`.
pub fn bytes<T: Plain>(v: &[T]) -> &[u8] {
    // SAFETY: T is Plain, so every byte of the slice is initialised; u8 needs no alignment;
    // the view borrows `v` for its whole life.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// The bytes of `v`, writable.
pub fn bytes_mut<T: AnyBits>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `bytes`; and T is AnyBits, so whatever is written leaves valid values; the
    // view borrows `v` mutably for its whole life.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_are_the_little_endian_bytes() {
        assert_eq!(
            bytes(&[0x0403_0201u32, 0x0807_0605]),
            [1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(bytes(&[true, false]), [1, 0]);
        let mut v = [0u64; 2];
        bytes_mut(&mut v)[8] = 9;
        assert_eq!(v, [0, 9]);
        assert_eq!(bytes(&[Scalar::from(1u64)]).len(), 32);
    }
}
