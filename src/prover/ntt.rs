//! Number-theoretic transforms over Fr on the CPU, and the quotient polynomial built on them.
//!
//! Both directions use per-block twiddles: a Cooley–Tukey pass (natural order in, bit-reversed
//! out) splits a block of `2t` elements with one constant `c`, `(x, y) ↦ (x + c·y, x − c·y)`,
//! and a Gentleman–Sande pass (bit-reversed in, natural out) undoes it,
//! `(x, y) ↦ (x + y, (x − y)·c)`. The constants of the `m` blocks of a stage are the first
//! `m` entries of one table of powers of the root in bit-reversed exponent order, read
//! sequentially; every stage's first block has `c = 1` and multiplies nothing. In a prime
//! field a radix-4 butterfly saves no multiplication (the fourth root of unity is not free as
//! it is over the complex numbers), so the passes stay radix-2 and the gain comes from doing
//! many stages per trip through memory instead.
//!
//! A vector of `n = R·B` elements is seen as `R` rows of `B` (one cache block, [`BLOCK_LOG`]).
//! Stages whose butterflies stay inside a row run on one row at a time; the other stages pair
//! whole rows, so they run on tiles of a few columns and all `R` rows, copied into a buffer
//! that stays in the core's cache. An NTT is then two passes over memory, and the quotient
//! fuses neighbouring steps of its seven transforms into five passes (see [`quotient`]).

use std::marker::PhantomData;

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use super::ProverError;

// The eight-lane passes of the quotient; the file sits beside this one because the prover's
// module list names only the arithmetic it needs (`fr52`).
#[cfg(target_arch = "x86_64")]
#[path = "ntt_ifma.rs"]
mod ifma;

/// Work per rayon task, in elements, for the simple element-wise passes.
const MIN_TASK: usize = 1 << 12;

/// Log2 of the row length `B`: 2^12 elements are 128 KiB, so a row, its share of the twist
/// table and the twiddles it reads stay in a core's L2 cache.
const BLOCK_LOG: u32 = 12;

/// Elements per column tile we aim for (columns times rows): 4096 elements are 128 KiB, and the
/// quotient's fused pass holds three tiles at once. A tile has at least [`MIN_TILE_COLS`]
/// columns, so above 2^21 (512 rows) tiles grow with the domain: 256 KiB at 2^22.
const TILE: usize = 1 << 12;

/// Fewest columns per tile: eight elements are four 64-byte cache lines of each row.
const MIN_TILE_COLS: usize = 8;

/// The largest transform Fr supports (its two-adicity).
pub const MAX_LOG_SIZE: u32 = Scalar::S;

/// A primitive `2^log_n`-th root of unity.
pub fn root_of_unity(log_n: u32) -> Scalar {
    let mut w = Scalar::ROOT_OF_UNITY;
    for _ in log_n..Scalar::S {
        w = w.square();
    }
    w
}

/// `[start, start·step, start·step², …]` of length `len`, computed in parallel chunks.
pub fn powers(start: Scalar, step: Scalar, len: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; len];
    out.par_chunks_mut(MIN_TASK)
        .enumerate()
        .for_each(|(k, chunk)| {
            let mut cur = start * step.pow_vartime([(k * MIN_TASK) as u64]);
            for v in chunk {
                *v = cur;
                cur *= step;
            }
        });
    out
}

/// `base^rev(k)` for `k < 2^bits`, where `rev` reverses the low `bits` bits.
///
/// Built by doubling: the indices in `[m, 2m)` are `m + k` with `k < m`, whose reversal is
/// `rev(m) + rev(k)` because the bits do not overlap, so `out[m + k] = out[m] · out[k]`.
fn bitrev_powers(base: Scalar, bits: u32) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; 1 << bits];
    out[0] = Scalar::ONE;
    // base^(2^(bits − 1 − j)) is the entry at index 2^j.
    let mut squares = Vec::with_capacity(bits as usize);
    let mut p = base;
    for _ in 0..bits {
        squares.push(p);
        p = p.square();
    }
    for j in 0..bits as usize {
        let m = 1usize << j;
        let step = squares[bits as usize - 1 - j];
        let (done, next) = out.split_at_mut(m);
        next[..m]
            .par_chunks_mut(MIN_TASK)
            .zip(done.par_chunks(MIN_TASK))
            .for_each(|(dst, src)| {
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = *s * step;
                }
            });
    }
    out
}

/// `i` with its lowest `bits` bits reversed.
#[inline]
fn rev(i: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - bits)
    }
}

/// `dst[i] = src[rev(i)]` for the first `dst.len()` indices, where `rev` reverses
/// `log2(src.len())` bits; in parallel.
///
/// An index splits into its three high bits `h`, its three low bits `l` and the middle
/// bits `m`, and `rev(h, m, l) = (rev(l), rev(m), rev(h))`. For one `m` the 64 elements read
/// eight runs of eight consecutive elements of `src` (one per `l`) and write eight runs of
/// eight of `dst` (one per `h`), so the cache lines read and written are used whole, where
/// the elements in order would read a new line of `src` for each.
fn permute_into(src: &[Scalar], dst: &mut [Scalar]) {
    let bits = src.len().trailing_zeros();
    if bits < 6 {
        for (i, d) in dst.iter_mut().enumerate() {
            *d = src[rev(i, bits)];
        }
        return;
    }
    let (row, mid_bits) = (src.len() >> 3, bits - 6);
    // A task covers `per_task` values of m: that many runs of eight in each of the eight
    // rows of dst (fewer rows, or a shorter last run, where dst is shorter than src).
    let per_task = MIN_TASK / 64;
    let mut rows: Vec<_> = dst
        .chunks_mut(row)
        .map(|r| r.chunks_mut(8 * per_task))
        .collect();
    let tasks: Vec<[Option<&mut [Scalar]>; 8]> = (0..row.div_ceil(8 * per_task))
        .map(|_| std::array::from_fn(|h| rows.get_mut(h).and_then(|r| r.next())))
        .collect();
    tasks
        .into_par_iter()
        .enumerate()
        .for_each(|(j, mut parts)| {
            let mut tile = [Scalar::ZERO; 64];
            for dm in 0..per_task.min((1 << mid_bits) - j * per_task) {
                let mid = rev(j * per_task + dm, mid_bits) * 8;
                for l in 0..8 {
                    let run = &src[rev(l, 3) * row + mid..][..8];
                    for h in 0..8 {
                        tile[8 * h + l] = run[rev(h, 3)];
                    }
                }
                for (h, part) in parts.iter_mut().enumerate() {
                    let Some(part) = part else { continue };
                    let out = part.iter_mut().skip(8 * dm).take(8);
                    for (d, x) in out.zip(&tile[8 * h..8 * h + 8]) {
                        *d = *x;
                    }
                }
            }
        });
}

