#!/usr/bin/env python3
"""Reference for the host emulation of cuda/field.cuh and cuda/fp2.cuh (Python big integers).

usage: check.py gen [N] [SEED]   test inputs for field_emu on stdout: edge cases, then N random
                                 operand pairs per field (Fp, Fr) and N random Fp2 pairs; then
                                 mul_sub (a b - c d) for Fp, Fr and Fp2: edge cases, equal
                                 products (a b = c d), N random quadruples each; then the
                                 lazy forms for Fp and Fr (operands a, b < 2p, w < p): edge
                                 cases and N random triples each; G1's lazy products
                                 (fplm: a b and a b - c d with all operands < 2p); the
                                 FP64 product (fpdf: a b, a, b < 2p): edge pairs, N random;
                                 inversions (fpinv, frinv): edge values, N/50 random each;
                                 squares (fpsq, frsq: the exact double-width square of any
                                 N-limb value, the lazy square): edge values, N random each
       check.py check            reads field_emu's output on stdin, recomputes every result,
                                 prints one summary line; exit status 1 on any mismatch

Operands are arbitrary residues (< modulus), i.e. Montgomery forms of arbitrary elements; a
product must be exactly a*b*R^-1 mod p (canonical, so the range contract is checked as well).
"""
import random
import sys

P = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB
R_ = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
FIELDS = {"fp": (P, 12), "fr": (R_, 8)}


