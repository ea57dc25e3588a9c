// Number-theoretic transforms over Fr.
//
// A transform of size n = 2^lgn is a decimation-in-time radix-2 network run in passes of up to
// 9 stages; each pass keeps a group of 2^t elements in shared memory, so the whole transform
// reads and writes global memory ceil(lgn/9) times. The network wants its input in bit-reversed
// order: the first pass gathers it from the natural-order source (the group of 2^t consecutive
// bit-reversed positions is a stride-2^(lgn-t) column of the source, the same access pattern a
// strided pass has anyway), so natural order goes in and natural order comes out with no
// separate permutation kernel. Scale factors ride along: the coset shift g^i on the first pass's
// loads, 1/n and g^-i on the last pass's stores. Between the first load and the last store the
// values are lazily reduced, in [0, 2r) (see butterfly).
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

// One radix-2 butterfly in place: (x, y) -> (x + w y, x - w y); `unit` skips the product
// (w = 1). Lazily reduced: x, y and the results are in [0, 2r), w < r (a table twiddle), so
// w y < 2r^2 < r R and the product needs no final subtraction (Field::mul_unreduced); the
// last pass brings its outputs back below r.
// CUZK_NTT_EAGER (a tuning variant, for A/B runs) reduces every result below r instead.
__device__ __forceinline__ void butterfly(Fr& x, Fr& y, const Fr& w, bool unit) {
#ifdef CUZK_NTT_EAGER
    const Fr wy = unit ? y : Fr::mul(y, w);
    const Fr s = Fr::add(x, wy);
    y = Fr::sub(x, wy);
#else
    const Fr wy = unit ? y : Fr::mul_unreduced(y, w);
    const Fr s = Fr::add_lazy(x, wy);
    y = Fr::sub_lazy(x, wy);
#endif
    x = s;
}

// CUZK_NTT_MINB (a tuning variant, for blocks of 128 threads) caps the pass kernel's registers
// for that many blocks per SM.
#ifdef CUZK_NTT_MINB
#define NTT_BOUNDS __launch_bounds__(128, CUZK_NTT_MINB)
#else
#define NTT_BOUNDS
#endif

// The first of the four elements j, j+h, j+2h, j+3h (h = 2^u) of radix-4 unit v < 2^(t-2) in
// stages u and u+1: j has bits u and u+1 clear.
__device__ __forceinline__ u32 unit_base(u32 v, u32 u) {
    return ((v >> u) << (u + 2)) + (v & ((1u << u) - 1));
}

