//! Configuration of a Tally node: a TOML file whose every key a command-line flag can
//! override, and the per-function limits a deploy can override.
//!
//! ```toml
//! data_dir = ".tally"
//! listen = "127.0.0.1:8080"
//! artifacts_dir = "/var/cache/tally"   # compiled components; default <data_dir>/artifacts
//! secrets_key_file = "/etc/tally/secrets.key"  # seals functions' secrets; default
//!                                     # <data_dir>/secrets.key, made if missing
//!
//! [limits]            # defaults for functions deployed without overrides
//! memory_bytes = 134217728
//! timeout_ms = 10000
//! request_bytes_max = 6291456
//! response_bytes_max = 6291456
//! concurrency_max = 64
//! retry_attempts = 3  # attempts of an invocation whose guest traps, the first included
//! retry_backoff_ms = 0          # the wait before the second; doubling, at most
//! retry_backoff_max_ms = 60000  # this (a wait past 1 s suspends the invocation)
//!
//! [node]              # what this node allows at most
//! instances_max = 256
//! memory_bytes_max = 1073741824
//! component_bytes_max = 67108864
//! call_depth_max = 8
//! memory_keep_resident_bytes = 4194304
//! index_resident_bytes = 33554432  # of full index chunks per index; older ones spill
//! function_timeout_ms_max = 900000         # the most a deploy may set each of these
//! function_request_bytes_max = 67108864
//! function_response_bytes_max = 67108864
//! outgoing_in_flight_max = 256             # requests out of guests (wasi:http)
//! outgoing_timeout_ms_max = 30000
//! outgoing_request_bytes_max = 4194304
//! outgoing_response_bytes_max = 524288     # at most 786432: a response is logged whole
//!
//! [index]             # the log's index (INDILOG)
//! mode = "complete"     # every function node indexes whole logs; or "partial": index
//!                       # nodes hold the complete index, function nodes a bounded one
//! shards = 2            # partial: index shards x replicas (in this process for `tally dev`)
//! replicas = 1
//!
//! [index.local]         # partial: this function node's local index, bounded in bytes
//! enabled = true
//! suffix_bytes = 2097152
//! tag_cache_bytes = 16777216
//! tag_bytes_max = 131072        # of one stream
//! popularity_bytes = 1048576
//!
//! [observe]
//! otlp_endpoint = "http://127.0.0.1:4318"   # traces over OTLP/HTTP; none by default
//!
//! [state]             # exactly-once state (see `durable`)
//! store = "rocksdb"   # or "postgres", with `postgres = "host=... user=..."`
//! protocol = "read-optimized"   # tables not named below
//! tables = { accounts = "write-optimized" }
//! reexecute_after_ms = 5000     # an unfinished invocation is run again this long
//!                               # past its timeout
//! ```
//!
//! [`Limits`] and [`NodeLimits`] are `tally-host`'s and [`StateConfig`] is
//! `tally-durable`'s, re-exported here.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use tally_durable::{Protocol, StateConfig, StoreKind};
pub use tally_host::{Limits, NodeLimits};

/// The most attempts a function's retry policy may ask for.
pub const RETRY_ATTEMPTS_MAX: u32 = 100;

/// A node's whole configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Everything durable: the log's RocksDB stores, compiled artifacts.
    pub data_dir: PathBuf,
    /// The HTTP gateway's address.
    pub listen: String,
    /// Where compiled components are kept, by the hash of their bytes and of the
    /// engine's settings: `data_dir/artifacts` unless set. Nodes of one machine may
    /// share one; it must be written only by Tally, since artifacts are loaded as code.
    pub artifacts_dir: Option<PathBuf>,
    /// The key that seals functions' secrets (64 hex digits): `data_dir/secrets.key`
    /// unless set, made (mode 0600) if missing. Every node of a cluster needs the same.
    pub secrets_key_file: Option<PathBuf>,
    /// Whether a request without a token is refused (`token`), or taken as the admin's
    /// when a web page cannot have forged it (`local`: only for a gateway on loopback).
    pub auth: AuthMode,
    /// The bootstrap admin token (`tally_<id>_<secret>`): `data_dir/admin.token` unless
    /// set, made (mode 0600) if missing. Its grant is appended to the log once.
    pub admin_token_file: Option<PathBuf>,
    /// HTTPS: the gateway's certificate chain and key (PEM files); plain HTTP unless
    /// both are set.
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    pub limits: Limits,
    pub node: NodeLimits,
    pub state: StateConfig,
    pub index: IndexConfig,
    pub observe: ObserveConfig,
}

