#!/usr/bin/env bash
# Builds the cuzk .deb and checks the distribution path end to end:
#   1. the committed man pages and example configuration match their sources;
#   2. the .deb holds exactly the files in packaging/deb-contents.txt (two binaries, no
#      test or generator binaries), with /etc/cuzk/cuzk.toml as a conffile; its cuzkd is
#      built without the `scaffolding` feature: no test sealing, test parameters, command
#      line or benchmark code, and no self-test kernels in its CUDA source or kernel list;
#   3. `dpkg -i` installs it: the cuzk user and group exist, the installed `cuzkd
#      --check-config` and `cuzk --help` work, a bad configuration exits 78;
#   4. the man pages render without groff warnings and the tmpfiles/sysusers entries apply;
#   5. `systemd-analyze verify` accepts the installed units, and `systemd-analyze security`
#      scores the service at most 1.0 and equal to the score recorded in docs/operating.md;
#   6. remove, purge and reinstall work (the package is left installed).
#
# Needs root (dpkg -i). Installs what it lacks (cargo-deb from crates.io, systemd and
# man-db from Debian) and is fast when everything is already there. Called by .ci/run
# after scripts/test.sh (so the release build is already done).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
SECONDS=0
# shellcheck source=check-lib.sh
. scripts/check-lib.sh

if [ "$(id -u)" != 0 ]; then
    echo "check-packaging.sh: must run as root (it installs the .deb)" >&2
    exit 1
fi

step "tools"
apt_updated=
apt_install() {
    if [ -z "$apt_updated" ]; then
        apt-get update -qq
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}
command -v systemd-analyze >/dev/null || apt_install systemd
# man-db: `systemd-analyze verify` resolves the units' Documentation=man:... through man(1);
# groff-base: the page lint below.
command -v man >/dev/null || apt_install man-db
command -v groff >/dev/null || apt_install groff-base
# nm, readelf: the scaffolding check below reads the binaries' symbols and build ids.
command -v nm >/dev/null && command -v readelf >/dev/null || apt_install binutils
cargo deb --version >/dev/null 2>&1 || cargo install cargo-deb --locked
echo "$(cargo deb --version), $(systemd-analyze --version | head -1)"

step "generated files are up to date (man pages, example configuration)"
check "tests/man_pages.rs" cargo test --release --locked --test man_pages

step "build"
# The man_pages test above built target/release/cuzk and cuzkd (cargo builds every binary
# for an integration test) with the same flags as scripts/test.sh and the default features,
# `scaffolding` included, which cuzk needs (demo, params generate, bench). The daemon is
# then built once more without it, replacing target/release/cuzkd: only this cuzk crate is
# compiled again, as the feature changes no dependency. For a release:
#   cargo build --release && cargo build --release --bin cuzkd --no-default-features \
#     && cargo deb --no-build
target_dir=${CARGO_TARGET_DIR:-target}
test -x "$target_dir/release/cuzk"
cargo build --release --locked --bin cuzkd --no-default-features
test -x "$target_dir/release/cuzkd"
rm -rf "$target_dir/debian"
# --no-build: package what was just built; --fast: gzip, not xz (the CI machine has 2 cores).
cargo deb --no-build --fast --output "$target_dir/debian/"
deb=$(ls "$target_dir"/debian/cuzk_*.deb)
echo "$deb: $(du -h "$deb" | cut -f1)"

step "contents"
actual=$(dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's|^\./|/|' | grep -v '/$' | sort)
expected=$(grep -v '^#' packaging/deb-contents.txt | grep . | sort)
if [ "$actual" = "$expected" ]; then
    ok "file list matches packaging/deb-contents.txt"
else
    bad "file list differs from packaging/deb-contents.txt (< expected, > actual):"
    diff <(echo "$expected") <(echo "$actual") >&2 || true
fi
# Only the two binaries are executables of ours: no test harness, no generator.
unpacked=$(mktemp -d)
dpkg-deb -x "$deb" "$unpacked"
elves=$(cd "$unpacked" && find . -type f | sort | while read -r f; do
    if [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ]; then echo "$f"; fi
done | tr '\n' ' ')
check "the only ELF files are cuzk and cuzkd ($elves)" test "$elves" = "./usr/bin/cuzk ./usr/bin/cuzkd "

