#!/usr/bin/env bash
# The Go client (clients/go): gofmt, go vet, and its tests, including the integration test
# against a real cuzkd (CUZKD/CUZK name the release binaries, CUZK_TEST_PARAMS the 2 KiB
# parameters that scripts/test.sh made sure of). .ci/run calls it after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
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

# Curio's proving client (cuzk.v1.ProvingEngine over gRPC) against the same cuzkd: client
# code generated from proto/cuzk/v1/proving.proto by Debian's protoc and Go plugins, built
# against Debian's grpc-go in GOPATH mode (no module download), tests/grpc-go run with it.
cd "$root"
# grpc-go 1.33 marshals through github.com/golang/protobuf: its 1.5 line (APIv2 underneath)
# reads the messages protoc-gen-go 1.28 generates; the 1.3 line it may come with cannot.
grpc_pkgs="protobuf-compiler protoc-gen-go protoc-gen-go-grpc golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev"
if ! command -v protoc-gen-go-grpc >/dev/null 2>&1 || ! command -v protoc-gen-go >/dev/null 2>&1 \
  || [ ! -d /usr/share/gocode/src/google.golang.org/grpc ] \
  || ! dpkg -s golang-github-golang-protobuf-1-5-dev >/dev/null 2>&1; then
  echo "installing $grpc_pkgs"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # shellcheck disable=SC2086
  apt-get install -y -qq $grpc_pkgs >/dev/null
fi
gopath="$(mktemp -d)"
trap 'rm -rf "$gopath"' EXIT
pkg="$gopath/src/cuzk.test/grpctest"
mkdir -p "$pkg"
protoc -I proto \
  --go_out="$gopath/src" --go_opt=Mcuzk/v1/proving.proto=cuzk.test/grpctest/pb \
  --go-grpc_out="$gopath/src" --go-grpc_opt=Mcuzk/v1/proving.proto=cuzk.test/grpctest/pb \
  proto/cuzk/v1/proving.proto
cp tests/grpc-go/*.go "$pkg/"
unformatted="$(gofmt -l tests/grpc-go)"
if [ -n "$unformatted" ]; then
  echo "gofmt: these files need formatting (gofmt -w tests/grpc-go):" >&2
  echo "$unformatted" >&2
  exit 1
fi
(cd "$pkg" && GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOFLAGS= go vet . \
  && GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOFLAGS= go test -count=1 -timeout 20m -v .)
