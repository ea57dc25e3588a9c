//! Eight Fr products at once with AVX-512 IFMA, for the CPU quotient's transforms.
//!
//! blst multiplies one Fr element at a time with 64-bit `mulx`; in the quotient's seven
//! transforms those products are most of the time. The butterflies of a stage are
//! independent, so eight of them can run in the eight 64-bit lanes of a 512-bit register.
//! IFMA multiplies 52-bit values into 104-bit products (`vpmadd52luq` / `vpmadd52huq`), so an
//! element is held as five limbs of 52 bits (radix 2^52), limb i of all eight lanes in one
//! register.
//!
//! The Montgomery product here divides by R' = 2^260 (five whole limbs), whereas blst's
//! values are in the domain of R = 2^256. The transforms keep their data in blst's domain and
//! store every constant they multiply by in the domain of R' instead: for `x·R` and `c·R'`
//! the product is `x·R·c·R' / R' = (x·c)·R`, again in blst's domain, so the data needs no
//! conversion other than repacking its bits.
//!
//! Values in registers (`Fr8`) are kept below 2r rather than below r, with every limb
//! below 2^52 (IFMA reads only the low 52 bits of a lane). r < 2^255, so 2r still fits the
//! 256 bits of blst's limbs, and the product needs no final subtraction: for `a < 4r` and
//! `b < 2r` it is below `a·b/2^260 + r < 2r`. Sums and differences subtract or add 2r once;
//! those that only feed a product, or are reduced later, skip even that (`Fr8::add_lazy`,
//! `Fr8::sub_lazy`, below 4r). `Fr8::store_scalars` reduces values below 4r to below r, so
//! every `Scalar` this module writes is valid.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::{
    __m512i, _mm512_add_epi64, _mm512_and_si512, _mm512_load_si512, _mm512_loadu_si512,
    _mm512_madd52hi_epu64, _mm512_madd52lo_epu64, _mm512_mask_blend_epi64, _mm512_movepi64_mask,
    _mm512_or_si512, _mm512_permutex2var_epi64, _mm512_permutexvar_epi64, _mm512_setzero_si512,
    _mm512_slli_epi64, _mm512_srai_epi64, _mm512_srli_epi64, _mm512_store_si512,
    _mm512_storeu_si512, _mm512_sub_epi64,
};

use blst::blst_fr;
use blstrs::Scalar;

pub use super::simd::{detected, LANES};
use super::simd::{splat, MASK52};

/// Limbs per element: five of 52 bits hold r < 2^255.
pub const LIMBS: usize = 5;

/// The modulus r in radix 2^52.
const R52: [u64; LIMBS] = [
    0xfffff00000001,
    0x2fffe5bfefff,
    0x9a1d80553bda4,
    0x7d483339d8080,
    0x73eda753299d,
];

/// 2r in radix 2^52 (below 2^256).
const TWO_R52: [u64; LIMBS] = double(R52);

/// 2r again, with 2^52 borrowed from each limb above the lowest into the one below, so
/// that each lower limb is at least 2^52 (for subtracting without borrows).
const TWO_R52_OFFSET: [u64; LIMBS] = [
    TWO_R52[0] + (1 << 52),
    TWO_R52[1] + (1 << 52) - 1,
    TWO_R52[2] + (1 << 52) - 1,
    TWO_R52[3] + (1 << 52) - 1,
    TWO_R52[4] - 1,
];

/// −r⁻¹ mod 2^52, the Montgomery reduction factor.
const R_INV: u64 = 0xffffeffffffff;

/// Eight field elements in memory, radix 2^52, limb-major (`0[i][lane]`), aligned so that a
/// limb of all lanes is one aligned 512-bit load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Block(pub [[u64; LANES]; LIMBS]);

impl Block {
    /// Lane `lane` of the block: the five limbs of one element.
    pub fn lane(&self, lane: usize) -> [u64; LIMBS] {
        std::array::from_fn(|i| self.0[i][lane])
    }

    /// Sets lane `lane` to the limbs `l`.
    pub fn set_lane(&mut self, lane: usize, l: [u64; LIMBS]) {
        for (row, v) in self.0.iter_mut().zip(l) {
            row[lane] = v;
        }
    }
}

