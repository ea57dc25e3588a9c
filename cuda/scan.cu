// Exclusive prefix sum of u32 counts (the bucket offsets of the MSM's counting sort). Three
// steps driven by the host: scan_blocks scans each block of 1024 and writes its total, the
// totals are scanned the same way (recursively), scan_add adds each block's offset.
#include "field.cuh"

#define SCAN_BLOCK 1024

extern "C" __global__ void scan_blocks(u32* data, u32 n, u32* block_sums) {
    __shared__ u32 warp_tot[32];
    const u32 i = blockIdx.x * SCAN_BLOCK + threadIdx.x;
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const u32 v = i < n ? data[i] : 0;
    u32 x = v;  // inclusive scan within the warp
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        u32 y = __shfl_up_sync(0xffffffffu, x, d);
        if (lane >= d) x += y;
    }
    if (lane == 31) warp_tot[warp] = x;
    __syncthreads();
    if (warp == 0) {
        u32 t = warp_tot[lane];
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            u32 y = __shfl_up_sync(0xffffffffu, t, d);
            if (lane >= d) t += y;
        }
        warp_tot[lane] = t;  // inclusive totals of warps 0..lane
    }
    __syncthreads();
    const u32 before = warp == 0 ? 0 : warp_tot[warp - 1];
    if (i < n) data[i] = before + x - v;
    if (threadIdx.x == SCAN_BLOCK - 1) block_sums[blockIdx.x] = before + x;
}

extern "C" __global__ void scan_add(u32* data, u32 n, const u32* block_offsets) {
    const u32 i = blockIdx.x * SCAN_BLOCK + threadIdx.x;
    if (i < n) data[i] += block_offsets[blockIdx.x];
}
