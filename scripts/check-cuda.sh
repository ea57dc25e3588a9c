#!/usr/bin/env bash
# Compiles every CUDA kernel in cuda/ for sm_90 without a GPU: NVRTC (the same translation unit
# and options that src/gpu builds at run time) to PTX, then ptxas for the register/spill report.
# Installs NVRTC and ptxas from pip when they are missing. Fails on any compile error. Also
# compiles the CUZK_MSM_DFMA variant, and runs the host emulation checks.
set -euo pipefail
cd "$(dirname "$0")/.."

site() { python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
CU13="$(site)/nvidia/cu13"
if [ ! -e "$CU13/lib/libnvrtc.so.13" ] || [ ! -x "$CU13/bin/ptxas" ]; then
    python3 -m pip install -q 'nvidia-cuda-nvrtc==13.0.*' 'nvidia-cuda-nvcc==13.0.*'
    CU13="$(site)/nvidia/cu13"
fi
export LD_LIBRARY_PATH="$CU13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

OUT="${CHECK_CUDA_OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
python3 scripts/gpu-nvrtc.py "$CU13/lib/libnvrtc.so.13" "$OUT/cuzk.ptx"
"$CU13/bin/ptxas" -arch=sm_90 -v -o "$OUT/cuzk.cubin" "$OUT/cuzk.ptx" 2> "$OUT/ptxas.log" || { cat "$OUT/ptxas.log"; exit 1; }
# One line per kernel: name, registers, spills.
python3 - "$OUT/ptxas.log" <<'PY'
import re, sys
name = None
for line in open(sys.argv[1]):
    m = re.search(r"Compiling entry function '(\w+)'", line)
    if m: name = m.group(1)
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and name: spill = (m.group(1), m.group(2))
    m = re.search(r"Used (\d+) registers", line)
    if m and name:
        print(f"{name:32s} regs {m.group(1):>4s}  spill st/ld {spill[0]}/{spill[1]}")
        name = None
PY
echo "check-cuda: all kernels compiled for sm_90"
# The kernel variant that puts part of G1's products on the FP64 units must keep compiling too.
CUZK_NVRTC_DEFINES=CUZK_MSM_DFMA python3 scripts/gpu-nvrtc.py "$CU13/lib/libnvrtc.so.13" "$OUT/dfma.ptx"
"$CU13/bin/ptxas" -arch=sm_90 -o "$OUT/dfma.cubin" "$OUT/dfma.ptx" 2> "$OUT/dfma.log" || { cat "$OUT/dfma.log"; exit 1; }
echo "check-cuda: the CUZK_MSM_DFMA variant compiled for sm_90"
# Host emulation of the field arithmetic against Python big integers (g++, no GPU).
bash scripts/check-field-emu.sh
# Host emulation of the R1CS row kernel, warps as host threads, against Python big integers.
bash scripts/check-r1cs-emu.sh