/// How the log is indexed (`[index]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IndexConfig {
    pub mode: IndexMode,
    /// Partial mode: index shards, and replicas of each.
    pub shards: usize,
    pub replicas: usize,
    pub local: LocalIndexConfig,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig { mode: IndexMode::Complete, shards: 2, replicas: 1, local: LocalIndexConfig::default() }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexMode {
    /// Every function node indexes every log whole (Boki).
    #[default]
    Complete,
    /// Index nodes hold the complete index, sharded; function nodes a bounded local one.
    Partial,
}

impl std::str::FromStr for IndexMode {
    type Err = String;

    fn from_str(text: &str) -> Result<IndexMode, String> {
        match text {
            "complete" => Ok(IndexMode::Complete),
            "partial" => Ok(IndexMode::Partial),
            other => Err(format!("index mode {other:?}: `complete` or `partial`")),
        }
    }
}

/// A function node's local index in partial mode (`[index.local]`), in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LocalIndexConfig {
    pub enabled: bool,
    pub suffix_bytes: usize,
    pub tag_cache_bytes: usize,
    /// Of one stream.
    pub tag_bytes_max: usize,
    pub popularity_bytes: usize,
}

impl Default for LocalIndexConfig {
    fn default() -> Self {
        LocalIndexConfig {
            enabled: true,
            suffix_bytes: 2 << 20,
            tag_cache_bytes: 16 << 20,
            tag_bytes_max: 128 << 10,
            popularity_bytes: 1 << 20,
        }
    }
}

impl LocalIndexConfig {
    /// A local index of `total` bytes in all (at least 64 KiB), split as the defaults are.
    pub fn with_bytes(total: usize) -> LocalIndexConfig {
        let total = total.max(64 << 10);
        LocalIndexConfig {
            enabled: true,
            suffix_bytes: total / 8,
            tag_cache_bytes: total * 3 / 4,
            tag_bytes_max: total / 16,
            popularity_bytes: total / 8,
        }
    }
}

/// What the node tells about its executions beyond `/metrics` and `Server-Timing`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ObserveConfig {
    /// An OTLP/HTTP collector (`http://host:4318`): every execution's trace is posted
    /// to `<otlp_endpoint>/v1/traces` (protobuf). No trace leaves the node without it.
    pub otlp_endpoint: Option<String>,
}

impl ObserveConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(e) = &self.otlp_endpoint {
            let rest =
                e.strip_prefix("http://").ok_or_else(|| anyhow::anyhow!("[observe] otlp_endpoint {e:?}: an http:// URL"))?;
            if rest.is_empty() || rest.starts_with('/') {
                anyhow::bail!("[observe] otlp_endpoint {e:?}: no host");
            }
        }
        Ok(())
    }
}

/// How the gateway takes requests without a token (`tally::auth::guard`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// Refused: every request needs a token.
    Token,
    /// Taken as the admin's, unless a web page could have forged it.
    #[default]
    Local,
}

impl std::str::FromStr for AuthMode {
    type Err = String;

