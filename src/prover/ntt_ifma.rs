//! The quotient's five passes on eight lanes with AVX-512 IFMA.
//!
//! The passes, their order and their tables are those of [`super::quotient`]; only the
//! arithmetic differs. A tile or a row is repacked into [`Block`]s of eight consecutive
//! elements when it is copied into the pass's buffer and back when it leaves it, so every
//! stage in between runs on eight butterflies at once with [`Fr8`].
//!
//! - Stages whose butterflies pair elements at least eight apart pair whole vectors, and
//!   every lane of a vector shares one twiddle, broadcast from the table. They run two
//!   stages per sweep over the buffer where they can ([`ct_stage2`], [`gs_stage2`]), so
//!   each vector is loaded and stored once for two butterflies (6% less time at 2^20).
//! - The last three Cooley–Tukey stages of a row and the first three Gentleman–Sande stages
//!   (half-widths 4, 2 and 1) pair lanes of the same vector: sixteen consecutive elements
//!   are shuffled into the eight `x` and the eight `y` of their butterflies, with a vector
//!   of eight twiddles, and shuffled back.
//!
//! The data stays in blst's Montgomery domain (R = 2^256) and every table holds its
//! constants in the domain of R' = 2^260 (see [`fr52`]), so each product by a table entry
//! returns blst's domain. The one product of two data values, A·B in pass 3, would lose a
//! factor 2^4 that way; B's twist carries an extra factor 16 to put it back, so no pass
//! multiplies more than the scalar one does.
//!
//! Values in the buffers are below 4r, not r: Gentleman–Sande differences that only feed a
//! product are left unreduced ([`diff_times`]), and Cooley–Tukey butterflies leave both
//! outputs unreduced, bringing `x` below 2r when it next enters a butterfly
//! ([`ct_butterfly`]). Products accept such values and return them below 2r, and unpacking
//! reduces below r.
//!
//! Where the time went before the lazy Cooley–Tukey butterflies and the blocked final
//! permutation (one thread, 2^20, 313 ms in all): building the twiddle tables 17 ms, pass 1
//! 40 ms, pass 2 146 ms, pass 3 54 ms, pass 4 31 ms, the final permutation 25 ms; 3.2–3.9 ns
//! per butterfly in the passes, of which the product is about 2.1 ns.

use std::arch::x86_64::{__m512i, _mm512_permutex2var_epi64};

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::super::fr52::{self, Block, Fr8, LANES, LIMBS};
use super::{root_of_unity, Domain, Layout, SharedRows, MIN_TASK};

/// Constants in the domain of R' = 2^260, eight per block, entry `i` in lane `i mod 8` of
/// block `i / 8`.
struct Table(Vec<Block>);

impl Table {
    /// Entry `i`'s limbs.
    fn entry(&self, i: usize) -> [u64; LIMBS] {
        self.0[i / LANES].lane(i % LANES)
    }

    /// The table of `xs` (a multiple of eight of them).
    fn from_scalars(xs: &[Scalar]) -> Table {
        Table(
            xs.chunks(LANES)
                .map(|c| {
                    let mut b = Block::default();
                    for (lane, x) in c.iter().enumerate() {
                        b.set_lane(lane, fr52::constant(*x));
                    }
                    b
                })
                .collect(),
        )
    }
}

/// The quotient's tables for the eight-lane passes.
struct Tables {
    /// `ω^rev(k)` and `ω^−rev(k)`, `n/2` entries each.
    tw: Table,
    tw_inv: Table,
    /// The twist's and untwist's per-column factors (`B` entries each).
    twist_lo: Table,
    untwist_lo: Table,
    /// The per-row factors: the twist's, sixteen times the twist's (for B) and the untwist's.
    twist_hi: Vec<[u64; LIMBS]>,
    twist_hi16: Vec<[u64; LIMBS]>,
    untwist_hi: Vec<[u64; LIMBS]>,
}