# The scaffolding stays out of the packaged daemon. The CUDA sources are embedded as text
# (include_str! in src/gpu/compile.rs) and the kernels looked up by name (src/gpu/device.rs),
# so a self-test kernel in cuzkd would show as its name in the binary's bytes; Rust code shows
# as symbols in the unstripped build that was packaged. Each check also looks at cuzk, which
# has the scaffolding, so that a check that cannot see it fails instead of passing.
count_bytes() { grep -a -c -e "$1" "$2" || true; }
count_symbols() { nm -C --defined-only "$2" | grep -c -E "$1" || true; }
scaffolding_symbols='cuzk::(sealing|params_gen|cli|gpu::bench|gpu::selftest)::'
for kernel in selftest_fp selftest_fr_from_mont selftest_g1; do
    n_cuzkd=$(count_bytes "$kernel" "$unpacked/usr/bin/cuzkd")
    n_cuzk=$(count_bytes "$kernel" "$unpacked/usr/bin/cuzk")
    check "packaged cuzkd has no self-test kernel $kernel ($n_cuzkd lines; cuzk $n_cuzk)" \
        test "$n_cuzkd" = 0 -a "$n_cuzk" -gt 0
done
n_cuzkd=$(count_symbols "$scaffolding_symbols" "$target_dir/release/cuzkd")
n_cuzk=$(count_symbols "$scaffolding_symbols" "$target_dir/release/cuzk")
check "cuzkd has no scaffolding symbols ($n_cuzkd; cuzk $n_cuzk)" test "$n_cuzkd" = 0 -a "$n_cuzk" -gt 0
for module in sealing params_gen; do
    n_cuzk=$(count_symbols "cuzk::$module::" "$target_dir/release/cuzk")
    check "cuzk has cuzk::$module ($n_cuzk symbols), so the check above can see it" test "$n_cuzk" -gt 0
done
# cargo-deb strips what it packages (the debug info goes to the dbgsym package); the build id
# survives, and ties the packaged daemon to the one whose symbols were read above.
build_id() { readelf -n "$1" | sed -n 's/.*Build ID: *//p'; }
id_built=$(build_id "$target_dir/release/cuzkd")
id_packaged=$(build_id "$unpacked/usr/bin/cuzkd")
check "packaged cuzkd is the one built without scaffolding (build id ${id_packaged:-none})" \
    test -n "$id_built" -a "$id_built" = "$id_packaged"
rm -rf "$unpacked"
check "/etc/cuzk/cuzk.toml is a conffile" \
    sh -c "dpkg-deb --ctrl-tarfile '$deb' | tar -xO ./conffiles | grep -qx /etc/cuzk/cuzk.toml"
for script in postinst prerm postrm; do
    check "maintainer script $script is valid sh" \
        sh -c "dpkg-deb --ctrl-tarfile '$deb' | tar -xO ./$script | sh -n"
done

step "install"
check "dpkg -i" dpkg -i "$deb"
check "package is installed" sh -c "dpkg-query -W -f='\${Status}' cuzk | grep -qx 'install ok installed'"
check "user cuzk exists" getent passwd cuzk
check "group cuzk exists" getent group cuzk
check "installed cuzk --help" sh -c '/usr/bin/cuzk --help >/dev/null'
check "installed cuzkd --help" sh -c '/usr/bin/cuzkd --help >/dev/null'
check "installed cuzkd --check-config (packaged /etc/cuzk/cuzk.toml)" /usr/bin/cuzkd --check-config
badconf=$(mktemp)
printf '[socket]\npathh = "/x"\n' >"$badconf"
rc=0
/usr/bin/cuzkd --check-config --config "$badconf" >/dev/null 2>&1 || rc=$?
rm -f "$badconf"
check "cuzkd --check-config exits 78 on a bad key (got $rc)" test "$rc" = 78
check "systemd-tmpfiles applies cuzk.conf" systemd-tmpfiles --create cuzk.conf
check "/run/cuzk is cuzk:cuzk 0750" sh -c 'test "$(stat -c %U:%G:%a /run/cuzk)" = cuzk:cuzk:750'
check "systemd-sysusers accepts cuzk.conf" sh -c 'systemd-sysusers --dry-run cuzk.conf >/dev/null'

step "installed daemon, as the cuzk user, with the packaged configuration"
# What cuzkd.service does, without systemd as PID 1: run the installed binary as cuzk with
# no capabilities and no_new_privs; first binding its own socket, then socket-activated.
as_cuzk=(setpriv --reuid=cuzk --regid=cuzk --init-groups --no-new-privs --bounding-set=-all --inh-caps=-all)
daemons=()
trap 'for p in "${daemons[@]}"; do kill -KILL "$p" 2>/dev/null || true; done' EXIT
wait_for() { for _ in $(seq 1 100); do if "$@"; then return 0; fi; sleep 0.2; done; return 1; }
conf=$(mktemp /tmp/cuzk-check.XXXXXX.toml)
cat /etc/cuzk/cuzk.toml >"$conf"
printf '\n[socket]\npath = "/run/cuzk/check.sock"\n' >>"$conf"
sed -i '0,/^\[socket\]$/{/^\[socket\]$/d}' "$conf" # one [socket] table: the appended one
chmod 644 "$conf"
rm -f /run/cuzk/check.sock
"${as_cuzk[@]}" /usr/bin/cuzkd --config "$conf" 2>/tmp/cuzk-check.log &
pid=$!
daemons+=("$pid")
if wait_for grep -qw ready /tmp/cuzk-check.log && test -S /run/cuzk/check.sock; then
    ok "cuzkd (as cuzk) binds /run/cuzk/check.sock"
    check "socket is cuzk:cuzk 0660" sh -c 'test "$(stat -c %U:%G:%a /run/cuzk/check.sock)" = cuzk:cuzk:660'