/// `2x` for normalised 52-bit limbs, normalised again.
const fn double(x: [u64; LIMBS]) -> [u64; LIMBS] {
    let mut out = [0; LIMBS];
    let mut carry = 0;
    let mut i = 0;
    while i < LIMBS {
        let t = 2 * x[i] + carry;
        out[i] = if i + 1 < LIMBS { t & MASK52 } else { t };
        carry = t >> 52;
        i += 1;
    }
    out
}

// blstrs' `Scalar` is a `#[repr(transparent)]` wrapper of blst's `#[repr(C)]` `blst_fr`, four
// u64 limbs in Montgomery form: eight of them are 256 contiguous bytes, which
// `Fr8::load_scalars` and `Fr8::store_scalars` read and write as four vectors.
const _: () = assert!(
    std::mem::size_of::<Scalar>() == 32 && std::mem::align_of::<Scalar>() == 8,
    "blstrs::Scalar is no longer four u64 limbs"
);

/// The 52-bit limbs of a 256-bit integer (64-bit limbs, least significant first).
pub const fn split(w: [u64; 4]) -> [u64; LIMBS] {
    [
        w[0] & MASK52,
        ((w[0] >> 52) | (w[1] << 12)) & MASK52,
        ((w[1] >> 40) | (w[2] << 24)) & MASK52,
        ((w[2] >> 28) | (w[3] << 36)) & MASK52,
        w[3] >> 16,
    ]
}

/// The 64-bit limbs of a value held in 52-bit limbs below 2^256; the inverse of [`split`].
pub const fn join(l: [u64; LIMBS]) -> [u64; 4] {
    [
        l[0] | (l[1] << 52),
        (l[1] >> 12) | (l[2] << 40),
        (l[2] >> 24) | (l[3] << 28),
        (l[3] >> 36) | (l[4] << 16),
    ]
}

/// `c` as a multiplier for this module's product: its limbs in the domain of R' = 2^260,
/// `c·2^260 mod r`.
///
/// blst holds `c·2^256`; sixteen times that is `c·2^260`, and blst's own multiplication by
/// 16 reduces it.
pub fn constant(c: Scalar) -> [u64; LIMBS] {
    split(blst_fr::from(c * Scalar::from(16u64)).l)
}

/// Eight field elements in registers, radix 2^52, limb i of every lane in `l[i]`.
#[derive(Clone, Copy)]
pub(crate) struct Fr8 {
    l: [__m512i; LIMBS],
}

/// Carries every limb's bits above 52 into the next limb; the top limb keeps its excess.
#[inline]
#[target_feature(enable = "avx512f")]
fn carry(mut l: [__m512i; LIMBS]) -> [__m512i; LIMBS] {
    let m = splat(MASK52);
    for i in 0..LIMBS - 1 {
        l[i + 1] = _mm512_add_epi64(l[i + 1], _mm512_srli_epi64::<52>(l[i]));
        l[i] = _mm512_and_si512(l[i], m);
    }
    l
}

/// `a − b` over limbs below 2^52 with the borrows propagated (arithmetic shifts carry the
/// sign), so that the top limb is negative exactly when `a < b`.
#[inline]
#[target_feature(enable = "avx512f")]
fn sub_borrow(a: &[__m512i; LIMBS], b: &[__m512i; LIMBS]) -> [__m512i; LIMBS] {
    let m = splat(MASK52);
    let mut out = *a;
    let mut borrow = _mm512_setzero_si512();
    for i in 0..LIMBS {
        let t = _mm512_add_epi64(_mm512_sub_epi64(a[i], b[i]), borrow);
        if i + 1 < LIMBS {
            borrow = _mm512_srai_epi64::<52>(t);
            out[i] = _mm512_and_si512(t, m);
        } else {
            out[i] = t;
        }
    }
    out
}

/// A constant in every lane.
#[inline]
#[target_feature(enable = "avx512f")]
fn splat_limbs(c: [u64; LIMBS]) -> [__m512i; LIMBS] {
    c.map(|x| splat(x))
}

/// `x − q` where that is not negative, else `x`, for normalised limbs and `x < 2q`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq")]
fn reduce_once(x: [__m512i; LIMBS], q: [u64; LIMBS]) -> [__m512i; LIMBS] {
    let d = sub_borrow(&x, &splat_limbs(q));
    // The sign bit of the top limb is set in the lanes where x < q: those keep x.
    let keep = _mm512_movepi64_mask(d[LIMBS - 1]);
    std::array::from_fn(|i| _mm512_mask_blend_epi64(keep, d[i], x[i]))
}

