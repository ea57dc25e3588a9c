// Kernels that expose single field and curve operations, so tests can check each one against
// blst on the host (tests/gpu_kernels.rs). Not used by the prover.
#include "field.cuh"
#include "curve.cuh"

// out[4i..4i+4) = a*b, a+b, a-b, -a in Fp.
extern "C" __global__ void selftest_fp(const Fp* a, const Fp* b, Fp* out, u32 n) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fp x = load_field(a + i), y = load_field(b + i);
    store_field(out + 4 * i, Fp::mul(x, y));
    store_field(out + 4 * i + 1, Fp::add(x, y));
    store_field(out + 4 * i + 2, Fp::sub(x, y));
    store_field(out + 4 * i + 3, Fp::neg(x));
}

// out[i] = canonical integer of the Montgomery-form a[i].
extern "C" __global__ void selftest_fr_from_mont(const Fr* a, Fr* out, u32 n) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    store_field(out + i, Fr::from_mont(load_field(a + i)));
}

// Jacobian outputs per i (3 Fp each): 2P, P+Q (mixed), P+Q (XYZZ), P+P (mixed), P-P (mixed).
extern "C" __global__ void selftest_g1(const G1Affine* p, const G1Affine* q, Fp* out, u32 n) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    G1Affine a = load_affine(p + i), b = load_affine(q + i);
    G1Xyzz P = G1Xyzz::from_affine(a), Q = G1Xyzz::from_affine(b);
    G1Affine na = a;
    na.y = Fp::neg(a.y);
    G1Xyzz r[5] = {G1Xyzz::dbl(P), G1Xyzz::madd(P, b), G1Xyzz::add(P, Q), G1Xyzz::madd(P, a), G1Xyzz::madd(P, na)};
    for (int k = 0; k < 5; k++) r[k].to_jacobian(out + 15 * i + 3 * k);
}