/// Reorders `values` into bit-reversed index order, in parallel (out of place).
pub fn bit_reverse_permute(values: &mut Vec<Scalar>) {
    if values.len() <= 2 {
        return;
    }
    let mut dst = vec![Scalar::ZERO; values.len()];
    permute_into(values, &mut dst);
    *values = dst;
}

/// The modulus r of Fr, little-endian 64-bit limbs.
const MODULUS: [u64; 4] = [
    0xffff_ffff_0000_0001,
    0x53bd_a402_fffe_5bfe,
    0x3339_d808_09a1_d805,
    0x73ed_a753_299d_7d48,
];

// `limbs` and `set_limbs` rely on this layout: blstrs' `Scalar` is a `#[repr(transparent)]`
// wrapper of blst's `#[repr(C)] blst_fr { l: [u64; 4] }`, the Montgomery form, always reduced
// below r.
const _: () = assert!(
    std::mem::size_of::<Scalar>() == 32 && std::mem::align_of::<Scalar>() == 8,
    "blstrs::Scalar is no longer four u64 limbs"
);

/// The Montgomery limbs of `x`.
///
/// The butterflies add and subtract inline on the limbs instead of calling blst: a call and
/// its return cost more than the dozen instructions of a 256-bit modular addition, and a
/// result that blst stores with 8-byte writes and Rust then copies with 16-byte reads stalls
/// store-to-load forwarding. Multiplications still go through blst, in place.
#[inline(always)]
fn limbs(x: &Scalar) -> [u64; 4] {
    // SAFETY: `Scalar` is `#[repr(transparent)]` over `blst_fr`, a `#[repr(C)]` struct of one
    // `[u64; 4]` (size and alignment are checked at compile time above), so a `&Scalar` is a
    // valid, aligned `&[u64; 4]` and every bit pattern of it is a valid array.
    unsafe { *(x as *const Scalar).cast::<[u64; 4]>() }
}

/// Stores the Montgomery limbs `l` (reduced below r) into `x`.
#[inline(always)]
fn set_limbs(x: &mut Scalar, l: [u64; 4]) {
    // SAFETY: the layout argument of `limbs`; the callers only store sums and differences
    // reduced below r, so `x` stays a valid field element.
    unsafe { *(x as *mut Scalar).cast::<[u64; 4]>() = l }
}

/// The modulus as a static, for the assembly below to address it.
#[cfg(target_arch = "x86_64")]
static MODULUS_LIMBS: [u64; 4] = MODULUS;

/// `a + b mod r` for reduced limbs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn add_limbs(a: [u64; 4], b: [u64; 4]) -> [u64; 4] {
    let (t0, t1, t2, t3): (u64, u64, u64, u64);
    // SAFETY: register arithmetic and reads of the static modulus only. r < 2^255, so the
    // sum of two reduced values fits in 256 bits; `sum − r` borrows exactly when sum < r,
    // and then the sum is kept.
    unsafe {
        std::arch::asm!(
            "add {s0}, {b0}",
            "adc {s1}, {b1}",
            "adc {s2}, {b2}",
            "adc {s3}, {b3}",
            "mov {t0}, {s0}",
            "sub {t0}, qword ptr [rip + {m}]",
            "mov {t1}, {s1}",
            "sbb {t1}, qword ptr [rip + {m} + 8]",
            "mov {t2}, {s2}",
            "sbb {t2}, qword ptr [rip + {m} + 16]",
            "mov {t3}, {s3}",
            "sbb {t3}, qword ptr [rip + {m} + 24]",
            "cmovc {t0}, {s0}",
            "cmovc {t1}, {s1}",
            "cmovc {t2}, {s2}",
            "cmovc {t3}, {s3}",
            s0 = inout(reg) a[0] => _,
            s1 = inout(reg) a[1] => _,
            s2 = inout(reg) a[2] => _,
            s3 = inout(reg) a[3] => _,
            b0 = in(reg) b[0],
            b1 = in(reg) b[1],
            b2 = in(reg) b[2],
            b3 = in(reg) b[3],
            t0 = lateout(reg) t0,
            t1 = lateout(reg) t1,
            t2 = lateout(reg) t2,
            t3 = lateout(reg) t3,
            m = sym MODULUS_LIMBS,
            options(pure, readonly, nostack),
        );
    }
    [t0, t1, t2, t3]
}

