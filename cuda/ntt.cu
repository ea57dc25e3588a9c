// Number-theoretic transforms over Fr.
//
// A transform of size 2^lgn is a decimation-in-frequency (natural in, bit-reversed out) radix-2
// network executed in passes of up to 9 stages; each pass keeps a group of 2^t elements in shared
// memory, so the whole transform reads and writes global memory ceil(lgn/9) times. A separate
// bit-reversal kernel restores natural order and folds in any per-element scale (1/n for inverse
// transforms, powers of the coset generator).
//
// Powers of a root are read from two tables of 2^14 entries each (lo[j] = w^j,
// hi[j] = w^(j*2^14)), so w^e is one product for any e < 2^28 and the tables stay in L2.
#include "field.cuh"

#define NTT_MAX_T 9
#define POW_LO_BITS 14

__device__ __forceinline__ Fr pow_from_tables(const Fr* lo, const Fr* hi, u64 e) {
    Fr a = load_field(lo + (e & ((1u << POW_LO_BITS) - 1)));
    Fr b = load_field(hi + (e >> POW_LO_BITS));
    return Fr::mul(a, b);
}

// lo[j] = base^j, hi[j] = base^(j * 2^14) for j < 2^14.
extern "C" __global__ void pow_tables(Fr* lo, Fr* hi, const Fr* base) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (1u << POW_LO_BITS)) return;
    Fr w = load_field(base);
    store_field(lo + j, Fr::pow(w, j));
    store_field(hi + j, Fr::pow(w, (u64)j << POW_LO_BITS));
}

// Stages s0 .. s0+t-1 of a DIF transform of size 2^lgn over `data` (in place). One block of
// 2^(t-1) threads per group of 2^t elements spaced `stride` apart. lo/hi: power tables of the
// transform's root (w or w^-1).
extern "C" __global__ void ntt_dif_pass(Fr* data, const Fr* lo, const Fr* hi, u32 lgn, u32 s0, u32 t) {
    __shared__ Fr sd[1 << NTT_MAX_T];
    __shared__ Fr stw[1 << NTT_MAX_T];
    const u32 half = 1u << (t - 1);
    const u32 tid = threadIdx.x;
    const u32 lgstride = lgn - s0 - t;
    const u64 stride = 1ull << lgstride;
    const u64 gidx = blockIdx.x + (u64)blockIdx.y * gridDim.x;
    const u64 base_low = gidx & (stride - 1);
    const u64 base = ((gidx >> lgstride) << (lgn - s0)) | base_low;

    sd[tid] = load_field(data + base + (u64)tid * stride);
    sd[tid + half] = load_field(data + base + (u64)(tid + half) * stride);

    // Twiddles of stage u, pair m: w^(k * 2^(s0+u)) with k = base_low + m*stride < n/2^(s0+u+1).
    // Stage u's 2^(t-1-u) values sit at offset 2^t - 2^(t-u).
    for (u32 i = tid; i < (1u << t) - 1; i += blockDim.x) {
        u32 u = 0;
        u32 off = 0;
        while (i >= off + (half >> u)) { off += half >> u; u++; }
        u64 m = i - off;
        u64 e = (base_low + m * stride) << (s0 + u);
        stw[i] = pow_from_tables(lo, hi, e);
    }
    __syncthreads();

    u32 off = 0;
    for (u32 u = 0; u < t; u++) {
        const u32 lh = t - 1 - u;
        const u32 h = 1u << lh;
        const u32 m = tid & (h - 1);
        const u32 j = ((tid >> lh) << (lh + 1)) + m;
        Fr x = sd[j];
        Fr y = sd[j + h];
        sd[j] = Fr::add(x, y);
        sd[j + h] = Fr::mul(Fr::sub(x, y), stw[off + m]);
        off += h;
        __syncthreads();
    }

    store_field(data + base + (u64)tid * stride, sd[tid]);
    store_field(data + base + (u64)(tid + half) * stride, sd[tid + half]);
}

__device__ __forceinline__ u64 bitrev(u64 i, u32 lgn) { return lgn == 0 ? 0 : __brevll(i) >> (64 - lgn); }

// out[i] = in[bitrev(i)] * factor(i) where factor is 1 (mode 0), c (mode 1) or c * g^i (mode 2,
// g given by its power tables). `in` and `out` must not overlap.
extern "C" __global__ void ntt_bitrev_scale(const Fr* in, Fr* out, u32 lgn, u32 mode, const Fr* c,
                                            const Fr* glo, const Fr* ghi) {
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= (1ull << lgn)) return;
    Fr v = load_field(in + bitrev(i, lgn));
    if (mode >= 1) v = Fr::mul(v, load_field(c));
    if (mode == 2) v = Fr::mul(v, pow_from_tables(glo, ghi, i));
    store_field(out + i, v);
}

// data[i] *= c * g^i (natural order), the coset shift before a forward coset transform.
extern "C" __global__ void ntt_scale_powers(Fr* data, u64 n, const Fr* c, const Fr* glo, const Fr* ghi) {
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr v = Fr::mul(load_field(data + i), load_field(c));
    store_field(data + i, Fr::mul(v, pow_from_tables(glo, ghi, i)));
}

// a[i] = (a[i] * b[i] - c[i]) * zinv: the quotient's numerator over Z on the coset.
extern "C" __global__ void quotient_pointwise(Fr* a, const Fr* b, const Fr* c, const Fr* zinv, u64 n) {
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr v = Fr::sub(Fr::mul(load_field(a + i), load_field(b + i)), load_field(c + i));
    store_field(a + i, Fr::mul(v, load_field(zinv)));
}
