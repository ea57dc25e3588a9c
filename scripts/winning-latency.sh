#!/usr/bin/env bash
# WinningPoSt latency through the daemon, idle and behind a queue of 2 KiB PoRep jobs, for the
# daemon binary carry/$1 (workers = 1, the default), on the GPU host: parameters in
# /tmp/params and a sealed sample in /tmp/s (cuzk params generate, cuzk sample). Prints one
# line; docs/benchmarks.md records a run.
set -u
d=$1; sock=/tmp/$d.sock; conf=/tmp/$d.toml
printf '[socket]\npath = "%s"\n[params]\ndir = "/tmp/params"\n[daemon]\nallow_root = true\n' "$sock" >"$conf"
carry/$d --config "$conf" 2>/tmp/$d.log &
pid=$!
for _ in $(seq 1 300); do [ -S "$sock" ] && break; sleep 0.1; done
c() { carry/cuzk "$@" --socket "$sock"; }
w() { local s; s=$(date +%s%N); c prove winning-post --input /tmp/s/winning-post.json --out /tmp/w.bin >/dev/null 2>/tmp/w.err || { echo -n "FAIL:"; head -c 200 /tmp/w.err; }; echo "$(( ($(date +%s%N) - s) / 1000000 ))ms"; }
w >/dev/null  # warm: parameters resident, kernels compiled
idle="$(w) $(w) $(w)"
for i in $(seq 1 12); do c submit porep --c1 /tmp/s/c1.json --miner-id 1000 --sector-number 1 >/dev/null; done
sleep 2
q1=$(w); sleep 1; q2=$(w); sleep 1; q3=$(w)
left=$(c status --json 2>/dev/null | grep -o '"Queued"' | wc -l)
echo "$d idle: $idle | behind the queue: $q1 $q2 $q3 (PoRep jobs still queued after: $left)"
kill $pid; wait $pid 2>/dev/null