/// `a − b mod r` for reduced limbs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn sub_limbs(a: [u64; 4], b: [u64; 4]) -> [u64; 4] {
    let [mut d0, mut d1, mut d2, mut d3] = a;
    // SAFETY: register arithmetic and reads of the static modulus only. A borrow out of
    // `a − b` means a < b; the mask is then all ones and r is added back.
    unsafe {
        std::arch::asm!(
            "sub {d0}, {b0}",
            "sbb {d1}, {b1}",
            "sbb {d2}, {b2}",
            "sbb {d3}, {b3}",
            "sbb {k}, {k}",
            "mov {q0}, qword ptr [rip + {m}]",
            "and {q0}, {k}",
            "mov {q1}, qword ptr [rip + {m} + 8]",
            "and {q1}, {k}",
            "mov {q2}, qword ptr [rip + {m} + 16]",
            "and {q2}, {k}",
            "mov {q3}, qword ptr [rip + {m} + 24]",
            "and {q3}, {k}",
            "add {d0}, {q0}",
            "adc {d1}, {q1}",
            "adc {d2}, {q2}",
            "adc {d3}, {q3}",
            d0 = inout(reg) d0,
            d1 = inout(reg) d1,
            d2 = inout(reg) d2,
            d3 = inout(reg) d3,
            b0 = in(reg) b[0],
            b1 = in(reg) b[1],
            b2 = in(reg) b[2],
            b3 = in(reg) b[3],
            k = lateout(reg) _,
            q0 = lateout(reg) _,
            q1 = lateout(reg) _,
            q2 = lateout(reg) _,
            q3 = lateout(reg) _,
            m = sym MODULUS_LIMBS,
            options(pure, readonly, nostack),
        );
    }
    [d0, d1, d2, d3]
}

// Elsewhere than on x86-64 the portable additions below are the ones used.
#[cfg(not(target_arch = "x86_64"))]
use {add_portable as add_limbs, sub_portable as sub_limbs};

/// `a + b mod r` for reduced limbs, in portable Rust.
#[cfg(any(test, not(target_arch = "x86_64")))]
#[inline(always)]
fn add_portable(a: [u64; 4], b: [u64; 4]) -> [u64; 4] {
    // r < 2^255, so the sum of two reduced values fits in 256 bits. The u128 carries compile
    // to add-with-carry chains.
    let mut sum = [0u64; 4];
    let mut carry = 0u128;
    for i in 0..4 {
        let t = u128::from(a[i]) + u128::from(b[i]) + carry;
        sum[i] = t as u64;
        carry = t >> 64;
    }
    let mut diff = [0u64; 4];
    let mut borrow = 0u128;
    for i in 0..4 {
        let t = u128::from(sum[i]).wrapping_sub(u128::from(MODULUS[i]) + borrow);
        diff[i] = t as u64;
        borrow = t >> 127;
    }
    // A borrow means sum < r: keep the sum.
    let keep = 0u64.wrapping_sub(borrow as u64);
    [0, 1, 2, 3].map(|i| (sum[i] & keep) | (diff[i] & !keep))
}

/// `a − b mod r` for reduced limbs, in portable Rust.
#[cfg(any(test, not(target_arch = "x86_64")))]
#[inline(always)]
fn sub_portable(a: [u64; 4], b: [u64; 4]) -> [u64; 4] {
    let mut diff = [0u64; 4];
    let mut borrow = 0u128;
    for i in 0..4 {
        let t = u128::from(a[i]).wrapping_sub(u128::from(b[i]) + borrow);
        diff[i] = t as u64;
        borrow = t >> 127;
    }
    // A borrow means a < b: add r back.
    let mask = 0u64.wrapping_sub(borrow as u64);
    let mut out = [0u64; 4];
    let mut carry = 0u128;
    for i in 0..4 {
        let t = u128::from(diff[i]) + u128::from(MODULUS[i] & mask) + carry;
        out[i] = t as u64;
        carry = t >> 64;
    }
    out
}

/// `(x, y) ← (x + y, x − y)`.
#[inline(always)]
fn add_sub(x: &mut Scalar, y: &mut Scalar) {
    let (u, v) = (limbs(x), limbs(y));
    set_limbs(x, add_limbs(u, v));
    set_limbs(y, sub_limbs(u, v));
}

/// Elements a Cooley–Tukey stage multiplies before it adds: see [`ct_stage`].
const CT_GROUP: usize = 32;

/// One Cooley–Tukey stage over `v`: blocks of `2t` elements, block `k` split with `tw[k]`:
/// `(x, y) ← (x + c·y, x − c·y)`.
///
/// The products of a group of blocks are all formed before any of them is added: an addition
/// right after the multiplication it needs would wait for blst's result on every butterfly,
/// whereas independent multiplications in a row overlap.
#[inline]
fn ct_stage(v: &mut [Scalar], t: usize, tw: &[Scalar]) {
    let group = CT_GROUP.max(2 * t);
    for (chunk, tw) in v.chunks_mut(group).zip(tw.chunks(group / (2 * t))) {
        for (block, c) in chunk.chunks_exact_mut(2 * t).zip(tw) {
            if *c != Scalar::ONE {
                block[t..].iter_mut().for_each(|y| *y *= c);
            }
        }
        for block in chunk.chunks_exact_mut(2 * t) {
            let (xs, ys) = block.split_at_mut(t);
            for (x, y) in xs.iter_mut().zip(ys.iter_mut()) {
                add_sub(x, y);
            }
        }
    }
}

/// One Gentleman–Sande stage over `v`: blocks of `2t` elements, block `k` joined with `tw[k]`:
/// `(x, y) ← (x + y, (x − y)·c)`.
#[inline]
fn gs_stage(v: &mut [Scalar], t: usize, tw: &[Scalar]) {
    for (block, c) in v.chunks_exact_mut(2 * t).zip(tw) {
        let (xs, ys) = block.split_at_mut(t);
        let trivial = *c == Scalar::ONE;
        for (x, y) in xs.iter_mut().zip(ys.iter_mut()) {
            add_sub(x, y);
            if !trivial {
                *y *= c;
            }
        }
    }
}

/// The Cooley–Tukey stages that stay inside one row: `row` starts at element `start` of the
/// whole vector, and `tw` is the whole vector's twiddle table.
fn ct_row(row: &mut [Scalar], start: usize, tw: &[Scalar]) {
    let mut t = row.len() / 2;
    while t >= 1 {
        let first = start / (2 * t);
        ct_stage(row, t, &tw[first..first + row.len() / (2 * t)]);
        t /= 2;
    }
}

