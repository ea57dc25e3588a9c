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

// Twiddle i of a pass (0 <= i < 2^t - 1): stage u's 2^(t-1-u) values sit at offset
// 2^t - 2^(t-u); pair m of stage u uses w^(k * 2^(s0+u)) with k = base_low + m*stride.
__device__ __forceinline__ Fr pass_twiddle(const Fr* lo, const Fr* hi, u32 i, u32 t, u32 s0, u64 base_low,
                                           u64 stride) {
    const u32 half = 1u << (t - 1);
    u32 u = 0;
    u32 off = 0;
    while (i >= off + (half >> u)) { off += half >> u; u++; }
    const u64 m = i - off;
    return pow_from_tables(lo, hi, (base_low + m * stride) << (s0 + u));
}

// The twiddles of a pass with stride 1 (the last pass of a transform), the same for every
// block: computed once per domain instead of once per block.
extern "C" __global__ void ntt_pass_twiddles(Fr* out, const Fr* lo, const Fr* hi, u32 s0, u32 t) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (1u << t) - 1) return;
    store_field(out + i, pass_twiddle(lo, hi, i, t, s0, 0, 1));
}

// Stages s0 .. s0+t-1 of a DIF transform of size 2^lgn over `data` (in place). One block of
// 2^(t-1) threads per group of 2^t elements spaced `stride` apart. lo/hi: power tables of the
// transform's root (w or w^-1). `tw`: for the last pass (stride 1) its precomputed twiddles
// (ntt_pass_twiddles), else null.
extern "C" __global__ void ntt_dif_pass(Fr* data, const Fr* lo, const Fr* hi, u32 lgn, u32 s0, u32 t,
                                        const Fr* tw) {
    // Dynamic shared memory, 2^t elements then 2^t twiddles (the host sizes it per pass).
    extern __shared__ uint4 smem_raw[];
    Fr* sd = reinterpret_cast<Fr*>(smem_raw);
    Fr* stw = sd + (1u << t);
    const u32 half = 1u << (t - 1);
    const u32 tid = threadIdx.x;
    const u32 lgstride = lgn - s0 - t;
    const u64 stride = 1ull << lgstride;
    const u64 gidx = blockIdx.x + (u64)blockIdx.y * gridDim.x;
    const u64 base_low = gidx & (stride - 1);
    const u64 base = ((gidx >> lgstride) << (lgn - s0)) | base_low;

    sd[tid] = load_field(data + base + (u64)tid * stride);
    sd[tid + half] = load_field(data + base + (u64)(tid + half) * stride);

    const bool last = lgstride == 0;
    if (last && tw != nullptr) {
        for (u32 i = tid; i < (1u << t) - 1; i += blockDim.x) stw[i] = load_field(tw + i);
    } else {
        for (u32 i = tid; i < (1u << t) - 1; i += blockDim.x)
            stw[i] = pass_twiddle(lo, hi, i, t, s0, base_low, stride);
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
        // The last stage of the last pass has only w^0 = 1 (m = 0, base_low = 0).
        if (last && lh == 0) sd[j + h] = Fr::sub(x, y);
        else sd[j + h] = Fr::mul(Fr::sub(x, y), stw[off + m]);
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

// data[i] *= c * g^i (natural order), the coset shift before a forward coset transform; a null
// c stands for 1.
extern "C" __global__ void ntt_scale_powers(Fr* data, u64 n, const Fr* c, const Fr* glo, const Fr* ghi) {
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr v = load_field(data + i);
    if (c != nullptr) v = Fr::mul(v, load_field(c));
    store_field(data + i, Fr::mul(v, pow_from_tables(glo, ghi, i)));
}

// a[i] = (a[i] * b[i] - c[i]) * zinv: the quotient's numerator over Z on the coset.
extern "C" __global__ void quotient_pointwise(Fr* a, const Fr* b, const Fr* c, const Fr* zinv, u64 n) {
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr v = Fr::sub(Fr::mul(load_field(a + i), load_field(b + i)), load_field(c + i));
    store_field(a + i, Fr::mul(v, load_field(zinv)));
}