impl Tables {
    #[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
    fn new(domain: &Domain) -> Tables {
        let log_n = domain.size.trailing_zeros();
        let omega = root_of_unity(log_n);
        let omega_inv = Option::<Scalar>::from(omega.invert()).unwrap_or(Scalar::ZERO);
        let sixteen = Scalar::from(16u64);
        let constants =
            |v: &[Scalar], s: Scalar| v.iter().map(|x| fr52::constant(*x * s)).collect();
        let (tw, tw_inv) = rayon::join(
            || bitrev_table(omega, log_n - 1),
            || bitrev_table(omega_inv, log_n - 1),
        );
        Tables {
            tw,
            tw_inv,
            twist_lo: Table::from_scalars(&domain.twist_lo),
            untwist_lo: Table::from_scalars(&domain.untwist_lo),
            twist_hi: constants(&domain.twist_hi, Scalar::ONE),
            twist_hi16: constants(&domain.twist_hi, sixteen),
            untwist_hi: constants(&domain.untwist_hi, Scalar::ONE),
        }
    }
}

/// `base^rev(k)` for `k < 2^bits` (`bits ≥ 3`), the table of [`super::bitrev_powers`] built
/// with eight-lane products: `out[m + k] = out[m] · out[k]`, whole blocks at a time once
/// `m ≥ 8`.
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn bitrev_table(base: Scalar, bits: u32) -> Table {
    let bits = bits as usize;
    // base^(2^(bits − 1 − j)) is the entry at index 2^j.
    let mut squares = Vec::with_capacity(bits);
    let mut p = base;
    for _ in 0..bits {
        squares.push(p);
        p = p.square();
    }
    let mut first = [Scalar::ONE; LANES];
    for j in 0..3 {
        let m = 1 << j;
        for k in 0..m {
            first[m + k] = first[k] * squares[bits - 1 - j];
        }
    }
    let mut out = vec![Block::default(); (1 << bits) / LANES];
    out[0] = Table::from_scalars(&first).0[0];
    // Blocks per rayon task.
    let task = MIN_TASK / LANES;
    for j in 3..bits {
        let m = (1 << j) / LANES;
        let step = Fr8::splat(&fr52::constant(squares[bits - 1 - j]));
        let (done, next) = out.split_at_mut(m);
        next[..m]
            .par_chunks_mut(task)
            .zip(done.par_chunks(task))
            .for_each(|(dst, src)| {
                for (d, s) in dst.iter_mut().zip(src) {
                    Fr8::mul(&Fr8::load(s), &step).store(d);
                }
            });
    }
    Table(out)
}

/// Packs `src` (a multiple of eight elements) into `dst`.
#[target_feature(enable = "avx512f")]
fn pack(src: &[Scalar], dst: &mut [Block]) {
    for (d, s) in dst.iter_mut().zip(src.as_chunks::<LANES>().0) {
        Fr8::load_scalars(s).store(d);
    }
}

/// Unpacks `src` into `dst`, reduced below r; the inverse of [`pack`].
#[target_feature(enable = "avx512f,avx512dq")]
fn unpack(src: &[Block], dst: &mut [Scalar]) {
    for (s, d) in src.iter().zip(dst.as_chunks_mut::<LANES>().0) {
        Fr8::load(s).store_scalars(d);
    }
}

/// One Cooley–Tukey stage over whole vectors: blocks of `2t` vectors, block `k` split with
/// table entry `first + k`.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn ct_stage(v: &mut [Block], t: usize, tw: &Table, first: usize) {
    for (k, block) in v.chunks_exact_mut(2 * t).enumerate() {
        let idx = first + k;
        let c = Fr8::splat(&tw.entry(idx));
        let (xs, ys) = block.split_at_mut(t);
        for (x, y) in xs.iter_mut().zip(ys.iter_mut()) {
            let w = ct_twiddled(&Fr8::load(y), &c, idx);
            let (u, w) = ct_butterfly(&Fr8::load(x), &w);
            u.store(x);
            w.store(y);
        }
    }
}

