// Host emulation driver for cuda/field.cuh and cuda/fp2.cuh (scripts/check-field-emu.sh).
//
// The device headers are compiled by g++ with CUZK_HOST_EMU, which replaces the PTX carry-chain
// instructions by C++ with an emulated carry flag (see the top of field.cuh); everything else is
// the very code the kernels run. Reads one test per line from stdin (cuda/emu/check.py gen),
// writes the same line followed by the results (checked by cuda/emu/check.py check):
//   fp  a b        -> fp  a b  a*b a*a a+b a-b -a from_mont(a)     (Montgomery products: /R)
//   fr  a b        -> fr  a b  (same)
//   fp2 a0 a1 b0 b1 -> fp2 a0 a1 b0 b1  (a*b).c0 (a*b).c1 (a^2).c0 (a^2).c1
//   fpms a b c d   -> fpms a b c d  mul_sub(a, b, c, d)          (= (a b - c d)/R)
//   frms a b c d   -> frms a b c d  (same, Fr)
//   fp2ms a0 a1 b0 b1 c0 c1 d0 d1 -> the inputs, then mul_sub(a, b, c, d).c0 .c1
//   fplz a b w     -> fplz a b w  mul_unreduced(a, w) mul_unreduced(w, a) add_lazy(a, b)
//                     sub_lazy(a, b) reduce_once(a)    (lazy forms: a, b < 2p, w < p)
//   frlz a b w     -> frlz a b w  (same, Fr)
//   fplm a b c d   -> fplm a b c d  mul_lazy(a, b) mul_sub_lazy(a, b, c, d) is_zero_lazy(a)
//                     (G1's lazy point arithmetic: all operands < 2p; the last as 0 or 1)
//   fpdf a b       -> fpdf a b  FpF64::mul_lazy(a, b)   (the FP64 product, a, b < 2p)
//   fpsq a         -> fpsq a  hi lo sqr_lazy(a)   (sqr_wide(a) = hi 2^(32N) + lo, exactly,
//                     for any a < 2^(32N); sqr_lazy for a < 2p)
//   frsq a         -> frsq a  (same, Fr: sqr_lazy for a < r)
//   fpinv a        -> fpinv a  inv(a)                   (Montgomery in and out; 0 for 0)
//   frinv a        -> frinv a  (same, Fr)
// Numbers are big-endian hex without prefix. The last line is "lost N": carries dropped by a
// non-.cc addc (must be 0).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../fp2.cuh"
#include "../field_f64.cuh"

template <class F>
static bool parse(const char* s, F& out) {
    size_t n = strlen(s);
    if (n == 0 || n > 8 * (size_t)F::N) return false;
    for (int i = 0; i < F::N; i++) out.v[i] = 0;
    for (size_t k = 0; k < n; k++) {
        const char c = s[n - 1 - k];
        u32 d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return false;
        out.v[k / 8] |= d << (4 * (k % 8));
    }
    return true;
}

template <class F>
static void put(std::string& line, const F& a) {
    char buf[16];
    line += ' ';
    for (int i = F::N - 1; i >= 0; i--) {
        snprintf(buf, sizeof buf, "%08x", a.v[i]);
        line += buf;
    }
}

template <class F>
static bool run_base(const char* tag, char** tok, std::string& line) {
    F a, b;
    if (!parse(tok[0], a) || !parse(tok[1], b)) return false;
    line = tag;
    put(line, a);
    put(line, b);
    put(line, F::mul(a, b));
    put(line, F::sqr(a));
    put(line, F::add(a, b));
    put(line, F::sub(a, b));
    put(line, F::neg(a));
    put(line, F::from_mont(a));
    return true;
}

static bool run_fp2(char** tok, std::string& line) {
    Fp2 a, b;
    if (!parse(tok[0], a.c0) || !parse(tok[1], a.c1) || !parse(tok[2], b.c0) || !parse(tok[3], b.c1)) return false;
    const Fp2 m = Fp2::mul(a, b), s = Fp2::sqr(a);
    line = "fp2";
    put(line, a.c0); put(line, a.c1); put(line, b.c0); put(line, b.c1);
    put(line, m.c0); put(line, m.c1); put(line, s.c0); put(line, s.c1);
    return true;
}

template <class F>
static bool run_mul_sub(const char* tag, char** tok, std::string& line) {
    F a, b, c, d;
    if (!parse(tok[0], a) || !parse(tok[1], b) || !parse(tok[2], c) || !parse(tok[3], d)) return false;
    line = tag;
    put(line, a); put(line, b); put(line, c); put(line, d);
    put(line, F::mul_sub(a, b, c, d));
    return true;
}

template <class F>
static bool run_lazy(const char* tag, char** tok, std::string& line) {
    F a, b, w;
    if (!parse(tok[0], a) || !parse(tok[1], b) || !parse(tok[2], w)) return false;
    line = tag;
    put(line, a); put(line, b); put(line, w);
    put(line, F::mul_unreduced(a, w));
    put(line, F::mul_unreduced(w, a));
    put(line, F::add_lazy(a, b));
    put(line, F::sub_lazy(a, b));
    put(line, F::reduce_once(a));
    return true;
}

