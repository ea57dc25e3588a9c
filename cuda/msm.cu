// Pippenger multi-scalar multiplication for G1 and G2, all on the GPU.
//
// 1. msm_front, once per chunk of the scalars (src/gpu/msm.rs uploads chunk k+1 on a copy stream
//    while this runs on chunk k): each scalar leaves Montgomery form; 0s are dropped, 1s go to
//    the batch addition (batch_add.cu), the rest get a position k in the `rest` list (a
//    warp-aggregated append, so k is only known inside the kernel) and, at once, their signed
//    c-bit digits: d in [-2^(c-1), 2^(c-1)]; digit d != 0 means bucket |d|-1 of its window, with
//    the point negated when d < 0. The digits are stored window-major with a window stride of
//    the capacity n (not the final count m of rest scalars, unknown until every chunk is done):
//    digits[w*n + k]. Bucket sizes are counted with atomics. The canonical form of each rest
//    scalar is written back in place for msm_digits.
//    msm_digits redoes the digits of the rest list with another window width (stride m), only
//    when the host picks one once m is known (few full scalars among many 0s and 1s).
// 2. scan (scan.cu) of the counts gives each bucket's slice of one list; msm_scatter fills it
//    (a counting sort by bucket: the order inside a bucket does not matter), reading the digits
//    with the stride they were written with.
// 3. msm_chunks sums the list in chunks of K points per thread (mixed XYZZ additions), writing
//    whole buckets directly and the pieces of buckets that cross chunks aside; msm_combine adds
//    those pieces.
// 4. msm_reduce_segments: window sum  sum_k (k+1) B_k  in segments of S buckets, one thread each:
//    running sums from the top give T = sum (k-lo+1) B_k and R = sum B_k; the segment is worth
//    T + lo*R.
// 5. msm_reduce_groups: tree sum of the segments of each window; msm_to_jacobian hands the window
//    sums to the host, which combines the windows (a few dozen point operations).
#include "field.cuh"
#include "curve.cuh"

#define NO_BUCKET 0xffffffffu

// Warp-aggregated append of `idx` to a list when `pred` holds: one atomic per warp. Every lane
// of the warp must call it (full-mask ballot). Returns the position written (meaningful only
// where `pred` holds).
__device__ __forceinline__ u32 warp_append(bool pred, u32 idx, u32* list, u32* count) {
    const u32 mask = __ballot_sync(0xffffffffu, pred);
    if (mask == 0) return 0;
    const u32 lane = threadIdx.x & 31;
    const u32 leader = __ffs(mask) - 1;
    u32 base = 0;
    if (lane == leader) base = atomicAdd(count, (u32)__popc(mask));
    base = __shfl_sync(0xffffffffu, base, leader);
    const u32 pos = base + __popc(mask & ((1u << lane) - 1));
    if (pred) list[pos] = idx;
    return pos;
}

// The nw signed c-bit digits of the canonical scalar s, at digits[w*stride + k]:
// bucket id (window*B + |d|-1) | sign << 31, or NO_BUCKET; counts[bucket]++.
__device__ __forceinline__ void scalar_digits(const Fr& s, u32 k, u32 c, u32 nw, u64 stride, u32* digits,
                                              u32* counts) {
    const u32 B = 1u << (c - 1);
    const u64 mask = (1ull << c) - 1;
    u32 carry = 0;
    for (u32 w = 0; w < nw; w++) {
        const u32 pos = w * c;
        const u32 l = pos >> 5, off = pos & 31;
        u64 two = 0;
        if (l < 8) two = s.v[l];
        if (l + 1 < 8) two |= (u64)s.v[l + 1] << 32;
        u32 d = (u32)((two >> off) & mask) + carry;
        u32 bucket = NO_BUCKET;
        if (d > B) {
            // d - 2^c is negative (or 0 when d = 2^c): borrow 1 from the next window.
            carry = 1;
            d = (1u << c) - d;  // magnitude of the negative digit
            if (d != 0) bucket = (w * B + d - 1) | 0x80000000u;
        } else {
            carry = 0;
            if (d != 0) bucket = w * B + d - 1;
        }
        digits[(u64)w * stride + k] = bucket;
        if (bucket != NO_BUCKET) atomicAdd(counts + (bucket & 0x7fffffffu), 1u);
    }
}

