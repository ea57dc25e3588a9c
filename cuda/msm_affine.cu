// Batch-affine bucket sums for G1 (`debug.gpu_msm_batch_affine`, a tuning variant of
// msm_chunks_g1 in msm.cu): the same chunks of K entries of the bucket-sorted list, one chain
// per chunk, whatever the bucket boundaries, and the same outputs (buckets, head, tail), so that
// msm_combine_g1 and the window sums run unchanged. What differs is how a chain sums:
//
// - Its running sum is affine, and every chain adds its next entry in the same step. An affine
//   addition costs three products once 1/(x2 - x1) is known; a mixed XYZZ addition costs ten.
// - The inverses come from Montgomery's trick over a block: the block's denominators multiplied
//   up a binary tree in shared memory, the root inverted, the inverse carried down the tree
//   (three products per chain). The roots of 256 blocks are inverted together the same way by
//   msm_affine_invert, so one Fermat inversion serves 32,768 chains.
// - A step is therefore two launches: msm_affine_invert on the roots the step before left, then
//   msm_affine_step, which recomputes its tree (one product per chain, cheaper than keeping it),
//   carries the inverses down, adds, and leaves the next step's roots. About seven products per
//   addition, for the state read and written once per step.
//
// A chain's state between launches lives in tail[t]: its running sum (x, y), its bucket and
// whether it is empty (at a segment's first entry, or after P + (-P)). tail[t] is free until the
// chain's last step, the only one that may write it as an output, after which the state is not
// read again. Points at infinity (blst's x = y = 0) add nothing. Equal points double; opposite
// points empty the chain.
#include "field.cuh"
#include "curve.cuh"

// Chains per block: 128 threads of at most 128 registers, four blocks to an SM, so that while
// one block's tree is down to a few lanes (its top levels) the others keep the multiplier busy.
#define AFF_THREADS 128
// Block products per inversion.
#define AFF_INV_THREADS 256