/// The Gentleman–Sande stages that stay inside one row; arguments as for [`ct_row`].
fn gs_row(row: &mut [Scalar], start: usize, tw: &[Scalar]) {
    let mut t = 1;
    while t < row.len() {
        let first = start / (2 * t);
        gs_stage(row, t, &tw[first..first + row.len() / (2 * t)]);
        t *= 2;
    }
}

/// The Cooley–Tukey stages that pair whole rows, on a tile of `cols` columns of every row
/// (`tile[r·cols + j]`): row-block `k` of a stage is the vector's block `k`.
fn ct_tile(tile: &mut [Scalar], cols: usize, tw: &[Scalar]) {
    let rows = tile.len() / cols;
    let mut half = rows / 2;
    while half >= 1 {
        ct_stage(tile, half * cols, &tw[..rows / (2 * half)]);
        half /= 2;
    }
}

/// The Gentleman–Sande stages that pair whole rows; arguments as for [`ct_tile`].
fn gs_tile(tile: &mut [Scalar], cols: usize, tw: &[Scalar]) {
    let rows = tile.len() / cols;
    let mut half = 1;
    while half < rows {
        gs_stage(tile, half * cols, &tw[..rows / (2 * half)]);
        half *= 2;
    }
}

/// How a vector of `n` elements is cut into rows and column tiles.
#[derive(Clone, Copy, Debug)]
struct Layout {
    /// Elements in a row (`B`).
    row: usize,
    /// Number of rows (`R = n / B`).
    rows: usize,
    /// Columns in a tile.
    cols: usize,
}

impl Layout {
    fn new(n: usize) -> Self {
        let row = n.min(1 << BLOCK_LOG);
        let rows = n / row;
        let cols = (TILE / rows).clamp(MIN_TILE_COLS.min(row), row);
        Self { row, rows, cols }
    }

    fn tiles(&self) -> usize {
        self.row / self.cols
    }
}

/// A vector that tasks on disjoint column tiles read and write at the same time.
///
/// Rust's borrows cannot split a slice into interleaved strided pieces, so the tile passes go
/// through a raw pointer; [`SharedRows::gather`] and [`SharedRows::scatter`] only form
/// references to the row segments of the tile they are given.
struct SharedRows<'a> {
    ptr: *mut Scalar,
    len: usize,
    layout: Layout,
    _borrow: PhantomData<&'a mut [Scalar]>,
}

// SAFETY: a `SharedRows` is only a mutable borrow of a `[Scalar]` spread over threads; its
// methods are unsafe and require callers on different threads to use disjoint tiles, so no
// element is reached from two threads at once. `Scalar` itself is `Send` and `Sync`.
unsafe impl Send for SharedRows<'_> {}
// SAFETY: as for `Send` above.
unsafe impl Sync for SharedRows<'_> {}

impl<'a> SharedRows<'a> {
    fn new(v: &'a mut [Scalar], layout: Layout) -> Self {
        assert_eq!(v.len(), layout.row * layout.rows);
        Self {
            ptr: v.as_mut_ptr(),
            len: v.len(),
            layout,
            _borrow: PhantomData,
        }
    }

    /// The offsets of tile `tile`'s row segments.
    fn segments(&self, tile: usize) -> impl Iterator<Item = usize> + '_ {
        let first = tile * self.layout.cols;
        assert!(first + self.layout.cols <= self.layout.row);
        (0..self.layout.rows).map(move |r| r * self.layout.row + first)
    }

    /// Hands `f` each row segment of tile `tile` in turn, with its row number.
    ///
    /// # Safety
    /// No other thread may write tile `tile` of this vector during the call.
    unsafe fn gather_with(&self, tile: usize, mut f: impl FnMut(usize, &[Scalar])) {
        let cols = self.layout.cols;
        for (r, off) in self.segments(tile).enumerate() {
            debug_assert!(off + cols <= self.len);
            // SAFETY: `off + cols ≤ len` because the tile's columns end within a row
            // (`segments` asserts it) and the row is one of the vector's; no other thread
            // writes these elements now (the caller's promise).
            f(r, unsafe {
                std::slice::from_raw_parts(self.ptr.add(off), cols)
            });
        }
    }

    /// Hands `f` each row segment of tile `tile` in turn, mutably, with its row number.
    ///
    /// # Safety
    /// No other thread may read or write tile `tile` of this vector during the call.
    unsafe fn scatter_with(&self, tile: usize, mut f: impl FnMut(usize, &mut [Scalar])) {
        let cols = self.layout.cols;
        for (r, off) in self.segments(tile).enumerate() {
            debug_assert!(off + cols <= self.len);
            // SAFETY: in bounds as in `gather_with`; this thread is the only one touching
            // these elements now (the caller's promise), so the mutable slice is unique.
            f(r, unsafe {
                std::slice::from_raw_parts_mut(self.ptr.add(off), cols)
            });
        }
    }

    /// Copies tile `tile` into `buf` (row-major, `cols` per row).
    ///
    /// # Safety
    /// No other thread may write tile `tile` of this vector during the call.
    unsafe fn gather(&self, tile: usize, buf: &mut [Scalar]) {
        let cols = self.layout.cols;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.gather_with(tile, |r, seg| buf[r * cols..][..cols].copy_from_slice(seg)) }
    }

    /// Copies `buf` back into tile `tile`.
    ///
    /// # Safety
    /// No other thread may read or write tile `tile` of this vector during the call.
    unsafe fn scatter(&self, tile: usize, buf: &[Scalar]) {
        let cols = self.layout.cols;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.scatter_with(tile, |r, seg| seg.copy_from_slice(&buf[r * cols..][..cols])) }
    }
}

