#!/usr/bin/env bash
# The device memory plan (gpu.memory_limit) on the GPU host, from binaries carried in carry/
# (built on the dev machine: cuzk as carry/cuzk, the test binary of tests/gpu_small.rs as
# carry/gpu_small). Logs go to $OUT when set. Steps, in the order given:
#   tests                 2 KiB PoRep parameters made here (about 2 minutes on 16 cores), then
#                         tests/gpu_small.rs: every plan's proofs equal the unlimited ones, its
#                         estimate covers the measured peak, and they verify through the proving
#                         service on the device; the MSM's working estimate against the device;
#                         a set proved between another's turns keeps the driver's margin
#   partition LIMITS      the 32 GiB synthetic partition's device stage under each limit of the
#                         comma list (0: none), proofs compared with the first
#   sector LIMIT          the same, then a whole synthetic 32 GiB sector under LIMIT
#   held FREE             another process holds the card's memory but FREE; the partition's
#                         device stage with no limit beside it
# Fails when a step fails, so that a figure from a failed run is never read as a result.
set -uo pipefail
OUT="${OUT:-/tmp}"
export CUZK_GPU_CACHE="$PWD/carry/cache"
export CUZK_TEST_PARAMS="${CUZK_TEST_PARAMS:-/tmp/cuzk-params}"
export FIL_PROOFS_PARAMETER_CACHE="$CUZK_TEST_PARAMS"
mkdir -p "$CUZK_GPU_CACHE" "$CUZK_TEST_PARAMS"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader || exit 1
failed=0
partition() {
    # partition LOG EXTRA-ARGS...
    local log="$OUT/$1"
    shift
    local rc=0
    timeout "${BENCH_TIMEOUT:-480}" carry/cuzk bench partition --sector-size 32GiB --synthetic \
        --no-reference --timed-runs 1 --kernel-cache "$CUZK_GPU_CACHE" "$@" >"$log" 2>&1 || rc=$?
    grep -E "^\||device stage|memory plan|same proofs|differ|rror" "$log" | tail -60
    if [ "$rc" != 0 ]; then
        tail -5 "$log"
        echo "small-gpu-device-run: partition $* failed (exit $rc)" >&2
        failed=1
    fi
}
while [ $# -gt 0 ]; do
    step=$1
    shift
    case "$step" in
    tests)
        carry/cuzk params generate --sector-size 2KiB --kind porep --dir "$CUZK_TEST_PARAMS" \
            >"$OUT/params.log" 2>&1 || { echo "parameters failed" >&2; failed=1; }
        rc=0
        timeout "${TEST_TIMEOUT:-600}" carry/gpu_small --include-ignored --test-threads=1 \
            --nocapture >"$OUT/small.log" 2>&1 || rc=$?
        grep -E "^test |test result|panicked|limit|forms|assert" "$OUT/small.log" | tail -40
        if [ "$rc" != 0 ] || ! grep -qE "test result: ok\. [1-9][0-9]* passed" "$OUT/small.log"; then
            echo "small-gpu-device-run: gpu_small failed (exit $rc)" >&2
            failed=1
        fi
        ;;
    partition)
        partition partition.log --gpu-memory-limit "$1"
        shift
        ;;
    sector)
        partition sector.log --gpu-memory-limit "$1" --sector
        shift
        ;;
    held)
        free=$1
        shift
        carry/cuzk bench hold-gpu --leave "$free" >"$OUT/hold-$free.log" 2>&1 &
        hog=$!
        for _ in $(seq 1 120); do
            grep -q holding "$OUT/hold-$free.log" && break
            sleep 0.5
        done
        cat "$OUT/hold-$free.log"
        if ! kill -0 "$hog" 2>/dev/null || ! grep -q holding "$OUT/hold-$free.log"; then
            # Without the holder the run would be one with no limit, read as a held one.
            echo "small-gpu-device-run: hold-gpu --leave $free did not hold the memory" >&2
            failed=1
            kill "$hog" 2>/dev/null
            wait "$hog" 2>/dev/null
            continue
        fi
        nvidia-smi --query-gpu=memory.used,memory.free --format=csv,noheader
        partition "held-$free.log"
        kill "$hog"
        wait "$hog" 2>/dev/null
        ;;
    *)
        echo "small-gpu-device-run: unknown step $step" >&2
        exit 2
        ;;
    esac
done
exit "$failed"