// Scalars [base, base+len) of n (one chunk; launched once per chunk, in order, on one stream).
// counts[0] = number of 1s, counts[1] = number of other non-zero scalars, both so far; ones and
// rest get global indices. digits has room for nw*n entries (stride n); bucket_counts[b]++.
extern "C" __global__ void msm_front(Fr* scalars, u32 base, u32 len, u32 n, u32 c, u32 nw, u32* ones,
                                     u32* rest, u32* counts, u32* digits, u32* bucket_counts) {
    const u32 j = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 i = base + j;
    bool is_one = false, is_rest = false;
    Fr s;
    if (j < len) {
        s = Fr::from_mont(load_field(scalars + i));
        u32 hi = 0;
#pragma unroll
        for (int k = 1; k < Fr::N; k++) hi |= s.v[k];
        is_one = hi == 0 && s.v[0] == 1;
        is_rest = !is_one && !s.is_zero();
        // Only msm_digits reads scalars again, and only those of the rest list.
        if (is_rest) store_field(scalars + i, s);
    }
    warp_append(is_one, i, ones, counts);
    const u32 k = warp_append(is_rest, i, rest, counts + 1);
    if (is_rest) scalar_digits(s, k, c, nw, n, digits, bucket_counts);
}

// The digits of the m rest scalars (already canonical) again, with stride m: for a window width
// other than the one msm_front used.
extern "C" __global__ void msm_digits(const Fr* scalars, const u32* rest, u32 m, u32 c, u32 nw,
                                      u32* digits, u32* counts) {
    const u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= m) return;
    scalar_digits(load_field(scalars + rest[k]), k, c, nw, m, digits, counts);
}

// list[cursor[bucket]++] = point index | sign << 31, one thread per (window, point) with the
// windows in block order: the blocks that run together write into one window's part of the list,
// a region that can stay in L2 while its scattered 4-byte writes are merged, instead of touching
// the whole list at once (H200: 2^27 points 183 -> 114 ms, 2^24 20.6 -> 13.1 ms). The digits of
// point k in window w are at digits[w*stride + k] (stride n after msm_front, m after msm_digits).
extern "C" __global__ void msm_scatter(const u32* digits, const u32* rest, u32 m, u32 nw, u32 stride,
                                       u32* cursor, u32* list) {
    const u32 per_window = (m + blockDim.x - 1) / blockDim.x;
    const u32 w = blockIdx.x / per_window;
    const u32 k = (blockIdx.x - w * per_window) * blockDim.x + threadIdx.x;
    if (w >= nw || k >= m) return;
    const u32 b = digits[(u64)w * stride + k];
    if (b == NO_BUCKET) return;
    const u32 pos = atomicAdd(cursor + (b & 0x7fffffffu), 1u);
    list[pos] = rest[k] | (b & 0x80000000u);
}

// *max_size = the largest bucket size (the accumulation sizes its chunks from it).
extern "C" __global__ void msm_max_bucket(const u32* offsets, u32 nb, u32* max_size) {
    const u32 b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb) return;
    atomicMax(max_size, offsets[b + 1] - offsets[b]);
}

