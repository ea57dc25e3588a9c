// Batch addition for the scalars equal to 1: a Filecoin witness is mostly bits, and a 1 needs
// no Pippenger digits at all, only the sum of its bases. Each thread sums a contiguous run of
// the index list with mixed additions; msm_reduce_groups_* (msm.cu) then folds the partial sums.
#include "field.cuh"
#include "curve.cuh"

template <class F>
__device__ void sum_indexed(const Affine<F>* bases, const u32* idx, u32 count, u32 per, Xyzz<F>* out) {
    const u32 t = blockIdx.x * blockDim.x + threadIdx.x;
    const u64 start = (u64)t * per;
    if (start >= count) return;
    const u64 end = min(start + per, (u64)count);
    Xyzz<F> acc = Xyzz<F>::inf();
    for (u64 k = start; k < end; k++) acc = Xyzz<F>::madd(acc, load_affine(bases + idx[k]));
    store_xyzz(out + t, acc);
}

extern "C" __global__ void batch_add_g1(const G1Affine* bases, const u32* idx, u32 count, u32 per, G1Xyzz* out) {
    sum_indexed<Fp>(bases, idx, count, per, out);
}
extern "C" __global__ void batch_add_g2(const G2Affine* bases, const u32* idx, u32 count, u32 per, G2Xyzz* out) {
    sum_indexed<Fp2>(bases, idx, count, per, out);
}
