//! The exactly-once layer's configuration (the `[state]` section of a node's TOML) and
//! the names of the protocols a table can use.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How a table's reads and writes are made exactly-once (Halfmoon §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Halfmoon-read: log-free reads of a multi-version store, logged writes.
    ReadOptimized,
    /// Halfmoon-write: logged reads, log-free conditional writes.
    WriteOptimized,
    /// Boki/Beldi-style: reads and writes logged (the baseline).
    Symmetric,
    /// No logging and no guarantee (the lower bound).
    Unsafe,
    /// Read- or write-optimized, switched by the runtime from observed rates.
    Auto,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::ReadOptimized => "read-optimized",
            Protocol::WriteOptimized => "write-optimized",
            Protocol::Symmetric => "symmetric",
            Protocol::Unsafe => "unsafe",
            Protocol::Auto => "auto",
        }
    }
}

impl std::str::FromStr for Protocol {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [Protocol::ReadOptimized, Protocol::WriteOptimized, Protocol::Symmetric, Protocol::Unsafe, Protocol::Auto]
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown protocol {s:?}: read-optimized, write-optimized, symmetric, unsafe or auto"))
    }
}

/// Where function state is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// Embedded RocksDB under `data_dir/state`.
    Rocksdb,
    /// A PostgreSQL server named by `postgres`.
    Postgres,
}

impl std::str::FromStr for StoreKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rocksdb" => Ok(StoreKind::Rocksdb),
            "postgres" => Ok(StoreKind::Postgres),
            _ => Err(format!("unknown state store {s:?}: rocksdb or postgres")),
        }
    }
}

/// Exactly-once state: the store, table protocols, re-execution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StateConfig {
    pub store: StoreKind,
    /// libpq connection string, when `store = "postgres"`.
    pub postgres: String,
    /// The protocol of tables that neither the function's deploy nor `tables` names.
    pub protocol: Protocol,
    pub tables: BTreeMap<String, Protocol>,
    /// An invocation with an init record and no result is run again once it is this
    /// much older than its function's timeout (found by a scan, also after a restart).
    pub reexecute_after_ms: u64,
    /// How often the scan for unfinished invocations runs.
    pub recovery_interval_ms: u64,
    /// Attempts after which an invocation that keeps failing transiently (timeouts,
    /// an unavailable log) gets that failure logged as its result.
    pub attempts_max: u32,
    /// Test hook: honour the `Tally-Crash-After` header, which aborts an invocation
    /// after that many effects as if its process died.
    pub crash_injection: bool,
    /// How often garbage collection runs (Halfmoon §4.5).
    pub gc_interval_ms: u64,
    /// How long a finished invocation's step log (and so its result, for a client
    /// retrying with the same idempotency key) is kept.
    pub results_kept_ms: u64,
    /// How long the past of read-optimized tables, objects and queues stays readable
    /// (`AS OF` a seqnum): garbage collection keeps what a reader at a position this
    /// old needs. 0: only what running invocations need.
    pub history_kept_ms: u64,
    /// How often `auto` tables are looked at.
    pub auto_interval_ms: u64,
    /// Operations on a table within one look below which `auto` does not decide.
    pub auto_min_ops: u64,
    /// What a synced write of the state store costs, in percent of a log append.
    /// `auto` counts the appends and syncs each protocol would make for the order of
    /// the table's operations (`Ops`) and picks the cheaper (with a 25% band against
    /// flapping). 100: about equal on `tally dev` (RocksDB's synced write and a
    /// one-node append each wait for one fsync); lower where the log is far and the
    /// store near.
    pub auto_sync_cost: u32,
    /// Unfinished root invocations the recovery scan tracks per book; past it, the
    /// newest are left for a later round (they stay in the log, so nothing is lost).
    pub open_max: usize,
    /// Asynchronous invocations running on this node at once; more are refused with
    /// `busy` until some finish.
    pub async_max: usize,
    /// A durable sleep whose wake is at most this far away (and before the attempt's
    /// deadline) waits in place, holding its instance; a longer one suspends the
    /// invocation (its instance is dropped) until a timer runs it again.
    pub sleep_in_place_max_ms: u64,
    /// How often a node looks for schedules to drive, and how soon a schedule's driver
    /// sees a change made on another node (a pause, a new definition).
    pub schedule_poll_ms: u64,
    /// Books that may have exactly-once state (the recovery scan reads each of them
    /// every round); an invocation that would add one more is refused.
    pub books_max: usize,
    /// Readers of objects, queue shards and locks cache the state they replayed in the
    /// aux data of the newest record (Boki §5.4), so the next reader replays only what
    /// is newer. Off, every read replays its stream from its last checkpoint (Boki's
    /// Table 7 baseline, for measuring).
    pub aux_views: bool,
    /// Values of stored versions this node keeps in memory for read-optimized reads
    /// ([`VersionCache`](crate::store::VersionCache)), in bytes; 0 turns it off. Only
    /// values too large for their write records are read from the store.
    pub version_cache_bytes: usize,
    /// The JSON text of the parsed views of objects this node keeps in memory
    /// (`core/views.rs`), in bytes; parsed, they take about seven times as much (Retwis's
    /// objects). A working set larger than this replays from aux data.
    pub views_bytes: usize,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            store: StoreKind::Rocksdb,
            postgres: String::new(),
            protocol: Protocol::ReadOptimized,
            tables: BTreeMap::new(),
            reexecute_after_ms: 5_000,
            recovery_interval_ms: 1_000,
            attempts_max: 5,
            crash_injection: false,
            gc_interval_ms: 10_000,
            results_kept_ms: 3_600_000,
            history_kept_ms: 600_000,
            auto_interval_ms: 2_000,
            auto_min_ops: 20,
            auto_sync_cost: 100,
            open_max: 10_000,
            async_max: 1_024,
            sleep_in_place_max_ms: 1_000,
            books_max: 100_000,
            schedule_poll_ms: 1_000,
            aux_views: true,
            version_cache_bytes: 32 << 20,
            views_bytes: 32 << 20,
        }
    }
}
