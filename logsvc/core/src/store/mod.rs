//! Durable storage behind the storage nodes, the sequencers and the controller: the
//! traits whose documentation is the contract, the in-memory implementations the
//! simulator uses, and (with the `testing` feature) one conformance suite per trait.
//! The durable implementations (RocksDB, the controller's file) live in `tally-logsvc`.
//!
//! # Record store
//!
//! A storage node keeps the records of the shards it replicates, keyed by
//! [`Location`] (shard, local id). A record is written when it arrives from its
//! engine, before it has a seqnum; the node reports it in its progress only once a
//! [`RecordStore::sync`] that started after the write has returned.
//!
//! ```text
//!   shard s, by local id:
//!
//!    0        reclaimed        t              ordered               c      stored        p
//!    |.........(meta only).....|==================================|+++++++++++++++++|
//!                              ^ data kept from here on           ^ cut: ordered     ^ progress:
//!                                (trims reclaim below,              below, by the      durable prefix
//!                                 record by record)                 metalog            reported
//! ```
//!
//! - `write` makes records readable at once; they survive a crash only after `sync`.
//! - `reclaim` drops a record's data once a trim covering it has been ordered; its
//!   metadata stays, because an index rebuilt from the beginning still has to place
//!   it (conditional-append offsets count trimmed records).
//! - `discard` removes records of a shard past the final cut of a sealed term: they
//!   were never ordered and their engines append them again in the next term.
//! - `recover` returns what survived, so a restarted node rebuilds its state.
//!
//! # Metalog store
//!
//! A sequencer persists every metalog entry, truncation and seal promise before it
//! acknowledges or acts on it ([`MetalogStore::persist`] returns once durable), and
//! replays them with [`MetalogStore::load`] after a restart.
//!
//! # Controller store
//!
//! The controller persists every configuration it installs before any node hears of
//! it ([`ControllerStore::persist`] returns once durable and replaces the previous
//! one), and a restarted controller resumes from [`ControllerStore::load`]. Only the
//! last configuration is kept: it holds the whole history of terms.

mod mem;

pub use mem::{MemControllerStore, MemMetalogStore, MemStore};

use crate::config::Configuration;
use crate::error::Result;
use crate::message::{MetalogEntry, Record, RecordMeta};
use crate::types::{LocalId, Location, LogId, ShardId, Term};

/// What a store holds at a location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredData {
    Record(Record),
    /// The record's trim was ordered and its data dropped; `meta` remains.
    Reclaimed(RecordMeta),
}

/// A record found by [`RecordStore::recover`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveredRecord {
    pub location: Location,
    pub meta: RecordMeta,
    pub has_data: bool,
}

/// The storage node's record store. See the module documentation for the contract.
pub trait RecordStore: Send + Sync + 'static {
    /// Writes records, overwriting any at the same location. Durable after a `sync`.
    fn write(&self, records: &[(Location, Record)]) -> Result<()>;
    /// Makes every write that returned before this call durable.
    fn sync(&self) -> Result<()>;
    fn read(&self, location: Location) -> Result<Option<StoredData>>;
    /// The metadata of the records `from..to` of `shard`, reclaimed ones included, in
    /// order, up to the first local id the store does not hold.
    fn read_metas(&self, shard: ShardId, from: LocalId, to: LocalId) -> Result<Vec<RecordMeta>>;
    /// Drops the data of these records and keeps their metadata. Need not be synced.
    fn reclaim(&self, locations: &[Location]) -> Result<()>;
    /// Removes every record of `shard` with a local id at or above `from`.
    fn discard(&self, shard: ShardId, from: LocalId) -> Result<()>;
    /// Every record the store holds, sorted by location.
    fn recover(&self) -> Result<Vec<RecoveredRecord>>;
}

/// One durable change of a sequencer's state.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MetalogWrite {
    Entry(MetalogEntry),
    /// Drop entries at and after `len` (an uncommitted tail, after a seal).
    Truncate {
        term: Term,
        log: LogId,
        len: u64,
    },
    /// The promise to reject further entries of this metalog.
    Seal {
        term: Term,
        log: LogId,
    },
    /// This replica leads (is the primary of) this metalog. Written before its first
    /// entry: a primary sends an entry to its backups while it persists it, so after a
    /// restart it may lack an entry the backups hold, and must never lead again.
    Lead {
        term: Term,
        log: LogId,
    },
    /// This replica may have lost writes that were not synced (a `replicated` metalog's
    /// entries, after a power loss) of every metalog of the terms up to `through`: its
    /// reports of their tails do not count towards a seal's quorum (see `sequencer`).
    /// Later ones raise the bound; written last, it stays written.
    Amnesiac {
        through: Term,
    },
}

/// [`MetalogWrite`] as stores wrote it before configuration versions: read, never
/// written (but for tests of old stores).
#[derive(serde::Deserialize, serde::Serialize)]
pub enum MetalogWriteV1 {
    Entry(crate::config::MetalogEntryV1),
    Truncate { term: Term, log: LogId, len: u64 },
    Seal { term: Term, log: LogId },
    Lead { term: Term, log: LogId },
}

impl From<MetalogWriteV1> for MetalogWrite {
    fn from(w: MetalogWriteV1) -> MetalogWrite {
        match w {
            MetalogWriteV1::Entry(e) => MetalogWrite::Entry(e.into()),
            MetalogWriteV1::Truncate { term, log, len } => MetalogWrite::Truncate { term, log, len },
            MetalogWriteV1::Seal { term, log } => MetalogWrite::Seal { term, log },
            MetalogWriteV1::Lead { term, log } => MetalogWrite::Lead { term, log },
        }
    }
}

/// The sequencer's durable metalog replica.
pub trait MetalogStore: Send + Sync + 'static {
    /// Persists `writes`, in order, as one write: returns once all are durable; a
    /// crash during the call keeps all of them or none. A driver persists every write
    /// a batch of inputs produced at once, with one sync. A metalog's entries come
    /// in order (each the next one, after a truncation the next after it), as the
    /// sequencer appends them; a store may refuse others.
    fn persist(&self, writes: &[MetalogWrite]) -> Result<()>;
    /// Writes `writes` like [`persist`](Self::persist) but returns before they are
    /// durable: a crash of the process keeps them (the kernel holds them), a power loss
    /// may lose any suffix of what was written since the last sync. A `replicated`
    /// metalog writes its entries so.
    fn write_unsynced(&self, writes: &[MetalogWrite]) -> Result<()> {
        self.persist(writes)
    }
    /// Makes every write before it durable.
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    /// Writes that rebuild the state, in an order that replays correctly: per
    /// (term, log), entries by index, then the seal and the lead mark if any.
    fn load(&self) -> Result<Vec<MetalogWrite>>;
    /// The entries `from..to` of the metalog of (`term`, `log`), in order, up to the
    /// first index the store does not hold.
    fn read_entries(&self, term: Term, log: LogId, from: u64, to: u64) -> Result<Vec<MetalogEntry>>;
}

/// The controller's durable configuration: the one it installed last.
pub trait ControllerStore: Send + Sync + 'static {
    /// Replaces the stored configuration; returns once durable. A crash during the
    /// call leaves the previous configuration or this one, never a mix.
    fn persist(&self, config: &Configuration) -> Result<()>;
    /// The configuration persisted last, `None` for a new cluster.
    fn load(&self) -> Result<Option<Configuration>>;
}

#[cfg(any(test, feature = "testing"))]
pub mod conformance;