    fn from_str(text: &str) -> Result<AuthMode, String> {
        match text {
            "token" => Ok(AuthMode::Token),
            "local" => Ok(AuthMode::Local),
            other => Err(format!("auth {other:?}: `token` or `local`")),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from(".tally"),
            listen: "127.0.0.1:8080".into(),
            artifacts_dir: None,
            secrets_key_file: None,
            auth: AuthMode::Local,
            admin_token_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            limits: Limits::default(),
            node: NodeLimits::default(),
            state: StateConfig::default(),
            index: IndexConfig::default(),
            observe: ObserveConfig::default(),
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
        self.observe.validate()?;
        for table in self.state.tables.keys() {
            tally_durable::check_table(table).map_err(|e| anyhow::anyhow!("[state] tables: {e}"))?;
        }
        if self.state.store == StoreKind::Postgres && self.state.postgres.is_empty() {
            anyhow::bail!("[state] store = \"postgres\" needs `postgres`, a connection string");
        }
        let ix = &self.index;
        if ix.mode == IndexMode::Partial && (ix.shards == 0 || ix.replicas == 0 || ix.shards > 64 || ix.replicas > 8) {
            anyhow::bail!("[index] shards must be 1 to 64 and replicas 1 to 8");
        }
        if self.state.attempts_max == 0 {
            anyhow::bail!("[state] attempts_max must be positive");
        }
        let cap = tally_host::OUTGOING_RESPONSE_BYTES_CAP;
        if self.node.outgoing_response_bytes_max > cap {
            anyhow::bail!("[node] outgoing_response_bytes_max is at most {cap}: a response is logged whole, in one record");
        }
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            anyhow::bail!("tls_cert_file and tls_key_file go together");
        }
        let n = &self.node;
        if n.invocations_max == 0 || n.book_invocations_max == 0 || n.queue_wait_ms == 0 {
            anyhow::bail!("[node] invocations_max, book_invocations_max and queue_wait_ms must be positive");
        }
        if n.book_invocations_max > n.invocations_max {
            anyhow::bail!("[node] book_invocations_max is at most invocations_max");
        }
        if self.node.outgoing_in_flight_max == 0 || self.node.outgoing_timeout_ms_max == 0 {
            anyhow::bail!("[node] outgoing_in_flight_max and outgoing_timeout_ms_max must be positive");
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
        let n = &self.node;
        let caps = [
            ("timeout_ms", l.timeout_ms, "function_timeout_ms_max", n.function_timeout_ms_max),
            ("request_bytes_max", l.request_bytes_max, "function_request_bytes_max", n.function_request_bytes_max),
            ("response_bytes_max", l.response_bytes_max, "function_response_bytes_max", n.function_response_bytes_max),
            ("concurrency_max", u64::from(l.concurrency_max), "instances_max", u64::from(n.instances_max)),
        ];
        for (what, value, cap, max) in caps {
            if value > max {
                return Err(format!("{what} {value} exceeds this node's maximum {max} ([node] {cap})"));
            }
        }
        if l.retry_attempts == 0 || l.retry_attempts > RETRY_ATTEMPTS_MAX {
            return Err(format!("retry_attempts must be 1 to {RETRY_ATTEMPTS_MAX} (1: no retry)"));
        }
        if l.retry_backoff_ms > l.retry_backoff_max_ms || l.retry_backoff_max_ms > tally_durable::SLEEP_MAX_MS {
            return Err(format!(
                "retry_backoff_ms ({}) must be at most retry_backoff_max_ms ({}), itself at most a year",
                l.retry_backoff_ms, l.retry_backoff_max_ms
            ));
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
    fn a_node_bounds_its_indexes_as_an_in_process_cluster_does() {
        let bytes = NodeLimits::default().index_resident_bytes;
        assert_eq!(usize::try_from(bytes).unwrap(), tally_logsvc::store::INDEX_RESIDENT_DEFAULT);
    }

    #[test]
    fn unknown_keys_and_oversized_limits_are_refused() {
        assert!(toml::from_str::<Config>("lisen = \"x\"").is_err());
        let mut c = Config::default();
        c.limits.memory_bytes = c.node.memory_bytes_max + 1;
        assert!(c.validate().is_err());
    }

    #[test]
    fn a_node_caps_every_limit_a_deploy_may_set() {
        let c = Config::default();
        type Set = fn(&mut Limits);
        let over: [(&str, Set); 4] = [
            ("timeout_ms", |l| l.timeout_ms = 16 * 60 * 1000),
            ("request_bytes_max", |l| l.request_bytes_max = 1 << 40),
            ("response_bytes_max", |l| l.response_bytes_max = 1 << 40),
            ("concurrency_max", |l| l.concurrency_max = 100_000),
        ];
        for (what, set) in over {
            let mut l = Limits::default();
            set(&mut l);
            let e = c.check_limits(&l).expect_err(what);
            assert!(e.starts_with(what) && e.contains("[node]"), "{e}");
        }
        assert_eq!(c.check_limits(&Limits::default()), Ok(()));
    }
}
