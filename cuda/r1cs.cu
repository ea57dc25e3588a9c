// The rows of an R1CS matrix (A, B or C of a Groth16 proof) evaluated on an assignment, from a
// shape kept on the device (src/gpu/r1cs.rs): out[r] = sum over the terms t of row r of
// coeffs[t.coeff] * value(t.var).
//
// The shape is CSR: starts[r] .. starts[r+1] are row r's terms. A term is two u32 (the host's
// ShapeTerm, read as one 8-byte uint2): x = the variable, an input when bit 31 is set (index in
// the low 31 bits) and an aux variable otherwise; y = the index of its coefficient in the
// coefficient table, whose entry 0 is ONE. Values and coefficients are Fr in Montgomery form
// (blstrs::Scalar's bytes), canonical (< r); so is every output.
//
// Mapping: one thread per row. A 32 GiB PoRep partition has 130 M rows of about 1.9 terms per
// matrix on average (mostly 1 to 8): a warp per row would leave nearly all of its lanes idle and
// pay a 5-step shuffle reduction of 8 limbs for every row. With a thread per row the warp's
// term reads cover one contiguous span (its 32 rows' terms, a few cache lines) and its output
// stores are 32 consecutive elements, i.e. coalesced. The few long rows (hundreds of terms)
// would hold their whole warp for hundreds of iterations, so a row of more than
// R1CS_LONG_ROW terms is left by its thread and summed by the whole warp afterwards: lanes
// stride over its terms and combine by shuffles. Short rows of a warp still diverge in length
// (a warp waits for its longest short row), at most R1CS_LONG_ROW iterations.
//
// The work is gathers: every term reads a 32-byte value at its variable's index (the assignment,
// 4 GB at 2^27 aux variables), so the kernel is bound by memory, not by products. Products are
// skipped where they are not needed: a zero value adds nothing, coefficient 0 (ONE) adds the
// value, a value of ONE adds the coefficient. In a PoRep assignment about 51% of the aux values
// are 0 and 47% are 1, so few terms multiply; the product is called out of line
// (Fr::mul_call), which keeps the loop's registers (and so the number of resident warps, which
// is what hides the gathers' latency) down.
#include "field.cuh"

// Bit of a term's variable that marks an input (the rest is the input's index).
#define R1CS_INPUT_BIT 0x80000000u
// Longest row summed by its own thread; longer rows are summed by their warp. A row of L terms
// costs its warp L iterations on its own thread and about L/32 + 6 (the strided loop, then five
// shuffle-and-add steps and the hand-over) on the warp; 32 keeps the warp path for rows that
// would stall their warp several times over the short rows' length.
#define R1CS_LONG_ROW 32u

// The value of term t's variable.
__device__ __forceinline__ Fr r1cs_value(uint2 t, const Fr* __restrict__ inputs, const Fr* __restrict__ aux) {
    return load_field((t.x & R1CS_INPUT_BIT) ? inputs + (t.x & ~R1CS_INPUT_BIT) : aux + t.x);
}

// acc += coeffs[coeff] * v, without the product where a factor is 0 or ONE.
__device__ __forceinline__ void r1cs_add_term(Fr& acc, u32 coeff, Fr v, const Fr* __restrict__ coeffs) {
    if (v.is_zero()) return;
    if (coeff != 0) {
        const Fr c = load_field(coeffs + coeff);
        v = v == Fr::one() ? c : Fr::mul_call(c, v);
    }
    acc = Fr::add(acc, v);
}

// The kernel's register cap: R1CS_MIN_BLOCKS blocks of 256 threads per SM. Uncapped, ptxas
// gives it 70 registers (3 blocks, 24 warps per SM); capped at 64 it fits without spills (32
// warps). The kernel waits on gathers, and resident warps are what hides their latency
// (ptxas's figures; the effect is not measured). 5 blocks (48 registers) spilled.
#ifndef R1CS_MIN_BLOCKS
#define R1CS_MIN_BLOCKS 4
#endif

// out[r] for r < rows. Launched with blocks of 256 threads (R1CS_MIN_BLOCKS assumes it; any
// whole number of warps is correct: the warp path needs all 32 lanes).
// Two terms per iteration on the thread path: their value loads are issued before either is
// used, so a thread has two gathers in flight instead of one (each waits a full memory latency
// behind the load of its term).
extern "C" __global__ void __launch_bounds__(256, R1CS_MIN_BLOCKS) r1cs_rows(const u32* __restrict__ starts, const uint2* __restrict__ terms,
                                     const Fr* __restrict__ coeffs, const Fr* __restrict__ inputs,
                                     const Fr* __restrict__ aux, Fr* __restrict__ out, u32 rows) {
    const u64 row = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    const u32 lane = threadIdx.x & 31;
    u32 begin = 0, end = 0;
    if (row < rows) {
        begin = starts[row];
        end = starts[row + 1];
    }
    const bool long_row = end - begin > R1CS_LONG_ROW;
    Fr acc = Fr::zero();
    if (!long_row) {
        u32 k = begin;
        for (; k + 1 < end; k += 2) {
            const uint2 t0 = terms[k], t1 = terms[k + 1];
            const Fr v0 = r1cs_value(t0, inputs, aux), v1 = r1cs_value(t1, inputs, aux);
            r1cs_add_term(acc, t0.y, v0, coeffs);
            r1cs_add_term(acc, t1.y, v1, coeffs);
        }
        if (k < end) {
            const uint2 t = terms[k];
            r1cs_add_term(acc, t.y, r1cs_value(t, inputs, aux), coeffs);
        }
    }
    // The warp's long rows, one after the other, each by all 32 lanes. `pending` is the same on
    // every lane, so every lane runs the same shuffles.
    u32 pending = __ballot_sync(0xffffffffu, long_row);
    while (pending) {
        const u32 owner = __ffs(pending) - 1;
        pending &= pending - 1;
        const u32 b = __shfl_sync(0xffffffffu, begin, owner);
        const u32 e = __shfl_sync(0xffffffffu, end, owner);
        Fr part = Fr::zero();
        for (u32 k = b + lane; k < e; k += 32) {
            const uint2 t = terms[k];
            r1cs_add_term(part, t.y, r1cs_value(t, inputs, aux), coeffs);
        }
        // Butterfly sum: afterwards every lane holds the row's total.
#pragma unroll
        for (u32 d = 16; d > 0; d >>= 1) {
            Fr other;
#pragma unroll
            for (int i = 0; i < Fr::N; i++) other.v[i] = __shfl_xor_sync(0xffffffffu, part.v[i], d);
            part = Fr::add(part, other);
        }
        if (lane == owner) acc = part;
    }
    if (row < rows) store_field(out + row, acc);
}
