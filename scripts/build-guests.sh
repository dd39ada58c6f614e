#!/usr/bin/env bash
# Builds the guest components, the example functions and the host tests' guests, in
# every SDK language, copies them to one directory and prints its path:
#
#   hello.wasm counter.wasm chain.wasm bank.wasm reminder.wasm approval.wasm nightly.wasm
#   travel.wasm movie.wasm retwis.wasm pipeline.wasm          examples/* (Rust)
#   faulty.wasm other-world.wasm steps.wasm probe.wasm        tests/guests/* (Rust)
#   clocks.wasm                                               tests/guests/clocks (Rust)
#   http_probe.wasm                                           tests/guests/http-probe (Rust, wasi:http)
#   webhook.wasm                                              tests/guests/webhook (Rust SDK, HTTP)
#   <lang>-hello.wasm <lang>-counter.wasm <lang>-bank.wasm    examples/<lang>/*
#   <lang>-steps.wasm                                         tests/guests/<lang>/steps
#   js-plain-http.wasm                                        tests/guests/js/plain-http (wasi:http only, componentize-js)
#   python-webhook.wasm                                       tests/guests/python/webhook (an HTTP function in Python)
#   go-webhook.wasm                                           tests/guests/go/webhook (an HTTP function in Go)
#   c-webhook.wasm                                            tests/guests/c/webhook (an HTTP function in C)
#
# for <lang> in python, ts (TypeScript), go and c, and js-hello.wasm (plain JavaScript),
# js-steps.wasm (tests/guests/js/steps, TypeScript) and js-webhook.wasm
# (tests/guests/js/webhook, an HTTP function in JavaScript).
#
# The directory is ${TALLY_GUESTS_DIR:-$HOME/.cache/tally-guests}. The Rust guests are
# built by cargo in their own target directory,
# ${TALLY_GUESTS_TARGET_DIR:-$HOME/.cache/tally-guests-target}, never the host's
# CARGO_TARGET_DIR: the guests have another target and profile, and a separate directory
# keeps the host build's lock free. The other languages are built by `tally build` (a
# debug build of the binary, which the tests build anyway), as a user's would be; it
# installs componentize-py and componentize-js on first use, and needs Go, Node.js,
# Python and clang with wasi-libc (scripts/env.sh installs the Debian packages).
#
# Each group of guests (Rust, and each other language) is rebuilt only when a hash of
# everything it is built from differs from the stamp its last build left in the output
# directory.
set -euo pipefail
cd "$(dirname "$0")/.."

out_dir="${TALLY_GUESTS_DIR:-$HOME/.cache/tally-guests}"
target_dir="${TALLY_GUESTS_TARGET_DIR:-$HOME/.cache/tally-guests-target}"
mkdir -p "$out_dir"