static bool run_fp_lazy_mul(char** tok, std::string& line) {
    Fp a, b, c, d;
    if (!parse(tok[0], a) || !parse(tok[1], b) || !parse(tok[2], c) || !parse(tok[3], d)) return false;
    line = "fplm";
    put(line, a); put(line, b); put(line, c); put(line, d);
    put(line, Fp::mul_lazy(a, b));
    put(line, Fp::mul_sub_lazy(a, b, c, d));
    line += Fp::is_zero_lazy(a) ? " 1" : " 0";
    return true;
}

template <class F>
static bool run_sqr(const char* tag, char** tok, std::string& line) {
    F a, hi, lo;
    if (!parse(tok[0], a)) return false;
    u32 t[2 * F::N];
    F::sqr_wide(a, t);
    for (int i = 0; i < F::N; i++) { lo.v[i] = t[i]; hi.v[i] = t[F::N + i]; }
    line = tag;
    put(line, a); put(line, hi); put(line, lo);
    put(line, F::sqr_lazy(a));
    return true;
}

static bool run_fp_f64(char** tok, std::string& line) {
    Fp a, b;
    if (!parse(tok[0], a) || !parse(tok[1], b)) return false;
    line = "fpdf";
    put(line, a); put(line, b);
    put(line, FpF64::mul_lazy(a, b));
    return true;
}

// FpF64 relies on a single rounding in std::fma: (1 + 2^-52)(1 - 2^-52) - 1 is -2^-104 fused,
// 0 when the product is rounded first. volatile keeps g++ from folding it at compile time.
static bool fma_is_fused() {
    volatile double e = 0x1p-52;
    const double x = 1 + e, y = 1 - e;
    return __fma_rn(x, y, -1.0) == -0x1p-104;
}

template <class F>
static bool run_inv(const char* tag, char** tok, std::string& line) {
    F a;
    if (!parse(tok[0], a)) return false;
    line = tag;
    put(line, a);
    put(line, F::inv(a));
    return true;
}

static bool run_fp2_mul_sub(char** tok, std::string& line) {
    Fp2 x[4];
    for (int i = 0; i < 4; i++)
        if (!parse(tok[2 * i], x[i].c0) || !parse(tok[2 * i + 1], x[i].c1)) return false;
    const Fp2 r = Fp2::mul_sub(x[0], x[1], x[2], x[3]);
    line = "fp2ms";
    for (int i = 0; i < 4; i++) { put(line, x[i].c0); put(line, x[i].c1); }
    put(line, r.c0); put(line, r.c1);
    return true;
}

int main() {
    if (!fma_is_fused()) {
        fprintf(stderr, "field_emu: std::fma is not a fused multiply-add on this host\n");
        return 2;
    }
    static char buf[1 << 12];
    std::string line;
    line.reserve(1 << 10);
    long lineno = 0;
    while (fgets(buf, sizeof buf, stdin)) {
        lineno++;
        char* tok[12];
        int nt = 0;
        for (char* t = strtok(buf, " \t\r\n"); t && nt < 12; t = strtok(nullptr, " \t\r\n")) tok[nt++] = t;
        if (nt == 0) continue;
        bool ok = false;
        if (!strcmp(tok[0], "fp") && nt == 3) ok = run_base<Fp>("fp", tok + 1, line);
        else if (!strcmp(tok[0], "fr") && nt == 3) ok = run_base<Fr>("fr", tok + 1, line);
        else if (!strcmp(tok[0], "fp2") && nt == 5) ok = run_fp2(tok + 1, line);
        else if (!strcmp(tok[0], "fpms") && nt == 5) ok = run_mul_sub<Fp>("fpms", tok + 1, line);
        else if (!strcmp(tok[0], "frms") && nt == 5) ok = run_mul_sub<Fr>("frms", tok + 1, line);
        else if (!strcmp(tok[0], "fp2ms") && nt == 9) ok = run_fp2_mul_sub(tok + 1, line);
        else if (!strcmp(tok[0], "fplz") && nt == 4) ok = run_lazy<Fp>("fplz", tok + 1, line);
        else if (!strcmp(tok[0], "frlz") && nt == 4) ok = run_lazy<Fr>("frlz", tok + 1, line);
        else if (!strcmp(tok[0], "fplm") && nt == 5) ok = run_fp_lazy_mul(tok + 1, line);
        else if (!strcmp(tok[0], "fpdf") && nt == 3) ok = run_fp_f64(tok + 1, line);
        else if (!strcmp(tok[0], "fpsq") && nt == 2) ok = run_sqr<Fp>("fpsq", tok + 1, line);
        else if (!strcmp(tok[0], "frsq") && nt == 2) ok = run_sqr<Fr>("frsq", tok + 1, line);
        else if (!strcmp(tok[0], "fpinv") && nt == 2) ok = run_inv<Fp>("fpinv", tok + 1, line);
        else if (!strcmp(tok[0], "frinv") && nt == 2) ok = run_inv<Fr>("frinv", tok + 1, line);
        if (!ok) {
            fprintf(stderr, "field_emu: bad input line %ld\n", lineno);
            return 2;
        }
        line += '\n';
        fputs(line.c_str(), stdout);
    }
    printf("lost %llu\n", (unsigned long long)ptx::lost_carries());
    return 0;
}
