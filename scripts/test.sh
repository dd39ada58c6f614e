#!/usr/bin/env bash
# Runs Tally's whole test suite on a fresh or warm machine: installs the system
# packages and cargo-nextest when they are missing (scripts/env.sh), checks formatting
# (the workspace and every guest crate) and clippy with `-D warnings`, builds the guest
# components (only when their sources changed), then runs the Rust SDK's tests, the
# workspace's tests under cargo-nextest (per-test timeouts in .config/nextest.toml) and
# the workspace's doctests, and closes with one line totalling every test run:
#
#   total: N passed, M failed
#
# Arguments go to `cargo nextest run` (a filter, `--no-fail-fast`, `--profile`, ...).
# Formatting and clippy run first and stop the script when they fail: they take seconds
# to minutes, the tests much longer. A test failure does not stop the later steps, so
# the total counts every test; the exit status is non-zero if any step failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
# CI sets CI=true; its nextest profile is in .config/nextest.toml.
if [[ "${CI:-}" == true && -z "${NEXTEST_PROFILE:-}" ]]; then
    export NEXTEST_PROFILE=ci
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
failed_steps=()

# Reads the log of every step so far: cargo test's `test result:` lines and nextest's
# `Summary [ 12.3s] 40 tests run: 38 passed, 1 failed, 1 timed out, 0 skipped`, where
# everything that ran and did not pass (failed, timed out, could not start) is a failure.
total() {
    awk '
        { gsub(/\033\[[0-9;]*m/, "") }
        /^test result:/ { p += $4; f += $6 }
        /^ *Summary \[.*\] [0-9\/]+ tests? run: [0-9]+ passed/ {
            line = $0
            sub(/^[^\]]*\] /, "", line)
            split(line, w, " ")
            run = w[1]; sub(/\/.*/, "", run)
            passed = w[4]
            p += passed; f += run - passed
        }
        END { printf "total: %d passed, %d failed\n", p, f }
    ' "$log"
}

# Runs a step with its output also in the log; a failure is remembered, not fatal.
step() {
    local name="$1"
    shift
    echo "==> $name" >&2
    if ! "$@" 2>&1 | tee -a "$log"; then
        failed_steps+=("$name")
    fi
}

finish() {
    if [[ ${#failed_steps[@]} -gt 0 ]]; then
        echo "failed: ${failed_steps[*]}" >&2
    fi
    total
    if [[ ${#failed_steps[@]} -gt 0 ]]; then
        exit 1
    fi
    exit 0
}

# The guest crates are separate workspaces, each formatted with the root's rustfmt.toml.
guest_manifests=(guest-sdks/rust/Cargo.toml examples/*/Cargo.toml tests/guests/*/Cargo.toml bench/guests/*/Cargo.toml)
check_format() {
    local manifest status=0
    cargo fmt --all --check || status=1
    for manifest in "${guest_manifests[@]}"; do
        cargo fmt --check --manifest-path "$manifest" || status=1
    done
    return "$status"
}
step fmt check_format
[[ ${#failed_steps[@]} -eq 0 ]] || finish
step clippy cargo clippy --locked --workspace --all-targets -- -D warnings
[[ ${#failed_steps[@]} -eq 0 ]] || finish

echo "==> guests" >&2
if ! TALLY_GUESTS_DIR="$(bash scripts/build-guests.sh)"; then
    failed_steps+=(guests)
    finish
fi
export TALLY_GUESTS_DIR
# The peer whose answers the HTTP functions' tests compare with: `wasmtime serve`.
if peer="$(bash bench/setup.sh)"; then
    TALLY_WASMTIME="$(sed -n 's/^wasmtime=//p' <<<"$peer")"
    export TALLY_WASMTIME
else
    failed_steps+=(wasmtime)
fi
step "Rust SDK tests" env CARGO_TARGET_DIR="${TALLY_GUESTS_TARGET_DIR:-$HOME/.cache/tally-guests-target}" \
    cargo test --locked --manifest-path guest-sdks/rust/Cargo.toml

# The other SDKs' unit tests, with their language's runner; each step ends with a line
# in cargo's `test result:` form, so that the total counts them.
counted() {
    local parse="$1" out status=0
    shift
    out="$(mktemp)"
    "$@" 2>&1 | tee "$out" || status=1
    awk "$parse"' END { printf "test result: %s. %d passed; %d failed;\n", (f || !p) ? "FAILED" : "ok", p, f }' "$out"
    rm -f "$out"
    [[ $status -eq 0 ]]
}
js_sdk_tests() {
    local tools scratch
    # The binary the guests were built with, or one built now if they were up to date.
    cargo build --quiet --locked -p tally --bin tally &&
        tools="$("${CARGO_TARGET_DIR}/debug/tally" js-tools)" || return 1
    scratch="$(mktemp -d)"
    "$tools/esbuild" guest-sdks/js/src/*.ts guest-sdks/js/test/*.ts --outbase=guest-sdks/js \
        --outdir="$scratch" --log-level=warning &&
        node --test "$scratch"/test/*.test.js
    local status=$?
    rm -rf "$scratch"
    return $status
}
step "Python SDK tests" counted '/ passed| failed/ { for (i = 1; i < NF; i++) { if ($(i+1) ~ /^passed/) p = $i; if ($(i+1) ~ /^failed/) f = $i } }' \
    env PYTHONDONTWRITEBYTECODE=1 python3 -m pytest -q -p no:cacheprovider guest-sdks/python/tests
step "JS SDK tests" counted '/^# pass / { p = $3 } /^# fail / { f = $3 }' js_sdk_tests
step "Go SDK tests" counted '/^--- PASS/ { p++ } /^--- FAIL/ { f++ }' \
    bash -c 'cd guest-sdks/go && go test -v ./...'
step "C SDK tests" counted '/ passed, [0-9]+ failed/ { p = $1; f = $3 }' \
    bash -c '{ sha256sum wit/platform.wit wit/deps/*.wit | cmp -s - guest-sdks/c/bindings/WIT.sha256 ||
        { echo "wit/ changed: regenerate the C bindings (guest-sdks/c/README.md)"; exit 1; }; } &&
        make --no-print-directory -C guest-sdks/c test OUT="$(mktemp -d)"' 
step "workspace tests" cargo nextest run --locked --workspace "$@"
# The exactly-once suite once more over a log in partial mode (INDILOG: index nodes, a
# 64 KiB local index).
step "exactly-once suite, partial index" env TALLY_TEST_INDEX=partial cargo nextest run --locked -p tally --test exactly_once "$@"
step doctests cargo test --locked --workspace --doc
finish
