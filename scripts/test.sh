#!/usr/bin/env bash
# Runs Tally's whole test suite on a fresh or warm machine: installs the system
# packages the build needs when they are missing, builds the guest components (only
# when their sources changed), then the Rust SDK's tests and `cargo test` over the
# workspace, and closes with one line totalling every test run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
TALLY_GUESTS_DIR="$(bash scripts/build-guests.sh)"
export TALLY_GUESTS_DIR
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
CARGO_TARGET_DIR="${TALLY_GUESTS_TARGET_DIR:-$HOME/.cache/tally-guests-target}" \
    cargo test --locked --manifest-path guest-sdks/rust/Cargo.toml 2>&1 | tee -a "$log"
cargo test --workspace "$@" 2>&1 | tee -a "$log"
awk '/^test result:/ { p += $4; f += $6 } END { printf "total: %d passed, %d failed\n", p, f }' "$log"
