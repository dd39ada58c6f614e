#!/usr/bin/env bash
# Builds the guest components for wasm32-wasip2, the example functions and the host
# tests' guests, copies them to one directory and prints its path:
#
#   hello.wasm  counter.wasm  chain.wasm  bank.wasm    (examples/)
#   faulty.wasm  other-world.wasm  steps.wasm            (tests/guests/)
#
# The directory is ${TALLY_GUESTS_DIR:-$HOME/.cache/tally-guests}. Cargo builds in its own
# target directory, ${TALLY_GUESTS_TARGET_DIR:-$HOME/.cache/tally-guests-target}, never the
# host's CARGO_TARGET_DIR: the guests have another target and profile, and a separate
# directory keeps the host build's lock free. When a hash of everything the guests are
# built from matches the stamp the last build left in the output directory, cargo is not
# run at all; otherwise cargo's fingerprints rebuild only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

out_dir="${TALLY_GUESTS_DIR:-$HOME/.cache/tally-guests}"
target_dir="${TALLY_GUESTS_TARGET_DIR:-$HOME/.cache/tally-guests-target}"
stamp="$out_dir/.sources.sha256"
workspaces=(examples tests/guests)
components=(hello counter chain bank faulty other-world steps)

# The WIT, the SDK, both guest workspaces with their Cargo.lock files, this script and
# the compiler, with paths relative to the repository so that every clone agrees.
# `target` directories are left out in case a guest workspace was built by hand.
sources_hash() {
    {
        rustc --version
        find wit guest-sdks/rust examples tests/guests scripts/build-guests.sh \
            -type f -not -path '*/target/*' -print0 |
            LC_ALL=C sort -z |
            xargs -0 sha256sum
    } | sha256sum | cut -d' ' -f1
}

all_components_present() {
    local name
    for name in "${components[@]}"; do
        [[ -f "$out_dir/$name.wasm" ]] || return 1
    done
}

hash="$(sources_hash)"
if [[ -f "$stamp" && "$(<"$stamp")" == "$hash" ]] && all_components_present; then
    echo "guests are up to date in $out_dir" >&2
    echo "$out_dir"
    exit 0
fi

# The list is read whole before grep looks at it: `rustup ... | grep -q` would close the
# pipe early, and with pipefail rustup's SIGPIPE would count as "not installed".
installed_targets="$(rustup target list --installed)"
if ! grep -qx wasm32-wasip2 <<<"$installed_targets"; then
    rustup target add wasm32-wasip2 >&2
fi

for workspace in "${workspaces[@]}"; do
    CARGO_TARGET_DIR="$target_dir" cargo build --release --locked \
        --target wasm32-wasip2 --manifest-path "$workspace/Cargo.toml"
done

mkdir -p "$out_dir"
# Without a stamp until every component is in place, a failed copy cannot pass for a
# finished build.
rm -f "$stamp"
for name in "${components[@]}"; do
    wasm="$target_dir/wasm32-wasip2/release/$name.wasm"
    # A component starts with the wasm magic, then version 0x0d and layer 1; a core
    # module would have version 1 and layer 0.
    header="$(head -c 8 "$wasm" | od -An -tx1 | tr -d ' \n')"
    if [[ "$header" != 0061736d0d000100 ]]; then
        echo "$wasm is not a component: its header is $header" >&2
        exit 1
    fi
    cp "$wasm" "$out_dir/$name.wasm"
done
echo "$hash" >"$stamp"
echo "$out_dir"