/// Cooley–Tukey transform of `v` in place: natural order in, bit-reversed order out, with
/// the bit-reversed twiddle table `tw` (`tw[k] = ω^rev(k)`, `n/2` entries).
fn ct_transform(v: &mut [Scalar], tw: &[Scalar]) {
    let layout = Layout::new(v.len());
    if layout.rows > 1 {
        let shared = SharedRows::new(v, layout);
        (0..layout.tiles()).into_par_iter().for_each_init(
            || vec![Scalar::ZERO; layout.cols * layout.rows],
            |buf, tile| {
                // SAFETY: every task has its own tile, so tiles are disjoint across threads.
                unsafe { shared.gather(tile, buf) };
                ct_tile(buf, layout.cols, tw);
                // SAFETY: as for `gather`.
                unsafe { shared.scatter(tile, buf) };
            },
        );
    }
    v.par_chunks_mut(layout.row)
        .enumerate()
        .for_each(|(r, row)| ct_row(row, r * layout.row, tw));
}

/// In-place NTT of `values` (length a power of two) with the primitive root `omega` of that
/// length: `values[k] ← Σ_j values[j]·omega^(jk)`.
pub fn ntt_in_place(values: &mut Vec<Scalar>, omega: Scalar) {
    let n = values.len();
    assert!(n.is_power_of_two(), "NTT size must be a power of two");
    if n < 2 {
        return;
    }
    let tw = bitrev_powers(omega, n.trailing_zeros() - 1);
    ct_transform(values, &tw);
    bit_reverse_permute(values);
}

/// The evaluation domain of size `2^log_n` and the tables the quotient needs.
struct Domain {
    size: usize,
    layout: Layout,
    /// `ω^rev(k)`, `n/2` entries: the forward transform's twiddles.
    tw: Vec<Scalar>,
    /// `ω^−rev(k)`, `n/2` entries: the inverse transform's twiddles.
    tw_inv: Vec<Scalar>,
    /// The coset twist of bit-reversed coefficients, `g^rev(p) / n = lo[p mod B] · hi[p / B]`.
    twist_lo: Vec<Scalar>,
    twist_hi: Vec<Scalar>,
    /// The final untwist, `g^−rev(p) / (n · Z(g))`, split the same way.
    untwist_lo: Vec<Scalar>,
    untwist_hi: Vec<Scalar>,
}

impl Domain {
    /// The domain of `size` elements; the twiddle tables `tw` and `tw_inv` stay empty unless
    /// `twiddles` (the eight-lane passes build their own).
    fn new(size: usize, twiddles: bool) -> Result<Self, ProverError> {
        let log_n = size.trailing_zeros();
        if !size.is_power_of_two() || log_n > MAX_LOG_SIZE {
            return Err(ProverError::DomainTooLarge {
                size,
                max_log: MAX_LOG_SIZE,
            });
        }
        let inv = |x: Scalar| Option::<Scalar>::from(x.invert()).unwrap_or(Scalar::ZERO);
        let omega = root_of_unity(log_n);
        let layout = Layout::new(size);
        let (row_bits, rows_bits) = (layout.row.trailing_zeros(), layout.rows.trailing_zeros());
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let g_inv = inv(g);
        let size_inv = inv(Scalar::from(size as u64));
        // Z(x) = x^n − 1 is the constant g^n − 1 on the coset g·domain.
        let z_inv = inv(g.pow_vartime([size as u64]) - Scalar::ONE);
        // For p = hi·B + lo, rev(p) over log n bits is rev(lo)·R + rev(hi), so
        // g^rev(p) = (g^R)^rev(lo) · g^rev(hi).
        let rows = layout.rows as u64;
        let scaled = |base: Scalar, s: Scalar| {
            let mut v = bitrev_powers(base, rows_bits);
            v.iter_mut().for_each(|x| *x *= s);
            v
        };
        let ((tw, tw_inv), (twist, untwist)) = rayon::join(
            || {
                if twiddles {
                    rayon::join(
                        || bitrev_powers(omega, log_n - 1),
                        || bitrev_powers(inv(omega), log_n - 1),
                    )
                } else {
                    (Vec::new(), Vec::new())
                }
            },
            || {
                (
                    (
                        bitrev_powers(g.pow_vartime([rows]), row_bits),
                        scaled(g, size_inv),
                    ),
                    (
                        bitrev_powers(g_inv.pow_vartime([rows]), row_bits),
                        scaled(g_inv, size_inv * z_inv),
                    ),
                )
            },
        );
        Ok(Self {
            size,
            layout,
            tw,
            tw_inv,
            twist_lo: twist.0,
            twist_hi: twist.1,
            untwist_lo: untwist.0,
            untwist_hi: untwist.1,
        })
    }
}

/// H(X) = (A·B − C)/Z on the CPU; see [`super::Backend::quotient`].
///
/// With ω the domain's root and g the coset generator, each of A, B, C goes through an
/// inverse transform (Cooley–Tukey with ω⁻¹, leaving `n`·coefficients in bit-reversed order),
/// the twist by `g^i / n`, and a forward transform (Gentleman–Sande with ω, back to natural
/// order: the values on the coset). Then `A·B − C` is transformed back with ω⁻¹ and untwisted
/// by `g^−i / (n·Z(g))`, and a last permutation puts the coefficients in natural order. The
/// work is arranged in five passes over memory:
///
/// 1. the row-pairing stages of the three inverse transforms (column tiles);
/// 2. per row, for A, B and C in turn: the rest of the inverse transform, the twist and the
///    forward transform's in-row stages, sharing one twist row `g^rev(p)/n` between the three;
/// 3. per column tile: the forward transforms' row-pairing stages for all three, `A·B − C`,
///    and the final inverse transform's row-pairing stages;
/// 4. per row: the rest of the final inverse transform and the untwist;
/// 5. the bit-reversal permutation, into B's buffer, which is returned.
///
/// The arithmetic is [`Arith::best`]'s: eight lanes at once with AVX-512 IFMA where the CPU
/// has it, blst's products otherwise; [`quotient_using`] takes it as an argument (the CPU
/// backend passes its options' choice). Both give the same bits.
pub fn quotient(
    a: Vec<Scalar>,
    b: Vec<Scalar>,
    c: Vec<Scalar>,
) -> Result<Vec<Scalar>, ProverError> {
    quotient_using(a, b, c, Arith::best())
}

