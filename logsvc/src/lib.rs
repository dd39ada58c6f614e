//! Tally's shared log: LogBooks multiplexed on physical logs, ordered by a replicated
//! metalog (Boki), with conditional appends (Halfmoon). See ARCHITECTURE.md.
//!
//! The protocol roles are IO-free state machines ([`sequencer`], [`storage`],
//! [`engine`], [`controller`]); [`sim`] drives them over a simulated network and disk,
//! the drivers over QUIC and RocksDB.

mod cache;
mod config;
mod context;
mod error;
mod follower;
mod index;
mod message;
mod types;

pub mod controller;
pub mod engine;
pub mod sequencer;
pub mod sim;
pub mod storage;

pub mod net;
pub mod store;

pub mod client;
pub mod cluster;
pub mod driver;

pub use client::LogClient;
pub use cluster::{Cluster, ClusterBuilder};
pub use config::{Configuration, LogTermConfig, SealedTail, ShardConfig, TermConfig};
pub use context::Context;
pub use error::{Error, Result};
pub use follower::FollowerConfig;
pub use index::Placement;
pub use message::{
    Cond, LogRecord, Message, MetalogEntry, Record, RecordMeta, Reply, Request, StoredRead, TrimCommand, WIRE_VERSION,
};
pub use types::{book_to_log, BookId, LocalId, Location, LogId, MetalogPosition, Micros, NodeId, SeqNum, ShardId, Tag, Term};