else
    bad "cuzkd (as cuzk) did not bind /run/cuzk/check.sock:"
    cat /tmp/cuzk-check.log >&2
fi
kill -TERM "$pid" 2>/dev/null || true
rc=0
wait "$pid" || rc=$?
check "cuzkd exits 0 on SIGTERM (got $rc)" test "$rc" = 0
check "cuzkd removed its socket" test ! -e /run/cuzk/check.sock
rm -f /run/cuzk/activated.sock
# systemd-socket-activate (root, like PID 1) listens, and on the first connection execs
# setpriv, which drops to cuzk and execs cuzkd with LISTEN_FDS=1 (same pid, so LISTEN_PID
# matches). The first connection is the installed client's `cuzk status`.
systemd-socket-activate -l /run/cuzk/activated.sock "${as_cuzk[@]}" /usr/bin/cuzkd 2>/tmp/cuzk-check.log &
pid=$!
daemons+=("$pid")
wait_for test -S /run/cuzk/activated.sock || true
rc=0
status=$(timeout 120 /usr/bin/cuzk status --socket /run/cuzk/activated.sock 2>&1) || rc=$?
echo "$status" | head -20
check "installed cuzk status through the activated socket (exit $rc)" test "$rc" = 0
if grep -q 'socket passed by systemd' /tmp/cuzk-check.log; then
    ok "socket-activated cuzkd takes the passed socket"
else
    bad "socket-activated cuzkd did not take the passed socket:"
    cat /tmp/cuzk-check.log >&2
fi
kill -TERM "$pid" 2>/dev/null || true
rc=0
wait "$pid" || rc=$?
check "socket-activated cuzkd exits 0 on SIGTERM (got $rc)" test "$rc" = 0
rm -f /run/cuzk/activated.sock
rm -f "$conf" /tmp/cuzk-check.log

step "man pages"
for page in cuzk.1 cuzkd.8 cuzk.toml.5; do
    check "man/$page renders without groff warnings" \
        sh -c "out=\$(groff -man -ww -z -Tutf8 man/$page 2>&1); [ -z \"\$out\" ] || { echo \"\$out\"; false; }"
done
check "man finds the installed pages" sh -c 'man -w cuzk >/dev/null && man -w 8 cuzkd >/dev/null && man -w 5 cuzk.toml >/dev/null'

step "systemd units"
units="/usr/lib/systemd/system/cuzkd.service /usr/lib/systemd/system/cuzkd.socket /usr/lib/systemd/system/cuzkd-grpc.socket"
check "systemd-analyze verify (installed units)" sh -c "out=\$(systemd-analyze verify $units 2>&1); echo \"\$out\"; [ -z \"\$out\" ]"
security=$(systemd-analyze security --offline=yes --threshold=10 /usr/lib/systemd/system/cuzkd.service 2>&1) && rc=0 || rc=$?
score=$(echo "$security" | sed -n 's/.*Overall exposure level for cuzkd.service: \([0-9.]*\).*/\1/p')
echo "exposure score: ${score:-?}"
check "systemd-analyze security: exposure ${score:-?} <= 1.0" test "$rc" = 0 -a -n "$score"
check "docs/operating.md records the exposure score $score" grep -q "exposure score is \*\*$score\*\*" docs/operating.md

step "remove, purge, reinstall"
check "dpkg -r" dpkg -r cuzk
check "binaries removed" test ! -e /usr/bin/cuzkd
check "conffile kept after remove" test -e /etc/cuzk/cuzk.toml
check "dpkg --purge" dpkg --purge cuzk
check "conffile removed by purge" test ! -e /etc/cuzk/cuzk.toml
check "dpkg -i again" dpkg -i "$deb"
check "reinstalled cuzkd --check-config" sh -c '/usr/bin/cuzkd --check-config >/dev/null'

echo
echo "check-packaging took ${SECONDS}s"
echo "check-packaging: $passed passed, $failed failed"
[ "$failed" = 0 ]
