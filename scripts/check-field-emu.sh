#!/usr/bin/env bash
# Host check of the field arithmetic in cuda/field.cuh and cuda/fp2.cuh, no GPU: the headers are
# compiled by g++ with CUZK_HOST_EMU (PTX carry-chain instructions emulated in C++, the rest the
# kernels' own code) and every result is recomputed with Python big integers.
# FIELD_EMU_N random tests per field (default 100000), FIELD_EMU_SEED (default 1).
# Exit status non-zero on any mismatch; prints one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."

N="${FIELD_EMU_N:-100000}"
SEED="${FIELD_EMU_SEED:-1}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
# The default products, then the variants kept for A/B runs: Karatsuba (CUZK_FP_KARATSUBA) and
# the FP64 product with integer column sums (CUZK_F64_INT_COLUMNS, cuda/field_f64.cuh).
for VARIANT in "" -DCUZK_FP_KARATSUBA -DCUZK_F64_INT_COLUMNS; do
    g++ -O2 -std=c++17 -ffp-contract=off -Wall -Wextra -Wno-unknown-pragmas -Werror -DCUZK_HOST_EMU $VARIANT -o "$TMP/field_emu" cuda/emu/field_emu.cpp
    echo -n "${VARIANT:-default}: "
    python3 cuda/emu/check.py gen "$N" "$SEED" | "$TMP/field_emu" | python3 cuda/emu/check.py check
done