/// One Gentleman–Sande stage over whole vectors; arguments as for [`ct_stage`].
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn gs_stage(v: &mut [Block], t: usize, tw: &Table, first: usize) {
    for (k, block) in v.chunks_exact_mut(2 * t).enumerate() {
        let idx = first + k;
        let c = Fr8::splat(&tw.entry(idx));
        let (xs, ys) = block.split_at_mut(t);
        for (x, y) in xs.iter_mut().zip(ys.iter_mut()) {
            let (u, w) = (Fr8::load(x), Fr8::load(y));
            Fr8::add(&u, &w).store(x);
            diff_times(&u, &w, &c, idx).store(y);
        }
    }
}

/// The Cooley–Tukey butterfly on `x` and the already multiplied `w`: `(x + w, x − w)`,
/// both below 4r and unreduced, for `x` below 4r and `w` below 2r. `x` is brought below 2r
/// first, so the outputs of one stage can be the inputs of the next (Harvey's lazy
/// butterfly); whatever stores them reduces them.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn ct_butterfly(x: &Fr8, w: &Fr8) -> (Fr8, Fr8) {
    let x = Fr8::reduce(x);
    (Fr8::add_lazy(&x, w), Fr8::sub_lazy(&x, w))
}

/// `y·c` below 2r for `y` below 4r, or `y` brought below 2r where `idx` is table entry 0
/// (ω^0 = 1).
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn ct_twiddled(y: &Fr8, c: &Fr8, idx: usize) -> Fr8 {
    if idx != 0 {
        Fr8::mul(y, c)
    } else {
        Fr8::reduce(y)
    }
}

/// `(a − b)·c`, or `a − b` where `idx` is table entry 0 (ω^0 = 1), for inputs below 2r;
/// the difference is reduced only when it is not multiplied.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn diff_times(a: &Fr8, b: &Fr8, c: &Fr8, idx: usize) -> Fr8 {
    if idx != 0 {
        Fr8::mul(&Fr8::sub_lazy(a, b), c)
    } else {
        Fr8::sub(a, b)
    }
}

/// Two Cooley–Tukey stages in one sweep: half-width `t` (in vectors, entries from `first`)
/// and then `t/2` (entries from `2·first`). A block of `2t` is four quarters; the first
/// stage pairs quarters 0 and 2, 1 and 3, the second 0 and 1, 2 and 3, so each vector is
/// loaded and stored once for two butterflies.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn ct_stage2(v: &mut [Block], t: usize, tw: &Table, first: usize) {
    let h = t / 2;
    for (k, block) in v.chunks_exact_mut(2 * t).enumerate() {
        let idx = [first + k, 2 * (first + k), 2 * (first + k) + 1];
        let [c1, c2, c3] = idx.map(|i| Fr8::splat(&tw.entry(i)));
        let (left, right) = block.split_at_mut(t);
        let (q0, q1) = left.split_at_mut(h);
        let (q2, q3) = right.split_at_mut(h);
        for (((a, b), c), d) in q0.iter_mut().zip(q1).zip(q2).zip(q3) {
            let xc = ct_twiddled(&Fr8::load(c), &c1, idx[0]);
            let xd = ct_twiddled(&Fr8::load(d), &c1, idx[0]);
            let (ya, yc) = ct_butterfly(&Fr8::load(a), &xc);
            let (yb, yd) = ct_butterfly(&Fr8::load(b), &xd);
            let (yb, yd) = (ct_twiddled(&yb, &c2, idx[1]), ct_twiddled(&yd, &c3, idx[2]));
            let ((za, zb), (zc, zd)) = (ct_butterfly(&ya, &yb), ct_butterfly(&yc, &yd));
            za.store(a);
            zb.store(b);
            zc.store(c);
            zd.store(d);
        }
    }
}

