#!/usr/bin/env python3
"""Reference for the host emulation of cuda/r1cs.cu (Python big integers).

usage: r1cs_check.py gen SEED FILE   writes a random R1CS matrix with its assignment for
                                     r1cs_emu to FILE
       r1cs_check.py check FILE      reads r1cs_emu's output on stdin, recomputes every row from
                                     FILE, prints one summary line; exit status 1 on a mismatch

The matrix mixes what the kernel treats apart: empty rows, short rows (1 to 12 terms, the
thread path, odd and even lengths), rows of exactly 32 terms (the longest on the thread path)
and of 33, 100 and 300 (the warp path), several long rows in one warp, a whole warp of long
rows, a long row as the very last row of a partial warp; inputs (bit 31) and aux variables;
coefficient 0 (ONE), -1 and random ones; values 0, ONE, -1 and random ones. Elements are
stored in Montgomery form, as on the device: row r is sum coeffs[c] * value * R^-1 over its
terms (coeffs[0] = R mod r, so ONE's terms add the value itself).
"""
import random
import sys

R_MOD = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
MONT = (1 << 256) % R_MOD
MONT_INV = pow(1 << 256, -1, R_MOD)
INPUT_BIT = 1 << 31


def mont(x):
    return x * MONT % R_MOD


def gen(seed, path):
    rng = random.Random(seed)
    n_coeffs, n_inputs, n_aux = 40, 5, 3000
    coeffs = [MONT, mont(R_MOD - 1), R_MOD - 1] + [rng.randrange(R_MOD) for _ in range(n_coeffs - 3)]

    def value():
        u = rng.random()
        if u < 0.5:
            return 0
        if u < 0.95:
            return MONT
        return rng.choice((mont(R_MOD - 1), R_MOD - 1, 1, rng.randrange(R_MOD), rng.randrange(R_MOD)))

    inputs = [MONT] + [value() for _ in range(n_inputs - 1)]
    aux = [value() for _ in range(n_aux)]

    def term():
        var = rng.randrange(n_inputs) | INPUT_BIT if rng.random() < 0.05 else rng.randrange(n_aux)
        u = rng.random()
        coeff = 0 if u < 0.6 else 1 if u < 0.7 else rng.randrange(n_coeffs)
        return var, coeff

    # Row lengths: the block is 64 threads (two warps), so the row numbers below say where a
    # row falls in its warp.
    lengths = [rng.randrange(13) for _ in range(1000)]
    for r in (5, 6, 40, 63, 64, 500):  # isolated long rows, one at a warp's start and end
        lengths[r] = rng.choice((33, 100, 300))
    for r in range(128, 160):  # a whole warp of long rows
        lengths[r] = rng.choice((32, 33, 34, 64))
    for r in range(200, 232, 3):  # every third row long, next to rows of exactly 32
        lengths[r] = 300
        lengths[r + 1] = 32
    for r in range(300, 310):  # empty rows in a row
        lengths[r] = 0
    lengths[999] = 300  # the last row, in a partial warp (1000 = 31 warps + 8 rows)
    terms = [[term() for _ in range(n)] for n in lengths]
    aux[11] = rng.randrange(R_MOD)
    terms[7] = [(11, 0), (11, 1)]  # v + (-1) v = 0
    terms[8] = [(0 | INPUT_BIT, 0)]  # the first input (ONE) alone
    with open(path, "w") as f:
        f.write("block 64\n")
        for name, vals in (("coeffs", coeffs), ("inputs", inputs), ("aux", aux)):
            f.write(f"{name} {len(vals)}\n")
            f.writelines(f"{x:x}\n" for x in vals)
        starts = [0]
        for row in terms:
            starts.append(starts[-1] + len(row))
        f.write(f"starts {len(starts)}\n")
        f.writelines(f"{s}\n" for s in starts)
        f.write(f"terms {starts[-1]}\n")
        f.writelines(f"{v} {c}\n" for row in terms for v, c in row)


def read(path):
    with open(path) as f:
        lines = iter(f.read().split("\n"))

    def block(name, conv):
        head = next(lines).split()
        assert head[0] == name, head
        return [conv(next(lines)) for _ in range(int(head[1]))]

    next(lines)
    coeffs = block("coeffs", lambda s: int(s, 16))
    inputs = block("inputs", lambda s: int(s, 16))
    aux = block("aux", lambda s: int(s, 16))
    starts = block("starts", int)
    terms = block("terms", lambda s: tuple(map(int, s.split())))
    return coeffs, inputs, aux, starts, terms


def check(path):
    coeffs, inputs, aux, starts, terms = read(path)
    want = []
    for r in range(len(starts) - 1):
        acc = 0
        for var, c in terms[starts[r]:starts[r + 1]]:
            v = inputs[var & ~INPUT_BIT] if var & INPUT_BIT else aux[var]
            acc += coeffs[c] * v * MONT_INV
        want.append(acc % R_MOD)
    got, lost, bad = [], None, 0
    for line in sys.stdin:
        t = line.split()
        if t and t[0] == "out":
            got.append(int(t[1], 16))
        elif t and t[0] == "lost":
            lost = int(t[1])
    if len(got) != len(want):
        print(f"r1cs-emu: FAILED: {len(got)} rows out, {len(want)} expected")
        sys.exit(1)
    for r, (g, w) in enumerate(zip(got, want)):
        if g != w:
            bad += 1
            if bad <= 5:
                print(f"r1cs-emu: row {r} ({starts[r + 1] - starts[r]} terms): got {g:x}, want {w:x}")
    if bad or lost != 0:
        print(f"r1cs-emu: FAILED: {bad} of {len(want)} rows differ, {lost} carries lost")
        sys.exit(1)
    long_rows = sum(1 for r in range(len(want)) if starts[r + 1] - starts[r] > 32)
    print(f"r1cs-emu: ok: {len(want)} rows ({long_rows} on the warp path), {len(terms)} terms, vs Python big integers")


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(int(sys.argv[2]), sys.argv[3])
    else:
        check(sys.argv[2])
