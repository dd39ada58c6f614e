//! The durable stores of a node: journal files (or RocksDB) for a storage node's
//! records, journal files for a sequencer's metalog replica, group commit in front of a
//! record store, and the controller's configuration file.
//!
//! The traits they implement, and the contract in their documentation, are
//! `tally-log-core`'s (re-exported here); so are the in-memory stores the simulator uses
//! and the conformance suites every implementation here runs (see `tests.rs`).
//!
//! A storage directory keeps the kind of record store it holds: `open_record_store` opens a
//! `RocksStore` (what earlier versions wrote) where it finds one, and a `JournalStore`, the
//! default, otherwise.

mod codec;
mod cold;
mod file;
#[cfg(feature = "fuzzing")]
pub(crate) mod fuzzing;
mod group;
mod journal;
mod journal_records;
mod rocks;
#[cfg(test)]
mod tests;

pub use cold::{cold_index, FileColdStore, INDEX_RESIDENT_DEFAULT};
pub use file::FileControllerStore;
pub use group::{GroupCommit, GroupCommitConfig, GroupCommitDone, GroupCommitStats};
pub use journal::JournalMetalogStore;
pub use journal_records::JournalStore;
pub use rocks::{FsyncPolicy, RocksMetalogStore, RocksStore};
use std::path::Path;
use std::sync::Arc;

/// What a new storage node keeps its records in. A directory that holds a store keeps
/// the kind it holds, whatever is asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecordStoreKind {
    /// [`JournalStore`]: data in journal files, metadata in RocksDB.
    #[default]
    Journal,
    /// [`RocksStore`]: data and metadata in RocksDB (what earlier versions wrote).
    Rocksdb,
}

/// Opens the record store in `path`: the kind found there, else `kind`.
pub fn open_record_store(
    path: &Path,
    kind: RecordStoreKind,
    policy: FsyncPolicy,
) -> tally_log_core::Result<Arc<dyn RecordStore>> {
    let found = rocksdb::DB::list_cf(&rocksdb::Options::default(), path).ok();
    let kind = match found {
        Some(families) if families.iter().any(|f| f == "data") => RecordStoreKind::Rocksdb,
        Some(_) => RecordStoreKind::Journal,
        None => kind,
    };
    Ok(match kind {
        RecordStoreKind::Journal => Arc::new(JournalStore::open(path, policy)?),
        RecordStoreKind::Rocksdb => Arc::new(RocksStore::open(path, policy)?),
    })
}

pub use tally_log_core::{ControllerStore, MetalogStore, MetalogWrite, RecordStore, RecoveredRecord, StoredData};
