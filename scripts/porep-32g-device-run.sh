#!/usr/bin/env bash
# A 32 GiB PoRep proved by cuzkd and checked by filecoin-proofs' verifier, on the GPU host
# (issue 32, item 3), from binaries carried in carry/ (stripped release builds: carry/cuzk with
# the default features, carry/cuzkd; a cubin compiled earlier may wait in carry/cache). BIN=DIR
# takes the two binaries from DIR instead (another build beside them, for an A/B on one machine).
#
# The parameters are cuzk's own setup with fresh random secrets (`cuzk params setup --gpu`),
# NOT the ceremony's; the C1 output is a satisfiable one made without sealing
# (`cuzk sample --satisfiable`). Steps, each with the time estimated from the 2 KiB and
# 32 GiB measurements in docs/benchmarks.md (16 cores, H200):
#   1. satisfiable 32 GiB C1 output                               ~3 s (3.0 s on 2 cores)
#   2. 32 GiB parameters on the GPU: shape ~25 s, scalars ~20 s, points ~20 s on the device,
#      47.5 GB written (disk bound, ~30-60 s)                     ~100-130 s
#   3. cold load: page cache dropped, cuzkd started, `cuzk preload` ~30-60 s (goal <= 60 s)
#   4. first proof over the socket (records the shape)            ~55 s
#   5. next proof                                                 ~25 s
#   6. filecoin-proofs' verify_seal on the proof, a tampered one  ~2 s
#   7. cuzkd restarted, warm load from the page cache             ~10-15 s (goal <= 15 s)
# In all about 5 minutes; every step runs under a deadline (DEADLINE seconds from the start,
# default 540) so the call ends with what it has. A table of the measurements ends the output.
# Disk: only the 47.5 GB .params file and the 38 MB C1 output are written (64 GiB disk).
#   scripts/porep-32g-device-run.sh [setup|prove|all|queued]   (default all; `prove` and
#   `queued` reuse /tmp/p32 and /tmp/s32 from an earlier `setup` on the same machine, `queued`
#   makes them where missing)
# `queued`: after the cold load, QUEUED (default 4) proofs submitted together, each checked by
# verify_seal; prints when each finished and the steady time per proof, (last - first) /
# (QUEUED - 1), the figure of a device-bound pipeline.
# BUDGET=80GiB (any size proving.memory_budget takes) is written into cuzkd's configuration;
# without it cuzkd's default applies. Host memory is reported at each step: RSS and VmHWM
# after the load (a VmHWM above the RSS is a transient copy), the peak RSS sampled every
# 0.2 s and the VmHWM under the proofs, and the budget's parts (`cuzk status`).
# SIZE=2KiB P=DIR scripts/porep-32g-device-run.sh prove tries the same steps at 2 KiB with the
# parameters in DIR, on any machine (cuzkd proves on the CPU where no GPU is found).
# Exits non-zero when any step fails (the preloads, a proof, the daemon's start) or when
# verify_seal refuses the proof or accepts the tampered one, after the summary table, so that
# a figure from a failed run is never read as a result.
set -uo pipefail
OUT="${OUT:-/tmp}"
deadline=${DEADLINE:-540}
what=${1:-all}
export CUZK_GPU_CACHE="$PWD/carry/cache"
BIN=${BIN:-carry}
SIZE=${SIZE:-32GiB}
P=${P:-/tmp/p32} S=/tmp/s32-$SIZE D=/tmp/d32
SOCK=$D/cuzk.sock
MINER=1000 SECTOR=1
left() { echo $((deadline - SECONDS > 1 ? deadline - SECONDS : 1)); }
declare -A row
failed=()
note() { row[$1]=$2; echo "[$SECONDS s] $1: $2"; }
# fail STEP WHY: the step's row says it failed, and the script's exit status will.
fail() { note "$1" "FAILED: $2"; failed+=("$1"); }
summary() {
    echo "== summary (at $SECONDS s; parameters: fresh setup, NOT the ceremony's)"
    printf '%-34s %s\n' "measure" "value"
    for k in "satisfiable C1" "parameter setup (GPU)" ".params size" "cold load (preload)" \
        "memory budget" "RSS after load" "VmHWM after load" "first proof" "next proof" \
        "verify_seal" "tampered proof" "warm load (page cache)" "queued proofs finished at (s)" \
        "queued: steady time per proof" "queued: verify_seal accepted" "peak RSS (sampled)" \
        "peak RSS (cuzkd)"; do
        printf '%-34s %s\n' "$k" "${row[$k]:-not measured}"
    done
}
# The summary, and the exit status: non-zero where a step failed.
finish() {
    local rc=$?
    summary
    if [ ${#failed[@]} -gt 0 ]; then
        echo "porep-32g-device-run: FAILED: ${failed[*]}" >&2
        [ "$rc" != 0 ] || rc=1
    fi
    exit "$rc"
}
trap finish EXIT
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader ||
    [ "$SIZE" != 32GiB ] || exit 1
echo "host: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; disk free: $(df -h /tmp | awk 'NR==2 {print $4}')"
ms() { date +%s%3N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f s", (b - a) / 1000 }'; }

if [ "$what" = all ] || [ "$what" = setup ] || [ ! -e "$S/c1.json" ]; then
    rm -rf "$S"
    t=$(ms)
    "$BIN"/cuzk sample --satisfiable --sector-size "$SIZE" --miner-id $MINER --sector-number $SECTOR \
        --out "$S" >"$OUT/sample.txt" 2>&1 || { cat "$OUT/sample.txt"; exit 1; }
    note "satisfiable C1" "$(secs "$t" "$(ms)"), $(du -m "$S/c1.json" | cut -f1) MB"
fi
if [ "$what" = all ] || [ "$what" = setup ] || { [ "$what" = queued ] && ! ls "$P"/*.params >/dev/null 2>&1; }; then
    rm -rf "$P"
    t=$(ms)
    timed=; [ -x /usr/bin/time ] && timed="/usr/bin/time -v"
    timeout "$(left)" $timed "$BIN"/cuzk params setup --gpu --sector-size "$SIZE" \
        --dir "$P" >"$OUT/setup.txt" 2>&1
    rc=$?
    grep -aE "cuzk:|written|Maximum resident|Elapsed" "$OUT/setup.txt" | tail -12
    [ $rc = 0 ] || { echo "setup failed (exit $rc)"; tail -20 "$OUT/setup.txt"; exit 1; }
    note "parameter setup (GPU)" "$(secs "$t" "$(ms)") ($(grep -a written "$OUT/setup.txt" | sed 's/.*written //'))"
    note ".params size" "$(du -BG "$P"/*.params | cut -f1)"
fi
[ "$what" = setup ] && exit 0

# cuzkd with the parameter directory, on its own socket, as root.
start_daemon() {
    rm -rf "$D"; mkdir -p "$D"
    cat >"$D/cuzk.toml" <<EOF
[socket]
path = "$SOCK"
[params]
dir = "$P"
[daemon]
allow_root = true
[gpu]
kernel_cache = "$CUZK_GPU_CACHE"
EOF
    [ -z "${BUDGET:-}" ] || printf '[proving]\nmemory_budget = "%s"\n' "$BUDGET" >>"$D/cuzk.toml"
    "$BIN"/cuzkd --config "$D/cuzk.toml" >"$OUT/cuzkd-$1.log" 2>&1 &
    DAEMON=$!
    # The largest VmRSS seen, every 0.2 s, until the daemon exits (VmHWM is the kernel's own
    # peak; the two differ by what lived less than a sample).
    (peak=0; while kb=$(awk '/VmRSS/ {print $2}' /proc/$DAEMON/status 2>/dev/null) && [ -n "$kb" ]; do
        [ "$kb" -gt "$peak" ] && peak=$kb && echo "$peak" >"$D/peak-rss"; sleep 0.2; done) &
    for _ in $(seq 600); do [ -S "$SOCK" ] && return 0; sleep 0.1; done
    echo "cuzkd did not open its socket"; tail -20 "$OUT/cuzkd-$1.log"; exit 1
}
stop_daemon() {
    if [ -n "${DAEMON:-}" ]; then
        note "peak RSS (sampled)" "$(awk '{printf "%.1f GiB", $1 / 1048576}' "$D/peak-rss" 2>/dev/null)"
        note "peak RSS (cuzkd)" "VmHWM $(hwm)"
        client status | grep -aE "host memory|held besides|process:" | tee "$OUT/status-$1.txt"
        kill "$DAEMON"; wait "$DAEMON" 2>/dev/null; DAEMON=
    fi
}
rss() { awk '/VmRSS/ {printf "%.1f GiB", $2 / 1048576}' /proc/$DAEMON/status; }
hwm() { awk '/VmHWM/ {printf "%.1f GiB", $2 / 1048576}' /proc/$DAEMON/status; }
# cuzk CMD ARGS… against the daemon, waiting for answers as long as the deadline allows.
client() { timeout "$(left)" "$BIN"/cuzk "$@" --socket "$SOCK" --answer-timeout 0; }
params_file=$(ls "$P"/v28-stacked-proof-of-replication-*.params | head -1)

# Cold: the .params file's pages dropped from the page cache (clean once synced: the setup
# synced it), the rest of the cache left alone.
sync "$params_file"
python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)" "$params_file" ||
    echo "could not drop the file from the page cache: the cold load is not cold"
start_daemon cold
t=$(ms)
if client preload porep "$SIZE" | tee "$OUT/preload-cold.txt"; then
    note "cold load (preload)" "$(secs "$t" "$(ms)") ($(grep -a loaded "$OUT/preload-cold.txt"))"
    note "RSS after load" "$(rss)"
    note "VmHWM after load" "$(hwm)"
    note "memory budget" "$(client status | grep -a "host memory" | sed 's/.*, //')"
    client status | grep -aE "held besides|process:"
else
    fail "cold load (preload)" "exit ${PIPESTATUS[0]}"
fi

prove() {
    local t
    t=$(ms)
    client prove porep --c1 "$S/c1.json" --miner-id $MINER --sector-number $SECTOR \
        --out "$D/proof-$1.bin" >"$OUT/prove-$1.txt" 2>&1
    local rc=$?
    tail -4 "$OUT/prove-$1.txt"
    [ $rc = 0 ] || { echo "prove $1 failed (exit $rc)"; fail "$1 proof" "exit $rc"; return 1; }
    note "$1 proof" "$(secs "$t" "$(ms)"), RSS $(rss)"
}
if [ "$what" = queued ]; then
    n=${QUEUED:-4}
    t=$(ms)
    pids=()
    for i in $(seq 1 "$n"); do
        (client prove porep --c1 "$S/c1.json" --miner-id $MINER --sector-number $SECTOR \
            --out "$D/proof-q$i.bin" >"$OUT/prove-q$i.txt" 2>&1 && echo "$(ms)" >"$D/done-q$i") &
        pids+=($!)
    done
    proved=0
    for pid in "${pids[@]}"; do wait "$pid" && proved=$((proved + 1)); done
    [ "$proved" = "$n" ] || fail "queued proofs" "$((n - proved)) of $n failed"
    stop_daemon queued
    done_at=$(for i in $(seq 1 "$n"); do [ -e "$D/done-q$i" ] && cat "$D/done-q$i"; done | sort -n |
        awk -v t="$t" '{printf "%s%.1f", (NR > 1 ? ", " : ""), ($1 - t) / 1000}')
    note "queued proofs finished at (s)" "$done_at"
    steady=$(for i in $(seq 1 "$n"); do [ -e "$D/done-q$i" ] && cat "$D/done-q$i"; done | sort -n |
        awk 'NR == 1 {a = $1} {b = $1; k = NR} END {if (k > 1) printf "%.1f s", (b - a) / 1000 / (k - 1); else print "-"}')
    note "queued: steady time per proof" "$steady"
    ok=0
    for i in $(seq 1 "$n"); do
        "$BIN"/cuzk verify porep --param-dir "$P" --c1 "$S/c1.json" --proof "$D/proof-q$i.bin" \
            --miner-id $MINER --sector-number $SECTOR >"$OUT/verify-q$i.txt" 2>&1 && ok=$((ok + 1))
    done
    if [ "$ok" = "$n" ]; then
        note "queued: verify_seal accepted" "$ok of $n"
    else
        fail "queued: verify_seal accepted" "$ok of $n"
    fi
    echo "queued: $n proofs, finished at $done_at s; steady $steady per proof; verify_seal accepted $ok of $n"
    exit 0
fi

prove first && prove next
stop_daemon proofs

# filecoin-proofs' verify_seal outside the daemon, on the proof and on a tampered copy.
if [ -e "$D/proof-next.bin" ]; then
    t=$(ms)
    if "$BIN"/cuzk verify porep --param-dir "$P" --c1 "$S/c1.json" --proof "$D/proof-next.bin" \
        --miner-id $MINER --sector-number $SECTOR; then
        note "verify_seal" "accepted ($(secs "$t" "$(ms)"))"
    else
        fail "verify_seal" "REFUSED"
    fi
    # The last partition's A and C swapped: valid points, a wrong proof (a flipped bit would
    # mostly be refused as a point off the curve, before any pairing).
    python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); p = len(b) - 192; b[p:p + 48], b[p + 144:p + 192] = b[p + 144:p + 192], b[p:p + 48]; open(sys.argv[2], 'wb').write(b)" \
        "$D/proof-next.bin" "$D/tampered.bin"
    if "$BIN"/cuzk verify porep --param-dir "$P" --c1 "$S/c1.json" --proof "$D/tampered.bin" \
        --miner-id $MINER --sector-number $SECTOR; then
        fail "tampered proof" "ACCEPTED (wrong)"
    else
        note "tampered proof" "refused"
    fi
else
    fail "verify_seal" "no proof to verify"
fi

# Warm: a second start reads the file from the page cache.
start_daemon warm
t=$(ms)
if client preload porep "$SIZE" | tee "$OUT/preload-warm.txt"; then
    note "warm load (page cache)" "$(secs "$t" "$(ms)") ($(grep -a loaded "$OUT/preload-warm.txt"))"
else
    fail "warm load (page cache)" "exit ${PIPESTATUS[0]}"
fi
kill "$DAEMON"; wait "$DAEMON" 2>/dev/null; DAEMON=