// Bucket sums. The bucket-sorted list is cut into chunks of exactly K points, one thread each,
// whatever the bucket boundaries. (The earlier units of at most L points of one bucket left a
// warp waiting for its longest unit: about 80% useful work at 2^24 points, where buckets hold
// 64 +- 8 points; H200 2^24: 131 -> 108 ms for this phase.) A
// thread sums each bucket segment of its chunk and stores it where the combination finds it:
// a bucket wholly inside the chunk goes straight to buckets[b]; otherwise the segment that
// starts the chunk goes to head[t] and one that starts later (its bucket then goes on past the
// chunk) to tail[t].
// One launch covers chunks [first, last): the host launches the chunks in pieces, so that
// another caller may take the device between them.
template <class F>
__device__ void accumulate_chunks(const Affine<F>* bases, const u32* list, const u32* offsets, u32 nb, u32 total,
                                  u32 K, u32 first, u32 last, Xyzz<F>* buckets, Xyzz<F>* head, Xyzz<F>* tail) {
    const u64 t64 = (u64)first + blockIdx.x * blockDim.x + threadIdx.x;
    if (t64 >= last) return;
    const u32 t = (u32)t64;
    const u64 s64 = (u64)t * K;
    if (s64 >= total) return;
    const u32 s = (u32)s64;
    const u32 e = (u32)min(s64 + K, (u64)total);
    // The bucket holding position s: the last b with offsets[b] <= s (then offsets[b+1] > s).
    u32 lo = 0, hi = nb;
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) >> 1;
        if (offsets[mid] <= s) lo = mid; else hi = mid;
    }
    u32 b = lo;
    u32 bstart = offsets[b], bend = offsets[b + 1];
    Xyzz<F> acc = Xyzz<F>::inf();
    for (u32 p = s; p < e; p++) {
        const u32 en = list[p];
        Affine<F> pt = load_affine(bases + (en & 0x7fffffffu));
        if (en & 0x80000000u) pt.y = F::neg(pt.y);
        acc = Xyzz<F>::madd(acc, pt);
        if (p + 1 == bend || p + 1 == e) {
            if (bstart >= s && bend <= e) store_xyzz(buckets + b, acc);
            else if (bstart <= s) store_xyzz(head + t, acc);  // the segment starts the chunk
            else store_xyzz(tail + t, acc);
            acc = Xyzz<F>::inf();
            if (p + 1 == bend && p + 1 < e) {
                // Next non-empty bucket (empty ones have offsets[b] == offsets[b+1]).
                do { b++; } while (offsets[b + 1] == offsets[b]);
                bstart = offsets[b];
                bend = offsets[b + 1];
            }
        }
    }
}

// Buckets that cross a chunk boundary: the tail (or head) of the first chunk plus the heads of
// the following ones. Empty buckets become infinity; buckets inside one chunk are left alone.
template <class F>
__device__ void combine_chunks(const u32* offsets, u32 nb, u32 K, const Xyzz<F>* head, const Xyzz<F>* tail,
                               Xyzz<F>* buckets) {
    const u32 b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb) return;
    const u32 start = offsets[b], end = offsets[b + 1];
    if (start == end) { store_xyzz(buckets + b, Xyzz<F>::inf()); return; }
    const u32 t0 = start / K, t1 = (end - 1) / K;
    if (t0 == t1) return;
    Xyzz<F> acc = load_xyzz(start == t0 * K ? head + t0 : tail + t0);
    for (u32 t = t0 + 1; t <= t1; t++) acc = Xyzz<F>::add(acc, load_xyzz(head + t));
    store_xyzz(buckets + b, acc);
}

// Segment [lo, lo+S) of window w, worth sum_{k in segment} (k+1) B_k.
template <class F>
__device__ void reduce_segments(const Xyzz<F>* buckets, u32 nw, u32 B, u32 S, Xyzz<F>* out) {
    const u32 segs = B / S;
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= nw * segs) return;
    const u32 w = t / segs, s = t % segs;
    const Xyzz<F>* bk = buckets + (u64)w * B + (u64)s * S;
    Xyzz<F> R = Xyzz<F>::inf(), T = Xyzz<F>::inf();
    for (int k = (int)S - 1; k >= 0; k--) {
        R = Xyzz<F>::add(R, load_xyzz(bk + k));
        T = Xyzz<F>::add(T, R);
    }
    // T += lo * R by double-and-add, lo = s*S.
    u32 lo = s * S;
    Xyzz<F> acc = Xyzz<F>::inf();
    for (int bit = 31; bit >= 0; bit--) {
        acc = Xyzz<F>::dbl(acc);
        if ((lo >> bit) & 1) acc = Xyzz<F>::add(acc, R);
    }
    store_xyzz(out + t, Xyzz<F>::add(T, acc));
}

