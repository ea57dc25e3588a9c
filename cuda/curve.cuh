// Short Weierstrass points with a = 0 (G1 over Fp, G2 over Fp2) in XYZZ coordinates:
// x = X/ZZ, y = Y/ZZZ with ZZ^3 = ZZZ^2. XYZZ makes a mixed addition 8M+2S and needs no
// inversion; G1's squares go through Fp::sqr_lazy (about 3/4 of a product's multiplies). The
// point at infinity is ZZ = 0. Affine points use blst's convention: infinity is
// x = y = 0 (never on either curve).
#ifndef CUZK_CURVE_CUH
#define CUZK_CURVE_CUH
#include "field.cuh"
#include "fp2.cuh"
#include "field_f64.cuh"

template <class F>
struct Affine {
    F x, y;
    __device__ __forceinline__ bool is_inf() const { return x.is_zero() && y.is_zero(); }
};

template <class F>
__device__ __forceinline__ Affine<F> load_affine(const Affine<F>* p) {
    const F* q = reinterpret_cast<const F*>(p);
    Affine<F> r; r.x = load_field(q); r.y = load_field(q + 1); return r;
}

// The arithmetic of the point formulas. G1's coordinates are lazily reduced, in [0, 2p) (Fp has
// room: 8p < R, see Field::mul_sub_inline): no product ends with a conditional subtraction, and
// zero tests accept p as well as 0. G2's (Fp2) are canonical. Values leave lazy form only in
// to_jacobian. CUZK_MSM_EAGER (a tuning variant, for A/B runs) makes G1's canonical too.
// mul_f64 is a second product for the formulas to spread independent products over two pipes:
// with CUZK_MSM_DFMA (a tuning variant) G1's runs on the FP64 units (FpF64, field_f64.cuh)
// while mul runs on the integer multiply-add pipe; otherwise, and always for G2, it is mul.
template <class F>
struct CurveOps {
    __device__ __forceinline__ static F mul(const F& a, const F& b) { return F::mul(a, b); }
    __device__ __forceinline__ static F mul_f64(const F& a, const F& b) { return F::mul(a, b); }
    __device__ __forceinline__ static F sqr(const F& a) { return F::sqr(a); }
    __device__ __forceinline__ static F sqr_f64(const F& a) { return F::sqr(a); }
    __device__ __forceinline__ static F mul_sub(const F& a, const F& b, const F& c, const F& d) {
        return F::mul_sub(a, b, c, d);
    }
    __device__ __forceinline__ static F add(const F& a, const F& b) { return F::add(a, b); }
    __device__ __forceinline__ static F sub(const F& a, const F& b) { return F::sub(a, b); }
    __device__ __forceinline__ static bool is_zero(const F& a) { return a.is_zero(); }
    __device__ __forceinline__ static F canonical(const F& a) { return a; }
};
#ifndef CUZK_MSM_EAGER
template <>
struct CurveOps<Fp> {
    __device__ __forceinline__ static Fp mul(const Fp& a, const Fp& b) { return Fp::mul_lazy(a, b); }
    // A square's own product: the cross products once (Field::sqr_wide).
    __device__ __forceinline__ static Fp sqr(const Fp& a) { return Fp::sqr_lazy(a); }
#ifdef CUZK_MSM_DFMA
    __device__ __forceinline__ static Fp mul_f64(const Fp& a, const Fp& b) { return FpF64::mul_lazy(a, b); }
    __device__ __forceinline__ static Fp sqr_f64(const Fp& a) { return FpF64::mul_lazy(a, a); }
#else
    __device__ __forceinline__ static Fp mul_f64(const Fp& a, const Fp& b) { return Fp::mul_lazy(a, b); }
    __device__ __forceinline__ static Fp sqr_f64(const Fp& a) { return Fp::sqr_lazy(a); }
#endif
    __device__ __forceinline__ static Fp mul_sub(const Fp& a, const Fp& b, const Fp& c, const Fp& d) {
        return Fp::mul_sub_lazy(a, b, c, d);
    }
    __device__ __forceinline__ static Fp add(const Fp& a, const Fp& b) { return Fp::add_lazy(a, b); }
    __device__ __forceinline__ static Fp sub(const Fp& a, const Fp& b) { return Fp::sub_lazy(a, b); }
    __device__ __forceinline__ static bool is_zero(const Fp& a) { return Fp::is_zero_lazy(a); }
    __device__ __forceinline__ static Fp canonical(const Fp& a) { return Fp::reduce_once(a); }
};
#endif

template <class F>
struct Xyzz {
    F X, Y, ZZ, ZZZ;

    typedef CurveOps<F> O;

    __device__ __forceinline__ static Xyzz inf() { Xyzz r; r.X = F::one(); r.Y = F::one(); r.ZZ = F::zero(); r.ZZZ = F::zero(); return r; }
    // ZZ is exactly 0 only for inf(): a product is 0 mod p only when a factor is, and a ZZ of
    // a finite point is a product of non-zero values.
    __device__ __forceinline__ bool is_inf() const { return ZZ.is_zero(); }
    __device__ __forceinline__ static Xyzz from_affine(const Affine<F>& a) {
        if (a.is_inf()) return inf();
        Xyzz r; r.X = a.x; r.Y = a.y; r.ZZ = F::one(); r.ZZZ = F::one(); return r;
    }

