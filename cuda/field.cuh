// Montgomery arithmetic over the BLS12-381 base field Fp (381 bits, 12 x 32-bit limbs) and the
// scalar field Fr (255 bits, 8 x 32-bit limbs).
//
// Representation: little-endian 32-bit limbs, Montgomery form with R = 2^(32*N). That is exactly
// the in-memory form of blst's blst_fp (6 x u64, R = 2^384) and blst_fr (4 x u64, R = 2^256) on
// a little-endian host, so host buffers of blstrs types are copied to the device unchanged.
//
// Multiplication is separated operand scanning: a full 2N-limb product, then N Montgomery
// reduction rounds. Both phases are carry chains of mad.lo/mad.hi with the PTX carry flag. The
// carry flag is only valid between adjacent instructions; every chain lives in one fully unrolled
// loop with nothing but chain instructions in it, and each asm statement is volatile so that the
// compiler keeps their order.
#ifndef CUZK_FIELD_CUH
#define CUZK_FIELD_CUH

typedef unsigned int u32;
typedef unsigned long long u64;

namespace ptx {
__device__ __forceinline__ u32 add_cc(u32 a, u32 b) { u32 r; asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 addc_cc(u32 a, u32 b) { u32 r; asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 addc(u32 a, u32 b) { u32 r; asm volatile("addc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 sub_cc(u32 a, u32 b) { u32 r; asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 subc_cc(u32 a, u32 b) { u32 r; asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 subc(u32 a, u32 b) { u32 r; asm volatile("subc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
__device__ __forceinline__ u32 madlo_cc(u32 a, u32 b, u32 c) { u32 r; asm volatile("mad.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
__device__ __forceinline__ u32 madloc_cc(u32 a, u32 b, u32 c) { u32 r; asm volatile("madc.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
__device__ __forceinline__ u32 madhi_cc(u32 a, u32 b, u32 c) { u32 r; asm volatile("mad.hi.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
__device__ __forceinline__ u32 madhic_cc(u32 a, u32 b, u32 c) { u32 r; asm volatile("madc.hi.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
}  // namespace ptx

// Field parameters: N limbs, modulus, -modulus^-1 mod 2^32, R mod modulus (one), R^2 mod modulus.
struct FpParams {
    static const int N = 12;
    static __device__ __forceinline__ u32 mod(int i) {
        const u32 m[12] = {0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0,
                           0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};
        return m[i];
    }
    static __device__ __forceinline__ u32 one(int i) {
        const u32 m[12] = {0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b, 0x53c758ba, 0x5f489857,
                           0x70525745, 0x77ce5853, 0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3};
        return m[i];
    }
    static const u32 INV = 0xfffcfffd;
    // Fp products sit inside large point formulas (G2 above all): calling one out-of-line copy
    // keeps NVRTC/ptxas time and code size small.
    static const bool INLINE_MUL = false;
};

struct FrParams {
    static const int N = 8;
    static __device__ __forceinline__ u32 mod(int i) {
        const u32 m[8] = {0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402,
                          0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753};
        return m[i];
    }
    static __device__ __forceinline__ u32 one(int i) {
        const u32 m[8] = {0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa,
                          0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159};
        return m[i];
    }
    static const u32 INV = 0xffffffff;
    // Fr products are the whole of an NTT butterfly: inline them.
    static const bool INLINE_MUL = true;
};

// An element of the field described by P, in Montgomery form.
template <class P>
struct Field {
    static const int N = P::N;
    u32 v[N];

    __device__ __forceinline__ static Field zero() {
        Field r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = 0;
        return r;
    }
    __device__ __forceinline__ static Field one() {
        Field r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = P::one(i);
        return r;
    }
    __device__ __forceinline__ bool is_zero() const {
        u32 acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i];
        return acc == 0;
    }
    __device__ __forceinline__ bool operator==(const Field& o) const {
        u32 acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i] ^ o.v[i];
        return acc == 0;
    }

    // r = a - p if a >= p else a  (a < 2p, and 2p fits in N limbs for both fields).
    __device__ __forceinline__ static Field reduce_once(const Field& a) {
        Field t;
        t.v[0] = ptx::sub_cc(a.v[0], P::mod(0));
#pragma unroll
        for (int i = 1; i < N; i++) t.v[i] = ptx::subc_cc(a.v[i], P::mod(i));
        u32 borrow = ptx::subc(0, 0);  // 0xffffffff when a < p
        Field r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = borrow ? a.v[i] : t.v[i];
        return r;
    }

    __device__ __forceinline__ static Field add(const Field& a, const Field& b) {
        Field t;
        t.v[0] = ptx::add_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) t.v[i] = ptx::addc_cc(a.v[i], b.v[i]);
        return reduce_once(t);
    }

    __device__ __forceinline__ static Field sub(const Field& a, const Field& b) {
        Field t;
        t.v[0] = ptx::sub_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) t.v[i] = ptx::subc_cc(a.v[i], b.v[i]);
        u32 borrow = ptx::subc(0, 0);
        // add p back when the subtraction borrowed (mask the modulus instead of branching)
        Field r;
        r.v[0] = ptx::add_cc(t.v[0], P::mod(0) & borrow);
#pragma unroll
        for (int i = 1; i < N; i++) r.v[i] = ptx::addc_cc(t.v[i], P::mod(i) & borrow);
        return r;
    }

    __device__ __forceinline__ static Field dbl(const Field& a) { return add(a, a); }

    __device__ __forceinline__ static Field neg(const Field& a) {
        if (a.is_zero()) return a;
        Field r;
        r.v[0] = ptx::sub_cc(P::mod(0), a.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) r.v[i] = ptx::subc_cc(P::mod(i), a.v[i]);
        return r;
    }

    // Montgomery product a*b/R mod p.
    __device__ __forceinline__ static Field mul(const Field& a, const Field& b) {
        if (P::INLINE_MUL) return mul_inline(a, b);
        return mul_call(a, b);
    }
    __device__ __noinline__ static Field mul_call(const Field& a, const Field& b) { return mul_inline(a, b); }

    __device__ __forceinline__ static Field mul_inline(const Field& a, const Field& b) {
        u32 t[2 * N];
#pragma unroll
        for (int i = 0; i < 2 * N; i++) t[i] = 0;
        // Product rows. Row i adds a*b[i] at limb i: the low halves in one chain whose carry
        // lands in the still-empty t[i+N], then the high halves one limb up. The partial sum
        // stays below 2^(32(i+N+1)), so the second chain cannot carry out of t[i+N].
#pragma unroll
        for (int i = 0; i < N; i++) {
            t[i] = ptx::madlo_cc(a.v[0], b.v[i], t[i]);
#pragma unroll
            for (int j = 1; j < N; j++) t[i + j] = ptx::madloc_cc(a.v[j], b.v[i], t[i + j]);
            t[i + N] = ptx::addc(t[i + N], 0);
            t[i + 1] = ptx::madhi_cc(a.v[0], b.v[i], t[i + 1]);
#pragma unroll
            for (int j = 1; j < N; j++) t[i + j + 1] = ptx::madhic_cc(a.v[j], b.v[i], t[i + j + 1]);
        }
        return reduce_wide(t);
    }

    __device__ __forceinline__ static Field sqr(const Field& a) { return mul(a, a); }

    // Montgomery reduction of a 2N-limb value t < p*R.
    __device__ __forceinline__ static Field reduce_wide(u32* t) {
        // `carry` holds what belongs at limb i+N of the current round (0..2); it is folded in by
        // the low chain of the next round.
        u32 carry = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            u32 m = t[i] * P::INV;
            t[i] = ptx::madlo_cc(m, P::mod(0), t[i]);
#pragma unroll
            for (int j = 1; j < N; j++) t[i + j] = ptx::madloc_cc(m, P::mod(j), t[i + j]);
            t[i + N] = ptx::addc_cc(t[i + N], carry);
            u32 c1 = ptx::addc(0, 0);
            t[i + 1] = ptx::madhi_cc(m, P::mod(0), t[i + 1]);
#pragma unroll
            for (int j = 1; j < N; j++) t[i + j + 1] = ptx::madhic_cc(m, P::mod(j), t[i + j + 1]);
            carry = ptx::addc(c1, 0);
        }
        // t[N..2N) + carry*2^(32N) < 2p < 2^(32N): carry is 0 here.
        Field r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = t[N + i];
        return reduce_once(r);
    }

    // Leaves Montgomery form: a/R mod p (the canonical integer).
    __device__ __forceinline__ static Field from_mont(const Field& a) {
        u32 t[2 * N];
#pragma unroll
        for (int i = 0; i < N; i++) { t[i] = a.v[i]; t[N + i] = 0; }
        return reduce_wide(t);
    }

    __device__ __forceinline__ static Field pow(Field base, u64 e) {
        Field r = one();
        while (e) {
            if (e & 1) r = mul(r, base);
            base = sqr(base);
            e >>= 1;
        }
        return r;
    }
};

// (Tried: a G1-only Fp with inlined products. It made the G1 kernels 1.5x slower on the H200 —
// 128 registers and ~7k-instruction point formulas that no longer fit the instruction cache —
// see docs/gpu-notes.md, v3. Products stay out of line for both groups.)

typedef Field<FpParams> Fp;
typedef Field<FrParams> Fr;

// Loads and stores through 16-byte vectors: both element sizes (48 and 32 bytes) are multiples of
// 16 and every array of them is 16-byte aligned.
template <class F>
__device__ __forceinline__ F load_field(const F* p) {
    F r;
    const uint4* s = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int i = 0; i < F::N / 4; i++) {
        uint4 q = s[i];
        r.v[4 * i] = q.x; r.v[4 * i + 1] = q.y; r.v[4 * i + 2] = q.z; r.v[4 * i + 3] = q.w;
    }
    return r;
}
template <class F>
__device__ __forceinline__ void store_field(F* p, const F& a) {
    uint4* d = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int i = 0; i < F::N / 4; i++) d[i] = make_uint4(a.v[4 * i], a.v[4 * i + 1], a.v[4 * i + 2], a.v[4 * i + 3]);
}

#endif  // CUZK_FIELD_CUH
