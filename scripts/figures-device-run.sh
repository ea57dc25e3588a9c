#!/usr/bin/env bash
# Re-measures on the GPU host the figures issue 34 flagged in docs/benchmarks.md, with the
# benchmarks as they are now, from binaries carried in carry/ (carry/cuzk; a cubin compiled
# here may wait in carry/cache):
#   1. `cuzk bench <kind>` for the four 2 KiB kinds on the GPU, then on the CPU (--cpu): the
#      reference is filecoin-proofs' CPU prover alone in a process of its own (its own peak
#      RSS), verified by filecoin-proofs' verifier;
#   2. `cuzk bench gpu --check` at the sizes of the session-29 table: the MSMs' smallest size
#      checked against blst's own Pippenger, the sppark ratio as our best against its best of 3
#      (ANCHORS.md, 2026-11-29, printed beside it).
# The 2 KiB parameters are generated in /tmp/params (`cuzk params generate --kind all`, about
# 2 minutes) and a sealed sample is made in /tmp/s where they are missing. About 5 to 6
# minutes in all: every step has a limit of its own and the whole run a deadline (DEADLINE
# seconds, default 345); a step the deadline leaves no time for is not started and counts
# as failed. Logs go to $OUT (default /tmp), one file per step; exits non-zero when a step
# failed (the others still run).
#   scripts/figures-device-run.sh
set -uo pipefail
OUT="${OUT:-/tmp}"
export CUZK_GPU_CACHE="$PWD/carry/cache"
params=/tmp/params
sample=/tmp/s
export FIL_PROOFS_PARAMETER_CACHE="$params"
deadline=${DEADLINE:-345}
failed=0
# step NAME LIMIT COMMAND...: runs COMMAND under LIMIT seconds (less where the deadline is
# nearer) into $OUT/NAME.txt and prints its table (or its tail); a failure is counted.
step() {
    local name=$1 limit=$2 rc=0 left=$((deadline - SECONDS))
    shift 2
    if [ "$left" -lt 5 ]; then
        echo "figures-device-run: $name not started: the deadline (${deadline} s) has come" >&2
        failed=1
        return
    fi
    [ "$left" -lt "$limit" ] && limit=$left
    echo "== $name (at ${SECONDS} s, limit ${limit} s)"
    timeout "$limit" "$@" >"$OUT/$name.txt" 2>&1 || rc=$?
    grep -aE "^(reference|run|cuzk|filecoin-proofs|op|NTT|coset|G1|G2|device|[0-9]+ timed)" "$OUT/$name.txt" ||
        tail -5 "$OUT/$name.txt"
    if [ "$rc" != 0 ]; then
        echo "figures-device-run: $name failed (exit $rc)" >&2
        tail -5 "$OUT/$name.txt" >&2
        failed=1
    fi
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader || exit 1
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(grep -c avx512ifma /proc/cpuinfo) with IFMA"
mkdir -p "$params"
step params 240 carry/cuzk params generate --sector-size 2KiB --kind all --dir "$params"
if [ ! -e "$sample/c1.json" ]; then
    step sample 120 carry/cuzk sample --out "$sample"
fi
for backend in gpu cpu; do
    flag=()
    [ "$backend" = cpu ] && flag=(--cpu)
    step "$backend-porep" 120 carry/cuzk bench ${flag[@]+"${flag[@]}"} --param-dir "$params" --runs 2 \
        porep --c1 "$sample/c1.json" --miner-id 1000 --sector-number 1
    step "$backend-snap" 90 carry/cuzk bench ${flag[@]+"${flag[@]}"} --param-dir "$params" --runs 2 \
        snap --input "$sample/snap.json"
    step "$backend-winning-post" 60 carry/cuzk bench ${flag[@]+"${flag[@]}"} --param-dir "$params" --runs 3 \
        winning-post --input "$sample/winning-post.json"
    step "$backend-window-post" 60 carry/cuzk bench ${flag[@]+"${flag[@]}"} --param-dir "$params" --runs 3 \
        window-post --input "$sample/window-post.json"
done
# The GPU rows must have been proved on the GPU: a backend that fell back to the CPU names
# itself `cpu` in the rows' labels.
for kind in porep snap winning-post window-post; do
    if [ -e "$OUT/gpu-$kind.txt" ] && ! grep -q "^cuzk warm (cuda:" "$OUT/gpu-$kind.txt"; then
        echo "figures-device-run: gpu-$kind was not proved on a GPU" >&2
        failed=1
    fi
done
step bench-gpu 150 carry/cuzk bench gpu --g1 24,26,27 --g2 24,26 --ntt 24,26,27 --h --aux \
    --upload --check
echo "== done at ${SECONDS} s"
exit "$failed"