# A hash of files and of what prints tool versions, with paths relative to the
# repository so that every clone agrees. `target` directories are left out in case a
# guest workspace was built by hand.
sources_hash() {
    local paths=() versions=()
    while [[ $# -gt 0 && "$1" != -- ]]; do
        paths+=("$1")
        shift
    done
    shift || true
    {
        for command in "$@"; do
            $command 2>&1 | head -1
        done
        find "${paths[@]}" -type f -not -path '*/target/*' -not -path '*/__pycache__/*' -not -path '*/node_modules/*' -print0 |
            LC_ALL=C sort -z |
            xargs -0 sha256sum
    } | sha256sum | cut -d' ' -f1
}

# True when the group's stamp matches and every component is in place.
up_to_date() {
    local group="$1" hash="$2" name
    shift 2
    [[ -f "$out_dir/.$group.sha256" && "$(<"$out_dir/.$group.sha256")" == "$hash" ]] || return 1
    for name in "$@"; do
        [[ -f "$out_dir/$name.wasm" ]] || return 1
    done
}

# A component starts with the wasm magic, then version 0x0d and layer 1; a core
# module would have version 1 and layer 0.
install_component() {
    local wasm="$1" name="$2" header
    header="$(head -c 8 "$wasm" | od -An -tx1 | tr -d ' \n')"
    if [[ "$header" != 0061736d0d000100 ]]; then
        echo "$wasm is not a component: its header is $header" >&2
        exit 1
    fi
    cp "$wasm" "$out_dir/$name.wasm"
}

# Rust: the examples and the test guests, two cargo workspaces.
rust_components=(hello counter chain bank reminder approval nightly travel movie retwis pipeline faulty other-world steps probe clocks http_probe webhook)
hash="$(sources_hash wit guest-sdks/rust examples/Cargo.toml examples/Cargo.lock examples/{hello,counter,chain,bank,reminder,approval,nightly,travel,movie,retwis,pipeline} \
    tests/guests/Cargo.toml tests/guests/Cargo.lock tests/guests/{faulty,other-world,steps,probe,clocks,http-probe,webhook} scripts/build-guests.sh \
    -- "rustc --version")"
if up_to_date rust "$hash" "${rust_components[@]}"; then
    echo "the Rust guests are up to date in $out_dir" >&2
else
    # Without a stamp until every component is in place, a failed build cannot pass for
    # a finished one.
    rm -f "$out_dir/.rust.sha256"
    for workspace in examples tests/guests; do
        CARGO_TARGET_DIR="$target_dir" cargo build --release --locked \
            --target wasm32-wasip2 --manifest-path "$workspace/Cargo.toml" >&2
    done
    for name in "${rust_components[@]}"; do
        install_component "$target_dir/wasm32-wasip2/release/$name.wasm" "$name"
    done
    echo "$hash" >"$out_dir/.rust.sha256"
fi

# The other languages, through `tally build`: <lang>=<project directories>.
groups=(
    "python=examples/python/hello examples/python/counter examples/python/bank tests/guests/python/steps tests/guests/python/webhook"
    "js=examples/js/hello tests/guests/js/steps tests/guests/js/webhook"
    "ts=examples/ts/hello examples/ts/counter examples/ts/bank"
    "go=examples/go/hello examples/go/counter examples/go/bank tests/guests/go/steps tests/guests/go/webhook"
    "c=examples/c/hello examples/c/counter examples/c/bank tests/guests/c/steps tests/guests/c/webhook"
)
tally=""
for group in "${groups[@]}"; do
    lang="${group%%=*}"
    read -r -a projects <<<"${group#*=}"
    sdk="guest-sdks/$lang"
    [[ "$lang" == ts ]] && sdk=guest-sdks/js
    names=()
    for project in "${projects[@]}"; do
        names+=("$lang-$(basename "$project")")
    done
    hash="$(sources_hash wit "$sdk" "${projects[@]}" runtime/tally/src/cli scripts/build-guests.sh \
        -- "go version" "node --version" "python3 --version" "clang --version")"
    if up_to_date "$lang" "$hash" "${names[@]}"; then
        echo "the $lang guests are up to date in $out_dir" >&2
        continue
    fi
    if [[ -z "$tally" ]]; then
        cargo build --locked -p tally --bin tally >&2
        tally="${CARGO_TARGET_DIR:-target}/debug/tally"
    fi
    rm -f "$out_dir/.$lang.sha256"
    for project in "${projects[@]}"; do
        echo "==> tally build $project" >&2
        component="$("$tally" build "$project" | tail -1)"
        install_component "$component" "$lang-$(basename "$project")"
    done
    echo "$hash" >"$out_dir/.$lang.sha256"
done
# A wasi:http component with nothing of Tally's, as componentize-js builds one for
# `wasmtime serve` (tests/guests/js/plain-http): the tests serve it on both.
plain="tests/guests/js/plain-http"
hash="$(sources_hash wit/deps "$plain" scripts/build-guests.sh -- "node --version")"
if up_to_date js-plain "$hash" js-plain-http; then
    echo "the plain JavaScript component is up to date in $out_dir" >&2
else
    if [[ -z "$tally" ]]; then
        cargo build --locked -p tally --bin tally >&2
        tally="${CARGO_TARGET_DIR:-target}/debug/tally"
    fi
    rm -f "$out_dir/.js-plain.sha256"
    scratch="$(mktemp -d)"
    cp "$plain/world.wit" "$scratch/" && cp -r wit/deps "$scratch/deps"
    bin="$("$tally" js-tools | tail -1)"
    (cd "$plain" && TMPDIR="$scratch" "$bin/componentize-js" --wit "$scratch" --world-name plain-http -o "$scratch/app.wasm" app.js >&2)
    install_component "$scratch/app.wasm" js-plain-http
    rm -rf "$scratch"
    echo "$hash" >"$out_dir/.js-plain.sha256"
fi
rm -f "$out_dir/.sources.sha256"
echo "$out_dir"
