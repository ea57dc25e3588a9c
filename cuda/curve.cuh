// Short Weierstrass points with a = 0 (G1 over Fp, G2 over Fp2) in XYZZ coordinates:
// x = X/ZZ, y = Y/ZZZ with ZZ^3 = ZZZ^2. XYZZ makes a mixed addition 8M+2S and needs no
// inversion; the point at infinity is ZZ = 0. Affine points use blst's convention: infinity is
// x = y = 0 (never on either curve).
#ifndef CUZK_CURVE_CUH
#define CUZK_CURVE_CUH
#include "field.cuh"
#include "fp2.cuh"

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

template <class F>
struct Xyzz {
    F X, Y, ZZ, ZZZ;

    __device__ __forceinline__ static Xyzz inf() { Xyzz r; r.X = F::one(); r.Y = F::one(); r.ZZ = F::zero(); r.ZZZ = F::zero(); return r; }
    __device__ __forceinline__ bool is_inf() const { return ZZ.is_zero(); }
    __device__ __forceinline__ static Xyzz from_affine(const Affine<F>& a) {
        if (a.is_inf()) return inf();
        Xyzz r; r.X = a.x; r.Y = a.y; r.ZZ = F::one(); r.ZZZ = F::one(); return r;
    }
    __device__ __forceinline__ Xyzz neg() const { Xyzz r = *this; r.Y = F::neg(Y); return r; }

    // 2P (dbl-2008-s-1 with a = 0).
    __device__ __noinline__ static Xyzz dbl(const Xyzz& p) {
        if (p.is_inf()) return p;
        F U = F::dbl(p.Y);
        F V = F::sqr(U);
        F W = F::mul(U, V);
        F S = F::mul(p.X, V);
        F X2 = F::sqr(p.X);
        F M = F::add(F::dbl(X2), X2);
        Xyzz r;
        r.X = F::sub(F::sub(F::sqr(M), S), S);
        r.Y = F::mul_sub(M, F::sub(S, r.X), W, p.Y);
        r.ZZ = F::mul(V, p.ZZ);
        r.ZZZ = F::mul(W, p.ZZZ);
        return r;
    }

    // P + Q for an affine Q (madd-2008-s); handles infinity, Q = P and Q = -P.
    __device__ __noinline__ static Xyzz madd(const Xyzz& p, const Affine<F>& q) {
        if (q.is_inf()) return p;
        if (p.is_inf()) return from_affine(q);
        F U2 = F::mul(q.x, p.ZZ);
        F S2 = F::mul(q.y, p.ZZZ);
        F P = F::sub(U2, p.X);
        F R = F::sub(S2, p.Y);
        if (P.is_zero()) {
            if (R.is_zero()) return dbl(p);
            return inf();
        }
        F PP = F::sqr(P);
        F PPP = F::mul(P, PP);
        F Q = F::mul(p.X, PP);
        Xyzz r;
        r.X = F::sub(F::sub(F::sub(F::sqr(R), PPP), Q), Q);
        r.Y = F::mul_sub(R, F::sub(Q, r.X), p.Y, PPP);
        r.ZZ = F::mul(p.ZZ, PP);
        r.ZZZ = F::mul(p.ZZZ, PPP);
        return r;
    }

    // P + Q, both XYZZ (add-2008-s); handles infinity, Q = P and Q = -P.
    __device__ __noinline__ static Xyzz add(const Xyzz& p, const Xyzz& q) {
        if (q.is_inf()) return p;
        if (p.is_inf()) return q;
        F U1 = F::mul(p.X, q.ZZ);
        F U2 = F::mul(q.X, p.ZZ);
        F S1 = F::mul(p.Y, q.ZZZ);
        F S2 = F::mul(q.Y, p.ZZZ);
        F P = F::sub(U2, U1);
        F R = F::sub(S2, S1);
        if (P.is_zero()) {
            if (R.is_zero()) return dbl(p);
            return inf();
        }
        F PP = F::sqr(P);
        F PPP = F::mul(P, PP);
        F Q = F::mul(U1, PP);
        Xyzz r;
        r.X = F::sub(F::sub(F::sub(F::sqr(R), PPP), Q), Q);
        r.Y = F::mul_sub(R, F::sub(Q, r.X), S1, PPP);
        r.ZZ = F::mul(F::mul(p.ZZ, q.ZZ), PP);
        r.ZZZ = F::mul(F::mul(p.ZZZ, q.ZZZ), PPP);
        return r;
    }

    // Jacobian (X', Y', Z') with Z' = ZZ*ZZZ, X' = X*ZZ*ZZZ^2, Y' = Y*ZZ^3*ZZZ^2: the same point
    // without an inversion (blst's projective form is Jacobian; Z' = 0 is infinity there too).
    __device__ void to_jacobian(F* out) const {
        F z = F::mul(ZZ, ZZZ);
        F zzz2 = F::sqr(ZZZ);
        F zz3 = F::mul(F::sqr(ZZ), ZZ);
        out[0] = F::mul(F::mul(X, ZZ), zzz2);
        out[1] = F::mul(F::mul(Y, zz3), zzz2);
        out[2] = z;
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