/// Two Gentleman–Sande stages in one sweep: half-width `t/2` (entries from `2·first`) and
/// then `t` (entries from `first`); the mirror image of [`ct_stage2`].
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn gs_stage2(v: &mut [Block], t: usize, tw: &Table, first: usize) {
    let h = t / 2;
    for (k, block) in v.chunks_exact_mut(2 * t).enumerate() {
        let idx = [first + k, 2 * (first + k), 2 * (first + k) + 1];
        let [c1, c2, c3] = idx.map(|i| Fr8::splat(&tw.entry(i)));
        let (left, right) = block.split_at_mut(t);
        let (q0, q1) = left.split_at_mut(h);
        let (q2, q3) = right.split_at_mut(h);
        for (((a, b), c), d) in q0.iter_mut().zip(q1).zip(q2).zip(q3) {
            let (xa, xb, xc, xd) = (Fr8::load(a), Fr8::load(b), Fr8::load(c), Fr8::load(d));
            let (ya, yb) = (Fr8::add(&xa, &xb), diff_times(&xa, &xb, &c2, idx[1]));
            let (yc, yd) = (Fr8::add(&xc, &xd), diff_times(&xc, &xd, &c3, idx[2]));
            Fr8::add(&ya, &yc).store(a);
            diff_times(&ya, &yc, &c1, idx[0]).store(c);
            Fr8::add(&yb, &yd).store(b);
            diff_times(&yb, &yd, &c1, idx[0]).store(d);
        }
    }
}

/// The Cooley–Tukey stages of half-widths `top`, `top/2`, … `bottom` (powers of two, in
/// vectors), two per sweep where possible; `first(t)` is the first table entry of the stage
/// of half-width `t`.
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn ct_stages(
    v: &mut [Block],
    top: usize,
    bottom: usize,
    tw: &Table,
    first: impl Fn(usize) -> usize,
) {
    let mut t = top;
    while t >= bottom.max(1) {
        if t / 2 >= bottom {
            ct_stage2(v, t, tw, first(t));
            t /= 4;
        } else {
            ct_stage(v, t, tw, first(t));
            t /= 2;
        }
    }
}

/// The Gentleman–Sande stages of half-widths `bottom`, `2·bottom`, … `top`; arguments as for
/// [`ct_stages`].
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn gs_stages(
    v: &mut [Block],
    top: usize,
    bottom: usize,
    tw: &Table,
    first: impl Fn(usize) -> usize,
) {
    if bottom == 0 || top < bottom {
        return;
    }
    let mut t = bottom;
    // With an odd number of stages the first runs alone, the rest in pairs.
    if (top / bottom).trailing_zeros().is_multiple_of(2) {
        gs_stage(v, t, tw, first(t));
        t *= 2;
    }
    while t < top {
        gs_stage2(v, 2 * t, tw, first(2 * t));
        t *= 4;
    }
}

/// How the butterflies of half-width `t < 8` sit in sixteen consecutive elements, as lane
/// indices for `_mm512_permutex2var_epi64` (8 + k is lane k of the second vector).
struct Shuffle {
    /// Half-width in elements.
    t: usize,
    /// The elements that are the butterflies' `x` and `y`.
    x: [i64; LANES],
    y: [i64; LANES],
    /// Where the first and the second eight elements are among `x` (0–7) and `y` (8–15)
    /// afterwards.
    lo: [i64; LANES],
    hi: [i64; LANES],
}

const HALF_4: Shuffle = Shuffle {
    t: 4,
    x: [0, 1, 2, 3, 8, 9, 10, 11],
    y: [4, 5, 6, 7, 12, 13, 14, 15],
    lo: [0, 1, 2, 3, 8, 9, 10, 11],
    hi: [4, 5, 6, 7, 12, 13, 14, 15],
};

const HALF_2: Shuffle = Shuffle {
    t: 2,
    x: [0, 1, 4, 5, 8, 9, 12, 13],
    y: [2, 3, 6, 7, 10, 11, 14, 15],
    lo: [0, 1, 8, 9, 2, 3, 10, 11],
    hi: [4, 5, 12, 13, 6, 7, 14, 15],
};

