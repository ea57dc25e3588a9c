#!/usr/bin/env bash
# A kernel variant against the default kernels on the GPU host, from binaries carried in carry/
# (built on the dev machine: cuzk as carry/cuzk, the test binary of tests/gpu_kernels.rs as
# carry/gpu_kernels). For each variant named (NVRTC defines, comma-separated for one variant,
# e.g. CUZK_MSM_DFMA or CUZK_MSM_DFMA,CUZK_F64_INT_COLUMNS): the MSM and curve kernel tests
# built with it (against blst, edge patterns included), then `cuzk bench gpu` once with the
# default kernels and once per variant, in the same call on the same card, each checked
# against blst at its smallest size. A variant that starts with `--` is a bench flag instead
# (e.g. --msm-batch-affine, whose own test is among the MSM tests): the tests run once with the
# default kernels for it. Logs go to $OUT when set.
#   scripts/variant-device-run.sh VARIANT... (BENCH_ARGS overrides the bench's sizes)
# Fails when a test or a bench run fails, so that a figure of a failed run is never read.
set -uo pipefail
OUT="${OUT:-/tmp}"
export CUZK_GPU_CACHE="${CUZK_GPU_CACHE:-$PWD/carry/cache}"
mkdir -p "$CUZK_GPU_CACHE"
nvidia-smi --query-gpu=name,clocks.sm,memory.total --format=csv,noheader || exit 1
read -r -a bench_args <<<"${BENCH_ARGS:---g1 22,27 --g2 --ntt --h 27 --aux --timed-runs 3}"
failed=0
for v in "$@"; do
    log="$OUT/tests-$v.log"
    define=$v
    case "$v" in --*) define= ;; esac
    CUZK_TEST_NVRTC_DEFINES=$define timeout "${TEST_TIMEOUT:-240}" carry/gpu_kernels --include-ignored \
        msm field_and_curve --test-threads=1 --nocapture >"$log" 2>&1
    rc=$?
    echo "== $v: kernel tests exit $rc"
    grep -E "^test |test result|panicked|seed" "$log" | tail -12
    if [ "$rc" != 0 ] || ! grep -qE "test result: ok\. [1-9][0-9]* passed" "$log"; then failed=1; fi
done
for v in default "$@"; do
    def=()
    case "$v" in
    default) ;;
    --*) def=("$v") ;;
    *) def=(--nvrtc-define "$v") ;;
    esac
    log="$OUT/bench-$v.log"
    timeout "${BENCH_TIMEOUT:-150}" carry/cuzk bench gpu "${bench_args[@]}" --check \
        --kernel-cache "$CUZK_GPU_CACHE" "${def[@]}" >"$log" 2>&1
    rc=$?
    echo "== $v: bench exit $rc"
    grep -vE "DEBUG|TRACE" "$log" | tail -25
    [ "$rc" = 0 ] || failed=1
done
exit "$failed"
