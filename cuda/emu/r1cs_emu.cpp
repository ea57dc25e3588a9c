// Host emulation driver for cuda/r1cs.cu (scripts/check-r1cs-emu.sh): the kernel's own source,
// compiled by g++ with CUZK_HOST_EMU (field.cuh's emulated carry chains), run warp by warp with
// each warp's 32 lanes as 32 host threads. The warp intrinsics the kernel uses (__ballot_sync,
// __shfl_sync, __shfl_xor_sync) make the 32 threads meet: each lane posts its value, all wait,
// each reads what it asked for, all wait again. A lane that calls a different intrinsic than the
// others, or skips one, is reported (the wait times out) instead of hanging: that is the
// warp-uniformity the kernel's long-row path relies on.
//
// Input (cuda/emu/r1cs_check.py gen), numbers in hex (field elements big-endian, Montgomery
// form as stored) or decimal (counts, indices):
//   block THREADS
//   coeffs N / inputs N / aux N, each followed by N field elements, one per line
//   starts N, then N decimal u32 (one per line); terms N, then N lines "var coeff"
// Output: "out HEX" per row (r1cs_rows' result), then "lost N": carries dropped by a non-.cc
// addc (must be 0).
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../field.cuh"

struct uint2 { u32 x, y; };
struct Idx { u32 x; };
static thread_local Idx threadIdx, blockIdx;
static Idx blockDim;
#define __global__
#define __launch_bounds__(...)

// One warp's meeting point.
struct Warp {
    std::mutex m;
    std::condition_variable cv;
    u32 arrived = 0;
    u64 generation = 0;
    u32 value[32];
    int kind[32];
};
static thread_local Warp* warp;
static thread_local u32 lane_id;

static void warp_wait(Warp& w) {
    std::unique_lock<std::mutex> lk(w.m);
    const u64 g = w.generation;
    if (++w.arrived == 32) {
        w.arrived = 0;
        w.generation++;
        w.cv.notify_all();
        return;
    }
    if (!w.cv.wait_for(lk, std::chrono::seconds(20), [&] { return w.generation != g; })) {
        fprintf(stderr, "r1cs_emu: block %u lane %u waits alone: the warp's lanes diverged at a warp intrinsic\n",
                blockIdx.x, threadIdx.x);
        std::exit(3);
    }
}

// Posts v (for intrinsic `kind`), waits for all lanes, returns lane src's value.
static u32 exchange(int kind, u32 mask, u32 v, u32 src) {
    if (mask != 0xffffffffu) {
        fprintf(stderr, "r1cs_emu: partial warp mask %08x\n", mask);
        std::exit(3);
    }
    Warp& w = *warp;
    w.value[lane_id] = v;
    w.kind[lane_id] = kind;
    warp_wait(w);
    for (int l = 0; l < 32; l++)
        if (w.kind[l] != kind) {
            fprintf(stderr, "r1cs_emu: lanes %u and %d called different warp intrinsics\n", lane_id, l);
            std::exit(3);
        }
    const u32 r = w.value[src & 31];
    warp_wait(w);
    return r;
}

// The ballot needs every lane's value, so it has its own exchange.
static u32 __ballot_sync(u32 mask, bool pred) {
    if (mask != 0xffffffffu) {
        fprintf(stderr, "r1cs_emu: partial warp mask %08x\n", mask);
        std::exit(3);
    }
    Warp& w = *warp;
    w.value[lane_id] = pred ? 1u : 0u;
    w.kind[lane_id] = 1;
    warp_wait(w);
    u32 bits = 0;
    for (int l = 0; l < 32; l++) {
        if (w.kind[l] != 1) {
            fprintf(stderr, "r1cs_emu: lanes %u and %d called different warp intrinsics\n", lane_id, l);
            std::exit(3);
        }
        bits |= (w.value[l] & 1u) << l;
    }
    warp_wait(w);
    return bits;
}
static u32 __shfl_sync(u32 mask, u32 v, u32 src) { return exchange(2, mask, v, src); }
static u32 __shfl_xor_sync(u32 mask, u32 v, u32 d) { return exchange(3, mask, v, lane_id ^ d); }
static int __ffs(u32 x) { return __builtin_ffs((int)x); }

#include "../r1cs.cu"

template <class F>
static bool parse(const char* s, F& out) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
    if (n == 0 || n > 8 * (size_t)F::N) return false;
    for (int i = 0; i < F::N; i++) out.v[i] = 0;
    for (size_t k = 0; k < n; k++) {
        const char c = s[n - 1 - k];
        u32 d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else return false;
        out.v[k / 8] |= d << (4 * (k % 8));
    }
    return true;
}

static char buf[1 << 12];

static size_t header(const char* name) {
    char want[64];
    unsigned long n;
    if (!fgets(buf, sizeof buf, stdin) || sscanf(buf, "%63s %lu", want, &n) != 2 || strcmp(want, name)) {
        fprintf(stderr, "r1cs_emu: expected \"%s N\"\n", name);
        std::exit(2);
    }
    return n;
}

static std::vector<Fr> fields(const char* name) {
    std::vector<Fr> v(header(name));
    for (Fr& x : v)
        if (!fgets(buf, sizeof buf, stdin) || !parse(buf, x)) {
            fprintf(stderr, "r1cs_emu: bad %s element\n", name);
            std::exit(2);
        }
    return v;
}

int main() {
    const u32 block = (u32)header("block");
    if (block == 0 || block % 32) {
        fprintf(stderr, "r1cs_emu: block must be a multiple of 32\n");
        return 2;
    }
    const std::vector<Fr> coeffs = fields("coeffs"), inputs = fields("inputs"), aux = fields("aux");
    std::vector<u32> starts(header("starts"));
    for (u32& s : starts)
        if (!fgets(buf, sizeof buf, stdin) || sscanf(buf, "%u", &s) != 1) return 2;
    std::vector<uint2> terms(header("terms"));
    for (uint2& t : terms)
        if (!fgets(buf, sizeof buf, stdin) || sscanf(buf, "%u %u", &t.x, &t.y) != 2) return 2;
    if (starts.empty()) return 2;
    const u32 rows = (u32)starts.size() - 1;
    std::vector<Fr> out(rows);
    blockDim.x = block;
    const u32 grid = (rows + block - 1) / block;
    u64 lost = 0;
    std::mutex lost_m;
    for (u32 b = 0; b < grid; b++)
        for (u32 w0 = 0; w0 < block; w0 += 32) {
            Warp w;
            std::vector<std::thread> lanes;
            for (u32 l = 0; l < 32; l++)
                lanes.emplace_back([&, l] {
                    blockIdx.x = b;
                    threadIdx.x = w0 + l;
                    warp = &w;
                    lane_id = l;
                    r1cs_rows(starts.data(), terms.data(), coeffs.data(), inputs.data(), aux.data(), out.data(),
                              rows);
                    std::lock_guard<std::mutex> g(lost_m);
                    lost += ptx::lost_carries();
                });
            for (auto& t : lanes) t.join();
        }
    std::string line;
    for (const Fr& x : out) {
        line = "out ";
        char h[16];
        for (int i = Fr::N - 1; i >= 0; i--) {
            snprintf(h, sizeof h, "%08x", x.v[i]);
            line += h;
        }
        line += '\n';
        fputs(line.c_str(), stdout);
    }
    printf("lost %llu\n", (unsigned long long)lost);
    return 0;
}
