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

#ifdef CUZK_HOST_EMU
// Host emulation (cuda/emu/field_emu.cpp, scripts/check-field-emu.sh): the same header compiled
// by g++, with the carry flag emulated in a variable. Each function below has the semantics of
// the PTX instruction named in its device twin: `.cc` writes the carry flag, the `c` forms read
// it, the others leave it alone. The flag is kept as the SASS carry bit, which is what ptxas
// (CUDA 13, sm_90) actually uses: add/mad set it to the carry, sub sets it to NOT borrow (a - b
// is a + ~b + 1), and subc subtracts (1 - flag). For chains of one family that is exactly the
// PTX manual's carry / borrow; mixing the families (sub.cc then addc, add.cc then subc) reads
// the flag inverted with respect to the manual (checked in SASS: `sub.cc 0, t; addc 0, 0` gives
// t == 0, not the borrow t != 0), and the emulation follows the hardware there too.
// Nothing in this branch reaches the device build.
#define __device__
#define __forceinline__ inline
#define __noinline__
#define __constant__
struct uint4 { u32 x, y, z, w; };
inline uint4 make_uint4(u32 x, u32 y, u32 z, u32 w) { return uint4{x, y, z, w}; }
namespace ptx {
inline u32& cf() { static thread_local u32 f = 0; return f; }
// Carries dropped by a non-`.cc` addc whose 33-bit sum overflowed: in this code every addc ends a
// chain on a word that must not wrap, so the driver fails when this is non-zero.
inline u64& lost_carries() { static thread_local u64 n = 0; return n; }
inline u32 add3(u32 a, u32 b, u32 c, bool set) {
    const u64 s = (u64)a + b + c;
    if (set) cf() = (u32)(s >> 32);
    else if (s >> 32) lost_carries()++;
    return (u32)s;
}
// a - b - borrow_in as a + ~b + (1 - borrow_in); the flag is that sum's carry (NOT borrow).
inline u32 sub3(u32 a, u32 b, u32 borrow_in, bool set) {
    const u64 s = (u64)a + (u32)~b + (1 - borrow_in);
    if (set) cf() = (u32)(s >> 32);
    return (u32)s;
}
inline u32 mullo(u32 a, u32 b) { return (u32)((u64)a * b); }
inline u32 mulhi(u32 a, u32 b) { return (u32)(((u64)a * b) >> 32); }
inline u32 add_cc(u32 a, u32 b) { return add3(a, b, 0, true); }
inline u32 addc_cc(u32 a, u32 b) { return add3(a, b, cf(), true); }
inline u32 addc(u32 a, u32 b) { return add3(a, b, cf(), false); }
inline u32 sub_cc(u32 a, u32 b) { return sub3(a, b, 0, true); }
inline u32 subc_cc(u32 a, u32 b) { return sub3(a, b, 1 - cf(), true); }
inline u32 subc(u32 a, u32 b) { return sub3(a, b, 1 - cf(), false); }
inline u32 madlo_cc(u32 a, u32 b, u32 c) { return add3(mullo(a, b), c, 0, true); }
inline u32 madloc_cc(u32 a, u32 b, u32 c) { return add3(mullo(a, b), c, cf(), true); }
inline u32 madhi_cc(u32 a, u32 b, u32 c) { return add3(mulhi(a, b), c, 0, true); }
inline u32 madhic_cc(u32 a, u32 b, u32 c) { return add3(mulhi(a, b), c, cf(), true); }
// A carry the code knows to be 0 and leaves unread (Field::mac_half's carry_out = false).
inline void drop_carry() { if (cf()) lost_carries()++; }
}  // namespace ptx
#else
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
// The chain's last madc.hi keeps its .cc (ptxas fuses a lo/hi pair into IMAD.WIDE.U32.X only
// then; a plain madc.hi became IMAD + IMAD.HI + IADD3.X) and the flag is simply not read.
__device__ __forceinline__ void drop_carry() {}
}  // namespace ptx
#endif  // CUZK_HOST_EMU

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
    static __device__ __forceinline__ u32 inv() { return INV; }
    static const bool MOD_LOW_1_M1 = false;  // see Field::mul_inline
    // The top limbs of p and of any two operands below 4p sum below 2^32 - 1 (Field::mac_row).
    static const bool TOP_ROOM = true;
    // Fp products sit inside large point formulas (G2 above all): calling one out-of-line copy
    // keeps NVRTC/ptxas time and code size small. CUZK_FP_INLINE (a tuning variant, see
    // CUZK_NVRTC_DEFINES in src/gpu/compile.rs) inlines them instead.
#ifdef CUZK_FP_INLINE
    static const bool INLINE_MUL = true;
#else
    static const bool INLINE_MUL = false;
#endif
};

// -r^-1 mod 2^32, read from constant memory: known to ptxas as the immediate 0xffffffff, the
// factor m becomes a negation and ptxas then splits the m*r chains into separate lo/hi
// multiply-adds; read from constant memory they stay fused IMAD.WIDE.U32.X (H200: NTT 2^27
// 51.3 -> 49.2 ms, 2^24 5.60 -> 5.31 ms). Still so with FrParams::MOD_LOW_1_M1 (m = 0 - t from a
// sub.cc: ptxas split a sixth of the chains of ntt_dit_pass, 2848 -> 2984 instructions).
__constant__ u32 FR_INV_CONST[1] = {0xffffffffu};

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
    static __device__ __forceinline__ u32 inv() { return FR_INV_CONST[0]; }
    // Lazy operands (below 2r) leave no room in the top word for a reduction row's carry
    // (Field::mac_row). (With the multiplicand below r they would; the NTT's operand order
    // that this needs, twiddle as multiplicand, made ptxas split the product's chains.)
    static const bool TOP_ROOM = false;
    // mod(0) = 1, mod(1) = 2^32 - 1: the reduction rounds start without multiplications
    // (Field::mul_inline). CUZK_FR_GENERIC (a tuning variant) keeps the generic rounds.
