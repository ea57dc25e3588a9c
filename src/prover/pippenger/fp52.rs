//! Eight Fp products at once with AVX-512 IFMA, for the G1 batch of affine additions.
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
//! and one of 20 bits, then a shift by 20 bits. Every value this module returns is fully
//! reduced (below p) with each limb below 2^52, which is what the products require (IFMA
//! reads only the low 52 bits of a lane).

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::{
    __m512i, _mm512_add_epi64, _mm512_and_si512, _mm512_loadu_si512, _mm512_madd52hi_epu64,
    _mm512_madd52lo_epu64, _mm512_mask_blend_epi64, _mm512_or_si512, _mm512_set1_epi64,
    _mm512_setzero_si512, _mm512_slli_epi64, _mm512_srli_epi64, _mm512_storeu_si512,
    _mm512_sub_epi64, _mm512_test_epi64_mask,
};

use blst::blst_fp;

use super::batch::{Addition, AffineBatch, ScalarBatch};
use super::curve::Coord;

/// Field elements per vector.
pub const LANES: usize = 8;

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

/// −p⁻¹ mod 2^52, the Montgomery reduction factor.
const P_INV: u64 = 0x3fffcfffcfffd;

const MASK52: u64 = (1 << 52) - 1;
const MASK20: u64 = (1 << 20) - 1;

/// Whether this CPU runs the eight-lane path (checked once per process).
pub fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        std::env::var("CUZK_CPU_SIMD").map_or(true, |v| v != "off")
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512ifma")
    })
}

/// Six 64-bit words of eight elements, word-major (`w[k][lane]`): blst's limbs, transposed
/// so that a word of all lanes is one vector load.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Words([[u64; LANES]; 6]);

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
struct Fp8 {
    l: [__m512i; 8],
}

#[inline]
#[target_feature(enable = "avx512f")]
fn splat(v: u64) -> __m512i {
    _mm512_set1_epi64(v as i64)
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

    /// `a − b mod p` for reduced inputs.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn sub(a: &Fp8, b: &Fp8) -> Fp8 {
        let (d, borrow) = Fp8::sub_raw(a, b);
        // Add p back in the lanes that borrowed (the 2^416 wraps away in the top limb).
        let lanes = _mm512_test_epi64_mask(borrow, borrow);
        let zero = _mm512_setzero_si512();
        let p = Fp8 {
            l: std::array::from_fn(|i| _mm512_mask_blend_epi64(lanes, zero, splat(P52[i]))),
        };
        let mut s = Fp8::add_raw(&d, &p);
        s.l[7] = and(s.l[7], splat(MASK52));
        s
    }

    /// `a` if below p, else `a − p`, for `a < 2p`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn reduce_once(a: &Fp8) -> Fp8 {
        let p = Fp8 {
            l: std::array::from_fn(|i| splat(P52[i])),
        };
        let (d, borrow) = Fp8::sub_raw(a, &p);
        let keep = _mm512_test_epi64_mask(borrow, borrow);
        Fp8 {
            l: std::array::from_fn(|i| _mm512_mask_blend_epi64(keep, d.l[i], a.l[i])),
        }
    }

    /// `a·b·2^−384 mod p`, the Montgomery product in blst's domain, for inputs below 2p.
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
        // The result is t / 2^384: bit 20 of limb 7 onwards. It is below 2p since p < 2^381.
        let r = Fp8 {
            l: std::array::from_fn(|i| and(or(shr::<20>(t[7 + i]), shl::<32>(t[8 + i])), mask)),
        };
        Fp8::reduce_once(&r)
    }
}

/// The G1 batch solver: eight additions per vector where the CPU has IFMA, else
/// [`ScalarBatch`].
pub enum Fp52Batch {
    /// The vector path, with its scratch space.
    Vector(Box<VectorScratch>),
    /// No IFMA on this CPU (or `CUZK_CPU_SIMD=off`).
    Scalar(ScalarBatch<blst_fp>),
}

/// Staged inputs and outputs of one batch, grouped by eight, and the prefix products.
#[derive(Default)]
pub struct VectorScratch {
    den: Vec<Words>,
    num: Vec<Words>,
    sum_x: Vec<Words>,
    x1: Vec<Words>,
    y1: Vec<Words>,
    prefix: Vec<Words>,
    out_x: Vec<Words>,
    out_y: Vec<Words>,
}

