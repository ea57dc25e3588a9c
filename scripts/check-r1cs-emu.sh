#!/usr/bin/env bash
# Host check of the R1CS row kernel (cuda/r1cs.cu), no GPU: its source compiled by g++ with
# CUZK_HOST_EMU (field.cuh's emulated carry chains) and run with each warp's 32 lanes as host
# threads (cuda/emu/r1cs_emu.cpp), every row recomputed with Python big integers
# (cuda/emu/r1cs_check.py). R1CS_EMU_SEED (default 1) picks the random matrix.
# Exit status non-zero on any mismatch; prints one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."

SEED="${R1CS_EMU_SEED:-1}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
g++ -O2 -std=c++17 -Wall -Wextra -Wno-unknown-pragmas -Werror -DCUZK_HOST_EMU -pthread -o "$TMP/r1cs_emu" cuda/emu/r1cs_emu.cpp
python3 cuda/emu/r1cs_check.py gen "$SEED" "$TMP/case"
timeout 300 "$TMP/r1cs_emu" < "$TMP/case" | python3 cuda/emu/r1cs_check.py check "$TMP/case"