// Stages s0 .. s0+t-1 (spans 2^s0 .. 2^(s0+t-1)) of a DIT transform of size 2^lgn. Group g
// holds the 2^t positions base + k 2^s0, base = (g >> s0) 2^(s0+t) + (g mod 2^s0); local stage
// u pairs k and k + 2^u (bit u of k clear) with twiddle w^(j n/2^(s0+u+1)), j = position
// mod 2^(s0+u). The group's 2^t - 1 twiddles are staged in shared memory first (entry
// 2^u - 1 + m for stage u, m = j's local part; reading them from the table as needed instead
// was 5% slower on the H200).
//
// The stages go two at a time: a thread's radix-4 unit combines four elements k, k+h, k+2h,
// k+3h (h = 2^u) in registers with two independent products per stage, and the block meets at
// a barrier half as often as with one butterfly per thread and stage (H200, 2^27: 42.8 -> 38.2
// ms; two units per thread was slower, from registers). An odd stage count ends with a single
// stage. In the first pass stage 0 multiplies by w^0 = 1 only and stage 1 by 1 and w^(n/4), so
// the first step skips the products of stage 0 and the half of stage 1 whose twiddle is 1.
//
// A block holds 2^lgc groups (passes of few stages would otherwise run blocks of one warp),
// interleaved in shared memory (entry e of group c at e 2^lgc + c): groups g0 + c when the
// group's low part is its column (s0 > 0), and for the first pass, whose gather reads source
// element bitrev(position), groups g0 + c 2^(lgn-t-lgc), whose sources are neighbours.
// lo/hi: power tables for the NTT_PRE_POWERS / NTT_POST_POWERS factors.
extern "C" __global__ void NTT_BOUNDS ntt_dit_pass(const Fr* src, Fr* dst, const Fr* tw, u32 lgn, u32 s0,
                                                   u32 t, u32 lgc, u32 flags, const Fr* lo, const Fr* hi) {
    extern __shared__ uint4 smem_raw[];
    const u32 size = 1u << t;
    const u32 threads = blockDim.x >> lgc;  // per group
    const u32 c = threadIdx.x & ((1u << lgc) - 1);
    const u32 q = threadIdx.x >> lgc;
    const u64 gidx = (flags & NTT_GATHER) ? blockIdx.x + ((u64)c << (lgn - t - lgc))
                                          : ((u64)blockIdx.x << lgc) + c;
    const u64 low = gidx & ((1ull << s0) - 1);
    const u64 base = ((gidx >> s0) << (s0 + t)) | low;
    Fr* sd = reinterpret_cast<Fr*>(smem_raw);
    Fr* stw = sd + (size << lgc);
#define SLOT(e) (((e) << lgc) + c)

    for (u32 k = q; k < size; k += threads) {
        const u64 pos = base + ((u64)k << s0);
        // With NTT_GATHER (s0 = 0) position pos of the bit-reversed sequence is source element
        // bitrev(pos).
        const u64 i = (flags & NTT_GATHER) ? bitrev(pos, lgn) : pos;
        Fr v = load_field(src + i);
        if (flags & NTT_PRE_POWERS) v = Fr::mul_call(v, pow_from_tables(lo, hi, i));
        sd[SLOT(k)] = v;
    }
    const u64 half_n = 1ull << (lgn - 1);
    for (u32 i = q; i < size - 1; i += threads) {
        const u32 u = 31 - __clz(i + 1);
        const u64 m = i + 1 - (1u << u);
        stw[SLOT(i)] = table_twiddle(tw, (low + (m << s0)) << (lgn - s0 - u - 1), half_n, flags & NTT_INVERSE);
    }
    __syncthreads();

    u32 u = 0;
    for (; u + 1 < t; u += 2) {
        const u32 h = 1u << u;
        const bool first = s0 == 0 && u == 0;
        for (u32 v = q; v < size / 4; v += threads) {
            const u32 j = unit_base(v, u), m = v & (h - 1);
            Fr a0 = sd[SLOT(j)], a1 = sd[SLOT(j + h)], a2 = sd[SLOT(j + 2 * h)], a3 = sd[SLOT(j + 3 * h)];
            const Fr w1 = stw[SLOT(h - 1 + m)];
            butterfly(a0, a1, w1, first);
            butterfly(a2, a3, w1, first);
            butterfly(a0, a2, stw[SLOT(2 * h - 1 + m)], first);
            butterfly(a1, a3, stw[SLOT(3 * h - 1 + m)], false);
            sd[SLOT(j)] = a0;
            sd[SLOT(j + h)] = a1;
            sd[SLOT(j + 2 * h)] = a2;
            sd[SLOT(j + 3 * h)] = a3;
        }
        __syncthreads();
    }
    if (u < t) {
        // The last stage of an odd count, one butterfly per pair.
        const u32 h = 1u << u;
        for (u32 p = q; p < size / 2; p += threads) {
            const u32 m = p & (h - 1), j = ((p >> u) << (u + 1)) + m;
            Fr a = sd[SLOT(j)], b = sd[SLOT(j + h)];
            butterfly(a, b, stw[SLOT(h - 1 + m)], s0 == 0 && u == 0);
            sd[SLOT(j)] = a;
            sd[SLOT(j + h)] = b;
        }
        __syncthreads();
    }

    // Values between passes are lazy (< 2r); the last pass stores canonical ones. The factor's
    // product does that by itself (v pow < 2r r < r R: its final subtraction leaves < r).
    const bool last = s0 + t == lgn;
    for (u32 k = q; k < size; k += threads) {
        const u64 pos = base + ((u64)k << s0);
        Fr v = sd[SLOT(k)];
        if (flags & NTT_POST_POWERS) v = Fr::mul_call(v, pow_from_tables(lo, hi, pos));
        else if (last) v = Fr::reduce_once(v);
        store_field(dst + pos, v);
    }
#undef SLOT
}

// a[i] = (a[i] * b[i] - c[i]) * zinv: the quotient's numerator over Z on the coset.
extern "C" __global__ void quotient_pointwise(Fr* a, const Fr* b, const Fr* c, const Fr* zinv, u64 n) {
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fr v = Fr::sub(Fr::mul(load_field(a + i), load_field(b + i)), load_field(c + i));
    store_field(a + i, Fr::mul(v, load_field(zinv)));
}