namespace affine {

// A chain: chunk t is list entries [s, e); the segment in hand belongs to bucket b, whose
// entries are [bstart, bend).
struct Chain {
    u32 t, s, e, b, bstart, bend;
    bool empty;
    Fp x, y;
};

enum Op { NONE, SET, ADD, CANCEL };

// What adding entry p does to a chain: d is the denominator whose inverse the addition needs
// (one where there is no division), num the slope's numerator.
struct Step {
    Op op;
    Fp px, py, num, d;
};

__device__ __forceinline__ void chunk_bounds(u32 t, u32 K, u32 total, u32& s, u32& e) {
    const u64 s64 = (u64)t * K;
    s = (u32)s64;
    e = (u32)min(s64 + K, (u64)total);
}

// The state lives in tail[t]: x, y, then the bucket and the empty flag in the third field.
__device__ __forceinline__ void load_state(Chain& c, const G1Xyzz* tail, const u32* offsets) {
    const Fp* st = reinterpret_cast<const Fp*>(tail + c.t);
    c.x = load_field(st);
    c.y = load_field(st + 1);
    const u32* m = reinterpret_cast<const u32*>(st + 2);
    c.b = m[0];
    c.empty = m[1] != 0;
    c.bstart = offsets[c.b];
    c.bend = offsets[c.b + 1];
}

__device__ __forceinline__ void store_state(const Chain& c, G1Xyzz* tail) {
    Fp* st = reinterpret_cast<Fp*>(tail + c.t);
    store_field(st, c.x);
    store_field(st + 1, c.y);
    u32* m = reinterpret_cast<u32*>(st + 2);
    m[0] = c.b;
    m[1] = c.empty ? 1u : 0u;
}

__device__ Step step_of(const Chain& c, const G1Affine* bases, const u32* list, u32 p) {
    Step o;
    o.op = NONE;
    o.d = Fp::one();
    if (p >= c.e) return o;
    const u32 en = list[p];
    G1Affine pt = load_affine(bases + (en & 0x7fffffffu));
    if (pt.is_inf()) return o;
    if (en & 0x80000000u) pt.y = Fp::neg(pt.y);
    o.px = pt.x;
    o.py = pt.y;
    if (c.empty) {
        o.op = SET;
        return o;
    }
    const Fp dx = Fp::sub(pt.x, c.x);
    if (!dx.is_zero()) {
        o.op = ADD;
        o.d = dx;
        o.num = Fp::sub(pt.y, c.y);
    } else if (pt.y == c.y) {
        // Doubling: slope 3x^2 / 2y (y != 0: G1 has no point of order 2).
        o.op = ADD;
        o.d = Fp::add(c.y, c.y);
        const Fp xx = Fp::sqr(c.x);
        o.num = Fp::add(Fp::add(xx, xx), xx);
    } else {
        o.op = CANCEL;
    }
    return o;
}

// The step, given 1/d: x3 = l^2 - x1 - x2, y3 = l (x1 - x3) - y1 (for doubling x2 = x1).
__device__ void apply(Chain& c, const Step& o, const Fp& dinv) {
    if (o.op == SET) {
        c.x = o.px;
        c.y = o.py;
        c.empty = false;
    } else if (o.op == ADD) {
        const Fp l = Fp::mul(o.num, dinv);
        const Fp x3 = Fp::sub(Fp::sub(Fp::sqr(l), c.x), o.px);
        c.y = Fp::sub(Fp::mul(l, Fp::sub(c.x, x3)), c.y);
        c.x = x3;
    } else if (o.op == CANCEL) {
        c.empty = true;
    }
}

// After entry p: where the segment ends there, its sum goes where msm_chunks_g1 would put it
// and the chain moves to the next non-empty bucket.
__device__ void flush_if_ends(Chain& c, u32 p, const u32* offsets, G1Xyzz* buckets, G1Xyzz* head, G1Xyzz* tail) {
    if (p + 1 != c.bend && p + 1 != c.e) return;
    G1Xyzz v = G1Xyzz::inf();
    if (!c.empty) {
        v.X = c.x;
        v.Y = c.y;
        v.ZZ = Fp::one();
        v.ZZZ = Fp::one();
    }
    if (c.bstart >= c.s && c.bend <= c.e) store_xyzz(buckets + c.b, v);
    else if (c.bstart <= c.s) store_xyzz(head + c.t, v);
    else store_xyzz(tail + c.t, v);
    c.empty = true;
    if (p + 1 == c.bend && p + 1 < c.e) {
        do { c.b++; } while (offsets[c.b + 1] == offsets[c.b]);
        c.bstart = offsets[c.b];
        c.bend = offsets[c.b + 1];
    }
}

// The block's product tree in sh[1 .. 2W) (W threads): leaves at W + thread, node k the product
// of nodes 2k and 2k+1. Returns after the root sh[1] is written.
template <u32 W>
__device__ void tree_up(Fp* sh, const Fp& leaf) {
    const u32 i = threadIdx.x;
    sh[W + i] = leaf;
    __syncthreads();
    for (u32 w = W / 2; w >= 1; w >>= 1) {
        if (i < w) sh[w + i] = Fp::mul(sh[2 * (w + i)], sh[2 * (w + i) + 1]);
        __syncthreads();
    }
}

// With sh[1] replaced by the root's inverse: each node's inverse carried down to its children
// (1/L = R/(LR), 1/R = L/(LR)); returns this thread's leaf's inverse.
template <u32 W>
__device__ Fp tree_down(Fp* sh) {
    const u32 i = threadIdx.x;
    __syncthreads();
    for (u32 w = 1; w < W; w <<= 1) {
        if (i < w) {
            const u32 k = w + i;
            const Fp inv = sh[k], l = sh[2 * k], r = sh[2 * k + 1];
            sh[2 * k] = Fp::mul(inv, r);
            sh[2 * k + 1] = Fp::mul(inv, l);
        }
        __syncthreads();
    }
    return sh[W + i];
}

}  // namespace affine

