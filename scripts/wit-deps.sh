#!/usr/bin/env bash
# Writes wit/deps/: the WASI packages the worlds of wit/platform.wit import, taken from
# the crates the host is built with (in cargo's registry, so run `cargo fetch` first).
#
#   wasi:{io,clocks,random,cli,filesystem,sockets,http}  wasmtime-wasi-http's wit/deps,
#       relabelled from 0.2.12 to 0.2.10: componentize-js's engine exports
#       incoming-handler@0.2.10 and refuses a newer world; the host (0.2.12) links 0.2.10
#       imports by semver. The one item 0.2.11+ added (cli's exit-with-code) is left out.
#   wasi:config@0.2.0-rc.1                               wasmtime-wasi-config's wit (the
#       host implements it itself: the crate is only fetched for its WIT)
#
# The files are committed; run this again only when the host's wasmtime changes.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n '/^name = "wasmtime-wasi-http"$/{n;s/^version = "\(.*\)"$/\1/p}' Cargo.lock)
registry=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/ | head -1)
http="$registry/wasmtime-wasi-http-$version/wit/deps"
config=$(ls -d "$registry"/wasmtime-wasi-config-*/wit/deps/config 2>/dev/null | sort -V | tail -1)
[[ -d "$http" ]] || { echo "wasmtime-wasi-http $version is not in $registry: cargo fetch" >&2; exit 1; }
[[ -n "$config" ]] || { echo "no wasmtime-wasi-config in $registry: cargo fetch it (any 0.2.0-rc.1 version)" >&2; exit 1; }
rm -rf wit/deps && mkdir -p wit/deps
for f in "$http"/*.wit; do
    # Drop each `@since(version = 0.2.1x)` item: the annotation line and the one after it.
    sed -e '/@since(version = 0\.2\.1[12])/,+1d' -e 's/@0\.2\.12/@0.2.10/g' "$f" >"wit/deps/$(basename "$f")"
done
cat "$config/world.wit" "$config/store.wit" >wit/deps/config.wit
ls wit/deps
