//! The durable stores of a node: RocksDB for a storage node's records, journal files
//! for a sequencer's metalog replica, group commit in front of a record store, and the
//! controller's configuration file.
//!
//! The traits they implement, and the contract in their documentation, are
//! `tally-log-core`'s (re-exported here); so are the in-memory stores the simulator uses
//! and the conformance suites every implementation here runs (see `tests.rs`).

mod codec;
mod file;
mod group;
mod journal;
mod rocks;
#[cfg(test)]
mod tests;

pub use file::FileControllerStore;
pub use group::{GroupCommit, GroupCommitConfig, GroupCommitDone, GroupCommitStats};
pub use journal::JournalMetalogStore;
pub use rocks::{FsyncPolicy, RocksMetalogStore, RocksStore};
pub use tally_log_core::{ControllerStore, MetalogStore, MetalogWrite, RecordStore, RecoveredRecord, StoredData};