const HALF_1: Shuffle = Shuffle {
    t: 1,
    x: [0, 2, 4, 6, 8, 10, 12, 14],
    y: [1, 3, 5, 7, 9, 11, 13, 15],
    lo: [0, 8, 1, 9, 2, 10, 3, 11],
    hi: [4, 12, 5, 13, 6, 14, 7, 15],
};

/// A vector of lane indices.
#[inline]
#[target_feature(enable = "avx512f")]
fn lanes(idx: [i64; LANES]) -> __m512i {
    // SAFETY: `idx` is 64 bytes of plain integers, exactly what the unaligned load reads;
    // AVX-512F is enabled on this function.
    unsafe { std::arch::x86_64::_mm512_loadu_si512(idx.as_ptr().cast()) }
}

/// `(a, b)` lanes picked by `idx` from the pair `(a, b)`, limb by limb.
#[inline]
#[target_feature(enable = "avx512f")]
fn pick(a: &Fr8, idx: __m512i, b: &Fr8) -> Fr8 {
    Fr8::zip_with(a, b, |x, y| _mm512_permutex2var_epi64(x, idx, y))
}

/// The twiddles of the eight butterflies of half-width `s.t` in the sixteen elements that
/// start at element `g` of the whole vector: entry `g/(2t) + k/t` in lane k.
#[inline]
#[target_feature(enable = "avx512f")]
fn lane_twiddles(s: &Shuffle, tw: &Table, g: usize) -> Fr8 {
    let first = g / (2 * s.t);
    let block = Fr8::load(&tw.0[first / LANES]);
    if s.t == 1 {
        // Eight consecutive entries, starting at a multiple of eight: one block.
        return block;
    }
    let idx: [i64; LANES] = std::array::from_fn(|k| ((first % LANES) + k / s.t) as i64);
    block.permute(lanes(idx))
}

/// The Cooley–Tukey stages of half-widths 4, 2 and 1 on a row (`start`: its first element's
/// index in the whole vector).
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn ct_lanes(row: &mut [Block], start: usize, tw: &Table) {
    let shuffles =
        [&HALF_4, &HALF_2, &HALF_1].map(|s| (s, [s.x, s.y, s.lo, s.hi].map(|i| lanes(i))));
    for (p, pair) in row.chunks_exact_mut(2).enumerate() {
        let g = start + p * 2 * LANES;
        let (mut v0, mut v1) = (Fr8::load(&pair[0]), Fr8::load(&pair[1]));
        for (s, [ix, iy, ilo, ihi]) in &shuffles {
            let c = lane_twiddles(s, tw, g);
            let y = Fr8::mul(&pick(&v0, *iy, &v1), &c);
            let (x, y) = ct_butterfly(&pick(&v0, *ix, &v1), &y);
            v0 = pick(&x, *ilo, &y);
            v1 = pick(&x, *ihi, &y);
        }
        v0.store(&mut pair[0]);
        v1.store(&mut pair[1]);
    }
}

/// The Gentleman–Sande stages of half-widths 1, 2 and 4 on a row; arguments as for
/// [`ct_lanes`].
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn gs_lanes(row: &mut [Block], start: usize, tw: &Table) {
    let shuffles =
        [&HALF_1, &HALF_2, &HALF_4].map(|s| (s, [s.x, s.y, s.lo, s.hi].map(|i| lanes(i))));
    for (p, pair) in row.chunks_exact_mut(2).enumerate() {
        let g = start + p * 2 * LANES;
        let (mut v0, mut v1) = (Fr8::load(&pair[0]), Fr8::load(&pair[1]));
        for (s, [ix, iy, ilo, ihi]) in &shuffles {
            let c = lane_twiddles(s, tw, g);
            let (x, y) = (pick(&v0, *ix, &v1), pick(&v0, *iy, &v1));
            let (x, y) = (Fr8::add(&x, &y), Fr8::mul(&Fr8::sub_lazy(&x, &y), &c));
            v0 = pick(&x, *ilo, &y);
            v1 = pick(&x, *ihi, &y);
        }
        v0.store(&mut pair[0]);
        v1.store(&mut pair[1]);
    }
}

