#!/usr/bin/env bash
# WinningPoSt latency through the daemon, idle and behind a queue of 2 KiB PoRep jobs, for the
# daemon binary carry/$1 (workers = 1, the default), on the GPU host: parameters in
# /tmp/params and a sealed sample in /tmp/s (cuzk params generate, cuzk sample). Prints one
# line; docs/benchmarks.md records a run. Exits non-zero when the daemon does not start, a
# WinningPoSt or a PoRep submission fails (the line is printed all the same, FAIL marking
# each failed proof).
set -u
d=$1; sock=/tmp/$d.sock; conf=/tmp/$d.toml
failed=0
printf '[socket]\npath = "%s"\n[params]\ndir = "/tmp/params"\n[daemon]\nallow_root = true\n' "$sock" >"$conf"
carry/$d --config "$conf" 2>/tmp/$d.log &
pid=$!
for _ in $(seq 1 300); do [ -S "$sock" ] && break; sleep 0.1; done
if [ ! -S "$sock" ]; then
    echo "winning-latency: $d did not listen on $sock within 30 s" >&2
    tail -5 /tmp/$d.log >&2
    kill $pid 2>/dev/null
    exit 1
fi
c() { carry/cuzk "$@" --socket "$sock"; }
# One WinningPoSt's wall time in ms; a failed one is marked and counted (in this shell: w runs
# in $(...), so it reports through a file).
w() {
    local s; s=$(date +%s%N)
    if ! c prove winning-post --input /tmp/s/winning-post.json --out /tmp/w.bin >/dev/null 2>/tmp/w.err; then
        echo -n "FAIL:"; head -c 200 /tmp/w.err; touch /tmp/w.failed
    fi
    echo "$(( ($(date +%s%N) - s) / 1000000 ))ms"
}
rm -f /tmp/w.failed
w >/dev/null  # warm: parameters resident, kernels compiled
idle="$(w) $(w) $(w)"
for i in $(seq 1 12); do
    if ! c submit porep --c1 /tmp/s/c1.json --miner-id 1000 --sector-number 1 >/dev/null; then
        echo "winning-latency: PoRep submission $i failed" >&2
        failed=1
    fi
done
sleep 2
q1=$(w); sleep 1; q2=$(w); sleep 1; q3=$(w)
left=$(c status --json 2>/dev/null | grep -o '"Queued"' | wc -l)
echo "$d idle: $idle | behind the queue: $q1 $q2 $q3 (PoRep jobs still queued after: $left)"
[ -e /tmp/w.failed ] && { echo "winning-latency: a WinningPoSt failed" >&2; failed=1; }
kill $pid; wait $pid 2>/dev/null
exit "$failed"
