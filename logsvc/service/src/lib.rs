//! Tally's shared log on real nodes: the protocol of `tally-log-core` driven over QUIC
//! and RocksDB. See ARCHITECTURE.md.
//!
//! The state machines, the index and the simulator are `tally-log-core`'s; this crate
//! adds the transport ([`net`]), one tokio task per role ([`driver`]), the durable
//! stores ([`store`]), the async client ([`LogClient`]) and a whole cluster in one
//! process ([`ClusterBuilder`]). The types a user of the log needs are re-exported
//! here, so dependents name one crate.

mod client;
mod cluster;

pub mod driver;
pub mod net;
pub mod store;
pub mod trace;

/// The decoders of bytes from the network and the disk, and their encoders, for the
/// fuzz targets of `tally-fuzz` (feature `fuzzing`).
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    pub use crate::net::fuzzing::*;
    pub use crate::store::fuzzing::*;
}

pub use client::LogClient;
pub use cluster::{Cluster, ClusterBuilder};
pub use tally_log_core::tier;
pub use tally_log_core::{
    book_to_log, BookId, Cond, Configuration, Context, ControllerConfig, EngineConfig, Error, FollowerConfig, Index, LocalId,
    Location, LogId, LogRecord, LogTermConfig, Message, MetalogEntry, MetalogMode, MetalogPosition, Micros, NodeId, Placement,
    Record, RecordMeta, Reply, Request, Result, Role, SealedTail, SeqNum, SequencerConfig, ShardConfig, ShardId, StorageConfig,
    StoredRead, Tag, Term, TermConfig, TierLayout, TrimCommand, WIRE_VERSION,
};