// out[g*m_out + j] = sum of in[g*m_in + j*G .. +G) (clipped to m_in), m_out = ceil(m_in/G).
template <class F>
__device__ void reduce_groups(const Xyzz<F>* in, Xyzz<F>* out, u32 groups, u32 m_in, u32 G) {
    const u32 m_out = (m_in + G - 1) / G;
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= groups * m_out) return;
    const u32 g = t / m_out, j = t % m_out;
    const u32 start = j * G, end = min(start + G, m_in);
    Xyzz<F> acc = Xyzz<F>::inf();
    for (u32 k = start; k < end; k++) acc = Xyzz<F>::add(acc, load_xyzz(in + (u64)g * m_in + k));
    store_xyzz(out + t, acc);
}

template <class F>
__device__ void to_jacobian(const Xyzz<F>* in, F* out, u32 n) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    F j[3];
    load_xyzz(in + t).to_jacobian(j);
    store_field(out + 3 * t, j[0]);
    store_field(out + 3 * t + 1, j[1]);
    store_field(out + 3 * t + 2, j[2]);
}

// Register caps of the bucket kernel. G2's uses 204 registers uncapped (2 blocks of 128 threads
// per SM); capped for 3 blocks it spills a few bytes and runs 5% faster on the H200 (G2 2^24
// 407 -> 387 ms; 4 blocks: 390 ms). G1's needs 146 registers since Y is one lazy a b - c d
// (Field::mul_sub), 3 blocks; capped for 4 (128 registers, a few bytes of spill) G1 2^24 took
// 133.4 ms against 138.5 uncapped (2^26: 482 against 490). G1 gained nothing from 5 or 6 blocks
// before that. CUZK_NVRTC_DEFINES=CUZK_ACC_MINB=<blocks> overrides both, for tuning.
#ifdef CUZK_ACC_MINB
#define ACC_BOUNDS_g1 __launch_bounds__(128, CUZK_ACC_MINB)
#define ACC_BOUNDS_g2 __launch_bounds__(128, CUZK_ACC_MINB)
#else
#define ACC_BOUNDS_g1 __launch_bounds__(128, 4)
#define ACC_BOUNDS_g2 __launch_bounds__(128, 3)
#endif

#define MSM_KERNELS(G, F)                                                                                     \
    extern "C" __global__ void ACC_BOUNDS_##G msm_chunks_##G(const Affine<F>* bases, const u32* list,              \
                                                      const u32* offsets, u32 nb, u32 total, u32 K,             \
                                                      u32 first, u32 last, Xyzz<F>* buckets, Xyzz<F>* head,     \
                                                      Xyzz<F>* tail) {                                          \
        accumulate_chunks<F>(bases, list, offsets, nb, total, K, first, last, buckets, head, tail);              \
    }                                                                                                           \
    extern "C" __global__ void msm_combine_##G(const u32* offsets, u32 nb, u32 K, const Xyzz<F>* head,         \
                                               const Xyzz<F>* tail, Xyzz<F>* buckets) {                         \
        combine_chunks<F>(offsets, nb, K, head, tail, buckets);                                                 \
    }                                                                                                           \
    extern "C" __global__ void msm_reduce_segments_##G(const Xyzz<F>* buckets, u32 nw, u32 B, u32 S,         \
                                                       Xyzz<F>* out) {                                        \
        reduce_segments<F>(buckets, nw, B, S, out);                                                           \
    }                                                                                                         \
    extern "C" __global__ void msm_reduce_groups_##G(const Xyzz<F>* in, Xyzz<F>* out, u32 groups, u32 m_in,   \
                                                     u32 gsize) {                                             \
        reduce_groups<F>(in, out, groups, m_in, gsize);                                                       \
    }                                                                                                         \
    extern "C" __global__ void msm_to_jacobian_##G(const Xyzz<F>* in, F* out, u32 n) { to_jacobian<F>(in, out, n); }

MSM_KERNELS(g1, Fp)
MSM_KERNELS(g2, Fp2)
