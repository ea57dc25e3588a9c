// The Fp Montgomery product on the double-precision pipe (FpF64::mul_lazy): the same contract as
// Fp::mul_lazy, computed with IEEE double fused multiply-adds on 48-bit limbs, so that a kernel
// can run some of its products on the FP64 units while the integer multiply-add pipe runs the
// others (curve.cuh, CUZK_MSM_DFMA).
//
// Limbs: 8 of 48 bits. 8 * 48 = 384, so R = 2^384 is a whole number of limbs and the Montgomery
// reduction of Fp (R = 2^384) keeps its meaning; a limb is an integer below 2^48, held exactly
// in a double (53-bit significand), and the product of two limbs is below 2^96.
//
// Exact split of a limb product x y (x, y < 2^48) into hi 2^48 + lo, with two FMAs:
//   h = fma(x, y, 2^100): x y < 2^96, so the exact sum lies in [2^100, 2^100 + 2^96), one binade
//     whose spacing is 2^48; rounded to nearest, h = 2^100 + H 2^48 with |x y - H 2^48| <= 2^47,
//     and H <= 2^48 - 2 (x y <= (2^48 - 1)^2). The bit pattern of h is that of 2^100 plus H.
//   d = (2^100 + 1.5 2^52) - h = 1.5 2^52 - H 2^48: both operands are multiples of 2^48 below
//     2^101 (2^100 + 1.5 2^52 has 50 significant bits), and so is the difference, |d| < 2^97,
//     so d is exact.
//   l = fma(x, y, d) = x y - H 2^48 + 1.5 2^52, an integer in [1.5 2^52 - 2^47, 1.5 2^52 + 2^47],
//     inside [2^52, 2^53) where every integer is a double: exact. Its bit pattern is that of
//     2^52 plus (x y - H 2^48 + 2^51).
// (The 1.5 2^52 offset keeps l in one binade although x y - H 2^48 may be negative; 4 spare
// bits between the 48-bit limbs and the 52-bit significand make room for it.)
// So x y = (bits(h) - bits(2^100)) 2^48 + (bits(l) - bits(1.5 2^52)). Integers never go
// through a conversion instruction: a limb v < 2^48 becomes the double with the bit pattern
// bits(2^52) | v minus 2^52 (exact: both in [2^52, 2^53)).
//
// Column sums, two forms:
// - in doubles (mul_inline_dacc, the default): each column's high parts are fused into one
//   double that stays in [2^100, 2^101), the low parts (the roundings) summed in another
//   (mac_d): 2 FMAs and 2 adds per limb product, all on the FP64 pipe;
// - in 64-bit integers (mul_inline_int, CUZK_F64_INT_COLUMNS): the bit patterns of h and l
//   added as integers, each column's constant bits subtracted once (column_offset): 2 FMAs and
//   1 FP64 add per limb product, plus two 64-bit integer adds.
// Column headroom: column k receives at most 8 low parts and 8 high parts from the product and
// as many from the reduction; low parts lie in [-2^47, 2^47], high parts in [0, 2^48), carries
// below 2^6 (below 2^49 in the double form, whose carry also takes one high part). Every
// partial column value is below 2^54 in magnitude, far inside a signed 64-bit
// word; integer sums are computed modulo 2^64 (u64, wrapping) and read as signed only when
// carried.
//
// Montgomery reduction (digit 2^48, integer quotient digits): round i takes column i (complete
// but for the round's own low part), q = column_i (-p^-1) mod 2^48 (an integer multiply: a
// handful of IMADs per round, against 24 FP64 operations), adds q p 2^(48 i) with the same
// FMA split, and carries column i / 2^48 (exact: column i is then 0 mod 2^48) into column
// i + 1. After 8 rounds columns 8..15 hold T / R with T = a b + M p, M < R. For a, b < 2p:
// T / R < 4 p^2 / R + p < 2p (4p < R), the range of Fp::mul_lazy; the final carries leave
// 48-bit limbs, the top one below 2^46 because the value is below 2^382.
#ifndef CUZK_FIELD_F64_CUH
#define CUZK_FIELD_F64_CUH
#include "field.cuh"

#ifdef CUZK_HOST_EMU
// Host twins of the device intrinsics: std::fma is IEEE-754 fusedMultiplyAdd (one rounding, to
// nearest), exactly DFMA's __fma_rn; the driver checks at start that it really is fused. The
// emulation is compiled with -ffp-contract=off so that g++ fuses nothing else.
#include <cmath>
#include <cstring>
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline long long __double_as_longlong(double x) { long long r; memcpy(&r, &x, sizeof r); return r; }
inline double __longlong_as_double(long long x) { double r; memcpy(&r, &x, sizeof r); return r; }
#endif

