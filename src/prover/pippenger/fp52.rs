//! Eight Fp (and Fp2) products at once with AVX-512 IFMA, for batches of affine additions.
//!
//! blst multiplies one Fp element at a time with 64-bit `mulx`; in the bucket phase of an MSM
//! those products are most of the time. The additions of a batch are independent, so eight
//! of them can run in the eight 64-bit lanes of a 512-bit register. IFMA multiplies 52-bit
//! values into 104-bit products (`vpmadd52luq` / `vpmadd52huq`), so an element is held as
//! eight limbs of 52 bits (radix 2^52), limb i of all eight lanes in one register.
//!
//! The values stay in blst's Montgomery domain (x·2^384 mod p), so converting to and from
//! blst's six 64-bit limbs is only a repacking of bits. The product therefore divides by
//! 2^384, which is not a whole number of 52-bit limbs: seven reduction steps of 52 bits
//! and one of 20 bits, then a shift by 20 bits. Values in registers are kept below 2p with
//! each limb below 2^52 (IFMA reads only the low 52 bits of a lane): the product of two such
//! values is again below 2p without a final subtraction. `canonical` reduces below p, which
//! blst and equality tests need.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::{
    __m512i, __mmask8, _mm512_add_epi64, _mm512_and_si512, _mm512_cmpeq_epi64_mask,
    _mm512_loadu_si512, _mm512_madd52hi_epu64, _mm512_madd52lo_epu64, _mm512_mask_blend_epi64,
    _mm512_or_si512, _mm512_setzero_si512, _mm512_slli_epi64, _mm512_srli_epi64,
    _mm512_storeu_si512, _mm512_sub_epi64, _mm512_test_epi64_mask,
};

use blst::blst_fp;

use blst::blst_fp2;

use super::coord::Coord;

pub use crate::prover::simd::{detected, LANES};
use crate::prover::simd::{splat, MASK52};

/// The modulus p in radix 2^52.
const P52: [u64; 8] = [
    0xeffffffffaaab,
    0xfeb153ffffb9f,
    0x6b0f6241eabff,
    0x12bf6730d2a0f,
    0x764774b84f385,
    0x1ba7b6434bacd,
    0x1ea397fe69a4b,
    0x1a011,
];

/// 2p in radix 2^52: values in registers are kept below 2p, which the product accepts and
/// yields, so most operations skip the final subtraction of p.
const P2_52: [u64; 8] = [
    0xdffffffff5556,
    0xfd62a7ffff73f,
    0xd61ec483d57ff,
    0x257ece61a541e,
    0xec8ee9709e70a,
    0x374f6c869759a,
    0x3d472ffcd3496,
    0x34022,
];

/// −p⁻¹ mod 2^52, the Montgomery reduction factor.
const P_INV: u64 = 0x3fffcfffcfffd;

const MASK20: u64 = (1 << 20) - 1;

/// Six 64-bit words of eight elements, word-major (`w[k][lane]`): blst's limbs, transposed
/// so that a word of all lanes is one vector load.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
pub struct Words([[u64; LANES]; 6]);

impl Words {
    fn set(&mut self, lane: usize, x: &blst_fp) {
        for (w, l) in self.0.iter_mut().zip(x.l) {
            w[lane] = l;
        }
    }

    fn get(&self, lane: usize) -> blst_fp {
        blst_fp {
            l: std::array::from_fn(|k| self.0[k][lane]),
        }
    }
}

/// Eight field elements in radix 2^52, limb i of every lane in `l[i]`.
#[derive(Clone, Copy)]
pub struct Fp8 {
    l: [__m512i; 8],
}

#[inline]
#[target_feature(enable = "avx512f")]
fn shr<const S: u32>(v: __m512i) -> __m512i {
    _mm512_srli_epi64::<S>(v)
}

#[inline]
#[target_feature(enable = "avx512f")]
fn shl<const S: u32>(v: __m512i) -> __m512i {
    _mm512_slli_epi64::<S>(v)
}

#[inline]
#[target_feature(enable = "avx512f")]
fn or(a: __m512i, b: __m512i) -> __m512i {
    _mm512_or_si512(a, b)
}

