#!/usr/bin/env bash
# `cuzk bench pipeline` on the GPU host, from binaries carried in carry/ (cuzk, cuzkd, and
# optionally an earlier daemon as carry/cuzkd-old to measure against in the same call).
# Generates the 2 KiB PoRep and WinningPoSt parameters in /tmp/params and a sealed sample in
# /tmp/s where they are missing, samples nvidia-smi's utilization during each run, and prints
# each run's table. docs/benchmarks.md records a run. Exits non-zero when a run or its plan
# failed (every run is still made and printed).
#   scripts/pipeline-device-run.sh JOBS [LABEL:DAEMON:--set k=v ...] ...
# e.g. scripts/pipeline-device-run.sh 64 new:cuzkd old:cuzkd-old "t14:cuzkd:--set proving.synthesis_threads=14"
set -uo pipefail
OUT="${OUT:-/tmp}"
jobs=$1
shift
failed=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || exit 1
for k in winning-post porep; do
    carry/cuzk params generate --sector-size 2KiB --kind "$k" --dir /tmp/params >/dev/null || exit 1
done
[ -e /tmp/s/c1.json ] || carry/cuzk sample --out /tmp/s >/dev/null || exit 1
for run in "$@"; do
    label=${run%%:*}
    rest=${run#*:}
    daemon=${rest%%:*}
    flags=""
    [ "$rest" != "$daemon" ] && flags=${rest#*:}
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 200 >"$OUT/util-$label.txt" &
    smi=$!
    # shellcheck disable=SC2086 # the flags are words
    rc=0
    timeout 300 carry/cuzk bench pipeline --jobs "$jobs" --param-dir /tmp/params --sample /tmp/s \
        --daemon "carry/$daemon" $flags >"$OUT/pipeline-$label.txt" 2>&1 || rc=$?
    echo "[$label rc=$rc]"
    if [ "$rc" != 0 ]; then
        echo "pipeline-device-run: run $label failed (exit $rc)" >&2
        failed=1
    fi
    kill $smi 2>/dev/null
    cat "$OUT/pipeline-$label.txt"
    awk '{s+=$1; n++} END {if (n) printf "nvidia-smi utilization, mean of %d samples over the whole run: %.1f %%\n", n, s/n}' "$OUT/util-$label.txt"
    # cuzk plan's prediction of the same batch from the per-partition costs the run measured
    # (its synthesis and device means); for a daemon of this tree with default sizes only.
    costs=$(sed -n 's/^| per partition: synthesis \/ device wait \/ device | \([0-9]*\) \/ [0-9]* \/ \([0-9]*\) ms.*/\1 \2/p' "$OUT/pipeline-$label.txt")
    if [ -n "$costs" ] && [ -z "$flags" ]; then
        read -r synth_ms dev_ms <<<"$costs"
        synth=$(awk "BEGIN {print $synth_ms / 1000}")
        dev=$(awk "BEGIN {print $dev_ms / 1000}")
        echo "cuzk plan --jobs $jobs --synthesis $synth --device $dev --verification 0.01:"
        if ! carry/cuzk plan --jobs "$jobs" --synthesis "$synth" --device "$dev" --verification 0.01 >"$OUT/plan-$label.txt" 2>&1; then
            echo "pipeline-device-run: cuzk plan failed for $label" >&2
            failed=1
        fi
        grep -E "wall|proofs/min|device busy" "$OUT/plan-$label.txt"
    fi
done
exit "$failed"