struct FpF64 {
    // Enumerators, not static data members: under NVRTC's -default-device those would become
    // global variables in every module, used or not.
    enum { L = 8 };  // limbs of 48 bits
    enum : u64 {
        MASK = (1ull << 48) - 1,
        BITS_2P52 = 0x4330000000000000ull,        // bits(2^52)
        BITS_HI = 0x4630000000000000ull,          // bits(2^100): H = bits(h) - this
        BITS_LO = 0x4330000000000000ull + (1ull << 51),  // bits(1.5 2^52)
        NINV = 0xfffcfffcfffdull,                 // -p^-1 mod 2^48
    };

    // 2^100 and 2^100 + 1.5 2^52 (see the top of the file).
    static __device__ __forceinline__ double c_hi() { return 0x1p100; }
    static __device__ __forceinline__ double c_lo() { return 0x1.0000000000018p100; }

    // Limb j of p, exact as doubles (below 2^48).
    static __device__ __forceinline__ double mod(int j) {
        const double m[8] = {(double)0xffffffffaaabull, (double)0xb153ffffb9feull, (double)0xf6241eabfffeull,
                             (double)0x6730d2a0f6b0ull, (double)0x4b84f38512bfull, (double)0x434bacd76477ull,
                             (double)0xe69a4b1ba7b6ull, (double)0x1a0111ea397full};
        return m[j];
    }

    static __device__ __forceinline__ u64 bits(double x) { return (u64)__double_as_longlong(x); }
    // v < 2^48 as a double: 2^52 + v is exact in [2^52, 2^53), and so is the subtraction.
    static __device__ __forceinline__ double to_double(u64 v) {
        return __dsub_rn(__longlong_as_double((long long)(BITS_2P52 | v)), 0x1p52);
    }

    // Number of limb products x_i y_j with i + j = k (i, j < 8).
    static __device__ __forceinline__ constexpr u64 pairs(int k) {
        return k < 0 || k > 14 ? 0 : (u64)(k < 8 ? k + 1 : 15 - k);
    }
    // The constant bits that the column sums of the product and of the reduction add to column
    // k: a low part for each pair on k and a high part for each pair on k - 1, twice.
    static __device__ __forceinline__ constexpr u64 column_offset(int k) {
        return 2 * (pairs(k) * BITS_LO + pairs(k - 1) * BITS_HI);
    }

    // col[k] += low part of x y, col[k + 1] += high part, as bit patterns (exactness: the top
    // of the file).
    static __device__ __forceinline__ void mac(u64* col, int k, double x, double y) {
        const double h = __fma_rn(x, y, c_hi());
        const double l = __fma_rn(x, y, __dsub_rn(c_lo(), h));
        col[k] += bits(l);
        col[k + 1] += bits(h);
    }