/// Which arithmetic the quotient's transforms use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    /// blst's products, one element at a time (every CPU).
    Scalar,
    /// Eight elements at once with AVX-512 IFMA ([`super::fr52`]); where the CPU lacks it,
    /// or for domains smaller than 16 elements, the scalar passes run instead.
    Ifma,
}

impl Arith {
    /// The fastest this CPU runs: [`Arith::Ifma`] where the CPU has AVX-512 IFMA (checked
    /// once per process). The CPU backend's choice, which its options may turn off, is
    /// [`super::cpu::CpuOptions::arith`].
    pub fn best() -> Arith {
        #[cfg(target_arch = "x86_64")]
        if super::fr52::detected() {
            return Arith::Ifma;
        }
        Arith::Scalar
    }
}

/// [`quotient`] with the arithmetic `arith` (for comparing the two in one process).
pub fn quotient_using(
    mut a: Vec<Scalar>,
    mut b: Vec<Scalar>,
    mut c: Vec<Scalar>,
    arith: Arith,
) -> Result<Vec<Scalar>, ProverError> {
    let n = a.len();
    if b.len() != n || c.len() != n {
        return Err(ProverError::LengthMismatch {
            what: "A and B, or A and C",
            left: n,
            right: if b.len() != n { b.len() } else { c.len() },
        });
    }
    let size = n.next_power_of_two().max(2);
    let simd = arith == Arith::Ifma && ifma_runs(size);
    let domain = Domain::new(size, !simd)?;
    for v in [&mut a, &mut b, &mut c] {
        v.resize(domain.size, Scalar::ZERO);
    }
    if simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `ifma_runs` checked that the CPU has AVX-512F, DQ and IFMA and that the
        // eight-lane passes support this layout.
        unsafe {
            ifma::passes(&domain, &mut a, &mut b, &mut c)
        };
    } else {
        scalar_passes(&domain, &mut a, &mut b, &mut c);
    }
    drop(c);

    // 5. Natural order, into B's buffer; H has n − 1 coefficients.
    b.truncate(domain.size - 1);
    permute_into(&a, &mut b);
    Ok(b)
}

/// Whether the eight-lane passes can run a domain of `size` elements on this CPU.
fn ifma_runs(size: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::fr52::detected() && ifma::supports(&Layout::new(size))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = size;
        false
    }
}

