//! Tally's state store backends: the exactly-once core's
//! [`StateStore`](tally_state_api::StateStore) in embedded RocksDB ([`RocksStateStore`],
//! the single-node default) and in PostgreSQL ([`PgStateStore`], for clusters whose
//! nodes share one database), and [`TempPostgres`], a throwaway local server for tests
//! and benchmarks. The trait, its specification and its conformance suite, which
//! `tests/state_stores.rs` runs against both backends, are the core's
//! (`tally_state_api`).
//!
//! **Architecture Invariant:** a backend knows the trait and its database, nothing
//! else. This crate depends on the exactly-once core (for the trait), rocksdb,
//! tokio-postgres, tokio for the blocking pool and the connection's task, and tempfile
//! for `TempPostgres`; it cannot reach the shared log, wasmtime or HTTP. What a table's protocol means is decided
//! above the trait, so a backend is replaced, or tested, on its own.

mod postgres;
mod rocks;

pub use postgres::{PgServer, PgStateStore, TempPostgres};
pub use rocks::RocksStateStore;
