//! Tally's exactly-once layer: Halfmoon's protocols (SOSP '23, §4-§5) for state and
//! invocations, as a core that reaches the world only through narrow traits, so that
//! one deterministic simulator (`sim`, the `durable-sim` binary) drives the same code
//! that runs in `tally dev`.
//!
//! ```text
//!   Durable (node.rs): the node's parts ── invoke/: attempts of an invocation until a
//!     │                                      │  final outcome; Functions::run(Attempt)
//!     │  background, for the books this      │  ──> the guest (wasmtime, or the
//!     │  node owns (env.rs: Peers):          │      simulator's scripted guests)
//!     │  recovery.rs (feeds gc.rs),          ▼
//!     │  switch.rs, schedule/             Instance (instance/): init, steps, cursorTS,
//!     │                                      │  the protocols; child calls go up through
//!     ▼                                      ▼  Invoker (core/)
//!   Core (core/): Log · StateStore · Clock · Spawn · Peers, books, tables (table/)
//! ```
//!
//! The records it logs are in `record/`, under the platform books and tags of
//! `tags.rs`, which also states the isolation rules. `recorder.rs` makes a guest's
//! clocks and random bytes the same in every execution of an invocation. `schedule/`
//! fires schedules' ticks (cron expressions: `cron.rs`).
//!
//! Boki's libraries (§5) are `objects.rs`, `queues.rs` and `locks.rs`: replicated state
//! machines over streams of a book's shadow (`replay.rs`), whose steps the instance logs
//! like any other. `store` is crate `tally-state-api`, re-exported: the `StateStore` trait,
//! its specification, the in-memory store, the version cache and the conformance suite
//! every backend runs.
//!
//! **Architecture Invariant:** this crate does no IO. Its Cargo.toml allows the log's
//! IO-free core (`tally-log-core`), the state store's contract (`tally-state-api`) and
//! plain data, hashing and logging, so tokio, wasmtime, RocksDB and the network are out of
//! reach, and every effect goes through the traits of `env.rs` and `store`. Its
//! `clippy.toml` refuses clocks, threads, files, sockets and processes besides. That is
//! what lets the simulator run this very code.

mod abort;
mod attempt;
mod config;
mod core;
mod cron;
mod env;
mod error;
/// What the core reads back from the log and takes from guests, for the fuzz targets
/// of `tally-fuzz`.
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod gc;
mod id;
mod inspect;
mod instance;
mod invoke;
pub mod locks;
mod memo;
mod node;
pub mod objects;
pub mod queues;
mod record;
mod recorder;
mod recovery;
mod replay;
mod schedule;
mod switch;
mod table;
mod tags;

#[cfg(feature = "sim")]
pub mod sim;
/// The state store contract (crate `tally-state-api`), as the core names it.
pub use tally_state_api as store;

pub use abort::{Abort, CrashAfter, KEY_MAX, PAYLOAD_MAX, VALUE_MAX};
pub use attempt::{Attempt, Functions};
pub use config::{Protocol, StateConfig, StoreKind};
pub use core::NodeBounds;
pub use cron::civil_from_days;
pub use env::{
    owner, Alone, BoxFuture, Clock, FunctionVersion, LogBook, LogResult, Observe, OwnsAll, Peers, RetryPolicy, Spawn, Unobserved,
};
pub use error::{Error, Result};
pub use id::{InstanceId, IDEMPOTENCY_KEY_MAX};
pub use inspect::lineage::{Lineage, Writer};
pub use inspect::state::StateValue;
pub use inspect::steps::{decoded, kind_name, protocol_at, History, StepView, Steps};
pub use inspect::{LibraryNames, ShardStatus};
pub use instance::{Instance, Of, Outcall, OutcallSlot, Started, Wake, SLEEP_MAX_MS};
pub use invoke::{InvocationStatus, InvokeRequest, ListFilter, Listed, ListedStatus};
pub use node::{Durable, Invocations, Libraries, Parts, Schedules, Tables};
pub use record::kind::OutcallOutcome;
pub use record::meta::{Meta, TraceRef};
pub use record::{InvocationKey, LockId, Outcome, Reading, Transition, INVOCATION_KEY_MAX};
pub use recorder::{GuestClock, RANDOM_BYTES_MAX, READINGS_MAX};
pub use schedule::{
    check_name as check_schedule_name, CatchUp, Overlap, Schedule, ScheduleSpec, Timing, EVERY_MIN_MS, LATE_MS,
    SCHEDULE_INPUT_MAX,
};
pub use store::{StateError, StateStore};
pub use switch::{auto_choice, TableStatus};
pub use table::{check_table, Ops};
pub use tags::{shadow, TagKey, MANIFESTS, PLATFORM_BOOK, TOKENS};
