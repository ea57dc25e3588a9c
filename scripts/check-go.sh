#!/usr/bin/env bash
# The Go client (clients/go): gofmt, go vet, and its tests, including the integration test
# against a real cuzkd (CUZKD/CUZK name the release binaries, CUZK_TEST_PARAMS the 2 KiB
# parameters that scripts/test.sh made sure of). .ci/run calls it after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-target}"
export CUZK_TEST_PARAMS="${CUZK_TEST_PARAMS:-/var/tmp/filecoin-proof-parameters}"
export FIL_PROOFS_PARAMETER_CACHE="$CUZK_TEST_PARAMS"

if ! command -v go >/dev/null 2>&1; then
  echo "installing golang-go"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq golang-go >/dev/null
fi
go version

# After scripts/test.sh both exist: it builds the release cuzk (`cargo build --bin cuzk`),
# and `cargo test --release` builds every binary for the daemon tests. Run on its own, this
# script builds them; it does not rebuild existing ones (cargo test's feature set may differ
# from a plain build's, and a rebuild takes minutes on 2 cores).
if [ ! -x "$target_dir/release/cuzkd" ] || [ ! -x "$target_dir/release/cuzk" ]; then
  cargo build --release --bins --locked
fi
export CUZKD="$(realpath "$target_dir/release/cuzkd")"
export CUZK="$(realpath "$target_dir/release/cuzk")"

cd clients/go
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "gofmt: these files need formatting (gofmt -w clients/go):" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
# The real PoRep proof takes about a minute on 2 cores; the default 10-minute test timeout
# would be tight beside a loaded CI machine.
go test -count=1 -timeout 20m -v ./...
