#!/usr/bin/env bash
# Runs Tally's whole test suite on a fresh or warm machine: installs the system
# packages the build needs when they are missing, then `cargo test` over the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo test --workspace "$@"
