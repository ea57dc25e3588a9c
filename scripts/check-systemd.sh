#!/usr/bin/env bash
# Checks the packaged service under a real systemd: boots a minimal Debian 12 with systemd as
# PID 1 (systemd-nspawn -b, ephemeral copy of a cached root file system), installs the .deb
# with apt, and checks, under systemd itself:
#   1. socket activation: cuzkd.socket listens after install (0660 root:cuzk), the first
#      connection starts cuzkd.service, users outside the group get EACCES;
#   2. Type=notify: READY, STATUS= text, the watchdog armed and pinged;
#   3. socket.allowed_uids admits the configured operator (alice) and refuses another group member;
#   4. a real 2 KiB PoRep C2 proof through the socket, as that operator; the job journal in
#      StateDirectory= (/var/lib/cuzk/journal, 0700 cuzk);
#   5. the journal's fields (journalctl -o json): CUZK_JOB_ID, PROOF_KIND, OUTCOME, the
#      client's real UID, and never systemd's own JOB_ID;
#   6. systemctl stop during a running job: it drains, the client gets its proof, exit 0;
#   7. a configuration error: status 78, no restart loop, the waiting client gets a clear
#      error instead of hanging, and the documented recovery brings the socket back;
#   8. the gRPC endpoint: cuzkd-grpc.socket off after install, then enabled with
#      grpc.enabled = true and passed to cuzkd beside cuzkd.socket;
#   9. systemd-analyze security: exposure at most 1.0.
#
# Usage: scripts/check-systemd.sh [DEB]   (default: the .deb check-packaging.sh built)
# Needs root. Installs what it lacks (systemd-container, mmdebstrap). Caches the root file
# system in $CUZK_CI_ROOTFS (default /var/tmp/cuzk-ci-rootfs, ~210 MB, ~30 s to build from
# Debian's mirror); needs the 2 KiB test parameters in $CUZK_TEST_PARAMS. Called by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
rootfs=${CUZK_CI_ROOTFS:-/var/tmp/cuzk-ci-rootfs}
params=${CUZK_TEST_PARAMS:-/var/tmp/filecoin-proof-parameters}
target_dir=${CARGO_TARGET_DIR:-target}
# The root file system's package set; a change here rebuilds the cache.
rootfs_version="bookworm minbase systemd systemd-sysv dbus util-linux v1"
# shellcheck source=check-lib.sh
. scripts/check-lib.sh

if [ "$(id -u)" != 0 ]; then
    echo "check-systemd.sh: must run as root (it boots a container)" >&2
    exit 1
fi
deb=${1:-$(ls "$target_dir"/debian/cuzk_*.deb 2>/dev/null | head -1)}
if [ ! -f "$deb" ]; then
    echo "check-systemd.sh: no .deb (run scripts/check-packaging.sh first, or pass one)" >&2
    exit 1
fi
cuzk_host="$target_dir/release/cuzk"
test -x "$cuzk_host" || { echo "check-systemd.sh: $cuzk_host missing" >&2; exit 1; }

step "tools"
missing=()
command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
systemd-nspawn --version | head -1

step "root file system ($rootfs)"
if [ "$(cat "$rootfs/.cuzk-rootfs" 2>/dev/null)" != "$rootfs_version" ]; then
    rm -rf "$rootfs" "$rootfs.new"
    mmdebstrap --variant=minbase --include=systemd,systemd-sysv,dbus,util-linux \
        bookworm "$rootfs.new" >/tmp/cuzk-mmdebstrap.log 2>&1 ||
        { tail -20 /tmp/cuzk-mmdebstrap.log >&2; exit 1; }
    echo "$rootfs_version" >"$rootfs.new/.cuzk-rootfs"
    mv "$rootfs.new" "$rootfs"
    echo "built in ${SECONDS}s"
else
    echo "cached"
fi

