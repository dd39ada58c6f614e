#!/usr/bin/env bash
# Runs Tally's whole test suite on a fresh or warm machine: installs the system
# packages the build needs when they are missing, builds the guest components (only
# when their sources changed), then the Rust SDK's tests and `cargo test` over the
# workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
TALLY_GUESTS_DIR="$(bash scripts/build-guests.sh)"
export TALLY_GUESTS_DIR
CARGO_TARGET_DIR="${TALLY_GUESTS_TARGET_DIR:-$HOME/.cache/tally-guests-target}" \
    cargo test --locked --manifest-path guest-sdks/rust/Cargo.toml
cargo test --workspace "$@"
