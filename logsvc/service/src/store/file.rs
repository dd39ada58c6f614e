//! [`FileControllerStore`]: the controller's configuration in one file, replaced
//! atomically.
//!
//! ```text
//!   dir/configuration       FORMAT | bincode(Configuration)
//!   dir/configuration.tmp   the next version while it is written; never read
//! ```
//!
//! A persist writes the temporary file, fsyncs it, renames it over `configuration` and
//! fsyncs the directory, so a crash at any point leaves the old configuration or the
//! new one, whole. A file rather than a RocksDB: the controller writes a few hundred
//! bytes once per term, and reads them once per start.

use std::fs::{self, File};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tally_log_core::{Configuration, Error, Result};

use super::codec::{decode, encode};
use super::ControllerStore;

const FILE: &str = "configuration";
const TMP: &str = "configuration.tmp";
/// Marks the file's content, so another file in its place, or a later layout, is
/// detected instead of misread.
const FORMAT: &[u8] = b"tally-configuration-v4\n";
/// Before aggregators ([`tally_log_core::ConfigurationV3`]): read, never written.
const FORMAT_V3: &[u8] = b"tally-configuration-v3\n";
/// Before configuration versions ([`tally_log_core::ConfigurationV2`]): read, never written.
const FORMAT_V2: &[u8] = b"tally-configuration-v2\n";
/// Before the index tier ([`tally_log_core::ConfigurationV1`]): read, never written.
const FORMAT_V1: &[u8] = b"tally-configuration-v1\n";
/// Upper bound on one encoded configuration. A term names its nodes and one shard per
/// engine and log; a configuration near this size is a bug, not a big cluster.
const CONFIG_BYTES_MAX: u64 = 64 << 20;

fn io_error<'a>(doing: &'a str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |e| Error::Storage(format!("{doing} {}: {e}", path.display()))
}

/// A [`ControllerStore`] in a directory. See the module documentation for the layout.
pub struct FileControllerStore {
    dir: PathBuf,
    /// Serialises persists, which share the temporary file.
    writing: Mutex<()>,
}

impl FileControllerStore {
    /// Opens (creating if needed) the store in `dir`.
    pub fn open(dir: &Path) -> Result<FileControllerStore> {
        fs::create_dir_all(dir).map_err(io_error("creating", dir))?;
        // A temporary file is a persist that a crash interrupted: it never took effect.
        let tmp = dir.join(TMP);
        match fs::remove_file(&tmp) {
            Ok(()) => tracing::warn!(path = %tmp.display(), "removed an interrupted configuration write"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("removing", &tmp)(e)),
        }
        Ok(FileControllerStore { dir: dir.to_owned(), writing: Mutex::new(()) })
    }
}

impl ControllerStore for FileControllerStore {
    fn persist(&self, config: &Configuration) -> Result<()> {
        let bytes = encode_file(config)?;
        let _guard = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let (tmp, path) = (self.dir.join(TMP), self.dir.join(FILE));
        let mut file = File::create(&tmp).map_err(io_error("creating", &tmp))?;
        file.write_all(&bytes).map_err(io_error("writing", &tmp))?;
        file.sync_all().map_err(io_error("syncing", &tmp))?;
        drop(file);
        fs::rename(&tmp, &path).map_err(io_error("renaming to", &path))?;
        // The rename is durable only once the directory is.
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(io_error("syncing", &self.dir))?;
        Ok(())
    }

    fn load(&self) -> Result<Option<Configuration>> {
        let path = self.dir.join(FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("reading", &path)(e)),
        };
        decode_file(&bytes).map(Some).map_err(|e| match e {
            Error::Storage(m) => Error::Storage(format!("{}: {m}", path.display())),
            e => e,
        })
    }
}

/// The configuration that the file's bytes hold.
pub(super) fn decode_file(bytes: &[u8]) -> Result<Configuration> {
    if let Some(body) = bytes.strip_prefix(FORMAT_V3) {
        return decode::<tally_log_core::ConfigurationV3>("configuration", body, CONFIG_BYTES_MAX).map(Configuration::from);
    }
    if let Some(body) = bytes.strip_prefix(FORMAT_V2) {
        return decode::<tally_log_core::ConfigurationV2>("configuration", body, CONFIG_BYTES_MAX).map(Configuration::from);
    }
    if let Some(body) = bytes.strip_prefix(FORMAT_V1) {
        return decode::<tally_log_core::ConfigurationV1>("configuration", body, CONFIG_BYTES_MAX).map(Configuration::from);
    }
    let Some(body) = bytes.strip_prefix(FORMAT) else {
        return Err(Error::Storage("not a tally configuration".into()));
    };
    decode("configuration", body, CONFIG_BYTES_MAX)
}

/// What [`decode_file`] reads.
pub(super) fn encode_file(config: &Configuration) -> Result<Vec<u8>> {
    encode("configuration", config, CONFIG_BYTES_MAX, FORMAT)
}