step "inputs"
work=$(mktemp -d /tmp/cuzk-systemd.XXXXXX)
chmod 755 "$work"
mkdir "$work/deb"
cp "$deb" "$work/deb/"
# A fresh 2 KiB sector and its C1 output, sealed on the host by the cuzk under test.
"$cuzk_host" sample --out "$work/sample" >/dev/null 2>"$work/sample.log" ||
    { cat "$work/sample.log" >&2; exit 1; }
chmod -R a+rX "$work"
test -d "$params" || { echo "check-systemd.sh: no test parameters in $params" >&2; exit 1; }

step "boot"
machine="cuzk-ci-$$"
console="$work/console.log"
# An ephemeral copy (-x) of the cached tree, its own network namespace with loopback only,
# the parameters read-only where the package expects them. On a host whose PID 1 is not
# systemd (CI), --register=no --keep-unit skip machined and the host's systemd, and the
# unified cgroup hierarchy is what systemd 252 inside wants.
SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 setsid systemd-nspawn -q -x -D "$rootfs" -b -M "$machine" \
    --register=no --keep-unit --private-network --console=read-only \
    --bind-ro="$work:/mnt/work" --bind-ro="$params:/var/tmp/filecoin-proof-parameters" \
    >"$console" 2>&1 </dev/null &
nspawn=$!
cleanup() {
    [ -n "${cleaned:-}" ] && return
    cleaned=1
    # A clean power-off lets nspawn delete its ephemeral copy of the tree; a kill leaves it.
    [ -n "${leader:-}" ] && nsenter -t "$leader" -a -- systemctl poweroff >/dev/null 2>&1 || true
    for _ in $(seq 1 150); do kill -0 "$nspawn" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$nspawn" 2>/dev/null; then
        kill -KILL "$nspawn" 2>/dev/null || true
        wait "$nspawn" 2>/dev/null || true
        rm -rf "$(dirname "$rootfs")/.#machine.$(basename "$rootfs")"* \
            "$(dirname "$rootfs")/.#.#machine.$(basename "$rootfs")"*
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'cleanup; exit 1' INT TERM
leader=
for _ in $(seq 1 100); do
    for p in $(pgrep -P "$nspawn" 2>/dev/null); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = systemd ] && leader=$p
    done
    [ -n "$leader" ] && break
    sleep 0.2
done
[ -n "$leader" ] || { cat "$console" >&2; echo "container did not start" >&2; exit 1; }
# Runs a command inside the container, with a clean environment.
inside() {
    nsenter -t "$leader" -a -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
}
# Runs a command inside as the user $1.
as() {
    local user=$1
    shift
    inside runuser -u "$user" -- "$@"
}
state=
for _ in $(seq 1 120); do
    # Until systemd has set up its private bus, systemctl prints nothing.
    state=$(inside systemctl is-system-running 2>/dev/null || true)
    case "$state" in running | degraded) break ;; esac
    sleep 0.5
done
check "systemd is PID 1 and the system is up ($state)" \
    test "$(inside cat /proc/1/comm)" = systemd -a \( "$state" = running -o "$state" = degraded \)
unit() { inside systemctl show "$1" -p "$2" --value; }
# says RC OUTPUT TEXT: the command failed and its output contains TEXT (any case).
says() { [ "$1" != 0 ] && grep -qi -- "$3" <<<"$2"; }
# holds OUTPUT TEXT: the output contains TEXT (any case).
holds() { grep -qi -- "$2" <<<"$1"; }

