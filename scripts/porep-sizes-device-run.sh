#!/usr/bin/env bash
# Real PoRep C2 at the sizes issue 15 names (8 MiB, 512 MiB) on the GPU host, in one call,
# from binaries carried in carry/. Each size's parameters go to /tmp/params-SIZE and a sealed
# sample (PoRep only) to /tmp/s-SIZE, all sizes prepared at once in the background; then, as
# each size is ready:
#   - `cuzk bench partition --c1`: our circuit split on every core against
#     storage-proofs-porep's circuit whole on one thread (digests), our native witness against
#     bellperson's gadgets, the shape's evaluation, the device stage;
#   - `cuzk bench porep --runs 1`: real proofs on the GPU, each verified by the proving
#     service's verifier before it counts, beside filecoin-proofs' own CPU prover in a
#     process of its own.
# Every step runs under a deadline (DEADLINE seconds from the start, default 570) so the call
# ends with what it has. Timings of a size benched while another is being prepared share the
# CPU with that preparation. docs/benchmarks.md records a run. Exits non-zero when any step
# failed: a size not prepared (its parameters or sample failed, or the deadline came first),
# a benchmark's exit status, or fewer than 3 bit-identical checks.
#   scripts/porep-sizes-device-run.sh SIZE...      e.g. 8MiB 512MiB (smallest first)
set -uo pipefail
OUT="${OUT:-/tmp}"
deadline=${DEADLINE:-570}
export CUZK_GPU_CACHE="$PWD/carry/cache"
left() { echo $((deadline - SECONDS > 1 ? deadline - SECONDS : 1)); }
prepare() {
    local size=$1 start=$SECONDS
    mkdir -p "/tmp/params-$size"
    carry/cuzk params generate --sector-size "$size" --kind porep --dir "/tmp/params-$size" \
        >"$OUT/params-$size.txt" 2>&1 &
    local params=$! ok=1
    if [ ! -e "/tmp/s-$size/c1.json" ] && ! carry/cuzk sample --porep-only --out "/tmp/s-$size" \
        --proof "StackedDrg${size}V1_1" >"$OUT/sample-$size.txt" 2>&1; then
        echo "[$size sample failed]"; tail -3 "$OUT/sample-$size.txt"; ok=0
    else
        echo "[$size sample ready at $((SECONDS - start)) s]"
    fi
    if ! wait $params; then
        echo "[$size params failed]"; tail -3 "$OUT/params-$size.txt"; ok=0
    else
        echo "[$size params ready at $((SECONDS - start)) s]"
    fi
    # Only a size whose parameters and sample are both there is benched.
    if [ "$ok" = 1 ]; then touch "/tmp/ready-$size"; else touch "/tmp/failed-$size"; fi
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || exit 1
for size in "$@"; do
    rm -f "/tmp/ready-$size" "/tmp/failed-$size"
    prepare "$size" &
done
summary=()
failed=0
for size in "$@"; do
    while [ ! -e "/tmp/ready-$size" ] && [ ! -e "/tmp/failed-$size" ] && [ "$(left)" -gt 1 ]; do sleep 2; done
    if [ -e "/tmp/failed-$size" ]; then
        summary+=("$size: its parameters or sample failed"); failed=1; continue
    fi
    [ -e "/tmp/ready-$size" ] || { summary+=("$size: not prepared before the deadline"); failed=1; break; }
    echo "== $size: bench partition --c1 (at $SECONDS s)"
    timeout "$(left)" carry/cuzk bench partition --c1 "/tmp/s-$size/c1.json" \
        --kernel-cache carry/cache --timed-runs 1 >"$OUT/partition-$size.txt" 2>&1
    rc=$?
    grep -aE "synthesis|witness|evaluated|recorded|DIFFERENT|identical|device" "$OUT/partition-$size.txt" | head -30
    same=$(grep -ac "bit-identical" "$OUT/partition-$size.txt")
    summary+=("$size partition: rc=$rc, bit-identical checks passed: $same of 3")
    if [ "$rc" != 0 ] || [ "$same" -lt 3 ]; then failed=1; fi
    echo "== $size: bench porep (at $SECONDS s)"
    timeout "$(left)" carry/cuzk bench porep --runs 1 --c1 "/tmp/s-$size/c1.json" \
        --miner-id 1000 --sector-number 1 --param-dir "/tmp/params-$size" \
        --kernel-cache carry/cache >"$OUT/porep-$size.txt" 2>&1
    rc=$?
    tail -8 "$OUT/porep-$size.txt"
    summary+=("$size porep: rc=$rc $(grep -a 'cuzk warm' "$OUT/porep-$size.txt" | head -1 | tr -s ' ')")
    [ "$rc" = 0 ] || failed=1
done
echo "== summary (at $SECONDS s)"
printf '%s\n' "${summary[@]}"
exit "$failed"