// Step 0 of every chain (its first entry needs no division) and the denominators of step 1:
// each block's product in prods[block]. tail[t] gets chain t's state.
extern "C" __global__ void __launch_bounds__(AFF_THREADS, 4)
    msm_affine_init_g1(const G1Affine* bases, const u32* list, const u32* offsets, u32 nb, u32 total, u32 K,
                       u32 chains, Fp* prods, G1Xyzz* buckets, G1Xyzz* head, G1Xyzz* tail) {
    using namespace affine;
    __shared__ Fp sh[2 * AFF_THREADS];
    const u32 t = blockIdx.x * AFF_THREADS + threadIdx.x;
    Fp next = Fp::one();
    if (t < chains) {
        Chain c;
        c.t = t;
        chunk_bounds(t, K, total, c.s, c.e);
        u32 lo = 0, hi = nb;
        while (hi - lo > 1) {
            const u32 mid = (lo + hi) >> 1;
            if (offsets[mid] <= c.s) lo = mid; else hi = mid;
        }
        c.b = lo;
        c.bstart = offsets[c.b];
        c.bend = offsets[c.b + 1];
        c.empty = true;
        const Step o = step_of(c, bases, list, c.s);
        apply(c, o, Fp::one());
        flush_if_ends(c, c.s, offsets, buckets, head, tail);
        if (c.s + 1 < c.e) {
            store_state(c, tail);
            next = step_of(c, bases, list, c.s + 1).d;
        }
    }
    tree_up<AFF_THREADS>(sh, next);
    if (threadIdx.x == 0) store_field(prods + blockIdx.x, sh[1]);
}

// 1/v[i] for the n block products: 256 of them share one inversion through the same tree.
extern "C" __global__ void __launch_bounds__(AFF_INV_THREADS)
    msm_affine_invert(Fp* v, u32 n) {
    using namespace affine;
    __shared__ Fp sh[2 * AFF_INV_THREADS];
    const u32 i = blockIdx.x * AFF_INV_THREADS + threadIdx.x;
    tree_up<AFF_INV_THREADS>(sh, i < n ? load_field(v + i) : Fp::one());
    if (threadIdx.x == 0) sh[1] = Fp::inv(sh[1]);
    const Fp r = tree_down<AFF_INV_THREADS>(sh);
    if (i < n) store_field(v + i, r);
}

// Step j >= 1 of every chain, prods[block] holding the inverse of the block's product of the
// step's denominators (msm_affine_invert); leaves there the product of step j + 1's.
extern "C" __global__ void __launch_bounds__(AFF_THREADS, 4)
    msm_affine_step_g1(const G1Affine* bases, const u32* list, const u32* offsets, u32 total, u32 K, u32 j,
                       u32 chains, Fp* prods, G1Xyzz* buckets, G1Xyzz* head, G1Xyzz* tail) {
    using namespace affine;
    __shared__ Fp sh[2 * AFF_THREADS];
    const u32 t = blockIdx.x * AFF_THREADS + threadIdx.x;
    Chain c;
    Step o;
    o.op = NONE;
    o.d = Fp::one();
    bool live = false;
    u32 p = 0;
    if (t < chains) {
        c.t = t;
        chunk_bounds(t, K, total, c.s, c.e);
        p = c.s + j;
        if (p < c.e) {
            load_state(c, tail, offsets);
            o = step_of(c, bases, list, p);
            live = true;
        }
    }
    tree_up<AFF_THREADS>(sh, o.d);
    if (threadIdx.x == 0) sh[1] = load_field(prods + blockIdx.x);
    const Fp dinv = tree_down<AFF_THREADS>(sh);
    Fp next = Fp::one();
    if (live) {
        apply(c, o, dinv);
        flush_if_ends(c, p, offsets, buckets, head, tail);
        if (p + 1 < c.e) {
            store_state(c, tail);
            next = step_of(c, bases, list, p + 1).d;
        }
    }
    tree_up<AFF_THREADS>(sh, next);
    if (threadIdx.x == 0) store_field(prods + blockIdx.x, sh[1]);
}
