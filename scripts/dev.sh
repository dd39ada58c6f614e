#!/usr/bin/env bash
# Runs `tally dev` on a fresh or warm machine: installs the system packages the build
# needs when they are missing, builds the `tally` binary in release, and runs every role
# in one process. Arguments go to `tally dev` (see `tally dev --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
exec cargo run --release --locked -p tally --bin tally -- dev "$@"