/// Lane indices for `_mm512_permutex2var_epi64` (8 + k is lane k of the second vector).
#[inline]
#[target_feature(enable = "avx512f")]
fn indices(idx: [i64; LANES]) -> __m512i {
    // SAFETY: `idx` is 64 bytes of plain integers, exactly what the unaligned load reads;
    // AVX-512F is enabled on this function.
    unsafe { _mm512_loadu_si512(idx.as_ptr().cast()) }
}

/// Transposes the 4×4 blocks of 64-bit words of a pair of vectors: with `a` holding words
/// 0–3 of items 0 and 1 and `b` those of items 2 and 3, returns words 0 and 1 of items 0–3,
/// then words 2 and 3. The same shuffle undoes itself.
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose4(a: __m512i, b: __m512i) -> (__m512i, __m512i) {
    (
        _mm512_permutex2var_epi64(a, indices([0, 4, 8, 12, 1, 5, 9, 13]), b),
        _mm512_permutex2var_epi64(a, indices([2, 6, 10, 14, 3, 7, 11, 15]), b),
    )
}

/// The low halves of two vectors, and their high halves.
#[inline]
#[target_feature(enable = "avx512f")]
fn halves(a: __m512i, b: __m512i) -> (__m512i, __m512i) {
    (
        _mm512_permutex2var_epi64(a, indices([0, 1, 2, 3, 8, 9, 10, 11]), b),
        _mm512_permutex2var_epi64(a, indices([4, 5, 6, 7, 12, 13, 14, 15]), b),
    )
}

