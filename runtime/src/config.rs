//! Configuration of a Tally node: a TOML file whose every key a command-line flag can
//! override, and the per-function limits a deploy can override.
//!
//! ```toml
//! data_dir = ".tally"
//! listen = "127.0.0.1:8080"
//!
//! [limits]            # defaults for functions deployed without overrides
//! memory_bytes = 134217728
//! timeout_ms = 10000
//! request_bytes_max = 6291456
//! response_bytes_max = 6291456
//! concurrency_max = 64
//!
//! [node]              # what this node allows at most
//! instances_max = 256
//! memory_bytes_max = 1073741824
//! component_bytes_max = 67108864
//! call_depth_max = 8
//!
//! [state]             # exactly-once state (see `durable`)
//! store = "rocksdb"   # or "postgres", with `postgres = "host=... user=..."`
//! protocol = "read-optimized"   # tables not named below
//! tables = { accounts = "write-optimized" }
//! retries = 2         # immediate re-executions after a trap
//! reexecute_after_ms = 5000     # an unfinished invocation is run again this long
//!                               # past its timeout
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Limits of one function. Every field has a node-wide default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Linear memory of one instance.
    pub memory_bytes: u64,
    /// Wall time of one invocation, host calls included.
    pub timeout_ms: u64,
    pub request_bytes_max: u64,
    pub response_bytes_max: u64,
    /// Instances of the function running at once on this node; more wait, up to the
    /// timeout.
    pub concurrency_max: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 128 << 20,
            timeout_ms: 10_000,
            request_bytes_max: 6 << 20,
            response_bytes_max: 6 << 20,
            concurrency_max: 64,
        }
    }
}

/// What one node allows at most, whatever a deploy asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeLimits {
    /// Instances alive at once over all functions (the pooling allocator's size).
    pub instances_max: u32,
    /// The largest `memory_bytes` a function may ask for.
    pub memory_bytes_max: u64,
    /// The largest component a deploy may upload.
    pub component_bytes_max: u64,
    /// Nested `invoke.call`s.
    pub call_depth_max: u32,
    /// Finished asynchronous invocations kept for `GET /v1/invocations/{id}`.
    pub invocations_kept: usize,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            instances_max: 256,
            memory_bytes_max: 1 << 30,
            component_bytes_max: 64 << 20,
            call_depth_max: 8,
            invocations_kept: 100_000,
        }
    }
}

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
    /// Re-executions right after an attempt trapped, before the trap is the result.
    pub retries: u32,
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
    /// How often `auto` tables are looked at.
    pub auto_interval_ms: u64,
    /// Operations on a table within one look below which `auto` does not decide.
    pub auto_min_ops: u64,
    /// C_w / C_r of Halfmoon §4.6: how much more a read-optimized write costs than a
    /// write-optimized one, over how much more a write-optimized read costs than a
    /// read-optimized one. `auto` picks read-optimized when reads exceed writes times
    /// this (with a 25% band against flapping). 1 here: each costs one log append (the
    /// Halfmoon prototype logs twice per read-optimized write, so 2 there).
    pub auto_write_cost: u32,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            store: StoreKind::Rocksdb,
            postgres: String::new(),
            protocol: Protocol::ReadOptimized,
            tables: BTreeMap::new(),
            retries: 2,
            reexecute_after_ms: 5_000,
            recovery_interval_ms: 1_000,
            attempts_max: 5,
            crash_injection: false,
            gc_interval_ms: 10_000,
            results_kept_ms: 3_600_000,
            auto_interval_ms: 2_000,
            auto_min_ops: 20,
            auto_write_cost: 1,
        }
    }
}

/// A node's whole configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Everything durable: the log's RocksDB stores, compiled artifacts.
    pub data_dir: PathBuf,
    /// The HTTP gateway's address.
    pub listen: String,
    pub limits: Limits,
    pub node: NodeLimits,
    pub state: StateConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from(".tally"),
            listen: "127.0.0.1:8080".into(),
            limits: Limits::default(),
            node: NodeLimits::default(),
            state: StateConfig::default(),
        }
    }
}

impl Config {
    /// Reads a TOML file; keys it lacks keep their defaults.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// Checks that function defaults fit the node's limits.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.check_limits(&self.limits).map_err(anyhow::Error::msg)?;
        for table in self.state.tables.keys() {
            crate::durable::check_table(table).map_err(|e| anyhow::anyhow!("[state] tables: {e}"))?;
        }
        if self.state.store == StoreKind::Postgres && self.state.postgres.is_empty() {
            anyhow::bail!("[state] store = \"postgres\" needs `postgres`, a connection string");
        }
        if self.state.attempts_max == 0 {
            anyhow::bail!("[state] attempts_max must be positive");
        }
        Ok(())
    }

    /// Checks one function's limits against the node's.
    pub fn check_limits(&self, l: &Limits) -> Result<(), String> {
        if l.memory_bytes > self.node.memory_bytes_max {
            return Err(format!("memory_bytes {} exceeds this node's maximum {}", l.memory_bytes, self.node.memory_bytes_max));
        }
        if l.memory_bytes < 1 << 16 {
            return Err("memory_bytes must be at least one 64 KiB page".into());
        }
        if l.timeout_ms == 0 || l.concurrency_max == 0 {
            return Err("timeout_ms and concurrency_max must be positive".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_file_keeps_the_defaults_of_missing_keys() {
        let c: Config = toml::from_str("listen = \"0.0.0.0:9000\"\n[limits]\ntimeout_ms = 500\n").unwrap();
        assert_eq!(c.listen, "0.0.0.0:9000");
        assert_eq!(c.limits.timeout_ms, 500);
        assert_eq!(c.limits.memory_bytes, Limits::default().memory_bytes);
        assert_eq!(c.node, NodeLimits::default());
    }

    #[test]
    fn unknown_keys_and_oversized_limits_are_refused() {
        assert!(toml::from_str::<Config>("lisen = \"x\"").is_err());
        let mut c = Config::default();
        c.limits.memory_bytes = c.node.memory_bytes_max + 1;
        assert!(c.validate().is_err());
    }
}