def edges(p, n):
    """0, 1, p-1, Montgomery one, halves, and values whose low limbs are all ones or zeros."""
    R = 1 << (32 * n)
    e = {0, 1, 2, 3, p - 1, p - 2, p - 3, R % p, R * R % p, (p - R) % p, (p - 1) // 2, (p + 1) // 2}
    for k in range(1, n):
        w = 1 << (32 * k)
        e |= {w - 1, w, w + 1, p - w, ((p >> (32 * k)) << (32 * k)) - 1, (p >> (32 * k)) << (32 * k)}
    # every other limb all ones, below the top limb
    alt = sum(0xFFFFFFFF << (32 * k) for k in range(0, n - 1, 2))
    e |= {alt, alt << 32 & ((1 << (32 * (n - 1))) - 1), (1 << (p.bit_length() - 1)) - 1}
    return sorted(x for x in e if 0 <= x < p)


def rand_elem(rng, p, n):
    """Uniform, or built from limbs drawn among 0 / all ones / 1 / random (carry-heavy)."""
    if rng.random() < 0.7:
        return rng.randrange(p)
    while True:
        limbs = [rng.choice((0, 0xFFFFFFFF, 0xFFFFFFFF, 1, rng.getrandbits(32))) for _ in range(n)]
        x = sum(l << (32 * i) for i, l in enumerate(limbs))
        if x >= p:
            x = (x & ((1 << (32 * (n - 1))) - 1)) | (rng.randrange(p >> (32 * (n - 1))) << (32 * (n - 1)))
        if x < p:
            return x


def gen(count, seed):
    rng = random.Random(seed)
    out = sys.stdout
    for tag, (p, n) in FIELDS.items():
        e = edges(p, n)
        for a in e:
            for b in e:
                out.write(f"{tag} {a:x} {b:x}\n")
        for _ in range(count):
            out.write(f"{tag} {rand_elem(rng, p, n):x} {rand_elem(rng, p, n):x}\n")
    e = edges(P, 12)
    small = [0, 1, P - 1, P - 2, (1 << 384) % P, (P - 1) // 2, (1 << 352) - 1, ((P >> 352) << 352) - 1]
    for a0 in small:
        for a1 in small:
            for b0 in small:
                for b1 in small:
                    out.write(f"fp2 {a0:x} {a1:x} {b0:x} {b1:x}\n")
    for _ in range(2000):
        out.write("fp2 " + " ".join(f"{rng.choice(e):x}" for _ in range(4)) + "\n")
    for _ in range(count):
        out.write("fp2 " + " ".join(f"{rand_elem(rng, P, 12):x}" for _ in range(4)) + "\n")
    gen_mul_sub(count, rng)
    gen_lazy(count, rng)
    gen_f64(count, rng)
    gen_inv(count, rng)
    gen_sqr(count, rng)


def gen_sqr(count, rng):
    """Squares: the edge values, their lazy twins (+ p, Fp only) and limb patterns up to
    2^(32n) - 1 for the exact square; then random lazy operands and random N-limb values."""
    out = sys.stdout
    for tag, (p, n) in FIELDS.items():
        top = 1 << (32 * n)
        e = set(edges(p, n)) | {top - 1, top - 2, top >> 1, (top >> 1) - 1}
        e |= {sum(rng.choice((0, 0xFFFFFFFF)) << (32 * k) for k in range(n)) for _ in range(200)}
        if tag == "fp":
            e |= {x + p for x in edges(p, n)} | {2 * p - 1, p, p + 1}
        for a in sorted(e):
            out.write(f"{tag}sq {a:x}\n")
        for _ in range(count):
            a = rand_elem(rng, p, n) + (p if tag == "fp" and rng.random() < 0.5 else 0)
            out.write(f"{tag}sq {a:x}\n")
            out.write(f"{tag}sq {rng.getrandbits(32 * n):x}\n")


def gen_inv(count, rng):
    """1/a: every edge value, then random (an inversion is hundreds of products: fewer)."""
    for tag, (p, n) in FIELDS.items():
        for a in edges(p, n):
            sys.stdout.write(f"{tag}inv {a:x}\n")
        for _ in range(max(1, count // 50)):
            sys.stdout.write(f"{tag}inv {rand_elem(rng, p, n):x}\n")


def gen_mul_sub(count, rng):
    """a b - c d: edge values, both signs, exact cancellation, then random."""
    out = sys.stdout
    for tag, (p, n) in FIELDS.items():
        small = [0, 1, 2, p - 1, p - 2, (1 << (32 * n)) % p, (p - 1) // 2, (1 << (32 * (n - 1))) - 1]
        for a in small:
            for b in small:
                for c in small:
                    for d in small:
                        out.write(f"{tag}ms {a:x} {b:x} {c:x} {d:x}\n")
        e = edges(p, n)
        for _ in range(2000):
            a, b = rng.choice(e), rng.choice(e)
            out.write(f"{tag}ms {a:x} {b:x} {a:x} {b:x}\n{tag}ms {a:x} {b:x} {b:x} {a:x}\n")
            out.write(f"{tag}ms " + " ".join(f"{rng.choice(e):x}" for _ in range(4)) + "\n")
        for _ in range(count):
            out.write(f"{tag}ms " + " ".join(f"{rand_elem(rng, p, n):x}" for _ in range(4)) + "\n")
    e = edges(P, 12)
    small = [0, 1, P - 1, P - 2, (1 << 384) % P, (P - 1) // 2]
    for _ in range(4000):
        v = [rng.choice(small) for _ in range(8)]
        out.write("fp2ms " + " ".join(f"{x:x}" for x in v) + "\n")
    for _ in range(2000):
        a = [rng.choice(e) for _ in range(4)]
        out.write("fp2ms " + " ".join(f"{x:x}" for x in a + a) + "\n")  # a b = c d
        out.write("fp2ms " + " ".join(f"{rng.choice(e):x}" for _ in range(8)) + "\n")
    for _ in range(count):
        out.write("fp2ms " + " ".join(f"{rand_elem(rng, P, 12):x}" for _ in range(8)) + "\n")


def gen_lazy(count, rng):
    """Lazy forms: a, b in [0, 2p) (edge values near 0, p and 2p), w in [0, p)."""
    out = sys.stdout
    for tag, (p, n) in FIELDS.items():
        e = edges(p, n)
        lazy = sorted({x for x in e} | {x + p for x in e} | {2 * p - 1, 2 * p - 2, p, p + 1}
                      | {((1 << (32 * n)) - 1) % (2 * p)})
        lazy = [x for x in lazy if x < 2 * p]
        for a in lazy:
            for b in lazy:
                out.write(f"{tag}lz {a:x} {b:x} {rng.choice(e):x}\n")
        for a in lazy:
            for w in e:
                out.write(f"{tag}lz {a:x} {rng.choice(lazy):x} {w:x}\n")
        for _ in range(count):
            a = rand_elem(rng, p, n) + (p if rng.random() < 0.5 else 0)
            b = rand_elem(rng, p, n) + (p if rng.random() < 0.5 else 0)
            out.write(f"{tag}lz {a:x} {b:x} {rand_elem(rng, p, n):x}\n")
    e = edges(P, 12)
    lazy = sorted({x for x in e} | {x + P for x in e} | {2 * P - 1, 2 * P - 2, P, P + 1})
    lazy = [x for x in lazy if x < 2 * P]
    for _ in range(20000):
        out.write("fplm " + " ".join(f"{rng.choice(lazy):x}" for _ in range(4)) + "\n")
    for a in lazy:
        out.write(f"fplm {a:x} {a:x} {a:x} {a:x}\n")
    for _ in range(count):
        v = [rand_elem(rng, P, 12) + (P if rng.random() < 0.5 else 0) for _ in range(4)]
        out.write("fplm " + " ".join(f"{x:x}" for x in v) + "\n")


def f64_edges():
    """Lazy operands for the FP64 product: 0, 1, p - 1, p, 2p - 1, R mod p, and values whose
    32-bit or 48-bit limbs (the FP64 product's own) are all ones, below 2p."""
    e = set(edges(P, 12)) | {x + P for x in edges(P, 12)} | {P, P + 1, 2 * P - 1, 2 * P - 2}
    for w in (32, 48):
        for k in range(1, 384 // w + 1):
            ones = (1 << (w * k)) - 1
            e |= {ones, ones ^ (1 << (w * (k - 1))), (2 * P - 1) | ones, ((2 * P - 1) >> (w * k) << (w * k)) | ones}
    e |= {sum(((1 << 48) - 1) << (96 * k) for k in range(4)), sum(((1 << 48) - 1) << (48 + 96 * k) for k in range(4))}
    return sorted(x for x in e if 0 <= x < 2 * P)


def gen_f64(count, rng):
    """FpF64::mul_lazy: every pair of edge operands, then random operands over [0, 2p)."""
    out = sys.stdout
    e = f64_edges()
    for a in e:
        for b in e:
            out.write(f"fpdf {a:x} {b:x}\n")
    for _ in range(count):
        v = [rand_elem(rng, P, 12) + (P if rng.random() < 0.5 else 0) for _ in range(2)]
        if rng.random() < 0.2:
            v[0] = rng.randrange(2 * P)
        out.write(f"fpdf {v[0]:x} {v[1]:x}\n")


def check():
    rinv = {tag: pow(1 << (32 * n), -1, p) for tag, (p, n) in FIELDS.items()}
    counts = {"fp": 0, "fr": 0, "fp2": 0, "fpms": 0, "frms": 0, "fp2ms": 0, "fplz": 0, "frlz": 0, "fplm": 0, "fpdf": 0,
              "fpinv": 0, "frinv": 0, "fpsq": 0, "frsq": 0}
    bad = 0
    lost = None
    for lineno, line in enumerate(sys.stdin, 1):
        f = line.split()
        if not f:
            continue
        if f[0] == "lost":
            lost = int(f[1])
            continue
        v = [int(x, 16) for x in f[1:]]
        if f[0] in FIELDS:
            p, _ = FIELDS[f[0]]
            ri = rinv[f[0]]
            a, b = v[0], v[1]
            want = [a * b * ri % p, a * a * ri % p, (a + b) % p, (a - b) % p, -a % p, a * ri % p]
            names = ["mul", "sqr", "add", "sub", "neg", "from_mont"]
            got = v[2:]
        elif f[0] == "fp2":
            p, ri = P, rinv["fp"]
            a0, a1, b0, b1 = v[:4]
            want = [(a0 * b0 - a1 * b1) * ri % p, (a0 * b1 + a1 * b0) * ri % p,
                    (a0 * a0 - a1 * a1) * ri % p, 2 * a0 * a1 * ri % p]
            names = ["mul.c0", "mul.c1", "sqr.c0", "sqr.c1"]
            got = v[4:]
        elif f[0] in ("fpms", "frms"):
            p, _ = FIELDS[f[0][:2]]
            a, b, c, d = v[:4]
            want = [(a * b - c * d) * rinv[f[0][:2]] % p]
            names = ["mul_sub"]
            got = v[4:]
        elif f[0] == "fp2ms":
            p, ri = P, rinv["fp"]
            a0, a1, b0, b1, c0, c1, d0, d1 = v[:8]
            want = [(a0 * b0 - a1 * b1 - c0 * d0 + c1 * d1) * ri % p,
                    (a0 * b1 + a1 * b0 - c0 * d1 - c1 * d0) * ri % p]
            names = ["mul_sub.c0", "mul_sub.c1"]
            got = v[8:]
        elif f[0] in ("fplz", "frlz"):
            p, _ = FIELDS[f[0][:2]]
            ri = rinv[f[0][:2]]
            a, b, w = v[:3]
            got = v[3:]
            # Each lazy result must be below 2p and congruent to its value; reduce_once canonical.
            congruent = [a * w * ri, a * w * ri, a + b, a - b]
            want = [g if g < 2 * p and (g - x) % p == 0 else -1 for g, x in zip(got[:4], congruent)]
            want.append(a % p)
            names = ["mul_unreduced(a,w)", "mul_unreduced(w,a)", "add_lazy", "sub_lazy", "reduce_once"]
        elif f[0] == "fplm":
            ri = rinv["fp"]
            a, b, c, d = v[:4]
            got = v[4:]
            congruent = [a * b * ri, (a * b - c * d) * ri]
            want = [g if g < 2 * P and (g - x) % P == 0 else -1 for g, x in zip(got[:2], congruent)]
            want.append(1 if a % P == 0 else 0)
            names = ["mul_lazy", "mul_sub_lazy", "is_zero_lazy"]
        elif f[0] == "fpdf":
            a, b = v[:2]
            got = v[2:]
            g = got[0] if got else -1
            want = [g if g < 2 * P and (g - a * b * rinv["fp"]) % P == 0 else -1]
            names = ["FpF64::mul_lazy"]
        elif f[0] in ("fpsq", "frsq"):
            p, n = FIELDS[f[0][:2]]
            a, hi, lo = v[:3]
            got = [(hi << (32 * n)) | lo] + v[3:4]
            want = [a * a]
            # The lazy square's contract: for a below 2p (Fp) or p (Fr), a value below 2p
            # congruent to a^2 / R; above that range it is not defined, and not checked.
            if a < (2 * p if f[0] == "fpsq" else p):
                g = v[3] if len(v) > 3 else -1
                want.append(g if g < 2 * p and (g - a * a * rinv[f[0][:2]]) % p == 0 else -1)
            else:
                want.append(v[3] if len(v) > 3 else -1)
            names = ["sqr_wide", "sqr_lazy"]
        elif f[0] in ("fpinv", "frinv"):
            p, n = FIELDS[f[0][:2]]
            R = 1 << (32 * n)
            x = v[0] * rinv[f[0][:2]] % p
            want = [pow(x, p - 2, p) * R % p]
            names = ["inv"]
            got = v[1:]
        else:
            sys.exit(f"check.py: unknown line {lineno}: {line[:60]}")
        if len(got) != len(want):
            sys.exit(f"check.py: malformed line {lineno}")
        counts[f[0]] += 1
        for name, g, w in zip(names, got, want):
            if g != w:
                bad += 1
                if bad <= 10:
                    print(f"MISMATCH {f[0]} {name} line {lineno}: inputs {' '.join(f[1:5])}\n  got  {g:x}\n  want {w:x}")
    if lost is None:
        print("field-emu: FAILED (no 'lost' line: the emulator did not finish)")
        sys.exit(1)
    if lost:
        bad += 1
        print(f"field-emu: {lost} carries dropped by a final addc (a top word overflowed)")
    status = "ok" if bad == 0 else f"FAILED ({bad} mismatches)"
    print(f"field-emu: {status}: Fp {counts['fp']} tests (mul sqr add sub neg from_mont), "
          f"Fr {counts['fr']} tests (same), Fp2 {counts['fp2']} tests (mul sqr), "
          f"mul_sub Fp {counts['fpms']} Fr {counts['frms']} Fp2 {counts['fp2ms']}, "
          f"lazy forms Fp {counts['fplz']} Fr {counts['frlz']}, G1 lazy products {counts['fplm']}, "
          f"FP64 products {counts['fpdf']}, inversions Fp {counts['fpinv']} Fr {counts['frinv']}, "
          f"squares Fp {counts['fpsq']} Fr {counts['frsq']}, "
          f"vs Python big integers")
    sys.exit(0 if bad == 0 else 1)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "gen":
        gen(int(sys.argv[2]) if len(sys.argv) > 2 else 100000, int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    elif len(sys.argv) == 2 and sys.argv[1] == "check":
        check()
    else:
        sys.exit(__doc__)