    // The 8 limbs of a (12 words) as doubles: limb 2k is word 3k and the low half of word
    // 3k + 1, limb 2k + 1 the high half of word 3k + 1 and word 3k + 2.
    static __device__ __forceinline__ void split(const Fp& a, double* x) {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const u64 lo = (u64)a.v[3 * k] | (u64)(a.v[3 * k + 1] & 0xffffu) << 32;
            const u64 hi = (u64)(a.v[3 * k + 1] >> 16) | (u64)a.v[3 * k + 2] << 16;
            x[2 * k] = to_double(lo);
            x[2 * k + 1] = to_double(hi);
        }
    }

    // Round i of the reduction. col[i] lacks only the round's own low part, whose offset
    // column_offset already subtracted: BITS_LO added back gives column i's value mod 2^64,
    // and its residue mod 2^48 is all that q depends on.
    static __device__ __forceinline__ void reduce_round(u64* col, int i) {
        const u64 q = ((col[i] + BITS_LO) * NINV) & MASK;
        const double qd = to_double(q);
#pragma unroll
        for (int j = 0; j < L; j++) mac(col, i + j, qd, mod(j));
        col[i + 1] += (u64)((long long)col[i] >> 48);
    }

    // Columns 8..15 (column 8 with the last round's carry) as 12 words: carried into 48-bit
    // limbs (signed shifts: a column may be negative before its carry), then repacked.
    static __device__ __forceinline__ Fp pack(u64* col) {
        u64 l[L];
#pragma unroll
        for (int k = 0; k < L - 1; k++) {
            l[k] = col[L + k] & MASK;
            col[L + k + 1] += (u64)((long long)col[L + k] >> 48);
        }
        l[L - 1] = col[2 * L - 1];
        Fp r;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            r.v[3 * k] = (u32)l[2 * k];
            r.v[3 * k + 1] = (u32)(l[2 * k] >> 32) | (u32)l[2 * k + 1] << 16;
            r.v[3 * k + 2] = (u32)(l[2 * k + 1] >> 16);
        }
        return r;
    }

    // Columns in doubles (mul_inline_dacc): no integer add per limb product.
    // h[k] accumulates the high parts that land on column k: it starts at 2^100 and each product
    // is fused into it, s = fma(x, y, h[k]), rounded to a multiple of 2^48 in [2^100, 2^101).
    // A column receives at most 16 high parts (8 from the product, 8 from the reduction), each
    // x y <= (2^48 - 1)^2, plus the earlier roundings (each <= 2^47): the exact sum stays below
    // 2^100 + 2^100 - 2^52, so s never rounds up to 2^101 and h stays in one binade, where
    // bits(h) - bits(2^100) is the sum of the high parts. h[k] - s is exact (both in the same
    // binade, Sterbenz), and x y + (h[k] - s) is s's rounding error, an integer of magnitude
    // <= 2^47: exact. l[k] sums those low parts, at most 16 of them: |l[k]| <= 2^51, every
    // partial sum an exact integer.
    static __device__ __forceinline__ void mac_d(double* h, double* l, int k, double x, double y) {
        const double s = __fma_rn(x, y, h[k + 1]);
        l[k] = __dadd_rn(l[k], __fma_rn(x, y, __dsub_rn(h[k + 1], s)));
        h[k + 1] = s;
    }
    // The integer that a column's accumulators hold: l + 1.5 2^52 lies in [2^52, 2^53] (|l| <=
    // 2^51), where the bit pattern is bits(2^52) plus the integer above 2^52 (2^53 included).
    static __device__ __forceinline__ u64 column_d(double h, double l) {
        return (bits(h) - BITS_HI) + (bits(__dadd_rn(l, 0x1.8p52)) - BITS_LO);
    }
    // Round i: c = column i plus the carry. The round's own product on column i (q p[0]) is
    // split with mac's constants, into integers at once, since the carry needs it; its high
    // part joins the carry into column i + 1.
    static __device__ __forceinline__ void reduce_round_d(double* h, double* l, u64& carry, int i) {
        const u64 c = carry + column_d(h[i], l[i]);
        const u64 q = (c * NINV) & MASK;
        const double qd = to_double(q);
        const double s = __fma_rn(qd, mod(0), c_hi());
        const double lo = __fma_rn(qd, mod(0), __dsub_rn(c_lo(), s));
        carry = (u64)((long long)(c + bits(lo) - BITS_LO) >> 48) + (bits(s) - BITS_HI);
#pragma unroll
        for (int j = 1; j < L; j++) mac_d(h, l, i + j, qd, mod(j));
    }
    static __device__ __forceinline__ Fp mul_inline_dacc(const Fp& a, const Fp& b) {
        double x[L], y[L], h[2 * L], l[2 * L];
        split(a, x);
        split(b, y);
        // -0 is the identity of addition (0 is not: 0 + -0 = 0), so the first add folds away.
#pragma unroll
        for (int k = 0; k < 2 * L; k++) { h[k] = c_hi(); l[k] = -0.0; }
#pragma unroll
        for (int i = 0; i < L; i++)
#pragma unroll
            for (int j = 0; j < L; j++) mac_d(h, l, i + j, x[i], y[j]);
        u64 carry = 0;
#pragma unroll
        for (int i = 0; i < L; i++) reduce_round_d(h, l, carry, i);
        u64 col[2 * L];
#pragma unroll
        for (int k = L; k < 2 * L; k++) col[k] = column_d(h[k], l[k]);
        col[L] += carry;
        return pack(col);
    }

    // The product with integer column sums (CUZK_F64_INT_COLUMNS).
    static __device__ __forceinline__ Fp mul_inline_int(const Fp& a, const Fp& b) {
        double x[L], y[L];
        split(a, x);
        split(b, y);
        u64 col[2 * L];
#pragma unroll
        for (int k = 0; k < 2 * L; k++) col[k] = 0 - column_offset(k);
#pragma unroll
        for (int i = 0; i < L; i++)
#pragma unroll
            for (int j = 0; j < L; j++) mac(col, i + j, x[i], y[j]);
#pragma unroll
        for (int i = 0; i < L; i++) reduce_round(col, i);
        return pack(col);
    }
    // a b / R mod p in [0, 2p) for a, b in [0, 2p): Fp::mul_lazy's contract. Double columns
    // by default: per limb product they trade two integer adds for one FP64 add, fewer
    // instructions in all and fewer on the integer pipes, which the kernels' integer products
    // already fill.
    static __device__ __forceinline__ Fp mul_inline(const Fp& a, const Fp& b) {
#ifdef CUZK_F64_INT_COLUMNS
        return mul_inline_int(a, b);
#else
        return mul_inline_dacc(a, b);
#endif
    }
    // Out of line and by value, as Fp::mul_lazy_call (registers, not the stack, carry the
    // operands); CUZK_FP_INLINE inlines it as it does the integer products.
    static __device__ __noinline__ Fp mul_call(Fp a, Fp b) { return mul_inline(a, b); }
    static __device__ __forceinline__ Fp mul_lazy(const Fp& a, const Fp& b) {
        if (FpParams::INLINE_MUL) return mul_inline(a, b);
        return mul_call(a, b);
    }
};

#endif  // CUZK_FIELD_F64_CUH
