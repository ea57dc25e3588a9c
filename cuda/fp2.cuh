// Fp2 = Fp[u]/(u^2 + 1), the field of G2's coordinates. Same layout as blst_fp2: c0 then c1.
#ifndef CUZK_FP2_CUH
#define CUZK_FP2_CUH
#include "field.cuh"

struct Fp2 {
    Fp c0, c1;
    static const int N = 2 * Fp::N;

    __device__ __forceinline__ static Fp2 zero() { Fp2 r; r.c0 = Fp::zero(); r.c1 = Fp::zero(); return r; }
    __device__ __forceinline__ static Fp2 one() { Fp2 r; r.c0 = Fp::one(); r.c1 = Fp::zero(); return r; }
    __device__ __forceinline__ bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    __device__ __forceinline__ static Fp2 add(const Fp2& a, const Fp2& b) { Fp2 r; r.c0 = Fp::add(a.c0, b.c0); r.c1 = Fp::add(a.c1, b.c1); return r; }
    __device__ __forceinline__ static Fp2 sub(const Fp2& a, const Fp2& b) { Fp2 r; r.c0 = Fp::sub(a.c0, b.c0); r.c1 = Fp::sub(a.c1, b.c1); return r; }
    __device__ __forceinline__ static Fp2 dbl(const Fp2& a) { return add(a, a); }
    __device__ __forceinline__ static Fp2 neg(const Fp2& a) { Fp2 r; r.c0 = Fp::neg(a.c0); r.c1 = Fp::neg(a.c1); return r; }
    // Karatsuba with lazy reduction: the three products a0 b0, a1 b1, (a0 + a1)(b0 + b1) as
    // double-width integers (mul_wide) and only two Montgomery reductions (redc_wide), 5 N^2
    // wide multiplies instead of 6 N^2. Bounds (p < 2^381, R = 2^384, operands < p):
    //   d = a0 b0 + a1 b1 < 2 p^2 < 2^763 fits 2N limbs;
    //   c0 = a0 b0 - a1 b1, plus p R when negative: in [0, p^2) or (p R - p^2, p R), so < p R
    //     and congruent to a0 b0 - a1 b1 mod p;
    //   c1 = (a0 + a1)(b0 + b1) - d = a0 b1 + a1 b0 in [0, 2 p^2) < p R; a0 + a1 < 2p < 2^(32N)
    //     is not reduced (mul_wide takes any N-limb operands).
    // redc_wide(c) = c / R mod p for c < p R.
    __device__ __forceinline__ static Fp2 mul_inline(const Fp2& a, const Fp2& b) {
        const int W = 2 * Fp::N;
        u32 p0[W], p1[W], d[W], c[W];
        Fp::mul_wide_fast(a.c0, b.c0, p0);
        Fp::mul_wide_fast(a.c1, b.c1, p1);
        d[0] = ptx::add_cc(p0[0], p1[0]);
#pragma unroll
        for (int k = 1; k < W; k++) d[k] = ptx::addc_cc(p0[k], p1[k]);
        c[0] = ptx::sub_cc(p0[0], p1[0]);
#pragma unroll
        for (int k = 1; k < W; k++) c[k] = ptx::subc_cc(p0[k], p1[k]);
        const u32 neg = ptx::subc(0, 0);  // 0xffffffff when a0 b0 < a1 b1
        c[Fp::N] = ptx::add_cc(c[Fp::N], FpParams::mod(0) & neg);
#pragma unroll
        for (int k = 1; k < Fp::N; k++) c[Fp::N + k] = ptx::addc_cc(c[Fp::N + k], FpParams::mod(k) & neg);
        Fp2 r;
        r.c0 = Fp::redc_wide(c);
        Fp sa, sb;
        sa.v[0] = ptx::add_cc(a.c0.v[0], a.c1.v[0]);
#pragma unroll
        for (int k = 1; k < Fp::N; k++) sa.v[k] = ptx::addc_cc(a.c0.v[k], a.c1.v[k]);
        sb.v[0] = ptx::add_cc(b.c0.v[0], b.c1.v[0]);
#pragma unroll
        for (int k = 1; k < Fp::N; k++) sb.v[k] = ptx::addc_cc(b.c0.v[k], b.c1.v[k]);
        Fp::mul_wide_fast(sa, sb, p0);
        c[0] = ptx::sub_cc(p0[0], d[0]);
#pragma unroll
        for (int k = 1; k < W; k++) c[k] = ptx::subc_cc(p0[k], d[k]);
        r.c1 = Fp::redc_wide(c);
        return r;
    }
    // Out of line unless Fp products are inlined (FpParams::INLINE_MUL): the point formulas of
    // G2 call it ~10 times each. By value, as Field::mul_call.
    __device__ __noinline__ static Fp2 mul_call(Fp2 a, Fp2 b) { return mul_inline(a, b); }
    __device__ __forceinline__ static Fp2 mul(const Fp2& a, const Fp2& b) {
        if (FpParams::INLINE_MUL) return mul_inline(a, b);
        return mul_call(a, b);
    }
    // a b - c d (the Y coordinate of the point formulas), as two products and a subtraction.
    // (A lazy form with the Karatsuba pieces of both products and 2 Montgomery reductions
    // instead of 4 cut the FMA-pipe slots of G2's madd by 5% in SASS but made the G2 kernels
    // spill more, and G2 MSM 2^24 went from 376 to 437 ms on the H200, commit c76f20d; Fp's
    // mul_sub stays lazy, G1 gained 4-6%.)
    __device__ __forceinline__ static Fp2 mul_sub(const Fp2& a, const Fp2& b, const Fp2& c, const Fp2& d) {
        return sub(mul(a, b), mul(c, d));
    }
    // a^2 as the general product. The two base-field products of (a0 + a1)(a0 - a1) +
    // 2 a0 a1 u take fewer multiplies, but as two out-of-line calls (or one call with both,
    // Field::mul2) they made the G2 MSM slower on the H200: 2^24 375 / 385 ms against 355 ms
    // for the Karatsuba product, whose three double-width products run interleaved in one call
    // (docs/gpu-notes.md, v15).
    __device__ __forceinline__ static Fp2 sqr(const Fp2& a) { return mul(a, a); }
};

template <>
__device__ __forceinline__ Fp2 load_field<Fp2>(const Fp2* p) {
    const Fp* q = reinterpret_cast<const Fp*>(p);
    Fp2 r; r.c0 = load_field(q); r.c1 = load_field(q + 1); return r;
}
template <>
__device__ __forceinline__ void store_field<Fp2>(Fp2* p, const Fp2& a) {
    Fp* q = reinterpret_cast<Fp*>(p);
    store_field(q, a.c0); store_field(q + 1, a.c1);
}
#endif  // CUZK_FP2_CUH