impl Fr8 {
    /// Loads eight elements from memory.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn load(src: &Block) -> Fr8 {
        Fr8 {
            // SAFETY: each row of a `Block` is eight contiguous u64 starting at a 64-byte
            // boundary (the struct is `align(64)` and rows are 64 bytes), exactly one aligned
            // 512-bit load.
            l: std::array::from_fn(|i| unsafe { _mm512_load_si512(src.0[i].as_ptr().cast()) }),
        }
    }

    /// Stores the eight elements to memory.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn store(&self, dst: &mut Block) {
        for (row, v) in dst.0.iter_mut().zip(self.l) {
            // SAFETY: as in `load`; `dst` is borrowed mutably, so nothing else reads it.
            unsafe { _mm512_store_si512(row.as_mut_ptr().cast(), v) };
        }
    }

    /// The same element in all eight lanes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn splat(l: &[u64; LIMBS]) -> Fr8 {
        Fr8 {
            l: l.map(|x| splat(x)),
        }
    }

    /// Lane `idx[k]` of `self` in lane k, for every limb.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn permute(&self, idx: __m512i) -> Fr8 {
        Fr8 {
            l: self.l.map(|x| _mm512_permutexvar_epi64(idx, x)),
        }
    }

    /// Applies `f` limb by limb to two vectors (for lane shuffles between them).
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn zip_with(a: &Fr8, b: &Fr8, f: impl Fn(__m512i, __m512i) -> __m512i) -> Fr8 {
        Fr8 {
            l: std::array::from_fn(|i| f(a.l[i], b.l[i])),
        }
    }

    /// Loads eight consecutive field elements: blst's limbs, transposed and repacked.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn load_scalars(xs: &[Scalar; LANES]) -> Fr8 {
        let p: *const __m512i = xs.as_ptr().cast();
        // SAFETY: eight `Scalar`s are 256 contiguous bytes (layout asserted above), four
        // unaligned 512-bit loads; every bit pattern is a valid integer vector.
        let z: [__m512i; 4] = std::array::from_fn(|k| unsafe { _mm512_loadu_si512(p.add(k)) });
        // Words 0–1 and 2–3 of items 0–3, then of items 4–7; then one word of all eight.
        let ((t0, t1), (t2, t3)) = (transpose4(z[0], z[1]), transpose4(z[2], z[3]));
        let ((w0, w1), (w2, w3)) = (halves(t0, t2), halves(t1, t3));
        let m = splat(MASK52);
        let or = _mm512_or_si512;
        Fr8 {
            l: [
                _mm512_and_si512(w0, m),
                _mm512_and_si512(
                    or(_mm512_srli_epi64::<52>(w0), _mm512_slli_epi64::<12>(w1)),
                    m,
                ),
                _mm512_and_si512(
                    or(_mm512_srli_epi64::<40>(w1), _mm512_slli_epi64::<24>(w2)),
                    m,
                ),
                _mm512_and_si512(
                    or(_mm512_srli_epi64::<28>(w2), _mm512_slli_epi64::<36>(w3)),
                    m,
                ),
                _mm512_srli_epi64::<16>(w3),
            ],
        }
    }

    /// Stores the eight elements (below 4r), reduced below r, as blst's limbs; the inverse
    /// of [`Fr8::load_scalars`].
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    pub(crate) fn store_scalars(&self, out: &mut [Scalar; LANES]) {
        let l = reduce_once(reduce_once(self.l, TWO_R52), R52);
        let or = _mm512_or_si512;
        let w0 = or(l[0], _mm512_slli_epi64::<52>(l[1]));
        let w1 = or(_mm512_srli_epi64::<12>(l[1]), _mm512_slli_epi64::<40>(l[2]));
        let w2 = or(_mm512_srli_epi64::<24>(l[2]), _mm512_slli_epi64::<28>(l[3]));
        let w3 = or(_mm512_srli_epi64::<36>(l[3]), _mm512_slli_epi64::<16>(l[4]));
        let ((t0, t2), (t1, t3)) = (halves(w0, w1), halves(w2, w3));
        let ((z0, z1), (z2, z3)) = (transpose4(t0, t1), transpose4(t2, t3));
        let p: *mut __m512i = out.as_mut_ptr().cast();
        for (k, z) in [z0, z1, z2, z3].into_iter().enumerate() {
            // SAFETY: as in `load_scalars`, and `out` is borrowed mutably; the values are
            // below r, so each `Scalar` stays a valid, reduced field element.
            unsafe { _mm512_storeu_si512(p.add(k), z) };
        }
    }

    /// `a + b`, below 2r for inputs below 2r.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    pub(crate) fn add(a: &Fr8, b: &Fr8) -> Fr8 {
        // Below 4r < 2^257, so five limbs hold the sum.
        let s = carry(std::array::from_fn(|i| _mm512_add_epi64(a.l[i], b.l[i])));
        Fr8 {
            l: reduce_once(s, TWO_R52),
        }
    }

    /// `a − b`, below 2r for inputs below 2r.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    pub(crate) fn sub(a: &Fr8, b: &Fr8) -> Fr8 {
        let d = sub_borrow(&a.l, &b.l);
        // In the lanes that borrowed (negative top limb) 2r is added back. The lower limbs
        // are not negative, and the top limb's sum is the true, non-negative top of
        // a − b + 2r.
        let neg = _mm512_movepi64_mask(d[LIMBS - 1]);
        let q = splat_limbs(TWO_R52);
        let zero = _mm512_setzero_si512();
        let mut e = d;
        for i in 0..LIMBS {
            e[i] = _mm512_add_epi64(d[i], _mm512_mask_blend_epi64(neg, zero, q[i]));
        }
        Fr8 { l: carry(e) }
    }

    /// `x` below 2r, for `x` below 4r.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    pub(crate) fn reduce(x: &Fr8) -> Fr8 {
        Fr8 {
            l: reduce_once(x.l, TWO_R52),
        }
    }

    /// `a + b`, below 4r for inputs below 2r: not reduced, so only for a product's first
    /// operand, [`Fr8::reduce`] or [`Fr8::store_scalars`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn add_lazy(a: &Fr8, b: &Fr8) -> Fr8 {
        Fr8 {
            l: carry(std::array::from_fn(|i| _mm512_add_epi64(a.l[i], b.l[i]))),
        }
    }

    /// `a − b + 2r`, in (0, 4r) for inputs below 2r: not reduced, as for [`Fr8::add_lazy`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn sub_lazy(a: &Fr8, b: &Fr8) -> Fr8 {
        // Each lower limb of the offset is at least 2^52, so no limb of a − b + 2r goes
        // negative and the plain carry normalises it.
        let q = splat_limbs(TWO_R52_OFFSET);
        Fr8 {
            l: carry(std::array::from_fn(|i| {
                _mm512_add_epi64(_mm512_sub_epi64(a.l[i], b.l[i]), q[i])
            })),
        }
    }

    /// `a·b / 2^260 mod r`, below 2r for `a` below 4r and `b` below 2r (Montgomery product
    /// with R' = 2^260): with `a` in blst's domain and `b` from [`constant`], `a·b` in
    /// blst's domain.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
    pub(crate) fn mul(a: &Fr8, b: &Fr8) -> Fr8 {
        let zero = _mm512_setzero_si512();
        let p = splat_limbs(R52);
        let r_inv = splat(R_INV);
        // t[0..6]: the running sum, one limb of headroom above the five of a product row.
        let mut t = [zero; LIMBS + 1];
        for &ai in &a.l {
            for (tj, bj) in t.iter_mut().zip(b.l) {
                *tj = _mm512_madd52lo_epu64(*tj, ai, bj);
            }
            for (tj, bj) in t[1..].iter_mut().zip(b.l) {
                *tj = _mm512_madd52hi_epu64(*tj, ai, bj);
            }
            // m = t0·(−r⁻¹) mod 2^52 makes t + m·r divisible by 2^52 (IFMA reads only the
            // low 52 bits of t0, which is all that m depends on).
            let m = _mm512_madd52lo_epu64(zero, t[0], r_inv);
            for (tj, pj) in t.iter_mut().zip(p) {
                *tj = _mm512_madd52lo_epu64(*tj, m, pj);
            }
            for (tj, pj) in t[1..].iter_mut().zip(p) {
                *tj = _mm512_madd52hi_epu64(*tj, m, pj);
            }
            // The low 52 bits of t0 are now zero; its bits above move into t1 as the limbs
            // shift down by one.
            t[1] = _mm512_add_epi64(t[1], _mm512_srli_epi64::<52>(t[0]));
            t = [t[1], t[2], t[3], t[4], t[5], zero];
        }
        // a < 4r < 2^257 and b < 2r < 2^256: the result is below a·b/2^260 + r < 2^253 + r
        // < 2r, so it fits five limbs and needs no subtraction.
        Fr8 {
            l: carry([t[0], t[1], t[2], t[3], t[4]]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use rand::SeedableRng;

    /// What an eight-lane test says when it was asked for on a CPU without the instructions.
    const NO_IFMA: &str =
        "this CPU lacks AVX-512 IFMA: run the ignored `ifma_` tests where it has it";

    /// Edge cases and random values, a multiple of eight of them.
    fn values() -> Vec<Scalar> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(52);
        let mut v = vec![
            Scalar::ZERO,
            Scalar::ONE,
            -Scalar::ONE,
            -Scalar::from(2u64),
            Scalar::from(u64::MAX),
            Scalar::from(u64::MAX) * Scalar::from(u64::MAX),
        ];
        // Montgomery forms with all-ones 52-bit limbs and the extremes 1 and r − 1.
        for l in [
            [MASK52, 0, 0, 0, 0],
            [MASK52, MASK52, 0, 0, 0],
            [MASK52, MASK52, MASK52, MASK52, 0],
            [0, MASK52, MASK52, MASK52, 0],
            [1, 0, 0, 0, 0],
            [R52[0] - 1, R52[1], R52[2], R52[3], R52[4]],
            [MASK52, MASK52, MASK52, MASK52, R52[4] - 1],
        ] {
            v.push(Scalar::from(blst_fr { l: join(l) }));
        }
        while v.len() % LANES != 0 || v.len() < 64 {
            v.push(Scalar::random(&mut rng));
        }
        v
    }

    /// `x`'s limbs plus r in radix 2^52: the same element, in the upper half of the range
    /// [0, 2r) that register values may take.
    fn raised(x: &Scalar) -> [u64; LIMBS] {
        let l = split(blst_fr::from(*x).l);
        let mut out = [0; LIMBS];
        let mut carry = 0;
        for i in 0..LIMBS {
            let t = l[i] + R52[i] + carry;
            out[i] = if i + 1 < LIMBS { t & MASK52 } else { t };
            carry = t >> 52;
        }
        out
    }

    /// Eight values into registers, each raised by r where `raise` says so.
    fn load(xs: &[Scalar], raise: impl Fn(usize) -> bool) -> Fr8 {
        let mut block = Block::default();
        for (lane, x) in xs.iter().enumerate() {
            let l = if raise(lane) {
                raised(x)
            } else {
                split(blst_fr::from(*x).l)
            };
            block.set_lane(lane, l);
        }
        // SAFETY: the callers assert `detected()` first.
        unsafe { Fr8::load(&block) }
    }

    /// Applies an eight-lane operation to `xs[k]` and `ys[k]` for every k, with some of
    /// the operands in [r, 2r) (`xs` in odd lanes, `ys` in lanes 2 and 3 mod 4 when
    /// `raise`), and reads the results back through `store_scalars`.
    fn lanewise(
        xs: &[Scalar],
        ys: &[Scalar],
        raise: bool,
        op: fn(&Fr8, &Fr8) -> Fr8,
    ) -> Vec<Scalar> {
        let mut out = vec![Scalar::ZERO; xs.len()];
        for ((x, y), o) in xs
            .chunks(LANES)
            .zip(ys.chunks(LANES))
            .zip(out.as_chunks_mut::<LANES>().0)
        {
            let (vx, vy) = (
                load(x, |k| raise && k % 2 == 1),
                load(y, |k| raise && k % 4 >= 2),
            );
            // SAFETY: the callers assert `detected()` first.
            unsafe { op(&vx, &vy).store_scalars(o) };
        }
        out
    }

    #[test]
    #[ignore = "needs AVX-512 IFMA; scripts/test.sh runs the `ifma_` tests with --ignored where the CPU has it"]
    fn ifma_scalars_load_and_store_round_trip() {
        assert!(detected(), "{NO_IFMA}");
        let v = values();
        for chunk in v.as_chunks::<LANES>().0 {
            let mut block = Block::default();
            let mut back = [Scalar::ZERO; LANES];
            // SAFETY: this CPU has AVX-512 IFMA (checked above).
            unsafe {
                let x = Fr8::load_scalars(chunk);
                x.store(&mut block);
                x.store_scalars(&mut back);
            }
            assert_eq!(&back, chunk);
            for (lane, x) in chunk.iter().enumerate() {
                assert_eq!(block.lane(lane), split(blst_fr::from(*x).l));
            }
        }
    }

    #[test]
    fn constants_match_the_modulus() {
        let bytes: Vec<u8> = join(R52).iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(bytes, Scalar::char().to_vec());
        // r·(−r⁻¹) ≡ −1 (mod 2^52).
        assert_eq!(R52[0].wrapping_mul(R_INV) & MASK52, MASK52);
    }

    #[test]
    fn split_and_join_round_trip() {
        for x in values() {
            let l = blst_fr::from(x).l;
            assert_eq!(join(split(l)), l);
            assert!(split(l).iter().all(|&w| w <= MASK52));
        }
    }

    #[test]
    #[ignore = "needs AVX-512 IFMA; scripts/test.sh runs the `ifma_` tests with --ignored where the CPU has it"]
    fn ifma_values_up_to_4r_reduce_and_store() {
        // x + 2r and x + 3r (below 4r < 2^257, so five limbs hold them) store as x.
        assert!(detected(), "{NO_IFMA}");
        let v = values();
        for chunk in v.as_chunks::<LANES>().0 {
            let (two, three) = (
                double(R52),
                [0, 1, 2, 3, 4].map(|i| R52[i] + double(R52)[i]),
            );
            let mut block = Block::default();
            for (lane, x) in chunk.iter().enumerate() {
                let l = split(blst_fr::from(*x).l);
                let add = if lane % 2 == 0 { two } else { three };
                let mut out = [0; LIMBS];
                let mut carry = 0;
                for i in 0..LIMBS {
                    let t = l[i] + add[i] + carry;
                    out[i] = if i + 1 < LIMBS { t & MASK52 } else { t };
                    carry = t >> 52;
                }
                block.set_lane(lane, out);
            }
            let (mut stored, mut reduced) = ([Scalar::ZERO; LANES], [Scalar::ZERO; LANES]);
            // SAFETY: this CPU has AVX-512 IFMA (checked above).
            unsafe {
                let x = Fr8::load(&block);
                x.store_scalars(&mut stored);
                Fr8::reduce(&x).store_scalars(&mut reduced);
            }
            assert_eq!(&stored, chunk);
            assert_eq!(&reduced, chunk);
        }
    }

    #[test]
    #[ignore = "needs AVX-512 IFMA; scripts/test.sh runs the `ifma_` tests with --ignored where the CPU has it"]
    fn ifma_products_landing_on_and_near_r_match_blst() {
        // y chosen so that x·y is 0, 1, r − 1, r − 2 or 2: results at both ends of [0, r),
        // where a missing or extra subtraction of r would show.
        assert!(detected(), "{NO_IFMA}");
        let mut rng = rand::rngs::StdRng::seed_from_u64(53);
        let targets = [
            Scalar::ZERO,
            Scalar::ONE,
            -Scalar::ONE,
            -Scalar::from(2u64),
            Scalar::from(2u64),
        ];
        let mut xs = values();
        xs.retain(|x| !bool::from(x.is_zero()));
        xs.extend((0..64).map(|_| Scalar::random(&mut rng)));
        xs.truncate(xs.len() / LANES * LANES);
        for target in targets {
            let ys: Vec<Scalar> = xs
                .iter()
                .map(|x| Option::<Scalar>::from(x.invert()).unwrap_or(Scalar::ZERO) * target)
                .collect();
            let yc = multipliers(&ys);
            for raise in [false, true] {
                // SAFETY: this CPU has AVX-512 IFMA (checked above).
                let prod = lanewise(&xs, &yc, raise, |a, b| unsafe { Fr8::mul(a, b) });
                assert!(prod.iter().all(|p| *p == target), "target {target:?}");
            }
        }
    }

    /// The values as multipliers, in R' = 2^260's domain (how the quotient stores its
    /// constants).
    fn multipliers(ys: &[Scalar]) -> Vec<Scalar> {
        ys.iter()
            .map(|y| {
                Scalar::from(blst_fr {
                    l: join(constant(*y)),
                })
            })
            .collect()
    }

    #[test]
    #[ignore = "needs AVX-512 IFMA; scripts/test.sh runs the `ifma_` tests with --ignored where the CPU has it"]
    fn ifma_add_sub_mul_match_blst() {
        assert!(detected(), "{NO_IFMA}");
        let v = values();
        let n = v.len();
        // Every value against every other: rotate the second operand by each offset.
        for shift in 0..n {
            let ys: Vec<Scalar> = (0..n).map(|k| v[(k + shift) % n]).collect();
            let yc = multipliers(&ys);
            for raise in [false, true] {
                // SAFETY (the three closures): this CPU has AVX-512 IFMA (checked above).
                let sum = lanewise(&v, &ys, raise, |a, b| unsafe { Fr8::add(a, b) });
                let diff = lanewise(&v, &ys, raise, |a, b| unsafe { Fr8::sub(a, b) });
                let prod = lanewise(&v, &yc, raise, |a, b| unsafe { Fr8::mul(a, b) });
                // (x ± y)·c with the unreduced sum and difference: c is the multiplier of
                // the first rotation, y the value of the second.
                let zs: Vec<Scalar> = (0..n).map(|k| v[(k + shift + 1) % n]).collect();
                let lazy = |op: fn(&Fr8, &Fr8) -> Fr8| -> Vec<Scalar> {
                    let mut out = vec![Scalar::ZERO; n];
                    let chunks = v.chunks(LANES).zip(zs.chunks(LANES)).zip(yc.chunks(LANES));
                    for (((x, z), c), o) in chunks.zip(out.as_chunks_mut::<LANES>().0) {
                        let (x, z) = (
                            load(x, |k| raise && k % 2 == 1),
                            load(z, |k| raise && k < 4),
                        );
                        // SAFETY: this CPU has AVX-512 IFMA (checked above).
                        unsafe { Fr8::mul(&op(&x, &z), &load(c, |_| false)).store_scalars(o) };
                    }
                    out
                };
                // SAFETY (both closures): as above.
                let sum_prod = lazy(|a, b| unsafe { Fr8::add_lazy(a, b) });
                let diff_prod = lazy(|a, b| unsafe { Fr8::sub_lazy(a, b) });
                for k in 0..n {
                    assert_eq!(sum[k], v[k] + ys[k], "{:?} + {:?}", v[k], ys[k]);
                    assert_eq!(diff[k], v[k] - ys[k], "{:?} - {:?}", v[k], ys[k]);
                    assert_eq!(prod[k], v[k] * ys[k], "{:?} * {:?}", v[k], ys[k]);
                    assert_eq!(sum_prod[k], (v[k] + zs[k]) * ys[k]);
                    assert_eq!(diff_prod[k], (v[k] - zs[k]) * ys[k]);
                }
            }
        }
    }
}
