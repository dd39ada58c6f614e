//! State store backends: embedded RocksDB ([`RocksStateStore`], the single-node
//! default) and PostgreSQL ([`PgStateStore`], for clusters). The trait they implement,
//! its specification and its conformance suite are the exactly-once core's
//! ([`tally_durable::store`]).

mod postgres;
mod rocks;

pub use postgres::{PgStateStore, TempPostgres};
pub use rocks::RocksStateStore;
pub use tally_durable::store::{conformance, Family, StateError, StateFuture, StateStore, Value, Version};

use tally_durable::store::check_table;