#ifdef CUZK_FR_GENERIC
    static const bool MOD_LOW_1_M1 = false;
#else
    static const bool MOD_LOW_1_M1 = true;
#endif
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

    // Word i of 2p (2p < R for both fields, so it fits N limbs).
    __device__ __forceinline__ static u32 mod2(int i) {
        return (P::mod(i) << 1) | (i == 0 ? 0u : P::mod(i - 1) >> 31);
    }

    // The value a + top 2^(32N) (top 0 or 1) minus m if that does not borrow, else a, for a
    // value below 2m; word i of m is m(i) (p, or 2p for the lazy forms). top - borrow is
    // 0xffffffff exactly when the value is below m (with top = 1 the subtraction always
    // borrows, since value - m < m < 2^(32N)).
    template <class M>
    __device__ __forceinline__ static Field sub_if_not_below(const Field& a, u32 top, M m) {
        Field t;
        t.v[0] = ptx::sub_cc(a.v[0], m(0));
#pragma unroll
        for (int i = 1; i < N; i++) t.v[i] = ptx::subc_cc(a.v[i], m(i));
        const u32 below = ptx::subc(top, 0);
        Field r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = below ? a.v[i] : t.v[i];
        return r;
    }

    // a - b, plus m when that borrows (the modulus masked in instead of a branch).
    template <class M>
    __device__ __forceinline__ static Field sub_add_back(const Field& a, const Field& b, M m) {
        Field t;
        t.v[0] = ptx::sub_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) t.v[i] = ptx::subc_cc(a.v[i], b.v[i]);
        const u32 borrow = ptx::subc(0, 0);
        Field r;
        r.v[0] = ptx::add_cc(t.v[0], m(0) & borrow);
