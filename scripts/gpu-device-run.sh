#!/usr/bin/env bash
# Runs the GPU tests and benchmark on the device machine from binaries carried in carry/
# (built on the dev machine: the test binary of tests/gpu_kernels.rs as carry/gpu_kernels, optionally
# those of tests/gpu_runtime.rs, tests/gpu_oom.rs and tests/gpu_prepared.rs as carry/gpu_runtime,
# carry/gpu_oom and carry/gpu_prepared, that of tests/gpu_faults.rs as carry/gpu_faults, that of
# tests/gpu_setup.rs as carry/gpu_setup, that of tests/gpu_small.rs as carry/gpu_small, and the
# cuzk binary as carry/cuzk; a cubin compiled here may wait in carry/cache, see docs/gpu-notes.md).
# Logs go to $OUT when set.
#   scripts/gpu-device-run.sh [tests] [bench ARGS...]
#
# The GPU tests are #[ignore]d, so that a machine without a device reports them as ignored
# rather than passed; here they run with --include-ignored. This is where a device is expected:
# the run fails when nvidia-smi finds none, when a test binary fails (a missing device fails
# every GPU test), or when a binary ran no test at all.
set -uo pipefail
OUT="${OUT:-/tmp}"
export CUZK_GPU_CACHE="$PWD/carry/cache"
failed=0
if ! nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,utilization.gpu --format=csv,noheader; then
    echo "gpu-device-run: no CUDA device found (nvidia-smi failed); the GPU tests need one" >&2
    exit 1
fi
# run_tests NAME LOG TIMEOUT ARGS...: runs carry/NAME with the ignored tests included, logs to
# $OUT/LOG, prints the results, and counts a failure or an empty run.
run_tests() {
    local name=$1 log="$OUT/$2" limit=$3
    shift 3
    local rc=0
    timeout "$limit" "carry/$name" --include-ignored "$@" >"$log" 2>&1 || rc=$?
    grep -E "^test |test result|panicked|seed|assert" "$log" | tail -40
    if [ "$rc" != 0 ]; then
        echo "gpu-device-run: $name failed (exit $rc)" >&2
        failed=1
    elif ! grep -qE "test result: ok\. [1-9][0-9]* passed" "$log"; then
        echo "gpu-device-run: $name passed no test" >&2
        failed=1
    fi
}
if [ "${1:-}" = tests ]; then
    shift
    run_tests gpu_kernels tests.log "${TEST_TIMEOUT:-240}" --test-threads=2 --nocapture
    # The host-side runtime tests (tests/gpu_runtime.rs), when carried as carry/gpu_runtime.
    if [ -x carry/gpu_runtime ]; then
        run_tests gpu_runtime runtime.log 120
    fi
    # Out-of-memory recovery (tests/gpu_oom.rs), when carried as carry/gpu_oom: alone, as it
    # holds nearly all of the device's memory while it runs.
    if [ -x carry/gpu_oom ]; then
        run_tests gpu_oom oom.log 120
    fi
    # Prepared parameter sets (tests/gpu_prepared.rs), when carried as carry/gpu_prepared: one
    # test at a time and alone, as they measure the device's used memory.
    if [ -x carry/gpu_prepared ]; then
        run_tests gpu_prepared prepared.log 300 --test-threads=1 --nocapture
    fi
    # The Groth16 setup's fixed-base kernels against blst, and the GPU setup's 2 KiB files
    # against the CPU setup's (tests/gpu_setup.rs), when carried as carry/gpu_setup.
    if [ -x carry/gpu_setup ]; then
        run_tests gpu_setup setup.log 300 --test-threads=1 --nocapture
    fi
    # Memory plans, host copies and small devices with real 2 KiB proofs (tests/gpu_small.rs),
    # when carried as carry/gpu_small: one test at a time, as they measure the device's memory.
    if [ -x carry/gpu_small ]; then
        run_tests gpu_small small.log 600 --test-threads=1 --nocapture
    fi
    # Device faults (tests/gpu_faults.rs), when carried as carry/gpu_faults: a 2 KiB PoRep
    # with faults injected on the GPU (parameters from $CUZK_TEST_PARAMS, generated there
    # when missing; a sector sealed on the spot).
    if [ -x carry/gpu_faults ]; then
        run_tests gpu_faults faults.log 600 --test-threads=1 --nocapture
    fi
fi
if [ "${1:-}" = bench ]; then
    shift
    rc=0
    timeout "${BENCH_TIMEOUT:-300}" carry/cuzk bench gpu "$@" 2>&1 | tee "$OUT/bench.log" || rc=$?
    if [ "$rc" != 0 ]; then
        echo "gpu-device-run: bench failed (exit $rc)" >&2
        failed=1
    fi
fi
exit "$failed"
