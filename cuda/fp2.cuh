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
    // Karatsuba: three base-field products instead of four.
    __device__ __forceinline__ static Fp2 mul(const Fp2& a, const Fp2& b) {
        Fp t0 = Fp::mul(a.c0, b.c0);
        Fp t1 = Fp::mul(a.c1, b.c1);
        Fp t2 = Fp::mul(Fp::add(a.c0, a.c1), Fp::add(b.c0, b.c1));
        Fp2 r;
        r.c0 = Fp::sub(t0, t1);
        r.c1 = Fp::sub(Fp::sub(t2, t0), t1);
        return r;
    }
    // (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u: two base-field products.
    __device__ __forceinline__ static Fp2 sqr(const Fp2& a) {
        Fp2 r;
        Fp t = Fp::mul(a.c0, a.c1);
        r.c0 = Fp::mul(Fp::add(a.c0, a.c1), Fp::sub(a.c0, a.c1));
        r.c1 = Fp::add(t, t);
        return r;
    }
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