#pragma unroll
        for (int i = 1; i < N; i++) r.v[i] = ptx::addc_cc(t.v[i], m(i) & borrow);
        return r;
    }

    // a + b with its carry out of the top limb.
    __device__ __forceinline__ static Field add_carry(const Field& a, const Field& b, u32& top) {
        Field s;
        s.v[0] = ptx::add_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) s.v[i] = ptx::addc_cc(a.v[i], b.v[i]);
        top = ptx::addc(0, 0);
        return s;
    }

    // r = a - p if a >= p else a  (a < 2p).
    __device__ __forceinline__ static Field reduce_once(const Field& a) {
        return sub_if_not_below(a, 0, [](int i) { return P::mod(i); });
    }

    // a + b < 2p fits N limbs (2p < R), so the sum's carry is 0.
    __device__ __forceinline__ static Field add(const Field& a, const Field& b) {
        u32 top;
        return reduce_once(add_carry(a, b, top));
    }

    __device__ __forceinline__ static Field sub(const Field& a, const Field& b) {
        return sub_add_back(a, b, [](int i) { return P::mod(i); });
    }

    __device__ __forceinline__ static Field dbl(const Field& a) { return add(a, a); }

    // Lazy reduction (the NTT's butterflies, G1's point formulas): values in [0, 2p) instead of
    // [0, p), so that a product needs no final subtraction (mul_unreduced) and each butterfly
    // saves one conditional subtraction of N words. A lazy value fits N limbs; the sum of two
    // may not (4p > R for Fr), so add_lazy keeps its carry as a top word.

    // a + b in [0, 2p) for a, b < 2p.
    __device__ __forceinline__ static Field add_lazy(const Field& a, const Field& b) {
        u32 top;
        const Field s = add_carry(a, b, top);
        return sub_if_not_below(s, top, [](int i) { return mod2(i); });
    }

    // a - b in [0, 2p) for a, b < 2p.
    __device__ __forceinline__ static Field sub_lazy(const Field& a, const Field& b) {
        return sub_add_back(a, b, [](int i) { return mod2(i); });
    }

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
    // By value, not by reference: the ABI then passes both operands and the result in registers
    // instead of through the stack, and ptxas keeps the limb pairs of mul_inline fused into
    // IMAD.WIDE.U32.X (with reference parameters it split half of them into lo/hi/add triples).
    __device__ __noinline__ static Field mul_call(Field a, Field b) { return mul_inline(a, b); }

    // One carry chain: acc[0 .. N) += b * (a[s] + a[s+2] 2^64 + a[s+4] 2^128 + ...), s = 0 or 1,
    // and the chain's carry into acc[N]. Each limb's 64-bit product a[j]*b lands on the aligned
    // word pair acc[k], acc[k+1], so the lo/hi pair of one limb is a single IMAD.WIDE.U32.X in
    // SASS (ptxas fuses mad.lo.cc + madc.hi.cc on the same operands into it). acc[N] only ever
    // holds a few carries when a chain ends on it (see mul_inline), so the final addc cannot
    // overflow.
    // head: 0 = the chain as above; 1 = its first pair is lo + hi 2^32 + (cin != 0) instead of
    // a[s] b (a partial product known without a multiplication, plus a carry); 2 = no first pair
    // (a[s] b is accounted for elsewhere), the chain starts at acc[2].
    // carry_out = false: the chain's top pair cannot overflow (see mac_row), so its carry out is
    // 0 and nothing is added to acc[N]. The flag is left for the next chain to read
    // (carry_in): ptxas fuses a chain's lo/hi pairs into IMAD.WIDE.U32.X only when its final
    // carry has a reader (an unread one, and a final madc.hi without .cc, made it split the
    // whole chain into IMAD + IMAD.HI + IADD3.X).
    // carry_in: the flag holds such a 0 carry; the chain's first instruction reads it.
    // CUZK_KEEP_CARRIES (a tuning variant, for A/B runs) keeps every chain's carry.
    // L: the chain's length in limbs (N, or N/2 for the pieces of mul_wide_karatsuba).
    template <int L, class Limb>
    __device__ __forceinline__ static void mac_half_l(u32* acc, Limb limb, int s, u32 b, int head = 0,
                                                      u32 lo = 0, u32 hi = 0, u32 cin = 0, bool carry_out = true,
                                                      bool carry_in = false) {
#ifdef CUZK_KEEP_CARRIES
        carry_out = true;
        carry_in = false;
#endif
        if (head == 0) {
            acc[0] = carry_in ? ptx::madloc_cc(limb(s), b, acc[0]) : ptx::madlo_cc(limb(s), b, acc[0]);
            acc[1] = ptx::madhic_cc(limb(s), b, acc[1]);
        } else if (head == 1) {
            // carry = (cin != 0)
            if (carry_in) ptx::addc_cc(cin, 0xffffffffu);
            else ptx::add_cc(cin, 0xffffffffu);
            acc[0] = ptx::addc_cc(acc[0], lo);
            acc[1] = ptx::addc_cc(acc[1], hi);
        }
#pragma unroll
        for (int j = 2; j < L; j += 2) {
            if (head == 2 && j == 2 && !carry_in) acc[j] = ptx::madlo_cc(limb(s + j), b, acc[j]);
            else acc[j] = ptx::madloc_cc(limb(s + j), b, acc[j]);
            acc[j + 1] = ptx::madhic_cc(limb(s + j), b, acc[j + 1]);
        }
        if (carry_out) acc[L] = ptx::addc(acc[L], 0);
        else ptx::drop_carry();
    }
    template <class Limb>
    __device__ __forceinline__ static void mac_half(u32* acc, Limb limb, int s, u32 b, int head = 0,
                                                    u32 lo = 0, u32 hi = 0, u32 cin = 0, bool carry_out = true,
                                                    bool carry_in = false) {
        mac_half_l<N>(acc, limb, s, b, head, lo, hi, cin, carry_out, carry_in);
    }

    // Adds b * A * 2^(32 i) to the split accumulator (x, y) of mul_inline: the even limbs of A
    // and the odd limbs of A go to whichever of x (aligned at even absolute words) and y
    // (aligned at odd absolute words) keeps every 64-bit product on an aligned word pair.
    // head0, head1 (with lo1, hi1, cin1): mac_half's head for the even and the odd chain.
    //
    // odd_carry = false drops the odd chain's carry out of its top pair. That chain is the one
    // that carries the top limb A[N-1], and in every round it is the first chain to reach its
    // top pair: in x and in y alike the odd chains of round i end one word above anything
    // written before (the even chains of round i-1 end, with their carry, one word lower), so
    // the pair's high word is still 0 and the pair below 2^32. The first row of a round adds at
    // most (2^32 - 1)^2 + 1 to it, so it never carries out. Each further row adds at most
    // A_top 2^32 + 1 (A_top the top limb of the row's multiplicand: an operand's, or p's for the
    // reduction row), so the sum stays below 2^64 while 1 + the rows' top limbs stays below
    // 2^32 - 1. Fp (top limb 0x1a0111ea) meets that for any operands below 4p and three rows;
    // Fr (0x73eda753) for a product and its reduction when the multiplicand is below r. The
    // even chains end on words the odd chains of the round before have filled, so they keep
    // their carries.
    // The host emulation counts any carry a dropped chain end would lose (ptx::lost_carries).
    // Without the odd chain's carry the flag holds 0 afterwards, and the caller's next flag
    // instruction must read it (mac_half); carry_in says the row's first chain does.
    template <class Limb>
    __device__ __forceinline__ static void mac_row(u32* x, u32* y, int i, Limb limb, u32 b, int head0 = 0,
                                                   int head1 = 0, u32 lo1 = 0, u32 hi1 = 0, u32 cin1 = 0,
                                                   bool odd_carry = true, bool carry_in = false) {
        // a[2k] b at absolute words i+2k, i+2k+1, a[2k+1] b at i+2k+1, i+2k+2.
        u32* even = (i & 1) == 0 ? x + i : y + i - 1;
        u32* odd = (i & 1) == 0 ? y + i : x + i + 1;
        mac_half(even, limb, 0, b, head0, 0, 0, 0, true, carry_in);
        mac_half(odd, limb, 1, b, head1, lo1, hi1, cin1, odd_carry);
    }

    // a + b, or a + b + flag when the flag holds a 0 carry left by a chain (mac_half).
    __device__ __forceinline__ static u32 add_first(u32 a, u32 b, bool carry_in) {
#ifdef CUZK_KEEP_CARRIES
        carry_in = false;
#endif
        return carry_in ? ptx::addc_cc(a, b) : ptx::add_cc(a, b);
    }

    // The generic reduction row of round i (mul_inline, redc_wide, mul_sub_inline): m clears
    // word i of T (m p[0] goes to x[i] for even i, to y[i-1] for odd i); afterwards that word's
    // sum x[i] + y[i-1] + c is 0, 2^32 or 2^33, and c becomes what it passes upwards.
    // odd_carry, carry_in: as mac_row's; the row's own dropped carry is read here.
    __device__ __forceinline__ static void reduce_row(u32* x, u32* y, int i, u32& c, bool odd_carry = true,
                                                      bool carry_in = false) {
        const u32 yl = i == 0 ? 0u : y[i - 1];
        const u32 m = (x[i] + yl + c) * P::inv();
        mac_row(x, y, i, [](int j) { return P::mod(j); }, m, 0, 0, 0, 0, 0, odd_carry, carry_in);
        u32 t = add_first(x[i], i == 0 ? 0u : y[i - 1], !odd_carry);
        const u32 h = ptx::addc(0, 0);
        t = ptx::add_cc(t, c);
        c = ptx::addc(h, 0);
    }

    // T/2^(32N) after the N rounds, not reduced: words N .. 2N-1 of x, plus y shifted by one
    // word, plus c at word N.
    // carry_in: the flag holds a 0 carry to read (mac_half).
    __device__ __forceinline__ static Field split_high(const u32* x, const u32* y, u32 c, bool carry_in = false) {
        Field r;
        r.v[0] = add_first(x[N], y[N - 1], carry_in);
#pragma unroll
        for (int k = 1; k < N; k++) r.v[k] = ptx::addc_cc(x[N + k], y[N - 1 + k]);
        r.v[0] = ptx::add_cc(r.v[0], c);
#pragma unroll
        for (int k = 1; k < N; k++) r.v[k] = ptx::addc_cc(r.v[k], 0);
        return r;
    }

    // Montgomery product a*b/R mod p, coarsely integrated operand scanning with the partial
    // products split by limb parity. The running value T is kept as two accumulators:
    //   T = sum_k x[k] 2^(32k) + sum_k y[k] 2^(32(k+1)) + c 2^(32i)
    // Round i adds b[i]*a and then m*p with m = (word i of T) * -p^-1, which clears word i;
    // c carries what words < i+1 passed upwards (0..2). Every 64-bit partial product falls on
    // an aligned pair of x or of y, so the whole product is 4N IMAD.WIDE.U32.X chains of N/2
    // instructions plus a few adds per round, instead of separate lo/hi multiplies with an
    // add-with-carry each (about a third of the instructions of the row-by-row version).
    // Bounds: x <= T < 2^(64N) and y <= T/2^32, and a word just above a chain has only received
    // carries (at most four) before a later chain covers it, so no top carry is lost.
    // Inputs a, b < p (any a b < p R works), output < p.
    //
    // P::MOD_LOW_1_M1 (Fr: p[0] = 1, p[1] = 2^32 - 1, -p^-1 = 2^32 - 1): the two low partial
    // products of m p need no multiplication. With W = x[i] + y[i-1] + c (word i before the
    // reduction, < 3 2^32) and t = W mod 2^32, m = -t mod 2^32, so
    //   m p[0] = m: word i becomes W + m = (W - t) + 2^32 (t != 0), i.e. word i is cleared and
    //     carries floor(W / 2^32) (into c) plus (t != 0) (into the odd chain's head) upwards;
    //   m p[1] 2^32 = (m 2^32 - m) 2^32: word i+1 gets -m mod 2^32 = t, word i+2 gets
    //     m - (m != 0) = m - (t != 0) (the borrow of 0 - t).
    // So the even chain of m p starts at p[2] and the odd one adds t + (m - (t != 0)) 2^32 +
    // (t != 0) at its head: integer adds on the ALU pipe instead of the 2 multiplies per round
    // that ptxas made IMAD.HI + IADD3. m itself is still t * -p^-1 with the factor from
    // constant memory (see FR_INV_CONST).
    // The flags: (t != 0) is taken once as a borrow (sub.cc 0 - t, read by subc) and once as a
    // carry (add.cc t + 0xffffffff, read by addc.cc): ptxas reads a flag of the other family
    // inverted (see CUZK_HOST_EMU above), so each consumer gets a flag of its own family.
    __device__ __forceinline__ static Field mul_inline(const Field& a, const Field& b) {
        // T/2^(32N) < 2p.
        return reduce_once(mul_unreduced(a, b));
    }

    // mul_inline without its final subtraction: a b / R mod p in [0, 2p), for a b < p R (for
    // instance a < 2p and b < p, since 2p < R). The rounds are mul_inline's: T = a b + M p stays
    // below p R + p R < R^2, so its accumulator bounds hold whatever the operands' order.
    __device__ __forceinline__ static Field mul_unreduced(const Field& a, const Field& b) {
        // The product row's odd chain never needs its carry (the first row on its top pair, see
        // mac_row); the reduction row's only where the top limbs leave room (P::TOP_ROOM: Fp).
        const bool red_carry = !P::TOP_ROOM;
        u32 x[2 * N + 2], y[2 * N + 2];
#pragma unroll
        for (int k = 0; k < 2 * N + 2; k++) { x[k] = 0; y[k] = 0; }
        u32 c = 0;
#pragma unroll
        for (int i = 0; i < N; i++) mul_round(x, y, c, i, a, b.v[i], red_carry);
        return split_high(x, y, c, P::MOD_LOW_1_M1 && !red_carry);
    }

    // Round i of mul_unreduced: b_i a, then the reduction row that clears word i.
    __device__ __forceinline__ static void mul_round(u32* x, u32* y, u32& c, int i, const Field& a, u32 bi,
                                                     bool red_carry) {
        // Fr rounds end with the reduction row's odd chain, whose dropped carry the next
        // round's first chain reads; the generic rounds read theirs in reduce_row.
        const bool pending = P::MOD_LOW_1_M1 && i > 0 && !red_carry;
        mac_row(x, y, i, [&](int j) { return a.v[j]; }, bi, 0, 0, 0, 0, 0, false, pending);
        const u32 yl = i == 0 ? 0u : y[i - 1];
        if (P::MOD_LOW_1_M1) {
            // t = W mod 2^32 and c = floor(W / 2^32) (word i is not touched again).
            u32 t = add_first(x[i], yl, true);
            const u32 h = ptx::addc(0, 0);
            t = ptx::add_cc(t, c);
            c = ptx::addc(h, 0);
            const u32 m = t * P::inv();       // = -t
            ptx::sub_cc(0, t);                // borrow = (t != 0)
            const u32 hi1 = ptx::subc(m, 0);  // m - (t != 0)
            mac_row(x, y, i, [](int j) { return P::mod(j); }, m, 2, 1, t, hi1, t, red_carry);
        } else {
            reduce_row(x, y, i, c, red_carry, true);
        }
    }

    __device__ __forceinline__ static Field sqr(const Field& a) { return mul(a, a); }

    // t[0 .. 2N) = a^2 exactly (any a < 2^(32N)): each cross product a_i a_j (i < j) once, the
    // sum doubled, then the squares a_i^2 added: N(N-1)/2 + N wide multiplies (78 for Fp)
    // against mul_wide's N^2 (144), paid in 2 (2N - 1) adds on the ALU pipe.
    // Row i's cross products land on absolute words i+j, i+j+1: those with j - i even on x
    // (aligned at even words), those with j - i odd on y (y[k] is word k+1), as in mul_wide.
    // Each row's two chains end one word higher than the row before's (x: N+i or N+i+1, y
    // alike), so the word a chain's carry goes to has received only carries: none is lost.
    template <int I>
    __device__ __forceinline__ static void sqr_rows(u32* x, u32* y, const Field& a) {
        if constexpr (I < N - 1) {
            constexpr int odd = (N - I) / 2, even = (N - I - 1) / 2;
            const auto limb = [&](int j) { return a.v[j]; };
            // j = I+1, I+3, ...: words 2I+1 on, y[2I] on.
            mac_half_l<2 * odd>(y + 2 * I, limb, I + 1, a.v[I]);
            // j = I+2, I+4, ...: words 2I+2 on, x[2I+2] on.
            if constexpr (even > 0) mac_half_l<2 * even>(x + 2 * I + 2, limb, I + 2, a.v[I]);
            sqr_rows<I + 1>(x, y, a);
        }
    }
    __device__ __forceinline__ static void sqr_wide(const Field& a, u32* t) {
        u32 x[2 * N + 2], y[2 * N + 2];
#pragma unroll
        for (int k = 0; k < 2 * N + 2; k++) { x[k] = 0; y[k] = 0; }
        sqr_rows<0>(x, y, a);
        // t = x + y 2^32 (the cross sum, below a^2 / 2), then t + t.
        t[0] = x[0];
        t[1] = ptx::add_cc(x[1], y[0]);
#pragma unroll
        for (int k = 2; k < 2 * N - 1; k++) t[k] = ptx::addc_cc(x[k], y[k - 1]);
        t[2 * N - 1] = ptx::addc(x[2 * N - 1], y[2 * N - 2]);
        t[0] = ptx::add_cc(t[0], t[0]);
#pragma unroll
        for (int k = 1; k < 2 * N - 1; k++) t[k] = ptx::addc_cc(t[k], t[k]);
        t[2 * N - 1] = ptx::addc(t[2 * N - 1], t[2 * N - 1]);
        // + a_i^2 on words 2i, 2i+1: one chain, its final carry 0 (the sum is a^2 < 2^(64N)).
        // Its flag is read once more (`top`, 0) so that ptxas keeps the pairs fused (see
        // mac_half); the emulation counts a non-zero one as a lost carry.
        t[0] = ptx::madlo_cc(a.v[0], a.v[0], t[0]);
        t[1] = ptx::madhic_cc(a.v[0], a.v[0], t[1]);
#pragma unroll
        for (int i = 1; i < N; i++) {
            t[2 * i] = ptx::madloc_cc(a.v[i], a.v[i], t[2 * i]);
            t[2 * i + 1] = ptx::madhic_cc(a.v[i], a.v[i], t[2 * i + 1]);
        }
        const u32 top = ptx::addc(0, 0);
#ifdef CUZK_HOST_EMU
        if (top) ptx::lost_carries()++;
#endif
        (void)top;
    }

    // a^2 / R mod p in [0, 2p) for a < 2p with 4p^2 < p R (Fp: the lazy G1 formulas, as
    // mul_lazy): sqr_wide, then the reduction of redc_wide_unreduced. CUZK_FP_SQR_MUL (a
    // tuning variant, for A/B runs) makes it mul_lazy(a, a).
    __device__ __noinline__ static Field sqr_lazy_call(Field a) {
        u32 t[2 * N];
        sqr_wide(a, t);
        return redc_wide_unreduced(t);
    }
    __device__ __forceinline__ static Field sqr_lazy(const Field& a) {
#ifdef CUZK_FP_SQR_MUL
        return mul_lazy(a, a);
#else
        if (P::INLINE_MUL) {
            u32 t[2 * N];
            sqr_wide(a, t);
            return redc_wide_unreduced(t);
        }
        return sqr_lazy_call(a);
#endif
    }

    // Lazy reduction (Fp2::mul): a product without reduction and the Montgomery reduction of a
    // double-width value, in the parity-split form of mul_inline (every partial product one
    // IMAD.WIDE.U32.X, N^2 of them for each).

    // t[0 .. 2N) = a b exactly (any a, b < 2^(32N)). The split accumulators of mul_inline hold
    // x + y 2^32 = a b < 2^(64N), so x[2N] and y[2N-1] stay 0 and the final carry is 0.
    __device__ __forceinline__ static void mul_wide(const Field& a, const Field& b, u32* t) {
        u32 x[2 * N + 2], y[2 * N + 2];
#pragma unroll
        for (int k = 0; k < 2 * N + 2; k++) { x[k] = 0; y[k] = 0; }
#pragma unroll
        // (Dropping the odd chains' carries here, as mul_unreduced does, made G2 2% slower.)
        for (int i = 0; i < N; i++) mac_row(x, y, i, [&](int j) { return a.v[j]; }, b.v[i]);
        t[0] = x[0];
        t[1] = ptx::add_cc(x[1], y[0]);
#pragma unroll
        for (int k = 2; k < 2 * N - 1; k++) t[k] = ptx::addc_cc(x[k], y[k - 1]);
        t[2 * N - 1] = ptx::addc(x[2 * N - 1], y[2 * N - 2]);
    }

    // t[0 .. 2H) = a[0 .. H) b[0 .. H) exactly (H even): mul_wide's rows on H-limb operands.
    template <int H>
    __device__ __forceinline__ static void mul_wide_h(const u32* a, const u32* b, u32* t) {
        u32 x[2 * H + 2], y[2 * H + 2];
#pragma unroll
        for (int k = 0; k < 2 * H + 2; k++) { x[k] = 0; y[k] = 0; }
#pragma unroll
        for (int i = 0; i < H; i++) {
            u32* even = (i & 1) == 0 ? x + i : y + i - 1;
            u32* odd = (i & 1) == 0 ? y + i : x + i + 1;
            mac_half_l<H>(even, [&](int j) { return a[j]; }, 0, b[i]);
            mac_half_l<H>(odd, [&](int j) { return a[j]; }, 1, b[i]);
        }
        t[0] = x[0];
        t[1] = ptx::add_cc(x[1], y[0]);
#pragma unroll
        for (int k = 2; k < 2 * H - 1; k++) t[k] = ptx::addc_cc(x[k], y[k - 1]);
        t[2 * H - 1] = ptx::addc(x[2 * H - 1], y[2 * H - 2]);
    }

    // t[0 .. 2N) = a b exactly (any a, b < 2^(32N)), as mul_wide, with one level of Karatsuba:
    // with H = N/2 and a = a0 + a1 2^(32H) (b alike),
    //   a b = z0 + (s - z0 - z2) 2^(32H) + z2 2^(64H),  z0 = a0 b0, z2 = a1 b1,
    //   s = (a0 + a1)(b0 + b1),
    // three H-limb products: 3/4 of mul_wide's wide multiplies (the pipe that bounds the MSM's
    // bucket sums), paid in adds on the ALU pipe. The sums a0 + a1 and b0 + b1 are H limbs and
    // a carry bit (ca, cb), so s = s' + (ca sb' + cb sa') 2^(32H) + ca cb 2^(64H) with s' the
    // product of the H-limb parts: H + 1 limbs above word H, the top word m_top. The middle
    // term a0 b1 + a1 b0 is never negative, and neither is s - z0 on the way.
    __device__ __forceinline__ static void mul_wide_karatsuba(const Field& a, const Field& b, u32* t) {
        constexpr int H = N / 2;
        u32 z0[2 * H], z2[2 * H], m[2 * H], sa[H], sb[H];
        mul_wide_h<H>(a.v, b.v, z0);
        mul_wide_h<H>(a.v + H, b.v + H, z2);
        sa[0] = ptx::add_cc(a.v[0], a.v[H]);
#pragma unroll
        for (int k = 1; k < H; k++) sa[k] = ptx::addc_cc(a.v[k], a.v[H + k]);
        const u32 ca = ptx::addc(0, 0);
        sb[0] = ptx::add_cc(b.v[0], b.v[H]);
#pragma unroll
        for (int k = 1; k < H; k++) sb[k] = ptx::addc_cc(b.v[k], b.v[H + k]);
        const u32 cb = ptx::addc(0, 0);
        mul_wide_h<H>(sa, sb, m);
        // The carry bits' terms, masked in before the chains (nothing but chain instructions
        // between a chain's flag instructions).
        u32 xa[H], xb[H];
#pragma unroll
        for (int k = 0; k < H; k++) { xa[k] = sb[k] & (0u - ca); xb[k] = sa[k] & (0u - cb); }
        m[H] = ptx::add_cc(m[H], xa[0]);
#pragma unroll
        for (int k = 1; k < H; k++) m[H + k] = ptx::addc_cc(m[H + k], xa[k]);
        u32 top = ptx::addc(ca & cb, 0);
        m[H] = ptx::add_cc(m[H], xb[0]);
#pragma unroll
        for (int k = 1; k < H; k++) m[H + k] = ptx::addc_cc(m[H + k], xb[k]);
        top = ptx::addc(top, 0);
        // m, top -= z0, z2.
        m[0] = ptx::sub_cc(m[0], z0[0]);
#pragma unroll
        for (int k = 1; k < 2 * H; k++) m[k] = ptx::subc_cc(m[k], z0[k]);
        top = ptx::subc(top, 0);
        m[0] = ptx::sub_cc(m[0], z2[0]);
#pragma unroll
        for (int k = 1; k < 2 * H; k++) m[k] = ptx::subc_cc(m[k], z2[k]);
        top = ptx::subc(top, 0);
        // t = z0 + m 2^(32H) + z2 2^(64H); z0 and z2 do not overlap.
#pragma unroll
        for (int k = 0; k < H; k++) t[k] = z0[k];
        t[H] = ptx::add_cc(z0[H], m[0]);
#pragma unroll
        for (int k = 1; k < H; k++) t[H + k] = ptx::addc_cc(z0[H + k], m[k]);
#pragma unroll
        for (int k = 0; k < H; k++) t[2 * H + k] = ptx::addc_cc(z2[k], m[H + k]);
        t[3 * H] = ptx::addc_cc(z2[H], top);
#pragma unroll
        for (int k = 3 * H + 1; k < 4 * H - 1; k++) t[k] = ptx::addc_cc(z2[k - 2 * H], 0);
        t[4 * H - 1] = ptx::addc(z2[2 * H - 1], 0);
    }

    // The double-width product of Fp2's products: mul_wide's rows, or Karatsuba's with
    // CUZK_FP_KARATSUBA (a tuning variant: on the H200 it made G2 8-9% slower, more ALU and
    // register pressure for 12% fewer wide multiplies; docs/gpu-notes.md, v19).
    __device__ __forceinline__ static void mul_wide_fast(const Field& a, const Field& b, u32* t) {
#ifdef CUZK_FP_KARATSUBA
        mul_wide_karatsuba(a, b, t);
#else
        mul_wide(a, b, t);
#endif
    }

    // t / R mod p for t[0 .. 2N) < p R, output < p. With t = lo + hi R (lo, hi < R) the rounds of
    // mul_inline's reduction clear lo: (lo + M p) / R < 1 + p, then hi is added at the end
    // (t / R + M p / R < 2p, so one reduce_once). hi is not loaded into the accumulators: the
    // chains end with a carry into the word above them, which must hold only carries.
    __device__ __forceinline__ static Field redc_wide(const u32* t) { return reduce_once(redc_wide_unreduced(t)); }
    // redc_wide without its final subtraction: t / R mod p in [0, 2p) for t < p R (the lo part
    // leaves below p + 1, and hi = t / R < p).
    __device__ __forceinline__ static Field redc_wide_unreduced(const u32* t) {
        u32 x[2 * N + 2], y[2 * N + 2];
#pragma unroll
        for (int k = 0; k < 2 * N + 2; k++) { x[k] = k < N ? t[k] : 0; y[k] = 0; }
        u32 c = 0;
#pragma unroll
        for (int i = 0; i < N; i++) reduce_row(x, y, i, c);
        Field r = split_high(x, y, c);
        r.v[0] = ptx::add_cc(r.v[0], t[N]);
#pragma unroll
        for (int k = 1; k < N; k++) r.v[k] = ptx::addc_cc(r.v[k], t[N + k]);
        return r;
    }

    // (a b - c d) / R mod p with one Montgomery reduction instead of two (the Y coordinate of
    // the point formulas, Y3 = R (Q - X3) - Y PPP), as (a b + c (p - d)) / R: mul_inline's
    // rounds with two product rows, b[i] a and (p - d)[i] c, before the reduction row, on the
    // same split accumulators (no double-width arrays, no subtraction of products).
    // Bounds (p < 2^381, R = 2^384, operands < p): p - d in (0, p], so S = a b + c (p - d)
    // < 2 p^2, and S = a b - c d mod p. The running value T = S + M p (M < R the sum of the
    // round factors m 2^(32 i)) stays < 2 p^2 + p R < 2^768 = 2^(64N), so the accumulator bounds
    // of mul_inline hold; a word above a chain receives at most six carries (three chains per
    // parity) before a later chain covers it. T / R < 2 p^2 / R + p < 2p because 2p < R, so one
    // reduce_once: output < p. For Fr (p < 2^255, R = 2^256) 2p < R holds as well. p - d is a
    // sub chain of its own (its final flag is not read); the reduction rounds are the generic
    // ones of mul_inline (word i is cleared by m p[0], its carries go to cw).
    //
    // LAZY (mul_sub_lazy): operands in [0, 2p), 2p - d instead of p - d, no final subtraction.
    // Then S < 8 p^2 and T < 8 p^2 + p R, which for Fp (p < 0.102 R) is < 0.19 R^2, and
    // T / R < 8 p^2 / R + p < 1.82 p: output in [0, 2p). Not valid for Fr (8 r^2 > R^2).
    template <bool LAZY = false>
    __device__ __forceinline__ static Field mul_sub_inline(const Field& a, const Field& b, const Field& c,
                                                           const Field& d) {
        Field dn;
        dn.v[0] = ptx::sub_cc(LAZY ? mod2(0) : P::mod(0), d.v[0]);
#pragma unroll
        for (int k = 1; k < N; k++) dn.v[k] = ptx::subc_cc(LAZY ? mod2(k) : P::mod(k), d.v[k]);
        u32 x[2 * N + 2], y[2 * N + 2];
#pragma unroll
        for (int k = 0; k < 2 * N + 2; k++) { x[k] = 0; y[k] = 0; }
        u32 cw = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            mac_row(x, y, i, [&](int j) { return a.v[j]; }, b.v[i], 0, 0, 0, 0, 0, false);
            mac_row(x, y, i, [&](int j) { return c.v[j]; }, dn.v[i], 0, 0, 0, 0, 0, !P::TOP_ROOM, true);
            reduce_row(x, y, i, cw, !P::TOP_ROOM, P::TOP_ROOM);
        }
        const Field r = split_high(x, y, cw);
        return LAZY ? r : reduce_once(r);
    }
    // Out of line and by value, as mul_call.
    __device__ __noinline__ static Field mul_sub_call(Field a, Field b, Field c, Field d) {
        return mul_sub_inline(a, b, c, d);
    }
    __device__ __forceinline__ static Field mul_sub(const Field& a, const Field& b, const Field& c, const Field& d) {
        if (P::INLINE_MUL) return mul_sub_inline(a, b, c, d);
        return mul_sub_call(a, b, c, d);
    }

    // The lazy forms of the point formulas (curve.cuh, G1): operands and results in [0, 2p).
    // a b < 4 p^2 < p R, so mul_unreduced's output is below 4 p^2 / R + p < 2p, and so is
    // redc_wide_unreduced's. Out of line (Fp only: Fr's products are inline) the product is
    // mul_unreduced's interleaved rounds; CUZK_FP_KARATSUBA (a tuning variant) makes it
    // Karatsuba's product and then the reduction (on the H200 no faster for G1: 2.7% fewer
    // FMA-pipe cycles in SASS, 30% more instructions; docs/gpu-notes.md, v19).
    __device__ __forceinline__ static Field mul_lazy_karatsuba(const Field& a, const Field& b) {
        u32 t[2 * N];
        mul_wide_karatsuba(a, b, t);
        return redc_wide_unreduced(t);
    }
    // (a b - c d) / R as (a b + c (2p - d)) / R, two Karatsuba products and one reduction: for
    // operands below 2p, S < 8 p^2 < p R (Fp: 8p < R), so the output is in [0, 2p) as
    // mul_sub_inline<true>'s.
    __device__ __forceinline__ static Field mul_sub_lazy_karatsuba(const Field& a, const Field& b, const Field& c,
                                                                   const Field& d) {
        Field dn;
        dn.v[0] = ptx::sub_cc(mod2(0), d.v[0]);
#pragma unroll
        for (int k = 1; k < N; k++) dn.v[k] = ptx::subc_cc(mod2(k), d.v[k]);
        u32 t[2 * N], u[2 * N];
        mul_wide_karatsuba(a, b, t);
        mul_wide_karatsuba(c, dn, u);
        t[0] = ptx::add_cc(t[0], u[0]);
#pragma unroll
        for (int k = 1; k < 2 * N - 1; k++) t[k] = ptx::addc_cc(t[k], u[k]);
        t[2 * N - 1] = ptx::addc(t[2 * N - 1], u[2 * N - 1]);
        return redc_wide_unreduced(t);
    }
    __device__ __noinline__ static Field mul_lazy_call(Field a, Field b) {
#ifdef CUZK_FP_KARATSUBA
        return mul_lazy_karatsuba(a, b);
#else
        return mul_unreduced(a, b);
#endif
    }
    __device__ __forceinline__ static Field mul_lazy(const Field& a, const Field& b) {
        if (P::INLINE_MUL) return mul_unreduced(a, b);
        return mul_lazy_call(a, b);
    }
    __device__ __noinline__ static Field mul_sub_lazy_call(Field a, Field b, Field c, Field d) {
#ifdef CUZK_FP_KARATSUBA
        return mul_sub_lazy_karatsuba(a, b, c, d);
#else
        return mul_sub_inline<true>(a, b, c, d);
#endif
    }
    __device__ __forceinline__ static Field mul_sub_lazy(const Field& a, const Field& b, const Field& c,
                                                         const Field& d) {
        if (P::INLINE_MUL) return mul_sub_inline<true>(a, b, c, d);
        return mul_sub_lazy_call(a, b, c, d);
    }
    // a = 0 mod p for a lazy a (0 or p).
    __device__ __forceinline__ static bool is_zero_lazy(const Field& a) {
        u32 z = 0, q = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            z |= a.v[i];
            q |= a.v[i] ^ P::mod(i);
        }
        return z == 0 || q == 0;
    }

    // Leaves Montgomery form: a/R mod p (the canonical integer).
    __device__ __forceinline__ static Field from_mont(const Field& a) {
        u32 t[2 * N];
#pragma unroll
        for (int i = 0; i < N; i++) { t[i] = a.v[i]; t[N + i] = 0; }
        return redc_wide(t);
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

    // 1/a (Montgomery form in and out) as a^(p-2) by square-and-multiply, 0 for 0. Hundreds of
    // products: for the few inversions a batch shares (msm_affine.cu), not for one per value.
    __device__ static Field inv(const Field& a) {
        u32 e[N];
        u32 borrow = 2;
#pragma unroll
        for (int i = 0; i < N; i++) {
            e[i] = P::mod(i) - borrow;
            borrow = P::mod(i) < borrow ? 1u : 0u;
        }
        Field r = one();
#pragma unroll 1
        for (int i = N - 1; i >= 0; i--) {
#pragma unroll 1
            for (int bit = 31; bit >= 0; bit--) {
                r = sqr(r);
                if ((e[i] >> bit) & 1u) r = mul(r, a);
            }
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