/// All Cooley–Tukey stages inside one row (`start`: its first element's index).
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn ct_row(row: &mut [Block], start: usize, tw: &Table) {
    // Half-width t vectors is 8t elements, whose first entry is start / (16t).
    ct_stages(row, row.len() / 2, 1, tw, |t| start / (2 * t * LANES));
    ct_lanes(row, start, tw);
}

/// All Gentleman–Sande stages inside one row; arguments as for [`ct_row`].
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn gs_row(row: &mut [Block], start: usize, tw: &Table) {
    gs_lanes(row, start, tw);
    gs_stages(row, row.len() / 2, 1, tw, |t| start / (2 * t * LANES));
}

/// The Cooley–Tukey stages that pair whole rows, on a tile of `cols` vectors per row: the
/// stage pairing rows `half` apart has half-width `half·cols` and entries from 0.
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn ct_tile(tile: &mut [Block], cols: usize, tw: &Table) {
    ct_stages(tile, tile.len() / 2, cols, tw, |_| 0);
}

/// The Gentleman–Sande stages that pair whole rows; arguments as for [`ct_tile`].
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn gs_tile(tile: &mut [Block], cols: usize, tw: &Table) {
    gs_stages(tile, tile.len() / 2, cols, tw, |_| 0);
}

/// `dst[k] = lo[k] · hi` (a twist row, in the domain of R').
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn scaled_row(dst: &mut [Block], lo: &Table, hi: &[u64; LIMBS]) {
    let hi = Fr8::splat(hi);
    for (d, l) in dst.iter_mut().zip(&lo.0) {
        Fr8::mul(&Fr8::load(l), &hi).store(d);
    }
}

/// `v[k] ← v[k] · f[k]` for a row of constants `f`.
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn mul_row(v: &mut [Block], f: &[Block]) {
    for (x, c) in v.iter_mut().zip(f) {
        Fr8::mul(&Fr8::load(x), &Fr8::load(c)).store(x);
    }
}

/// Whether the eight-lane passes handle a domain of `n` elements: rows of at least sixteen
/// (a pair of vectors for the in-vector stages) and tiles at least a vector wide.
pub(super) fn supports(layout: &Layout) -> bool {
    layout.row >= 2 * LANES && layout.cols.is_multiple_of(LANES)
}

/// The quotient's passes 1–4 on `a`, `b` and `c`, padded to the domain: afterwards `a` holds
/// the final inverse transform's untwisted output in bit-reversed order, as the scalar
/// passes leave it.
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512DQ and AVX-512 IFMA, and `supports(&domain.layout)`
/// must hold.
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
pub(super) unsafe fn passes(domain: &Domain, a: &mut [Scalar], b: &mut [Scalar], c: &mut [Scalar]) {
    let tables = Tables::new(domain);
    let layout = domain.layout;
    if layout.rows > 1 {
        inverse_tiles(&tables, layout, [&mut *a, &mut *b, &mut *c]);
    }
    twist_rows(&tables, layout, a, b, c);
    forward_tiles(&tables, layout, a, b, c);
    untwist_rows(&tables, layout, a);
}

/// Pass 1: the row-pairing stages of the three inverse transforms.
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn inverse_tiles(tables: &Tables, layout: Layout, vs: [&mut [Scalar]; 3]) {
    let cols = layout.cols / LANES;
    let shared = vs.map(|v| SharedRows::new(v, layout));
    (0..3 * layout.tiles()).into_par_iter().for_each_init(
        || vec![Block::default(); cols * layout.rows],
        |buf, job| {
            let (v, tile) = (&shared[job % 3], job / 3);
            // SAFETY: each job is one tile of one vector, so no two threads share a tile.
            unsafe { v.gather_with(tile, |r, seg| pack(seg, &mut buf[r * cols..][..cols])) };
            ct_tile(buf, cols, &tables.tw_inv);
            // SAFETY: as for `gather_with`.
            unsafe { v.scatter_with(tile, |r, seg| unpack(&buf[r * cols..][..cols], seg)) };
        },
    );
}

