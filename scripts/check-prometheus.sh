#!/usr/bin/env bash
# The metrics under Prometheus's own parser: starts a real cuzkd (CPU backend) with
# metrics.textfile set, waits for the file, and runs `promtool check metrics` on it (also with
# the 2 KiB PoRep parameters resident, which must be in $CUZK_TEST_PARAMS), on
# `cuzk metrics --prometheus` and on the file cuzkd leaves at shutdown. Any promtool error or
# lint problem (a missing HELP, a counter without _total, a non-base unit, ...) fails the
# script. .ci/run calls it after the Go client's check.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-target}"
export CUZK_TEST_PARAMS="${CUZK_TEST_PARAMS:-/var/tmp/filecoin-proof-parameters}"
tools="${CUZK_CI_TOOLS:-/var/tmp/cuzk-ci-tools}"

# promtool ships in Debian's `prometheus` package. Installing that package would also set
# up (and, through its init script, start) a Prometheus server; only promtool is wanted, so
# it is taken out of the package and kept outside the clone for the next run.
if command -v promtool >/dev/null 2>&1; then
  promtool="$(command -v promtool)"
else
  promtool="$tools/promtool"
  if [ ! -x "$promtool" ]; then
    echo "fetching promtool (Debian package prometheus)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    download="$(mktemp -d)"
    # As root into a private temporary directory: apt's sandbox user could not write there.
    (cd "$download" && apt-get download -qq -o APT::Sandbox::User=root prometheus >/dev/null)
    mkdir -p "$tools"
    dpkg-deb --fsys-tarfile "$download"/prometheus_*.deb | tar -x -C "$download" ./usr/bin/promtool
    mv "$download/usr/bin/promtool" "$promtool"
    rm -rf "$download"
  fi
fi
"$promtool" --version 2>&1 | head -1

# Like scripts/check-go.sh: after scripts/test.sh both binaries exist; on its own, this
# script builds them (it does not rebuild existing ones).
if [ ! -x "$target_dir/release/cuzkd" ] || [ ! -x "$target_dir/release/cuzk" ]; then
  cargo build --release --bins --locked
fi
cuzkd="$(realpath "$target_dir/release/cuzkd")"
cuzk="$(realpath "$target_dir/release/cuzk")"

work="$(mktemp -d)"
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

allow_root=false
if [ "$(id -u)" -eq 0 ]; then allow_root=true; fi
mkdir "$work/textfile"
textfile="$work/textfile/cuzk.prom"
cat >"$work/cuzk.toml" <<EOF
[socket]
path = "$work/cuzk.sock"
[params]
dir = "$CUZK_TEST_PARAMS"
[proving]
backend = "cpu"
[daemon]
allow_root = $allow_root
drain_grace = "10s"
[metrics]
textfile = "$textfile"
textfile_interval = "1s"
EOF

fail() {
  echo "check-prometheus: $*" >&2
  echo "--- cuzkd's log:" >&2
  cat "$work/cuzkd.log" >&2 || true
  exit 1
}

# `promtool check metrics` reads the text on stdin; it exits non-zero on a parse error or a
# lint problem and prints each problem. Both count as failures here.
check() {
  local what="$1" file="$2" out
  if ! out="$("$promtool" check metrics <"$file" 2>&1)" || [ -n "$out" ]; then
    echo "promtool check metrics on $what:" >&2
    echo "$out" >&2
    echo "--- the text:" >&2
    cat "$file" >&2
    fail "promtool rejected $what"
  fi
  echo "ok: promtool check metrics: $what ($(grep -c '^# TYPE ' "$file") metric families)"
}

# Waits up to 60 s for the textfile to hold $1.
wait_for() {
  local needle="$1" deadline=$((SECONDS + 60))
  until [ -f "$textfile" ] && grep -qF -- "$needle" "$textfile"; do
    kill -0 "$pid" 2>/dev/null || fail "cuzkd exited before $textfile held $needle"
    [ "$SECONDS" -lt "$deadline" ] || fail "$textfile did not hold $needle within 60 s"
    sleep 0.2
  done
}

"$cuzkd" --config "$work/cuzk.toml" >"$work/cuzkd.log" 2>&1 &
pid=$!
wait_for "cuzk_uptime_seconds"
check "metrics.textfile at start" "$textfile"

# A resident parameter set gives the labelled families samples. The 2 KiB test parameters
# must be there (scripts/test.sh, which .ci/run calls first, makes sure); a preload that
# fails for any reason fails the check, with what the daemon said.
export CUZK_SOCKET="$work/cuzk.sock"
if ! "$cuzk" preload porep 2KiB >"$work/preload.log" 2>&1; then
  cat "$work/preload.log" >&2
  fail "cuzk preload porep 2KiB failed (the 2 KiB test parameters belong in $CUZK_TEST_PARAMS: scripts/test.sh makes them), so the labelled families could not be checked"
fi
wait_for "cuzk_params_resident_bytes{"
cp "$textfile" "$work/resident.prom"
check "metrics.textfile with a resident parameter set" "$work/resident.prom"

"$cuzk" metrics --prometheus >"$work/client.prom" || fail "cuzk metrics --prometheus failed"
check "cuzk metrics --prometheus" "$work/client.prom"
"$cuzk" metrics >"$work/default.prom" || fail "cuzk metrics failed"
# The default output is the same format: the same lines but for the values that move (the
# process's own memory among them: each call reads it afresh).
moving='^cuzk_(uptime_seconds|connections|connections_total|process_memory_bytes)[ {]'
if ! diff <(grep -Ev "$moving" "$work/client.prom") <(grep -Ev "$moving" "$work/default.prom") >&2; then
  fail "cuzk metrics and cuzk metrics --prometheus print different text"
fi
echo "ok: cuzk metrics prints the same text without --prometheus"

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
[ "$status" -eq 0 ] || fail "cuzkd exited with status $status after SIGTERM"
check "metrics.textfile written at shutdown" "$textfile"
leftover="$(find "$work/textfile" -mindepth 1 ! -name cuzk.prom)"
[ -z "$leftover" ] || fail "temporary files left beside the textfile: $leftover"
echo "ok: the metrics pass promtool check metrics"
