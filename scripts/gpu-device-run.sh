#!/usr/bin/env bash
# Runs the GPU tests and benchmark on the device machine from binaries carried in carry/
# (built on the dev machine: the test binary of tests/gpu_kernels.rs as carry/gpu_kernels, optionally
# those of tests/gpu_runtime.rs and tests/gpu_oom.rs as carry/gpu_runtime and carry/gpu_oom, and the
# cuzk binary as carry/cuzk; a cubin compiled here may wait in carry/cache, see docs/gpu-notes.md).
# Logs go to $OUT when set.
#   scripts/gpu-device-run.sh [tests] [bench ARGS...]
set -uo pipefail
OUT="${OUT:-/tmp}"
export CUZK_GPU_CACHE="$PWD/carry/cache"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,utilization.gpu --format=csv,noheader
if [ "${1:-}" = tests ]; then
    shift
    timeout "${TEST_TIMEOUT:-240}" carry/gpu_kernels --test-threads=2 --nocapture 2>&1 | tee "$OUT/tests.log" | grep -E "^test |test result|panicked|seed|assert" | tail -40
    # The host-side runtime tests (tests/gpu_runtime.rs), when carried as carry/gpu_runtime.
    if [ -x carry/gpu_runtime ]; then
        timeout 120 carry/gpu_runtime 2>&1 | tee "$OUT/runtime.log" | grep -E "test result|panicked"
    fi
    # Out-of-memory recovery (tests/gpu_oom.rs), when carried as carry/gpu_oom: alone, as it
    # holds nearly all of the device's memory while it runs.
    if [ -x carry/gpu_oom ]; then
        timeout 120 carry/gpu_oom 2>&1 | tee "$OUT/oom.log" | grep -E "test result|panicked"
    fi
fi
if [ "${1:-}" = bench ]; then
    shift
    timeout "${BENCH_TIMEOUT:-300}" carry/cuzk bench gpu "$@" 2>&1 | tee "$OUT/bench.log"
fi
