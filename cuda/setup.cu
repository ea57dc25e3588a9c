// Fixed-base scalar multiplication for a Groth16 setup (src/params_gen, driven by src/gpu/setup.rs):
// every scalar of a query times one base point, written as bellperson's uncompressed bytes.
//
// A scalar is 16 digits of 16 bits; digit w of its canonical integer selects table entry
// d = digit (1..65535) of window w, which holds d * 2^(16w) * base (affine, built on the host:
// 96 MiB for G1, 192 MiB for G2). The product is the sum of at most 16 entries: mixed additions
// only, no doublings. An entry sum never meets P = ±Q by
// accident (the partial sums are distinct multiples below r), and madd handles both anyway.
// Scalar 0 gives the point at infinity.
//
// Points are then made affine a strip at a time (one inversion per strip, Montgomery's trick)
// and written big-endian: G1 as x || y (48 bytes each), G2 as x.c1 || x.c0 || y.c1 || y.c0, the
// point at infinity as 0x40 followed by zeros (blst's uncompressed encoding).
#include "field.cuh"
#include "fp2.cuh"
#include "curve.cuh"

#define SETUP_WINDOW_BITS 16
#define SETUP_WINDOWS 16
#define SETUP_DIGITS 65535
// Points per thread in the affine pass: one inversion (~570 products) per strip.
#define SETUP_STRIP 32

template <class F>
__device__ void setup_mul(const Affine<F>* table, const Fr* scalars, u32 n, Xyzz<F>* out) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Fr s = Fr::from_mont(load_field(scalars + i));
    Xyzz<F> acc = Xyzz<F>::inf();
#pragma unroll 1
    for (int w = 0; w < SETUP_WINDOWS; w++) {
        const u32 d = (s.v[w / 2] >> (SETUP_WINDOW_BITS * (w % 2))) & 0xffff;
        if (d) acc = Xyzz<F>::madd(acc, load_affine(table + (u64)w * SETUP_DIGITS + (d - 1)));
    }
    store_xyzz(out + i, acc);
}

extern "C" __global__ void setup_mul_g1(const G1Affine* table, const Fr* scalars, u32 n, G1Xyzz* out) {
    setup_mul<Fp>(table, scalars, n, out);
}
extern "C" __global__ void setup_mul_g2(const G2Affine* table, const Fr* scalars, u32 n, G2Xyzz* out) {
    setup_mul<Fp2>(table, scalars, n, out);
}

// a^(p - 2) = a^-1 in Fp (Fermat); 0 for 0.
__device__ Fp setup_fp_inverse(const Fp& a) {
    Fp r = Fp::one();
#pragma unroll 1
    for (int i = Fp::N - 1; i >= 0; i--) {
        // p's low limb is odd and above 2: p - 2 borrows from no other limb.
        const u32 e = FpParams::mod(i) - (i == 0 ? 2u : 0u);
#pragma unroll 1
        for (int b = 31; b >= 0; b--) {
            r = Fp::sqr(r);
            if ((e >> b) & 1) r = Fp::mul(r, a);
        }
    }
    return r;
}

__device__ __forceinline__ Fp setup_inverse(const Fp& a) { return setup_fp_inverse(a); }
// (c0 + c1 u)^-1 = (c0 - c1 u) / (c0^2 + c1^2), as u^2 = -1.
__device__ __forceinline__ Fp2 setup_inverse(const Fp2& a) {
    const Fp n = setup_fp_inverse(Fp::add(Fp::sqr(a.c0), Fp::sqr(a.c1)));
    Fp2 r;
    r.c0 = Fp::mul(a.c0, n);
    r.c1 = Fp::neg(Fp::mul(a.c1, n));
    return r;
}

// G1's point formulas leave coordinates in [0, 2p); G2's are canonical already.
__device__ __forceinline__ Fp setup_canonical(const Fp& a) { return Fp::reduce_once(a); }
__device__ __forceinline__ Fp2 setup_canonical(const Fp2& a) {
    Fp2 r;
    r.c0 = Fp::reduce_once(a.c0);
    r.c1 = Fp::reduce_once(a.c1);
    return r;
}

template <class F>
__device__ __forceinline__ Xyzz<F> setup_load(const Xyzz<F>* p) {
    Xyzz<F> q = load_xyzz(p);
    q.X = setup_canonical(q.X); q.Y = setup_canonical(q.Y);
    q.ZZ = setup_canonical(q.ZZ); q.ZZZ = setup_canonical(q.ZZZ);
    return q;
}

// 48 big-endian bytes of a (Montgomery form in, canonical integer out), as 12 words whose bytes
// lie in memory in that order.
__device__ __forceinline__ void setup_put(u32* out, const Fp& a) {
    const Fp c = Fp::from_mont(a);
#pragma unroll
    for (int j = 0; j < Fp::N; j++) out[j] = __byte_perm(c.v[Fp::N - 1 - j], 0, 0x0123);
}
__device__ __forceinline__ void setup_put(u32* out, const Fp2& a) {
    setup_put(out, a.c1);
    setup_put(out + Fp::N, a.c0);
}

// Writes point k's uncompressed bytes (2 * F::N words) given 1 / (ZZ * ZZZ).
template <class F>
__device__ __forceinline__ void setup_put_point(u32* out, const Xyzz<F>& p, const F& zinv) {
    if (p.is_inf()) {
#pragma unroll 1
        for (int j = 0; j < 2 * F::N; j++) out[j] = 0;
        out[0] = 0x40;  // the first byte: the infinity flag
        return;
    }
    // x = X / ZZ = X ZZZ / (ZZ ZZZ), y = Y / ZZZ = Y ZZ / (ZZ ZZZ).
    setup_put(out, F::mul(F::mul(p.X, p.ZZZ), zinv));
    setup_put(out + F::N, F::mul(F::mul(p.Y, p.ZZ), zinv));
}

template <class F>
__device__ void setup_affine(const Xyzz<F>* pts, u32 n, u32* out) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    const u64 start = (u64)t * SETUP_STRIP;
    if (start >= n) return;
    const u32 count = (u32)min((u64)SETUP_STRIP, (u64)n - start);
    F prefix[SETUP_STRIP];
    F acc = F::one();
#pragma unroll 1
    for (u32 k = 0; k < count; k++) {
        const Xyzz<F> p = setup_load(pts + start + k);
        if (!p.is_inf()) acc = F::mul(acc, F::mul(p.ZZ, p.ZZZ));
        prefix[k] = acc;
    }
    F inv = setup_inverse(acc);  // 1 / (product of the strip's finite ZZ ZZZ)
#pragma unroll 1
    for (u32 k = count; k-- > 0;) {
        const Xyzz<F> p = setup_load(pts + start + k);
        const F zinv = k ? F::mul(inv, prefix[k - 1]) : inv;
        if (!p.is_inf()) inv = F::mul(inv, F::mul(p.ZZ, p.ZZZ));
        setup_put_point(out + (start + k) * 2 * F::N, p, zinv);
    }
}

extern "C" __global__ void setup_affine_g1(const G1Xyzz* pts, u32 n, u32* out) {
    setup_affine<Fp>(pts, n, out);
}
extern "C" __global__ void setup_affine_g2(const G2Xyzz* pts, u32 n, u32* out) {
    setup_affine<Fp2>(pts, n, out);
}