    // 2P (dbl-2008-s-1 with a = 0).
    __device__ __noinline__ static Xyzz dbl(const Xyzz& p) {
        if (p.is_inf()) return p;
        F U = O::add(p.Y, p.Y);
        F V = O::sqr(U);
        F W = O::mul(U, V);
        F S = O::mul(p.X, V);
        F X2 = O::sqr(p.X);
        F M = O::add(O::add(X2, X2), X2);
        Xyzz r;
        r.X = O::sub(O::sub(O::sqr(M), S), S);
        r.Y = O::mul_sub(M, O::sub(S, r.X), W, p.Y);
        r.ZZ = O::mul(V, p.ZZ);
        r.ZZZ = O::mul(W, p.ZZZ);
        return r;
    }

    // P + Q for an affine Q (madd-2008-s); handles infinity, Q = P and Q = -P. Of each set of
    // independent products (U2 S2; PP RR; PPP Q ZZ; ZZZ and the Y product) about half go to
    // mul_f64: S2, RR, Q, ZZZ.
    __device__ __noinline__ static Xyzz madd(const Xyzz& p, const Affine<F>& q) {
        if (q.is_inf()) return p;
        if (p.is_inf()) return from_affine(q);
        F U2 = O::mul(q.x, p.ZZ);
        F S2 = O::mul_f64(q.y, p.ZZZ);
        F P = O::sub(U2, p.X);
        F R = O::sub(S2, p.Y);
        if (O::is_zero(P)) {
            if (O::is_zero(R)) return dbl(p);
            return inf();
        }
        F PP = O::sqr(P);
        F PPP = O::mul(P, PP);
        F Q = O::mul_f64(p.X, PP);
        Xyzz r;
        r.X = O::sub(O::sub(O::sub(O::sqr_f64(R), PPP), Q), Q);
        r.Y = O::mul_sub(R, O::sub(Q, r.X), p.Y, PPP);
        r.ZZ = O::mul(p.ZZ, PP);
        r.ZZZ = O::mul_f64(p.ZZZ, PPP);
        return r;
    }

    // P + Q, both XYZZ (add-2008-s); handles infinity, Q = P and Q = -P.
    __device__ __noinline__ static Xyzz add(const Xyzz& p, const Xyzz& q) {
        if (q.is_inf()) return p;
        if (p.is_inf()) return q;
        F U1 = O::mul(p.X, q.ZZ);
        F U2 = O::mul(q.X, p.ZZ);
        F S1 = O::mul(p.Y, q.ZZZ);
        F S2 = O::mul(q.Y, p.ZZZ);
        F P = O::sub(U2, U1);
        F R = O::sub(S2, S1);
        if (O::is_zero(P)) {
            if (O::is_zero(R)) return dbl(p);
            return inf();
        }
        F PP = O::sqr(P);
        F PPP = O::mul(P, PP);
        F Q = O::mul(U1, PP);
        Xyzz r;
        r.X = O::sub(O::sub(O::sub(O::sqr(R), PPP), Q), Q);
        r.Y = O::mul_sub(R, O::sub(Q, r.X), S1, PPP);
        r.ZZ = O::mul(O::mul(p.ZZ, q.ZZ), PP);
        r.ZZZ = O::mul(O::mul(p.ZZZ, q.ZZZ), PPP);
        return r;
    }

    // Jacobian (X', Y', Z') with Z' = ZZ*ZZZ, X' = X*ZZ*ZZZ^2, Y' = Y*ZZ^3*ZZZ^2: the same point
    // without an inversion (blst's projective form is Jacobian; Z' = 0 is infinity there too).
    // Canonical output.
    __device__ void to_jacobian(F* out) const {
        F z = O::mul(ZZ, ZZZ);
        F zzz2 = O::mul(ZZZ, ZZZ);
        F zz3 = O::mul(O::mul(ZZ, ZZ), ZZ);
        out[0] = O::canonical(O::mul(O::mul(X, ZZ), zzz2));
        out[1] = O::canonical(O::mul(O::mul(Y, zz3), zzz2));
        out[2] = O::canonical(z);
    }
};

template <class F>
__device__ __forceinline__ Xyzz<F> load_xyzz(const Xyzz<F>* p) {
    const F* q = reinterpret_cast<const F*>(p);
    Xyzz<F> r; r.X = load_field(q); r.Y = load_field(q + 1); r.ZZ = load_field(q + 2); r.ZZZ = load_field(q + 3); return r;
}
template <class F>
__device__ __forceinline__ void store_xyzz(Xyzz<F>* p, const Xyzz<F>& a) {
    F* q = reinterpret_cast<F*>(p);
    store_field(q, a.X); store_field(q + 1, a.Y); store_field(q + 2, a.ZZ); store_field(q + 3, a.ZZZ);
}

typedef Affine<Fp> G1Affine;
typedef Affine<Fp2> G2Affine;
typedef Xyzz<Fp> G1Xyzz;
typedef Xyzz<Fp2> G2Xyzz;
#endif  // CUZK_CURVE_CUH