/// Pass 2: per row, for A, B and C, the rest of the inverse transform, the twist and the
/// forward transform's in-row stages.
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn twist_rows(
    tables: &Tables,
    layout: Layout,
    a: &mut [Scalar],
    b: &mut [Scalar],
    c: &mut [Scalar],
) {
    let width = layout.row / LANES;
    a.par_chunks_mut(layout.row)
        .zip(b.par_chunks_mut(layout.row))
        .zip(c.par_chunks_mut(layout.row))
        .enumerate()
        .for_each_init(
            || [(); 3].map(|_| vec![Block::default(); width]),
            |[buf, twist, twist16], (r, ((ra, rb), rc))| {
                scaled_row(twist, &tables.twist_lo, &tables.twist_hi[r]);
                scaled_row(twist16, &tables.twist_lo, &tables.twist_hi16[r]);
                let start = r * layout.row;
                for (row, twist) in [(ra, &*twist), (rb, &*twist16), (rc, &*twist)] {
                    pack(row, buf);
                    ct_row(buf, start, &tables.tw_inv);
                    mul_row(buf, twist);
                    gs_row(buf, start, &tables.tw);
                    unpack(buf, row);
                }
            },
        );
}

/// Pass 3: the forward transforms' row-pairing stages, A·B − C, and the final inverse
/// transform's row-pairing stages.
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn forward_tiles(
    tables: &Tables,
    layout: Layout,
    a: &mut [Scalar],
    b: &mut [Scalar],
    c: &mut [Scalar],
) {
    let cols = layout.cols / LANES;
    let [sa, sb, sc] = [a, b, c].map(|v| SharedRows::new(v, layout));
    (0..layout.tiles()).into_par_iter().for_each_init(
        || [(); 3].map(|_| vec![Block::default(); cols * layout.rows]),
        |[ta, tb, tc], tile| {
            for (s, t) in [(&sa, &mut *ta), (&sb, &mut *tb), (&sc, &mut *tc)] {
                // SAFETY: each job is one tile, the same in all three vectors, so no two
                // threads share a tile.
                unsafe { s.gather_with(tile, |r, seg| pack(seg, &mut t[r * cols..][..cols])) };
                gs_tile(t, cols, &tables.tw);
            }
            // B carries the extra factor 16 that the product by a data value needs.
            for ((x, y), z) in ta.iter_mut().zip(tb.iter()).zip(tc.iter()) {
                let p = Fr8::mul(&Fr8::load(x), &Fr8::load(y));
                Fr8::sub(&p, &Fr8::load(z)).store(x);
            }
            ct_tile(ta, cols, &tables.tw_inv);
            // SAFETY: as for `gather_with`; B and C are not written back, they are done with.
            unsafe { sa.scatter_with(tile, |r, seg| unpack(&ta[r * cols..][..cols], seg)) };
        },
    );
}

/// Pass 4: the final inverse transform's in-row stages and the untwist.
#[target_feature(enable = "avx512f,avx512dq,avx512ifma")]
fn untwist_rows(tables: &Tables, layout: Layout, a: &mut [Scalar]) {
    let width = layout.row / LANES;
    a.par_chunks_mut(layout.row).enumerate().for_each_init(
        || [(); 2].map(|_| vec![Block::default(); width]),
        |[buf, untwist], (r, row)| {
            pack(row, buf);
            ct_row(buf, r * layout.row, &tables.tw_inv);
            scaled_row(untwist, &tables.untwist_lo, &tables.untwist_hi[r]);
            mul_row(buf, untwist);
            unpack(buf, row);
        },
    );
}
