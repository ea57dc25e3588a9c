#!/usr/bin/env bash
# The project's test command (README.md; .ci/run calls it).
#
# Makes sure the 2 KiB test parameters of all four proof kinds exist outside the checkout
# ($CUZK_TEST_PARAMS, default /var/tmp/filecoin-proof-parameters) — generating only the
# missing ones with cuzk's own setup on every core (fresh secrets, not the ceremony's; a
# few minutes on 2 cores the first time, with a line at least every 10 s) — then runs every test in
# release mode (debug-mode proving of real circuits would take hours), as root also those
# that need root (#[ignore]d elsewhere), and where the CPU has AVX-512 IFMA the eight-lane
# tests (#[ignore]d elsewhere). The portable paths are tested on every CPU: the prover's tests
# build them through `CpuOptions { simd: false, .. }`, the typed option the library takes.
set -euo pipefail
cd "$(dirname "$0")/.."
export CUZK_TEST_PARAMS="${CUZK_TEST_PARAMS:-/var/tmp/filecoin-proof-parameters}"
export FIL_PROOFS_PARAMETER_CACHE="$CUZK_TEST_PARAMS"
target_dir="${CARGO_TARGET_DIR:-target}"

# With the default features: `cuzk params generate` is scaffolding (Cargo.toml [features]).
# The tests that need a CUDA device are #[ignore]d here and reported as such; they run on a
# GPU host through scripts/gpu-device-run.sh.
cargo build --release --locked --bin cuzk
"$target_dir/release/cuzk" params generate --sector-size 2KiB --kind all --dir "$CUZK_TEST_PARAMS"
cargo test --release --locked "$@"
# The committed gRPC code against proto/cuzk/v1/proving.proto: needs protoc (Debian's
# protobuf-compiler), which a plain build does not.
if [ "$#" -eq 0 ]; then
  if ! command -v protoc >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing protobuf-compiler"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null
  fi
  if command -v protoc >/dev/null 2>&1; then
    cargo test --release --locked --test grpc_codegen -- --ignored
  fi
fi
# Tests that connect as other uids need root; elsewhere they are reported as ignored. As
# root (CI), run them too.
if [ "$#" -eq 0 ] && [ "$(id -u)" = 0 ]; then
  cargo test --release --locked --test daemon_trust -- --ignored
  # The journald test plays journald at its fixed socket: only where no journald runs.
  if [ ! -e /run/systemd/journal/socket ]; then
    cargo test --release --locked --test daemon_lifecycle -- --ignored logs_natively_to_journald
  fi
fi
# The eight-lane AVX-512 IFMA tests (named `ifma_…`) are #[ignore]d, so that a CPU without
# the instructions reports them as ignored, not passed. Where the CPU has them, run them; a
# run asked for on a CPU without them fails.
if [ "$#" -eq 0 ] && grep -qw avx512ifma /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo; then
  cargo test --release --locked --lib -- --ignored ifma_
fi