#[inline]
#[target_feature(enable = "avx512f")]
fn and(a: __m512i, b: __m512i) -> __m512i {
    _mm512_and_si512(a, b)
}

impl Fp8 {
    /// Repacks six 64-bit words per lane into eight 52-bit limbs.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load(src: &Words) -> Fp8 {
        // SAFETY: each row of `Words` is eight contiguous u64, exactly one 512-bit load, and
        // the unaligned load has no alignment requirement.
        let w: [__m512i; 6] =
            std::array::from_fn(|k| unsafe { _mm512_loadu_si512(src.0[k].as_ptr().cast()) });
        let m = splat(MASK52);
        Fp8 {
            l: [
                and(w[0], m),
                and(or(shr::<52>(w[0]), shl::<12>(w[1])), m),
                and(or(shr::<40>(w[1]), shl::<24>(w[2])), m),
                and(or(shr::<28>(w[2]), shl::<36>(w[3])), m),
                and(or(shr::<16>(w[3]), shl::<48>(w[4])), m),
                and(shr::<4>(w[4]), m),
                and(or(shr::<56>(w[4]), shl::<8>(w[5])), m),
                shr::<44>(w[5]),
            ],
        }
    }

    /// Repacks into six 64-bit words per lane (the inverse of [`Fp8::load`]).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store(&self, dst: &mut Words) {
        let l = &self.l;
        let w = [
            or(l[0], shl::<52>(l[1])),
            or(shr::<12>(l[1]), shl::<40>(l[2])),
            or(shr::<24>(l[2]), shl::<28>(l[3])),
            or(shr::<36>(l[3]), shl::<16>(l[4])),
            or(or(shr::<48>(l[4]), shl::<4>(l[5])), shl::<56>(l[6])),
            or(shr::<8>(l[6]), shl::<44>(l[7])),
        ];
        for (row, v) in dst.0.iter_mut().zip(w) {
            // SAFETY: each row is eight contiguous u64 that we own mutably; the unaligned
            // store has no alignment requirement.
            unsafe { _mm512_storeu_si512(row.as_mut_ptr().cast(), v) };
        }
    }

    /// `a − b` if it does not borrow, else `a − b + 2^416`; and whether it borrowed. Limbs
    /// of the result are below 2^52.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn sub_raw(a: &Fp8, b: &Fp8) -> (Fp8, __m512i) {
        let m = splat(MASK52);
        let mut borrow = _mm512_setzero_si512();
        let mut out = *a;
        for i in 0..8 {
            let t = _mm512_sub_epi64(_mm512_sub_epi64(a.l[i], b.l[i]), borrow);
            borrow = shr::<63>(t);
            out.l[i] = and(t, m);
        }
        (out, borrow)
    }

    /// `a + b` limb by limb with the carries propagated (no modular reduction).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn add_raw(a: &Fp8, b: &Fp8) -> Fp8 {
        let m = splat(MASK52);
        let mut carry = _mm512_setzero_si512();
        let mut out = *a;
        for i in 0..8 {
            let t = _mm512_add_epi64(_mm512_add_epi64(a.l[i], b.l[i]), carry);
            carry = shr::<52>(t);
            out.l[i] = and(t, m);
        }
        out
    }

    /// `a − b`, plus 2p where that is negative: for inputs below 2p, a value below 2p.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn sub(a: &Fp8, b: &Fp8) -> Fp8 {
        let (d, borrow) = Fp8::sub_raw(a, b);
        // Add 2p back in the lanes that borrowed (the 2^416 wraps away in the top limb).
        let lanes = _mm512_test_epi64_mask(borrow, borrow);
        let zero = _mm512_setzero_si512();
        let p2 = Fp8 {
            l: std::array::from_fn(|i| _mm512_mask_blend_epi64(lanes, zero, splat(P2_52[i]))),
        };
        let mut s = Fp8::add_raw(&d, &p2);
        s.l[7] = and(s.l[7], splat(MASK52));
        s
    }

    /// `a − m` where that is not negative, else `a`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn sub_if_ge(a: &Fp8, m: &[u64; 8]) -> Fp8 {
        let m = Fp8 {
            l: std::array::from_fn(|i| splat(m[i])),
        };
        let (d, borrow) = Fp8::sub_raw(a, &m);
        let keep = _mm512_test_epi64_mask(borrow, borrow);
        Fp8 {
            l: std::array::from_fn(|i| _mm512_mask_blend_epi64(keep, d.l[i], a.l[i])),
        }
    }

    /// The fully reduced value (below p) of `a < 2p`, as blst and comparisons need it.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn canonical(a: &Fp8) -> Fp8 {
        Fp8::sub_if_ge(a, &P52)
    }

    /// `a + b`, less 2p where that reaches 2p: for inputs below 2p, a value below 2p.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn add(a: &Fp8, b: &Fp8) -> Fp8 {
        Fp8::sub_if_ge(&Fp8::add_raw(a, b), &P2_52)
    }

    /// The lanes where `a == b`, for fully reduced values (they have one representation).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn eq_mask(a: &Fp8, b: &Fp8) -> __mmask8 {
        (0..8).fold(0xff, |m, i| m & _mm512_cmpeq_epi64_mask(a.l[i], b.l[i]))
    }

    /// `b` in the lanes of `mask`, `a` elsewhere.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn blend(mask: __mmask8, a: &Fp8, b: &Fp8) -> Fp8 {
        Fp8 {
            l: std::array::from_fn(|i| _mm512_mask_blend_epi64(mask, a.l[i], b.l[i])),
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn sqr(a: &Fp8) -> Fp8 {
        Fp8::mul(a, a)
    }

    /// `a·b·2^−384` modulo p, the Montgomery product in blst's domain: for inputs below 2p
    /// a value below 2p.
    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn mul(a: &Fp8, b: &Fp8) -> Fp8 {
        let zero = _mm512_setzero_si512();
        // t[k] accumulates 52-bit pieces of weight 2^(52k); 33 of them stay below 2^58.
        let mut t = [zero; 17];
        for i in 0..8 {
            for j in 0..8 {
                t[i + j] = _mm512_madd52lo_epu64(t[i + j], a.l[j], b.l[i]);
                t[i + j + 1] = _mm512_madd52hi_epu64(t[i + j + 1], a.l[j], b.l[i]);
            }
        }
        let p: [__m512i; 8] = std::array::from_fn(|j| splat(P52[j]));
        let p_inv = splat(P_INV);
        // Seven steps clear 52 bits each: m ≡ −t·p⁻¹ (mod 2^52) makes t + m·p divisible by
        // 2^52 at position i (IFMA reads the low 52 bits of t[i], which is all m needs).
        for i in 0..7 {
            let m = _mm512_madd52lo_epu64(zero, t[i], p_inv);
            for j in 0..8 {
                t[i + j] = _mm512_madd52lo_epu64(t[i + j], m, p[j]);
                t[i + j + 1] = _mm512_madd52hi_epu64(t[i + j + 1], m, p[j]);
            }
            t[i + 1] = _mm512_add_epi64(t[i + 1], shr::<52>(t[i]));
        }
        // The eighth clears only the 20 bits that remain to 2^384.
        let m = and(_mm512_madd52lo_epu64(zero, t[7], p_inv), splat(MASK20));
        for j in 0..8 {
            t[7 + j] = _mm512_madd52lo_epu64(t[7 + j], m, p[j]);
            t[8 + j] = _mm512_madd52hi_epu64(t[8 + j], m, p[j]);
        }
        let mask = splat(MASK52);
        for k in 7..16 {
            t[k + 1] = _mm512_add_epi64(t[k + 1], shr::<52>(t[k]));
            t[k] = and(t[k], mask);
        }
        // The result is t / 2^384: bit 20 of limb 7 onwards. For a, b < 2p it is below
        // 4p²/2^384 + p < 1.5p (p < 2^381), so no subtraction is needed to stay below 2p.
        Fp8 {
            l: std::array::from_fn(|i| and(or(shr::<20>(t[7 + i]), shl::<32>(t[8 + i])), mask)),
        }
    }
}