step "install with apt"
check "apt-get install ./cuzk_*.deb" \
    inside sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /mnt/work/deb/*.deb >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; false; }'
expect "cuzkd.socket after install" active "$(inside systemctl is-active cuzkd.socket || true)"
expect "cuzkd.service after install (starts on the first connection)" inactive \
    "$(inside systemctl is-active cuzkd.service || true)"
expect "socket owner and mode" "root:cuzk:660" "$(inside stat -c %U:%G:%a /run/cuzk/cuzk.sock)"

step "operators, configuration, a short watchdog"
inside useradd -u 1000 -G cuzk -m alice
inside useradd -u 1001 -G cuzk -m bob
inside useradd -u 1002 -m carol
# The packaged file with the operator (alice) admitted by uid, and a pause at each job's start so
# that a stop can land while a job runs (step 6).
inside sh -c 'cat >/etc/cuzk/cuzk.toml <<EOF
[socket]
allowed_uids = [1000]

[debug]
job_delay = "3s"
EOF'
# WatchdogSec=60s pings every 30 s; a drop-in makes the check quick, the mechanism the same.
inside mkdir -p /etc/systemd/system/cuzkd.service.d
inside sh -c 'printf "[Service]\nWatchdogSec=4s\n" >/etc/systemd/system/cuzkd.service.d/ci.conf'
inside systemctl daemon-reload

step "socket activation, readiness, watchdog"
rc=0
out=$(as alice timeout 120 cuzk status 2>&1) || rc=$?
check "cuzk status as alice (uid 1000, in allowed_uids) starts the daemon (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || echo "$out" >&2
expect "cuzkd.service" active "$(inside systemctl is-active cuzkd.service || true)"
expect "Type" notify "$(unit cuzkd Type)"
status_text=$(unit cuzkd StatusText)
check "STATUS= text reached systemd ('$status_text')" test -n "$status_text"
expect "WatchdogUSec" 4s "$(unit cuzkd WatchdogUSec)"
pid=$(unit cuzkd MainPID)
w1=$(unit cuzkd WatchdogTimestampMonotonic)
sleep 6
w2=$(unit cuzkd WatchdogTimestampMonotonic)
check "watchdog pinged (WatchdogTimestampMonotonic $w1 -> $w2)" test "${w2:-0}" -gt "${w1:-0}"
expect "same daemon after 1.5 watchdog periods (MainPID)" "$pid" "$(unit cuzkd MainPID)"
expect "NRestarts" 0 "$(unit cuzkd NRestarts)"

step "who may connect"
rc=0
out=$(as bob timeout 60 cuzk status 2>&1) || rc=$?
check "group member not in allowed_uids is refused (exit $rc)" \
    says "$rc" "$out" 'not allowed'
echo "$out" | head -2
rc=0
out=$(as carol timeout 60 cuzk status 2>&1) || rc=$?
check "user outside group cuzk gets EACCES (exit $rc)" \
    says "$rc" "$out" 'permission denied'

step "a real 2 KiB PoRep C2 proof through the socket"
rc=0
out=$(as alice timeout 600 cuzk prove porep --c1 /mnt/work/sample/c1.json --miner-id 1000 \
    --sector-number 1 --out /tmp/proof-1 2>&1) || rc=$?
check "cuzk prove porep as alice (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || echo "$out" >&2
size=$(inside stat -c %s /tmp/proof-1 2>/dev/null || echo 0)
check "proof written ($size bytes, a multiple of 192)" test "$size" -gt 0 -a $((size % 192)) = 0
# The job journal: StateDirectory=cuzk, the daemon's own and no one else's.
expect "state directory owner and mode" "cuzk:cuzk:700" "$(inside stat -c %U:%G:%a /var/lib/cuzk)"
expect "job journal owner and mode" "cuzk:cuzk:700" "$(inside stat -c %U:%G:%a /var/lib/cuzk/journal)"
expect "journal log owner and mode" "cuzk:cuzk:600" "$(inside stat -c %U:%G:%a /var/lib/cuzk/journal/journal.log)"

step "journal fields"
inside journalctl -u cuzkd -o json --no-pager >"$work/journal.json" 2>/dev/null || true
check "journal: CUZK_JOB_ID, PROOF_KIND, OUTCOME, UID, no JOB_ID of ours" python3 - "$work/journal.json" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ours = [r for r in recs if r.get("SYSLOG_IDENTIFIER") == "cuzkd"]
accepted = [r for r in ours if r.get("MESSAGE") == "job accepted"]
finished = [r for r in ours if r.get("MESSAGE") == "job finished"]
problems = []
if not accepted or not finished:
    problems.append(f"no job records among {len(ours)} cuzkd records")
for r in accepted + finished:
    if "JOB_ID" in r:
        problems.append(f"cuzkd wrote systemd's JOB_ID: {r['MESSAGE']}")
    if not r.get("CUZK_JOB_ID") or r.get("PROOF_KIND") != "porep":
        problems.append(f"missing CUZK_JOB_ID/PROOF_KIND: {r.get('MESSAGE')}")
if accepted and accepted[0].get("UID") != "1000":
    problems.append(f"client UID {accepted[0].get('UID')!r}, not 1000")
if finished and finished[0].get("OUTCOME") != "succeeded":
    problems.append(f"OUTCOME {finished[0].get('OUTCOME')!r}")
for p in problems:
    print(p, file=sys.stderr)
if finished:
    f = finished[0]
    print("  " + " ".join(f"{k}={f.get(k)}" for k in
          ["CUZK_JOB_ID", "PROOF_KIND", "MINER", "OUTCOME", "SYNTHESIS_MS", "PROVING_MS", "TOTAL_MS"]))
sys.exit(1 if problems else 0)
EOF
id=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r.get("MESSAGE")=="job finished": print(r["CUZK_JOB_ID"]); break' "$work/journal.json" 2>/dev/null || true)
n=$(inside journalctl -u cuzkd -o cat --no-pager "CUZK_JOB_ID=${id:-none}" 2>/dev/null | wc -l)
check "journalctl -u cuzkd CUZK_JOB_ID=$id finds the job's records ($n)" test "$n" -ge 2

step "systemctl stop during a job: drain, the proof, exit 0"
nsenter -t "$leader" -a -- env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin runuser -u alice -- \
    cuzk prove porep --c1 /mnt/work/sample/c1.json --miner-id 1000 --sector-number 1 \
    --out /tmp/proof-2 >"$work/drain.log" 2>&1 &
client=$!
running=
for _ in $(seq 1 100); do
    if as alice cuzk status --json 2>/dev/null | grep -q '"Running"'; then running=1; break; fi
    sleep 0.1
done
check "a job is running when the stop comes" test -n "$running"
inside systemctl stop cuzkd.service
rc=0
wait "$client" || rc=$?
check "the client still got its proof (exit $rc)" test "$rc" = 0
[ "$rc" = 0 ] || cat "$work/drain.log" >&2
size=$(inside stat -c %s /tmp/proof-2 2>/dev/null || echo 0)
check "drained proof written ($size bytes)" test "$size" -gt 0
expect "service result after stop" success "$(unit cuzkd Result)"
expect "exit status after stop" 0 "$(unit cuzkd ExecMainStatus)"
expect "exit code after stop (exited, not killed)" exited \
    "$(inside systemctl show cuzkd -p ExecMainCode | sed 's/.*=//; s/^1$/exited/')"
expect "socket still listening after the stop" active "$(inside systemctl is-active cuzkd.socket || true)"

step "a configuration error while a client waits"
inside sh -c 'printf "[socket]\nallowed_uidz = [1000]\n" >/etc/cuzk/cuzk.toml'
start=$SECONDS
rc=0
out=$(as alice timeout 120 cuzk status --answer-timeout 20s 2>&1) || rc=$?
took=$((SECONDS - start))
echo "$out" | head -3
check "the waiting client fails within its timeout (exit $rc, ${took}s)" \
    test "$rc" != 0 -a "$rc" != 124 -a "$took" -le 25
check "its message says where to look" says "$rc" "$out" 'journalctl -u cuzkd'
expect "cuzkd exit status" 78 "$(unit cuzkd ExecMainStatus)"
sleep 7 # longer than RestartSec=5s: a restart loop would have restarted it by now
expect "NRestarts after a configuration error (no restart loop)" 0 "$(unit cuzkd NRestarts)"
check "cuzkd not running" sh -c "! nsenter -t $leader -a -- systemctl is-active -q cuzkd.service"
echo "cuzkd.socket: $(inside systemctl is-active cuzkd.socket || true) ($(unit cuzkd.socket Result))"
# The recovery docs/operating.md gives: fix the file, check it, restart both units.
inside sh -c 'printf "[socket]\nallowed_uids = [1000]\n" >/etc/cuzk/cuzk.toml'
check "cuzkd --check-config accepts the fixed file" inside cuzkd --check-config --config /etc/cuzk/cuzk.toml >/dev/null
check "recovery: systemctl reset-failed + restart cuzkd.socket" \
    inside sh -c 'systemctl reset-failed cuzkd.socket cuzkd.service; systemctl restart cuzkd.socket'
rc=0
as alice timeout 60 cuzk status >/dev/null 2>&1 || rc=$?
check "cuzk status works again after the recovery (exit $rc)" test "$rc" = 0

step "the gRPC endpoint, socket-activated"
expect "cuzkd-grpc.socket after install (off by default)" inactive \
    "$(inside systemctl is-active cuzkd-grpc.socket || true)"
inside sh -c 'printf "[socket]\nallowed_uids = [1000]\n\n[grpc]\nenabled = true\n" >/etc/cuzk/cuzk.toml'
check "cuzkd --check-config accepts grpc.enabled" inside cuzkd --check-config --config /etc/cuzk/cuzk.toml >/dev/null
# systemd refuses to start a socket whose service is running ("Socket service cuzkd.service
# already active, refusing"): the documented order stops cuzkd first.
check "systemctl stop cuzkd" inside systemctl stop cuzkd.service
if inside systemctl enable --now cuzkd-grpc.socket; then
    ok "systemctl enable --now cuzkd-grpc.socket"
else
    bad "systemctl enable --now cuzkd-grpc.socket"
    inside systemctl status --no-pager cuzkd-grpc.socket 2>&1 | tail -15 || true
fi
expect "gRPC socket owner and mode" "root:cuzk:660" "$(inside stat -c %U:%G:%a /run/cuzk/cuzk-grpc.sock)"
started_at=$(inside date +%s)
check "systemctl start cuzkd" inside systemctl start cuzkd.service
sleep 2
# This start's entries only, with their fields (the socket's path is one).
grpc_log=$(inside journalctl -u cuzkd --since "@$started_at" --no-pager -o verbose 2>/dev/null)
if holds "$grpc_log" 'cuzk-grpc.sock'; then
    ok "cuzkd took the gRPC socket from systemd"
else
    bad "cuzkd took the gRPC socket from systemd"
    inside journalctl -u cuzkd -b --no-pager -o cat 2>/dev/null | grep -i 'socket\|grpc' | tail -12 || true
fi
check "cuzkd serves the gRPC endpoint" holds "$grpc_log" 'serving the gRPC endpoint'
rc=0
as alice timeout 60 cuzk status >/dev/null 2>&1 || rc=$?
check "the first socket still answers beside it (exit $rc)" test "$rc" = 0

step "systemd-analyze security"
security=$(inside systemd-analyze security --no-pager cuzkd.service 2>&1 || true)
score=$(echo "$security" | sed -n 's/.*Overall exposure level for cuzkd.service: \([0-9.]*\).*/\1/p')
check "exposure under systemd ${score:-?} <= 1.0" \
    python3 -c "import sys; sys.exit(0 if '${score}' and float('${score}') <= 1.0 else 1)"

echo
echo "check-systemd took ${SECONDS}s"
echo "check-systemd: $passed passed, $failed failed"
[ "$failed" = 0 ]
