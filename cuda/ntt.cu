// Number-theoretic transforms over Fr.
//
// A transform of size n = 2^lgn is a decimation-in-time radix-2 network run in passes of up to
// 9 stages; each pass keeps a group of 2^t elements in shared memory, so the whole transform
// reads and writes global memory ceil(lgn/9) times. The network wants its input in bit-reversed
// order: the first pass gathers it from the natural-order source (the group of 2^t consecutive
// bit-reversed positions is a stride-2^(lgn-t) column of the source, the same access pattern a
// strided pass has anyway), so natural order goes in and natural order comes out with no
// separate permutation kernel. Scale factors ride along: the coset shift g^i on the first pass's
// loads, 1/n and g^-i on the last pass's stores.
//
// Twiddles come from one table per domain, tw[e] = w^e for e < n/2 (16 bytes per element of
// the domain): a load instead of a product. w^-e = -tw[n/2 - e] serves the inverse transform.
// Powers of the coset generator are read from two tables of 2^14 entries each (lo[j] = s*g^j,
// hi[j] = g^(j*2^14), s an optional constant folded into lo), so s*g^i is one product for any
// i < 2^28 and the tables stay in L2.
#include "field.cuh"

#define POW_LO_BITS 14

__device__ __forceinline__ Fr pow_from_tables(const Fr* lo, const Fr* hi, u64 e) {
    Fr a = load_field(lo + (e & ((1u << POW_LO_BITS) - 1)));
    Fr b = load_field(hi + (e >> POW_LO_BITS));
    return Fr::mul(a, b);
}

// lo[j] = scale * base^j, hi[j] = base^(j * 2^14) for j < 2^14.
extern "C" __global__ void pow_tables(Fr* lo, Fr* hi, const Fr* base, const Fr* scale) {
    u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (1u << POW_LO_BITS)) return;
    Fr w = load_field(base);
    store_field(lo + j, Fr::mul(load_field(scale), Fr::pow(w, j)));
    store_field(hi + j, Fr::pow(w, (u64)j << POW_LO_BITS));
}

// tw[e] = w^e for e < count, from w's power tables (built once per domain).
extern "C" __global__ void ntt_twiddle_table(Fr* tw, const Fr* lo, const Fr* hi, u64 count) {
    const u64 e = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (e >= count) return;
    store_field(tw + e, pow_from_tables(lo, hi, e));
}

// w^e, or w^-e for the inverse transform, for e < n/2 (half_n = n/2).
__device__ __forceinline__ Fr table_twiddle(const Fr* tw, u64 e, u64 half_n, bool inverse) {
    if (!inverse) return load_field(tw + e);
    if (e == 0) return Fr::one();
    return Fr::neg(load_field(tw + (half_n - e)));
}

__device__ __forceinline__ u64 bitrev(u64 i, u32 lgn) { return lgn == 0 ? 0 : __brevll(i) >> (64 - lgn); }

// Flags of a pass.
#define NTT_INVERSE 1u     // twiddles w^-e
#define NTT_GATHER 2u      // first pass: read the source in bit-reversed order (src != dst)
#define NTT_PRE_POWERS 4u  // multiply each loaded element (natural index i) by lo/hi's power i
#define NTT_POST_POWERS 8u // multiply each stored element (natural index i) by lo/hi's power i

// Stages s0 .. s0+t-1 (spans 2^s0 .. 2^(s0+t-1)) of a DIT transform of size 2^lgn. One block of
// 2^(t-1) threads per group of 2^t elements spaced 2^s0 apart: group g holds positions
// base + k 2^s0 with base = (g >> s0) 2^(s0+t) + (g mod 2^s0). Local stage u pairs k and
// k + 2^u (bit u of k clear) with twiddle w^(j n/2^(s0+u+1)), j = position mod 2^(s0+u).
// lo/hi: power tables for the NTT_PRE_POWERS / NTT_POST_POWERS factors.
extern "C" __global__ void ntt_dit_pass(const Fr* src, Fr* dst, const Fr* tw, u32 lgn, u32 s0, u32 t,
                                        u32 flags, const Fr* lo, const Fr* hi) {
    // Dynamic shared memory: 2^t elements, then the 2^t - 1 twiddles of this group.
    extern __shared__ uint4 smem_raw[];
    Fr* sd = reinterpret_cast<Fr*>(smem_raw);
    Fr* stw = sd + (1u << t);
    const u32 half = 1u << (t - 1);
    const u32 tid = threadIdx.x;
    const u64 half_n = 1ull << (lgn - 1);
    const bool inverse = flags & NTT_INVERSE;
    const u64 gidx = blockIdx.x + (u64)blockIdx.y * gridDim.x;
    const u64 low = gidx & ((1ull << s0) - 1);
    const u64 base = ((gidx >> s0) << (s0 + t)) | low;

#pragma unroll
    for (u32 r = 0; r < 2; r++) {
        const u32 k = tid + r * half;
        const u64 pos = base + ((u64)k << s0);
        // With NTT_GATHER (s0 = 0) position pos of the bit-reversed sequence is source element
        // bitrev(pos).
        const u64 i = (flags & NTT_GATHER) ? bitrev(pos, lgn) : pos;
        Fr v = load_field(src + i);
        if (flags & NTT_PRE_POWERS) v = Fr::mul(v, pow_from_tables(lo, hi, i));
        sd[k] = v;
    }
    // Twiddle (u, m), m < 2^u, sits at 2^u - 1 + m.
    for (u32 i = tid; i < (1u << t) - 1; i += blockDim.x) {
        const u32 u = 31 - __clz(i + 1);
        const u64 m = i + 1 - (1u << u);
        stw[i] = table_twiddle(tw, (low + (m << s0)) << (lgn - s0 - u - 1), half_n, inverse);
    }
    __syncthreads();

    for (u32 u = 0; u < t; u++) {
        const u32 h = 1u << u;
        const u32 m = tid & (h - 1);
        const u32 j = ((tid >> u) << (u + 1)) + m;
        const Fr x = sd[j];
        Fr y = sd[j + h];
        // The first stage of a transform has only w^0 = 1.
        if (s0 != 0 || u != 0) y = Fr::mul(y, stw[h - 1 + m]);
        sd[j] = Fr::add(x, y);
        sd[j + h] = Fr::sub(x, y);
        __syncthreads();
    }

#pragma unroll
    for (u32 r = 0; r < 2; r++) {
        const u32 k = tid + r * half;
        const u64 pos = base + ((u64)k << s0);
        Fr v = sd[k];
        if (flags & NTT_POST_POWERS) v = Fr::mul(v, pow_from_tables(lo, hi, pos));
        store_field(dst + pos, v);
    }
}

// a[i] = (a[i] * b[i] - c[i]) * zinv: the quotient's numerator over Z on the coset.
extern "C" __global__ void quotient_pointwise(Fr* a, const Fr* b, const Fr* c, const Fr* zinv, u64 n) {
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr v = Fr::sub(Fr::mul(load_field(a + i), load_field(b + i)), load_field(c + i));
    store_field(a + i, Fr::mul(v, load_field(zinv)));
}
