//! Embeds the guest SDKs and the WIT in the `tally` binary, so that `tally new` and
//! `tally build` work anywhere the binary is: `$OUT_DIR/sdk_files.rs` lists every SDK
//! file under `guest-sdks/` (build outputs, caches and tests left out) and every file
//! under `wit/` as `(path, bytes)`, and a hash of them names the directory `tally build`
//! writes them to.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Directories that hold build outputs, caches or the SDKs' own tests, not the SDK.
const SKIPPED_DIRS: &[&str] = &["target", "node_modules", "__pycache__", ".pytest_cache", "tests", "dist", "build"];

fn main() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("../..");
    let sdks = root.join("guest-sdks");
    let wit = root.join("wit");
    println!("cargo:rerun-if-changed={}", sdks.display());
    println!("cargo:rerun-if-changed={}", wit.display());

    let mut files = Vec::new();
    walk(&sdks, &sdks, &mut files);
    files.sort();
    let mut wit_files = Vec::new();
    walk(&wit, &wit, &mut wit_files);
    wit_files.sort();

    // FNV-1a over paths and contents: stable across Rust versions, unlike `Hasher`s.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut fnv = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    let mut list = |files: &[(String, PathBuf)]| {
        let mut list = String::from("&[\n");
        for (relative, path) in files {
            fnv(relative.as_bytes());
            fnv(&std::fs::read(path).expect("reading an SDK file"));
            writeln!(list, "    ({relative:?}, include_bytes!({:?}) as &[u8]),", path.display().to_string()).unwrap();
        }
        list.push(']');
        list
    };
    let sdk_list = list(&files);
    let wit_list = list(&wit_files);

    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let code = format!(
        "/// Every embedded SDK file, by its path under `guest-sdks/`.\n\
         pub const SDK_FILES: &[(&str, &[u8])] = {sdk_list};\n\
         /// Every file of the WIT, by its path under `wit/`.\n\
         pub const WIT_FILES: &[(&str, &[u8])] = {wit_list};\n\
         /// A hash of the SDK files and the WIT.\n\
         pub const SDK_HASH: u64 = {hash:#x};\n"
    );
    std::fs::write(out.join("sdk_files.rs"), code).expect("writing sdk_files.rs");
}

fn walk(base: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.expect("a directory entry");
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type().expect("a file type");
        if kind.is_dir() {
            if !SKIPPED_DIRS.contains(&name.as_str()) && !name.starts_with('.') {
                println!("cargo:rerun-if-changed={}", path.display());
                walk(base, &path, files);
            }
        } else if kind.is_file() && (!name.starts_with('.') || name == ".gitignore") && !name.ends_with(".pyc") {
            let relative = path.strip_prefix(base).expect("under the base").to_string_lossy().replace('\\', "/");
            files.push((relative, path));
        }
    }
}
