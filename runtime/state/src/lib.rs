//! Tally's state store backends: the [`StateStore`](tally_state_api::StateStore) that the
//! exactly-once core calls, in embedded RocksDB ([`RocksStateStore`], the single-node
//! default) and in PostgreSQL ([`PgStateStore`], for clusters whose nodes share one
//! database); [`PgServer`], a PostgreSQL server over a data directory of its own with
//! Debian's binaries (`tally cluster` keeps the function nodes' shared state in one); and
//! [`TempPostgres`], a throwaway local server for tests and benchmarks. The trait, its
//! specification and its conformance suite, which `tests/state_stores.rs` runs against both
//! backends, are `tally_state_api`'s.
//!
//! **Architecture Invariant:** a backend knows the trait and its database, nothing else.
//! This crate depends on the contract (`tally-state-api`, not the exactly-once core),
//! rocksdb, tokio-postgres, tokio for the blocking pool, the writer's answers and the
//! connection's task, and tempfile for `TempPostgres`; it cannot reach the core, the shared
//! log, wasmtime or HTTP. What a table's protocol means is decided above the trait, so a
//! backend is replaced, or tested, on its own.

/// How the RocksDB backend encodes entries, for the fuzz targets of `tally-fuzz`.
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod postgres;
mod rocks;

pub use postgres::{PgServer, PgStateStore, TempPostgres};
pub use rocks::RocksStateStore;
