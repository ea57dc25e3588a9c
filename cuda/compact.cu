// Stream compaction of scalars by a density flag (the witness MSMs' A and B queries take the aux
// assignment's values where their density marks the variable): dst keeps the flagged elements
// of src in order. Three steps driven by the host: compact_count counts the flags of each block
// of 1024, the counts are scanned (scan.cu), compact_scatter writes each flagged element at its
// block's offset plus its rank inside the block.
#include "field.cuh"

#define COMPACT_BLOCK 1024

// flags: one byte per element, 0 or 1 (a Rust Vec<bool>).
extern "C" __global__ void compact_count(const unsigned char* flags, u32 n, u32* block_counts) {
    const u32 i = blockIdx.x * COMPACT_BLOCK + threadIdx.x;
    const int f = i < n && flags[i] != 0;
    const int total = __syncthreads_count(f);
    if (threadIdx.x == 0) block_counts[blockIdx.x] = (u32)total;
}

// block_offsets: the exclusive scan of compact_count's block counts. dst has room for cap
// elements: more set flags than that (a caller's wrong count) write nothing past it.
extern "C" __global__ void compact_scatter(const Fr* src, const unsigned char* flags, u32 n,
                                           const u32* block_offsets, Fr* dst, u32 cap) {
    __shared__ u32 warp_before[32];
    const u32 i = blockIdx.x * COMPACT_BLOCK + threadIdx.x;
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const bool f = i < n && flags[i] != 0;
    const u32 ballot = __ballot_sync(0xffffffffu, f);
    if (lane == 0) warp_before[warp] = __popc(ballot);
    __syncthreads();
    if (warp == 0) {
        // Exclusive scan of the 32 warp counts.
        const u32 v = warp_before[lane];
        u32 x = v;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const u32 y = __shfl_up_sync(0xffffffffu, x, d);
            if (lane >= d) x += y;
        }
        warp_before[lane] = x - v;
    }
    __syncthreads();
    if (f) {
        const u32 pos = block_offsets[blockIdx.x] + warp_before[warp] + __popc(ballot & ((1u << lane) - 1));
        if (pos < cap) store_field(dst + pos, load_field(src + i));
    }
}
