//! Scratch files for the cold chunks of indexes ([`ColdStore`]): what an index spills
//! is a cache of what the log holds, never read after a restart (the index is rebuilt
//! from the log), so each file is unlinked as soon as it is created and its space goes
//! back to the filesystem when the process ends, however it ends.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tally_log_core::{ColdIndex, ColdStore};

/// Bytes of full chunks an index keeps in memory by default before it spills the
/// oldest: about 2M single-tag records per index (the engine's, and a storage node's
/// liveness index, each hold one per log).
pub const INDEX_RESIDENT_DEFAULT: usize = 32 << 20;

/// A [`ColdStore`] in an unlinked file.
#[derive(Debug)]
pub struct FileColdStore {
    file: File,
}

impl FileColdStore {
    /// A new, empty store in `dir` (created if missing).
    pub fn create(dir: &Path) -> std::io::Result<FileColdStore> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("index-{}-{}.cold", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        std::fs::remove_file(&path)?;
        Ok(FileColdStore { file })
    }
}

impl ColdStore for FileColdStore {
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all_at(bytes, offset)
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.file.read_exact_at(out, offset)
    }

    /// Punches a hole: a freed place (a chunk trimmed out of its row) goes back to the
    /// filesystem until a later chunk reuses it, so the file holds what is spilled now
    /// rather than the most ever spilled. Failures (a filesystem without holes) keep
    /// the space, which is only that.
    fn discard(&mut self, offset: u64, len: usize) {
        use std::os::fd::AsRawFd as _;
        // SAFETY: fallocate reads no memory of ours; the descriptor is open and owned by `file`.
        unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            );
        }
    }
}

/// Indexes that spill to files in `dir` past `resident_max` bytes each.
pub fn cold_index(dir: PathBuf, resident_max: usize) -> ColdIndex {
    ColdIndex { resident_max, open: Arc::new(move || Ok(Box::new(FileColdStore::create(&dir)?) as Box<dyn ColdStore>)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_reads_what_was_written_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = FileColdStore::create(dir.path()).unwrap();
        store.write_at(10, b"cold").unwrap();
        store.write_at(0, b"0123456789").unwrap();
        let mut out = [0; 14];
        store.read_at(0, &mut out).unwrap();
        assert_eq!(&out, b"0123456789cold");
        assert!(store.read_at(12, &mut out).is_err(), "a read past the end fails");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "unlinked");
    }

    #[test]
    fn a_discarded_place_gives_its_space_back_and_can_be_written_again() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let mut store = FileColdStore::create(dir.path()).unwrap();
        let chunk = vec![7u8; 1 << 20];
        store.write_at(0, &chunk).unwrap();
        store.write_at(1 << 20, &chunk).unwrap();
        store.file.sync_all().unwrap();
        let blocks = |store: &FileColdStore| store.file.metadata().unwrap().blocks() * 512;
        let before = blocks(&store);
        store.discard(0, 1 << 20);
        let after = blocks(&store);
        assert!(after + (1 << 20) <= before + 4096, "{before} bytes allocated before, {after} after");
        let mut out = vec![0; 1 << 20];
        store.read_at(1 << 20, &mut out).unwrap();
        assert_eq!(out, chunk, "the place after it is untouched");
        store.write_at(0, &chunk).unwrap();
        store.read_at(0, &mut out).unwrap();
        assert_eq!(out, chunk, "written again");
    }
}
