//! The guest SDKs and the WIT, embedded in the binary (see `build.rs`) and written out
//! once per SDK version to a cache directory that `tally new` and `tally build` use.
//!
//! ```text
//!   ~/.cache/tally/                 ($TALLY_CACHE_DIR, else $XDG_CACHE_HOME/tally)
//!     sdk-<hash>/wit/platform.wit   the contract every component is built against,
//!     sdk-<hash>/wit/deps/          and the WASI packages its worlds import
//!     sdk-<hash>/guest-sdks/<lang>/ guest-sdks/<lang> of this binary's source (the
//!                                   repository's layout: the Rust SDK finds the WIT
//!                                   at ../../wit)
//!     build/<project>-<hash>/       one project's build outputs (tally build)
//!   ~/.cache/tally-tools/           ($TALLY_TOOLS_DIR) guest toolchains tally installs
//! ```

use std::path::{Path, PathBuf};

use anyhow::Context as _;

include!(concat!(env!("OUT_DIR"), "/sdk_files.rs"));

/// The WIT of world `function`, as the host implements it.
#[cfg(test)]
pub const WIT: &str = include_str!("../../../../wit/platform.wit");

/// Where tally keeps what it writes out and builds.
pub fn cache_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("TALLY_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("tally"));
    }
    let home = std::env::var_os("HOME").context("neither TALLY_CACHE_DIR nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache/tally"))
}

/// Where tally installs guest toolchains (shared with the repository's scripts).
pub fn tools_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("TALLY_TOOLS_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").context("neither TALLY_TOOLS_DIR nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache/tally-tools"))
}

/// The SDKs written out: `wit/` and one directory per language.
pub struct Sdk {
    pub root: PathBuf,
}

impl Sdk {
    /// Writes the embedded SDKs out unless this version already is, and returns them.
    /// Each version is written to a directory of its own and renamed into place whole,
    /// so two builds at once never see half an SDK.
    pub fn materialize() -> anyhow::Result<Sdk> {
        let cache = cache_dir()?;
        let root = cache.join(format!("sdk-{SDK_HASH:016x}"));
        if !root.join("wit/platform.wit").is_file() {
            std::fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
            let staging = cache.join(format!(".sdk-{SDK_HASH:016x}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&staging);
            for (path, bytes) in WIT_FILES {
                write(&staging.join("wit").join(path), bytes)?;
            }
            for (path, bytes) in SDK_FILES {
                write(&staging.join("guest-sdks").join(path), bytes)?;
            }
            match std::fs::rename(&staging, &root) {
                Ok(()) => {}
                // Another build put the same version in place first.
                Err(_) if root.join("wit/platform.wit").is_file() => {
                    let _ = std::fs::remove_dir_all(&staging);
                }
                Err(e) => return Err(e).with_context(|| format!("moving the SDK into {}", root.display())),
            }
        }
        Ok(Sdk { root })
    }

    pub fn wit_dir(&self) -> PathBuf {
        self.root.join("wit")
    }

    /// One language's SDK: `rust`, `python`, `js`, `go` or `c`.
    pub fn lang(&self, name: &str) -> PathBuf {
        self.root.join("guest-sdks").join(name)
    }
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sdk_is_embedded_without_build_outputs() {
        let paths: Vec<&str> = SDK_FILES.iter().map(|(p, _)| *p).collect();
        assert!(paths.contains(&"rust/src/lib.rs"), "{paths:?}");
        assert!(paths.contains(&"test-vectors/tags.json"), "{paths:?}");
        for path in &paths {
            let parts: Vec<&str> = path.split('/').collect();
            assert!(!parts.iter().any(|p| ["target", "node_modules", "__pycache__"].contains(p)), "{path}");
        }
    }

    #[test]
    fn materializing_writes_the_wit_and_the_sdks_once() {
        let dir = tempfile::tempdir().unwrap();
        // The only test in this binary that reads or sets the variable.
        std::env::set_var("TALLY_CACHE_DIR", dir.path());
        let sdk = Sdk::materialize().unwrap();
        assert_eq!(std::fs::read_to_string(sdk.wit_dir().join("platform.wit")).unwrap(), WIT);
        assert!(sdk.wit_dir().join("deps/http.wit").is_file());
        assert!(sdk.lang("rust").join("src/lib.rs").is_file());
        let again = Sdk::materialize().unwrap();
        assert_eq!(again.root, sdk.root);
    }
}
