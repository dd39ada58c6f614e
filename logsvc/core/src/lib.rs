//! Tally's shared log without IO: LogBooks multiplexed on physical logs, ordered by a
//! replicated metalog (Boki), with conditional appends (Halfmoon). See ARCHITECTURE.md.
//!
//! Every protocol role ([`Sequencer`], [`StorageNode`], [`Engine`], [`Controller`]) is a
//! state machine: messages and ticks in, actions out, time passed in as a value. The
//! simulator (`Sim`, behind the `sim` feature) drives them over a simulated network and
//! disk; `tally-logsvc` drives the same code over QUIC and RocksDB. The [`Index`] of a
//! physical log and the caller's [`Context`] are plain values, usable by any IO-free
//! caller.

mod assembly;
mod cache;
mod chunks;
mod config;
mod context;
mod controller;
mod engine;
mod error;
mod follower;
mod index;
mod logbook;
mod message;
mod sequencer;
#[cfg(feature = "sim")]
mod sim;
mod storage;
mod store;
pub mod tier;
mod types;

pub use chunks::{ColdStore, MemColdStore};
pub use config::{
    Configuration, ConfigurationV1, ConfigurationV2, ConfigurationV3, LogTermConfig, MetalogEntryV1, SealedTail, ShardConfig,
    TermConfig, TierLayout,
};
pub use context::Context;
pub use controller::{Controller, ControllerAction, ControllerConfig, Role};
pub use engine::{Engine, EngineAction, EngineConfig, IndexedRecord, OpId, PartialStats};
pub use error::{Error, Result};
pub use follower::FollowerConfig;
pub use index::{ColdIndex, Found, Index, Placement};
pub use logbook::{BoxFuture, LogBook, LogResult};
pub use message::{
    Cond, LogRecord, Message, MetalogEntry, Record, RecordMeta, RecordMetaV1, Reply, Request, SpanRef, StoredRead, TrimCommand,
    UNCHANGED_MAX, WIRE_VERSION,
};
pub use sequencer::{stored_entries_messages, MetalogMode, Sequencer, SequencerAction, SequencerConfig};
#[cfg(feature = "sim")]
pub use sim::{run_seeds, Rng, Sim, SimLog, SimOptions, SimPartial, SimStats, Violation};
pub use storage::{meta_reply, StorageAction, StorageConfig, StorageNode};
pub use store::{
    ControllerStore, MemControllerStore, MemMetalogStore, MemStore, MetalogStore, MetalogWrite, MetalogWriteV1, RecordStore,
    RecoveredRecord, StoredData,
};
pub use types::{
    book_to_log, BookId, LocalId, Location, LogId, MetalogPosition, Micros, NextTick, NodeId, SeqNum, ShardId, Tag, Term,
    TICK_MAX_US,
};

#[cfg(any(test, feature = "testing"))]
pub use logbook::conformance as logbook_conformance;
#[cfg(any(test, feature = "testing"))]
pub use store::conformance;