/// Passes 1–4 of [`quotient`] with blst's products, on `a`, `b` and `c` padded to the
/// domain; `a` is left holding the untwisted coefficients in bit-reversed order.
fn scalar_passes(domain: &Domain, a: &mut [Scalar], b: &mut [Scalar], c: &mut [Scalar]) {
    let layout = domain.layout;
    let tile_len = layout.cols * layout.rows;
    let (tw, tw_inv) = (&domain.tw[..], &domain.tw_inv[..]);

    // 1. Row-pairing stages of the inverse transforms.
    if layout.rows > 1 {
        let shared = [&mut *a, &mut *b, &mut *c].map(|v| SharedRows::new(v, layout));
        (0..3 * layout.tiles()).into_par_iter().for_each_init(
            || vec![Scalar::ZERO; tile_len],
            |buf, job| {
                let (v, tile) = (&shared[job % 3], job / 3);
                // SAFETY: each job is one tile of one vector, so no two threads share a tile.
                unsafe { v.gather(tile, buf) };
                ct_tile(buf, layout.cols, tw_inv);
                // SAFETY: as for `gather`.
                unsafe { v.scatter(tile, buf) };
            },
        );
    }

    // 2. In-row stages of the inverse transforms, twist, in-row stages of the forward ones.
    a.par_chunks_mut(layout.row)
        .zip(b.par_chunks_mut(layout.row))
        .zip(c.par_chunks_mut(layout.row))
        .enumerate()
        .for_each_init(
            || vec![Scalar::ZERO; layout.row],
            |twist, (r, ((ra, rb), rc))| {
                let hi = domain.twist_hi[r];
                for (t, lo) in twist.iter_mut().zip(&domain.twist_lo) {
                    *t = *lo * hi;
                }
                let start = r * layout.row;
                for row in [ra, rb, rc] {
                    ct_row(row, start, tw_inv);
                    for (x, t) in row.iter_mut().zip(twist.iter()) {
                        *x *= t;
                    }
                    gs_row(row, start, tw);
                }
            },
        );

    // 3. Row-pairing stages of the forward transforms, A·B − C, and the row-pairing stages of
    // the final inverse transform.
    {
        let [sa, sb, sc] = [&mut *a, &mut *b, &mut *c].map(|v| SharedRows::new(v, layout));
        (0..layout.tiles()).into_par_iter().for_each_init(
            || [(); 3].map(|_| vec![Scalar::ZERO; tile_len]),
            |[ta, tb, tc], tile| {
                // SAFETY: each job is one tile, the same in all three vectors, so no two
                // threads share a tile.
                unsafe {
                    sa.gather(tile, ta);
                    sb.gather(tile, tb);
                    sc.gather(tile, tc);
                }
                for t in [&mut *ta, &mut *tb, &mut *tc] {
                    gs_tile(t, layout.cols, tw);
                }
                for ((x, y), z) in ta.iter_mut().zip(tb.iter()).zip(tc.iter()) {
                    *x *= y;
                    set_limbs(x, sub_limbs(limbs(x), limbs(z)));
                }
                ct_tile(ta, layout.cols, tw_inv);
                // SAFETY: as for `gather`; B and C are not written back, they are done with.
                unsafe { sa.scatter(tile, ta) };
            },
        );
    }
    // 4. In-row stages of the final inverse transform and the untwist.
    a.par_chunks_mut(layout.row).enumerate().for_each_init(
        || vec![Scalar::ZERO; layout.row],
        |untwist, (r, row)| {
            ct_row(row, r * layout.row, tw_inv);
            let hi = domain.untwist_hi[r];
            for (t, lo) in untwist.iter_mut().zip(&domain.untwist_lo) {
                *t = *lo * hi;
            }
            for (x, t) in row.iter_mut().zip(untwist.iter()) {
                *x *= t;
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn naive_dft(v: &[Scalar], omega: Scalar) -> Vec<Scalar> {
        (0..v.len())
            .map(|k| {
                let wk = omega.pow_vartime([k as u64]);
                let mut acc = Scalar::ZERO;
                let mut w = Scalar::ONE;
                for x in v {
                    acc += *x * w;
                    w *= wk;
                }
                acc
            })
            .collect()
    }

    #[test]
    fn inline_add_and_sub_match_blst() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        let mut edge = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE, -Scalar::from(2u64)];
        // Values around 2^64 and 2^128 exercise the carries between limbs.
        edge.push(Scalar::from(u64::MAX));
        edge.push(Scalar::from(u64::MAX) * Scalar::from(u64::MAX));
        // The extreme Montgomery forms: limbs 1 and r − 1.
        for l in [
            [1, 0, 0, 0],
            [MODULUS[0] - 1, MODULUS[1], MODULUS[2], MODULUS[3]],
        ] {
            let mut x = Scalar::ZERO;
            set_limbs(&mut x, l);
            edge.push(x);
        }
        let mut values = edge.clone();
        values.extend((0..200).map(|_| Scalar::random(&mut rng)));
        for x in &values {
            for y in values.iter().take(edge.len() + 20) {
                let (lx, ly) = (limbs(x), limbs(y));
                for (add, sub) in [
                    (add_limbs as fn(_, _) -> _, sub_limbs as fn(_, _) -> _),
                    (add_portable, sub_portable),
                ] {
                    assert_eq!(add(lx, ly), limbs(&(*x + y)));
                    assert_eq!(sub(lx, ly), limbs(&(*x - y)));
                    assert_eq!(sub(ly, lx), limbs(&(*y - x)));
                }
            }
        }
    }

    #[test]
    fn permutation_matches_the_definition() {
        // Sizes below, at and above the 8×8 blocking, and destinations one short (as the
        // quotient's) and much shorter.
        for bits in [0u32, 1, 3, 5, 6, 7, 12, 13, 15] {
            let n = 1usize << bits;
            let src: Vec<Scalar> = (0..n as u64).map(Scalar::from).collect();
            for len in [n, n.saturating_sub(1), n / 3] {
                let mut dst = vec![Scalar::ZERO; len];
                permute_into(&src, &mut dst);
                let want: Vec<Scalar> = (0..len).map(|i| src[rev(i, bits)]).collect();
                assert!(dst == want, "2^{bits}, {len} outputs");
            }
        }
    }

    #[test]
    fn ntt_matches_naive_dft_and_round_trips() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for log_n in [0u32, 1, 2, 3, 6, 9] {
            let n = 1usize << log_n;
            let v: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            let omega = root_of_unity(log_n);
            let mut fast = v.clone();
            ntt_in_place(&mut fast, omega);
            assert_eq!(fast, naive_dft(&v, omega), "size {n}");
            let mut back = fast.clone();
            ntt_in_place(&mut back, Option::from(omega.invert()).unwrap());
            let n_inv: Scalar = Option::from(Scalar::from(n as u64).invert()).unwrap();
            back.iter_mut().for_each(|x| *x *= n_inv);
            assert_eq!(back, v, "round trip {n}");
        }
    }

    #[test]
    fn large_ntt_matches_the_dft_at_sampled_points() {
        // Larger than a cache block, so the wide stages run too; checked at a few outputs.
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let log_n = 15;
        let v: Vec<Scalar> = (0..1 << log_n).map(|_| Scalar::random(&mut rng)).collect();
        let omega = root_of_unity(log_n);
        let mut fast = v.clone();
        ntt_in_place(&mut fast, omega);
        for k in [0usize, 1, 2, 4097, (1 << log_n) - 1] {
            let wk = omega.pow_vartime([k as u64]);
            let want = v.iter().rev().fold(Scalar::ZERO, |acc, x| acc * wk + x);
            assert_eq!(fast[k], want, "output {k}");
        }
    }

    #[test]
    fn large_parallel_ntt_round_trips() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let log_n = 16;
        let v: Vec<Scalar> = (0..1 << log_n).map(|_| Scalar::random(&mut rng)).collect();
        let omega = root_of_unity(log_n);
        let mut x = v.clone();
        ntt_in_place(&mut x, omega);
        assert_ne!(x, v);
        ntt_in_place(&mut x, Option::from(omega.invert()).unwrap());
        let n_inv: Scalar = Option::from(Scalar::from(1u64 << log_n).invert()).unwrap();
        x.iter_mut().for_each(|y| *y *= n_inv);
        assert_eq!(x, v);
    }

    fn coefficients(evals: &[Scalar]) -> Vec<Scalar> {
        let n = evals.len();
        let mut v = evals.to_vec();
        ntt_in_place(
            &mut v,
            Option::from(root_of_unity(n.trailing_zeros()).invert()).unwrap(),
        );
        let n_inv: Scalar = Option::from(Scalar::from(n as u64).invert()).unwrap();
        v.iter_mut().for_each(|x| *x *= n_inv);
        v
    }

    fn eval(coeffs: &[Scalar], x: Scalar) -> Scalar {
        coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c)
    }

    /// The portable arithmetic, and this CPU's best (the eight lanes where it has IFMA; the
    /// portable one again elsewhere): both run on every machine, chosen by value.
    fn ariths() -> [Arith; 2] {
        [Arith::Scalar, Arith::best()]
    }

    /// What an eight-lane test says when it was asked for on a CPU without the instructions.
    const NO_IFMA: &str =
        "this CPU lacks AVX-512 IFMA: run the ignored `ifma_` tests where it has it";

    #[test]
    fn quotient_equals_bellpersons() {
        // Bit for bit, from domains of one row to ones split into rows and column tiles
        // (`cargo bench --bench ntt` checks 2^18 to 2^22 the same way).
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for n in [2usize, 3, 5, 1000, 4097, (1 << 16) - 7, (1 << 17) + 1] {
            let v = |rng: &mut rand::rngs::StdRng| -> Vec<Scalar> {
                (0..n).map(|_| Scalar::random(&mut *rng)).collect()
            };
            let (a, b, c) = (v(&mut rng), v(&mut rng), v(&mut rng));
            let theirs = bellpersons_quotient(a.clone(), b.clone(), c.clone());
            for arith in ariths() {
                let ours = quotient_using(a.clone(), b.clone(), c.clone(), arith).unwrap();
                assert!(ours == theirs, "{arith:?}, n = {n}");
            }
        }
    }

    /// bellperson's CPU quotient, as its prover runs it.
    fn bellpersons_quotient(a: Vec<Scalar>, b: Vec<Scalar>, c: Vec<Scalar>) -> Vec<Scalar> {
        use bellperson::domain::EvaluationDomain;
        let worker = Default::default();
        let domain = |x| EvaluationDomain::from_coeffs(x).unwrap();
        let (mut a, mut b, mut c) = (domain(a), domain(b), domain(c));
        let mut kern = None;
        EvaluationDomain::ifft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut kern).unwrap();
        EvaluationDomain::coset_fft_many(&mut [&mut a, &mut b, &mut c], &worker, &mut kern)
            .unwrap();
        a.mul_assign(&worker, &b);
        a.sub_assign(&worker, &c);
        a.divide_by_z_on_coset(&worker);
        a.icoset_fft(&worker, &mut kern).unwrap();
        let mut h = a.into_coeffs();
        h.pop();
        h
    }

    /// The sizes the two arithmetics are compared with bellperson's at: every power of two
    /// up to a single row, one size split into rows and tiles, and lengths short of a power
    /// of two (padding).
    fn quotient_sizes() -> Vec<usize> {
        let mut sizes: Vec<usize> = (1..=12).map(|k| 1 << k).collect();
        sizes.extend([17, 100, 1 << 16]);
        sizes
    }

    /// Compares the quotient in `arith` with bellperson's at [`quotient_sizes`].
    fn arith_equals_bellpersons(arith: Arith) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(6);
        for n in quotient_sizes() {
            let v = |rng: &mut rand::rngs::StdRng| -> Vec<Scalar> {
                (0..n).map(|_| Scalar::random(&mut *rng)).collect()
            };
            let (a, b, c) = (v(&mut rng), v(&mut rng), v(&mut rng));
            let want = bellpersons_quotient(a.clone(), b.clone(), c.clone());
            let got = quotient_using(a, b, c, arith).unwrap();
            assert!(got == want, "{arith:?}, n = {n}");
        }
    }

    #[test]
    fn scalar_arithmetic_equals_bellpersons() {
        arith_equals_bellpersons(Arith::Scalar);
    }

    #[test]
    #[ignore = "needs AVX-512 IFMA; scripts/test.sh runs the `ifma_` tests with --ignored where the CPU has it"]
    fn ifma_arithmetic_equals_bellpersons() {
        assert!(ifma_runs(1 << 12), "{NO_IFMA}");
        arith_equals_bellpersons(Arith::Ifma);
    }

    #[test]
    #[ignore = "needs AVX-512 IFMA; scripts/test.sh runs the `ifma_` tests with --ignored where the CPU has it"]
    fn ifma_quotient_of_edge_values_equals_the_scalar_one() {
        // Inputs of only 0, 1 and r − 1 (and the largest Montgomery forms) drive the lanes
        // through sums and differences at the ends of the range.
        assert!(ifma_runs(1 << 12), "{NO_IFMA}");
        let edge = [Scalar::ZERO, Scalar::ONE, -Scalar::ONE, -Scalar::from(2u64)];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for n in [64usize, 1 << 13] {
            let v = |rng: &mut rand::rngs::StdRng| -> Vec<Scalar> {
                (0..n).map(|_| edge[rng.gen_range(0..edge.len())]).collect()
            };
            let (a, b, c) = (v(&mut rng), v(&mut rng), v(&mut rng));
            let scalar = quotient_using(a.clone(), b.clone(), c.clone(), Arith::Scalar).unwrap();
            let simd = quotient_using(a, b, c, Arith::Ifma).unwrap();
            assert!(simd == scalar, "n = {n}");
        }
    }

    #[test]
    fn quotient_satisfies_the_divisibility_identity() {
        // With c = a·b on the domain, A·B − C = H·Z must hold as polynomials: check it at a
        // random point.
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for n in [3usize, 1000, (1 << 15) + 1] {
            let m = n.next_power_of_two();
            let a: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            let b: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            let c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
            let pad = |v: &[Scalar]| {
                let mut v = v.to_vec();
                v.resize(m, Scalar::ZERO);
                coefficients(&v)
            };
            let (ac, bc, cc) = (pad(&a), pad(&b), pad(&c));
            let x = Scalar::random(&mut rng);
            let z = x.pow_vartime([m as u64]) - Scalar::ONE;
            for arith in ariths() {
                let h = quotient_using(a.clone(), b.clone(), c.clone(), arith).unwrap();
                assert_eq!(h.len(), m - 1);
                assert_eq!(
                    eval(&ac, x) * eval(&bc, x) - eval(&cc, x),
                    eval(&h, x) * z,
                    "{arith:?}, n = {n}"
                );
            }
        }
    }
}