impl AffineBatch<blst_fp> for Fp52Batch {
    fn new(cap: usize) -> Self {
        if !available() {
            return Fp52Batch::Scalar(ScalarBatch::new(cap));
        }
        let groups = cap.div_ceil(LANES);
        let rows = || vec![Words::default(); groups];
        Fp52Batch::Vector(Box::new(VectorScratch {
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

    fn solve(&mut self, adds: &[Addition<blst_fp>], out: &mut [(blst_fp, blst_fp)]) {
        match self {
            Fp52Batch::Scalar(s) => s.solve(adds, out),
            Fp52Batch::Vector(v) => {
                v.stage(adds);
                let groups = adds.len().div_ceil(LANES);
                let totals = {
                    // SAFETY: `Vector` is only built when `available()` found AVX-512F and
                    // IFMA on this CPU.
                    unsafe { v.prefix_products(groups) }
                };
                let inverses = lane_inverses(&totals);
                // SAFETY: as above.
                unsafe { v.backward(groups, &inverses) };
                v.unstage(out);
            }
        }
    }
}

impl VectorScratch {
    /// Copies the additions into word-major groups of eight; the lanes past the end get
    /// denominator one, so the products stay invertible.
    fn stage(&mut self, adds: &[Addition<blst_fp>]) {
        let one = blst_fp::one();
        let groups = adds.len().div_ceil(LANES);
        for k in adds.len()..groups * LANES {
            self.den[k / LANES].set(k % LANES, &one);
        }
        for (k, a) in adds.iter().enumerate() {
            let (g, lane) = (k / LANES, k % LANES);
            self.den[g].set(lane, &a.den);
            self.num[g].set(lane, &a.num);
            self.sum_x[g].set(lane, &a.sum_x);
            self.x1[g].set(lane, &a.x1);
            self.y1[g].set(lane, &a.y1);
        }
    }

    fn unstage(&self, out: &mut [(blst_fp, blst_fp)]) {
        for (k, o) in out.iter_mut().enumerate() {
            let (g, lane) = (k / LANES, k % LANES);
            *o = (self.out_x[g].get(lane), self.out_y[g].get(lane));
        }
    }

    /// Running products of the denominators per lane, each group's value before its own
    /// factor kept in `prefix`; returns the eight lane totals.
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn prefix_products(&mut self, groups: usize) -> Words {
        let mut ones = Words::default();
        let one = blst_fp::one();
        for lane in 0..LANES {
            ones.set(lane, &one);
        }
        let mut running = Fp8::load(&ones);
        for g in 0..groups {
            running.store(&mut self.prefix[g]);
            running = Fp8::mul(&running, &Fp8::load(&self.den[g]));
        }
        let mut totals = Words::default();
        running.store(&mut totals);
        totals
    }

    /// Walks the groups backwards: each denominator's inverse from the lane's running
    /// inverse and prefix, then the slope and the sum.
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn backward(&mut self, groups: usize, inverses: &Words) {
        let mut inv = Fp8::load(inverses);
        for g in (0..groups).rev() {
            let den_inv = Fp8::mul(&inv, &Fp8::load(&self.prefix[g]));
            inv = Fp8::mul(&inv, &Fp8::load(&self.den[g]));
            let lambda = Fp8::mul(&Fp8::load(&self.num[g]), &den_inv);
            let x3 = Fp8::sub(&Fp8::mul(&lambda, &lambda), &Fp8::load(&self.sum_x[g]));
            let dx = Fp8::sub(&Fp8::load(&self.x1[g]), &x3);
            let y3 = Fp8::sub(&Fp8::mul(&lambda, &dx), &Fp8::load(&self.y1[g]));
            x3.store(&mut self.out_x[g]);
            y3.store(&mut self.out_y[g]);
        }
    }
}

/// The inverses of the eight lane totals with one field inversion (Montgomery's trick again,
/// in scalar code: it runs once per batch).
fn lane_inverses(totals: &Words) -> Words {
    let t: [blst_fp; LANES] = std::array::from_fn(|lane| totals.get(lane));
    let mut prefix = [blst_fp::one(); LANES];
    for lane in 1..LANES {
        prefix[lane] = prefix[lane - 1].mul(&t[lane - 1]);
    }
    let mut inv = prefix[LANES - 1].mul(&t[LANES - 1]).inverse();
    let mut out = Words::default();
    for lane in (0..LANES).rev() {
        out.set(lane, &inv.mul(&prefix[lane]));
        inv = inv.mul(&t[lane]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::Fp;
    use ff::Field;
    use rand::SeedableRng;

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
            // SAFETY: the caller checked `available()`.
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
    fn packing_round_trips_and_arithmetic_matches_blst() {
        if !available() {
            eprintln!("skipped: no AVX-512 IFMA on this CPU (the scalar path is tested elsewhere)");
            return;
        }
        let pairs = pairs();
        // SAFETY (all closures): `available()` holds, so AVX-512F and IFMA are present.
        let same = lanes(&pairs, |a, _| *a);
        let prod = lanes(&pairs, |a, b| unsafe { Fp8::mul(a, b) });
        let diff = lanes(&pairs, |a, b| unsafe { Fp8::sub(a, b) });
        for (k, (a, b)) in pairs.iter().enumerate() {
            assert_eq!(same[k], raw(*a));
            assert_eq!(prod[k], raw(a * b), "{a:?} · {b:?}");
            assert_eq!(diff[k], raw(a - b), "{a:?} − {b:?}");
        }
    }

    #[test]
    fn vector_and_scalar_batches_agree() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(53);
        for n in [1usize, 7, 8, 9, 100, 1024] {
            let adds: Vec<Addition<blst_fp>> = (0..n)
                .map(|_| Addition {
                    den: raw(Fp::random(&mut rng)),
                    num: raw(Fp::random(&mut rng)),
                    sum_x: raw(Fp::random(&mut rng)),
                    x1: raw(Fp::random(&mut rng)),
                    y1: raw(Fp::random(&mut rng)),
                })
                .collect();
            let mut want = vec![(blst_fp::default(), blst_fp::default()); n];
            ScalarBatch::new(n).solve(&adds, &mut want);
            let mut got = want.clone();
            got.fill((blst_fp::default(), blst_fp::default()));
            let mut solver = Fp52Batch::new(n);
            if matches!(solver, Fp52Batch::Scalar(_)) {
                eprintln!("skipped: no AVX-512 IFMA on this CPU; the vector batch was not run");
                return;
            }
            solver.solve(&adds, &mut got);
            assert_eq!(got, want, "n = {n}");
        }
    }
}