/// Eight Fp2 elements c₀ + c₁·u (u² = −1), as two [`Fp8`].
#[derive(Clone, Copy)]
pub struct Fp2x8 {
    c0: Fp8,
    c1: Fp8,
}

impl Fp2x8 {
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load(src: &[Words; 2]) -> Fp2x8 {
        Fp2x8 {
            c0: Fp8::load(&src[0]),
            c1: Fp8::load(&src[1]),
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store(&self, dst: &mut [Words; 2]) {
        self.c0.store(&mut dst[0]);
        self.c1.store(&mut dst[1]);
    }

    /// Karatsuba: three Fp products (the sums a₀ + a₁ reduced below 2p, which the product
    /// needs).
    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn mul(a: &Fp2x8, b: &Fp2x8) -> Fp2x8 {
        let t0 = Fp8::mul(&a.c0, &b.c0);
        let t1 = Fp8::mul(&a.c1, &b.c1);
        let t2 = Fp8::mul(&Fp8::add(&a.c0, &a.c1), &Fp8::add(&b.c0, &b.c1));
        Fp2x8 {
            c0: Fp8::sub(&t0, &t1),
            c1: Fp8::sub(&Fp8::sub(&t2, &t0), &t1),
        }
    }

    /// (a₀ + a₁)(a₀ − a₁) + 2a₀a₁·u: two Fp products.
    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn sqr(a: &Fp2x8) -> Fp2x8 {
        let sum = Fp8::add(&a.c0, &a.c1);
        let diff = Fp8::sub(&a.c0, &a.c1);
        Fp2x8 {
            c0: Fp8::mul(&sum, &diff),
            c1: Fp8::mul(&Fp8::add(&a.c0, &a.c0), &a.c1),
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn sub(a: &Fp2x8, b: &Fp2x8) -> Fp2x8 {
        Fp2x8 {
            c0: Fp8::sub(&a.c0, &b.c0),
            c1: Fp8::sub(&a.c1, &b.c1),
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn add(a: &Fp2x8, b: &Fp2x8) -> Fp2x8 {
        Fp2x8 {
            c0: Fp8::add(&a.c0, &b.c0),
            c1: Fp8::add(&a.c1, &b.c1),
        }
    }
}

impl Fp2x8 {
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn canonical(a: &Fp2x8) -> Fp2x8 {
        Fp2x8 {
            c0: Fp8::canonical(&a.c0),
            c1: Fp8::canonical(&a.c1),
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn eq_mask(a: &Fp2x8, b: &Fp2x8) -> __mmask8 {
        Fp8::eq_mask(&a.c0, &b.c0) & Fp8::eq_mask(&a.c1, &b.c1)
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn blend(mask: __mmask8, a: &Fp2x8, b: &Fp2x8) -> Fp2x8 {
        Fp2x8 {
            c0: Fp8::blend(mask, &a.c0, &b.c0),
            c1: Fp8::blend(mask, &a.c1, &b.c1),
        }
    }
}

/// Eight elements of a coordinate field in vector registers, and their form in memory.
///
/// # Safety
/// Every `unsafe` method requires a CPU with AVX-512F and IFMA ([`detected`]).
pub trait Packed: Copy {
    /// The element as blst stores it.
    type Elem: Coord;
    /// Eight elements, word-major.
    type Store: Copy + Default + Send;

    /// Writes lane `lane` of `store`.
    fn set(store: &mut Self::Store, lane: usize, x: &Self::Elem);
    /// Reads lane `lane` of `store`.
    fn get(store: &Self::Store, lane: usize) -> Self::Elem;

    /// Loads eight elements.
    unsafe fn load(src: &Self::Store) -> Self;
    /// Stores eight elements.
    unsafe fn store(&self, dst: &mut Self::Store);
    /// `a·b`.
    unsafe fn mul(a: &Self, b: &Self) -> Self;
    /// `a²`.
    unsafe fn sqr(a: &Self) -> Self;
    /// `a + b`.
    unsafe fn add(a: &Self, b: &Self) -> Self;
    /// `a − b`.
    unsafe fn sub(a: &Self, b: &Self) -> Self;
    /// The fully reduced form of `a` (values in registers are only kept below 2p).
    unsafe fn canonical(a: &Self) -> Self;
    /// The lanes where `a == b`, for fully reduced values.
    unsafe fn eq_mask(a: &Self, b: &Self) -> __mmask8;
    /// `b` in the lanes of `mask`, `a` elsewhere.
    unsafe fn blend(mask: __mmask8, a: &Self, b: &Self) -> Self;
}

/// The [`Packed`] methods that forward to the type's own (target-feature) functions.
macro_rules! packed_forward {
    ($t:ty, $store:ty) => {
        #[inline]
        #[target_feature(enable = "avx512f,avx512ifma")]
        unsafe fn load(src: &$store) -> $t {
            <$t>::load(src)
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512ifma")]
        unsafe fn store(&self, dst: &mut $store) {
            <$t>::store(self, dst)
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512ifma")]
        unsafe fn mul(a: &$t, b: &$t) -> $t {
            <$t>::mul(a, b)
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512ifma")]
        unsafe fn sqr(a: &$t) -> $t {
            <$t>::sqr(a)
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512ifma")]
        unsafe fn add(a: &$t, b: &$t) -> $t {
            <$t>::add(a, b)
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512ifma")]
        unsafe fn sub(a: &$t, b: &$t) -> $t {
            <$t>::sub(a, b)
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512ifma")]
        unsafe fn canonical(a: &$t) -> $t {
            <$t>::canonical(a)
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512ifma")]
        unsafe fn eq_mask(a: &$t, b: &$t) -> __mmask8 {
            <$t>::eq_mask(a, b)
        }
        #[inline]
        #[target_feature(enable = "avx512f,avx512ifma")]
        unsafe fn blend(mask: __mmask8, a: &$t, b: &$t) -> $t {
            <$t>::blend(mask, a, b)
        }
    };
}

impl Packed for Fp8 {
    type Elem = blst_fp;
    type Store = Words;

    fn set(store: &mut Words, lane: usize, x: &blst_fp) {
        store.set(lane, x);
    }
    fn get(store: &Words, lane: usize) -> blst_fp {
        store.get(lane)
    }
    packed_forward!(Fp8, Words);
}

impl Packed for Fp2x8 {
    type Elem = blst_fp2;
    type Store = [Words; 2];

    fn set(store: &mut [Words; 2], lane: usize, x: &blst_fp2) {
        store[0].set(lane, &x.fp[0]);
        store[1].set(lane, &x.fp[1]);
    }
    fn get(store: &[Words; 2], lane: usize) -> blst_fp2 {
        blst_fp2 {
            fp: [store[0].get(lane), store[1].get(lane)],
        }
    }
    packed_forward!(Fp2x8, [Words; 2]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{Fp, Fp2};
    use ff::Field;
    use rand::SeedableRng;

    /// What an eight-lane test says when it was asked for on a CPU without the instructions.
    const NO_IFMA: &str =
        "this CPU lacks AVX-512 IFMA: run the ignored `ifma_` tests where it has it";

    fn raw(x: Fp) -> blst_fp {
        // SAFETY: blstrs' Fp is a transparent wrapper over blst_fp.
        unsafe { std::mem::transmute::<Fp, blst_fp>(x) }
    }

    /// Values that stress the carries: 0, 1, −1, p − 2^k, limbs of all ones below p, random.
    fn values(rng: &mut rand::rngs::StdRng) -> Vec<Fp> {
        let mut v = vec![Fp::ZERO, Fp::ONE, -Fp::ONE, Fp::from(2u64), -Fp::from(2u64)];
        for k in [1u32, 52, 104, 200, 380] {
            let two_k = (0..k).fold(Fp::ONE, |a, _| a.double());
            v.push(-two_k);
            v.push(two_k);
            v.push(two_k - Fp::ONE);
        }
        v.extend((0..40).map(|_| Fp::random(&mut *rng)));
        v
    }

    /// Runs `f` on eight-lane groups of `(a, b)` pairs through the vector code.
    fn lanes(pairs: &[(Fp, Fp)], f: impl Fn(&Fp8, &Fp8) -> Fp8) -> Vec<blst_fp> {
        let mut out = Vec::new();
        for group in pairs.chunks(LANES) {
            let (mut wa, mut wb, mut wr) = (Words::default(), Words::default(), Words::default());
            for (lane, (a, b)) in group.iter().enumerate() {
                wa.set(lane, &raw(*a));
                wb.set(lane, &raw(*b));
            }
            // SAFETY: the caller checked `detected()`.
            unsafe { f(&Fp8::load(&wa), &Fp8::load(&wb)).store(&mut wr) };
            out.extend((0..group.len()).map(|lane| wr.get(lane)));
        }
        out
    }

    fn pairs() -> Vec<(Fp, Fp)> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(52);
        let v = values(&mut rng);
        v.iter()
            .flat_map(|&a| v.iter().map(move |&b| (a, b)))
            .collect()
    }

    #[test]
    #[ignore = "needs AVX-512 IFMA; scripts/test.sh runs the `ifma_` tests with --ignored where the CPU has it"]
    fn ifma_packing_round_trips_and_arithmetic_matches_blst() {
        assert!(detected(), "{NO_IFMA}");
        let pairs = pairs();
        // SAFETY (all closures): `detected()` holds, so AVX-512F and IFMA are present.
        let same = lanes(&pairs, |a, _| *a);
        let prod = lanes(&pairs, |a, b| unsafe { Fp8::canonical(&Fp8::mul(a, b)) });
        let diff = lanes(&pairs, |a, b| unsafe { Fp8::canonical(&Fp8::sub(a, b)) });
        let sum = lanes(&pairs, |a, b| unsafe { Fp8::canonical(&Fp8::add(a, b)) });
        for (k, (a, b)) in pairs.iter().enumerate() {
            assert_eq!(same[k], raw(*a));
            assert_eq!(prod[k], raw(a * b), "{a:?} · {b:?}");
            assert_eq!(diff[k], raw(a - b), "{a:?} − {b:?}");
            assert_eq!(sum[k], raw(a + b), "{a:?} + {b:?}");
        }
    }

    #[test]
    #[ignore = "needs AVX-512 IFMA; scripts/test.sh runs the `ifma_` tests with --ignored where the CPU has it"]
    fn ifma_fp2_products_and_squares_match_blst() {
        assert!(detected(), "{NO_IFMA}");
        let mut rng = rand::rngs::StdRng::seed_from_u64(54);
        let v = values(&mut rng);
        let elems: Vec<Fp2> = v
            .iter()
            .zip(v.iter().rev())
            .map(|(&a, &b)| Fp2::new(a, b))
            .chain([Fp2::ZERO, Fp2::ONE, -Fp2::ONE])
            .collect();
        for group in elems.chunks(LANES) {
            for shift in [0, 1, 3] {
                let mut wa = [Words::default(); 2];
                let mut wb = [Words::default(); 2];
                for (lane, a) in group.iter().enumerate() {
                    let b = group[(lane + shift) % group.len()];
                    Fp2x8::set(&mut wa, lane, &raw2(*a));
                    Fp2x8::set(&mut wb, lane, &raw2(b));
                }
                let (mut prod, mut sq, mut diff) = (
                    [Words::default(); 2],
                    [Words::default(); 2],
                    [Words::default(); 2],
                );
                // SAFETY: `detected()` holds, so AVX-512F and IFMA are present.
                unsafe {
                    let (a, b) = (<Fp2x8 as Packed>::load(&wa), <Fp2x8 as Packed>::load(&wb));
                    let canonical = |x| <Fp2x8 as Packed>::canonical(&x);
                    canonical(<Fp2x8 as Packed>::mul(&a, &b)).store(&mut prod);
                    canonical(<Fp2x8 as Packed>::sqr(&a)).store(&mut sq);
                    canonical(<Fp2x8 as Packed>::sub(&a, &b)).store(&mut diff);
                }
                for (lane, a) in group.iter().enumerate() {
                    let b = group[(lane + shift) % group.len()];
                    assert_eq!(Fp2x8::get(&prod, lane), raw2(a * b));
                    assert_eq!(Fp2x8::get(&sq, lane), raw2(a.square()));
                    assert_eq!(Fp2x8::get(&diff, lane), raw2(a - b));
                }
            }
        }
    }

    fn raw2(x: Fp2) -> blst::blst_fp2 {
        // SAFETY: blstrs' Fp2 is a transparent wrapper over blst_fp2.
        unsafe { std::mem::transmute::<Fp2, blst::blst_fp2>(x) }
    }
}
