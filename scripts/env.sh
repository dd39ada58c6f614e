# Sourced by the scripts: system packages and build environment.
#
# RocksDB comes from Debian (librocksdb-dev 7.8) and is linked dynamically: building
# the bundled C++ takes ~15 minutes on two cores, linking takes seconds. bindgen in
# librocksdb-sys needs libclang. PostgreSQL is for the state store tests, which start a
# server of their own from /usr/lib/postgresql/<ver>/bin.
missing=()
for pkg in clang libclang-dev librocksdb-dev postgresql; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
export ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu
# One target directory outside the clone, reused across clones and CI runs on this
# machine; cargo's fingerprints keep that safe, and a fresh machine just builds it.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tally-target}"
