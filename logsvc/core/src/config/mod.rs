//! Cluster configuration: which nodes order, store and index each physical log in each
//! term. The controller is the only writer; every other node receives whole
//! [`Configuration`]s and never edits one.

use serde::{Deserialize, Serialize};

use crate::message::MetalogEntry;
use crate::types::{book_to_log, BookId, LogId, NodeId, ShardId, Term};

mod legacy;
pub use legacy::{ConfigurationV1, ConfigurationV2, ConfigurationV3, MetalogEntryV1};

/// One shard of a physical log in one term: the records appended by `engine`,
/// replicated on every node of `replicas`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardConfig {
    pub shard: ShardId,
    pub engine: NodeId,
    /// The incarnation of `engine` the shard was made for; another incarnation of the
    /// same node never appends to it.
    pub incarnation: u64,
    pub replicas: Vec<NodeId>,
    /// The version of its term that bound the shard (0: the term's first).
    pub since: u32,
    /// The version that closed it: from the entry announcing that version on, the
    /// metalog orders none of its records.
    pub until: Option<u32>,
}

impl ShardConfig {
    /// Whether entries of `version` may order this shard's records.
    pub fn open_at(&self, version: u32) -> bool {
        self.since <= version && self.until.is_none_or(|u| version < u)
    }
}

/// A physical log in one term. `sequencers[0]` is the primary; position `i` of a
/// metalog entry's `cut` vectors refers to `shards[i]`. Shards are only appended
/// within a term (a version binds a new one at the end, or closes one), so an index
/// names the same shard in every version, and an entry's vectors cover the shards
/// bound up to its version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogTermConfig {
    pub log: LogId,
    pub sequencers: Vec<NodeId>,
    pub shards: Vec<ShardConfig>,
}

impl LogTermConfig {
    pub fn primary(&self) -> NodeId {
        self.sequencers[0]
    }

    /// Acknowledgements (the primary's own included) that commit a metalog entry.
    pub fn quorum(&self) -> usize {
        self.sequencers.len() / 2 + 1
    }

    pub fn shard_index_of_engine(&self, engine: NodeId) -> Option<usize> {
        self.shards.iter().position(|s| s.engine == engine)
    }

    pub fn shard_index(&self, shard: ShardId) -> Option<usize> {
        self.shards.iter().position(|s| s.shard == shard)
    }
}

/// How a sealed term's metalog of one log ends: `len` entries, the last of which is
/// carried here because it may have reached only the sealing quorum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedTail {
    pub len: u64,
    pub last: Option<MetalogEntry>,
}

/// One term of the cluster. `sealed` is `None` while the term is current. A term has
/// at least the logs of the term before it: logs are added, never removed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermConfig {
    pub term: Term,
    pub logs: Vec<LogTermConfig>,
    pub engines: Vec<NodeId>,
    pub storage: Vec<NodeId>,
    pub sealed: Option<Vec<SealedTail>>,
    /// The configuration's version within the term (0 when installed). A version binds
    /// or closes shards of function nodes (partial mode) and takes effect in each log
    /// at the first entry that carries it ([`MetalogEntry::version`]).
    pub version: u32,
}

impl TermConfig {
    pub fn log(&self, log: LogId) -> &LogTermConfig {
        &self.logs[log.0 as usize]
    }

    /// The physical logs of this term; books map onto them with [`book_to_log`].
    pub fn n_logs(&self) -> u8 {
        self.logs.len() as u8
    }

    /// Nodes that receive this term's metalog entries: every engine and storage node.
    pub fn subscribers(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.engines.iter().chain(self.storage.iter()).copied()
    }

    pub fn shard(&self, shard: ShardId) -> Option<(&LogTermConfig, usize)> {
        self.logs.iter().find_map(|l| l.shard_index(shard).map(|i| (l, i)))
    }
}

/// INDILOG's index tier (partial mode): `shards[s]` are the index nodes replicating index
/// shard `s` (entry k of log l goes to shard (k + l) mod S), the first one pushing the
/// decided updates of its entries. Fixed for the life of the cluster, like `indexers`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierLayout {
    pub shards: Vec<Vec<NodeId>>,
    /// The aggregators function nodes name in their lookups, in turn; none: each
    /// function node aggregates its own. They come and go with versions.
    /// (`default` for configurations stored before aggregators; never skipped when
    /// empty: the wire's format is not self-describing.)
    #[serde(default)]
    pub aggregators: Vec<NodeId>,
}

impl TierLayout {
    /// Every index node, shard by shard.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.shards.iter().flatten().copied()
    }

    /// The shard `node` replicates.
    pub fn shard_of_node(&self, node: NodeId) -> Option<usize> {
        self.shards.iter().position(|r| r.contains(&node))
    }
}

/// The whole history of terms, oldest first; the last one is current. Engines that
/// start from nothing replay every term, so sealed terms stay in the history.
///
/// `n_logs` is the current term's number of physical logs. It grows when the
/// controller adds a log: from that term on, the books that [`book_to_log`] maps to
/// the new log append there; what they wrote before stays in their old log, and the
/// new log's indexers take over those books' index state as of the end of the term
/// before (`Message::IndexExport`).
///
/// `indexers[l]` are the engines that hold the index of log `l` (Boki §4.1: index
/// replicas); an empty list means every engine does. The set is fixed for the life of
/// the cluster, so an indexer has applied every entry since the first term. Other
/// engines append to the log but forward reads to an indexer.
///
/// With `tier`, the cluster runs in partial mode: engines keep no complete index, index
/// nodes decide placements and answer lookups, and engines keep a bounded local index
/// fed by the index nodes' decided updates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Configuration {
    pub n_logs: u8,
    pub controller: NodeId,
    pub terms: Vec<TermConfig>,
    pub indexers: Vec<Vec<NodeId>>,
    /// Partial mode's index tier (`None`: complete mode, every indexer holds `index.rs`).
    pub tier: Option<TierLayout>,
}

impl Configuration {
    pub fn current(&self) -> &TermConfig {
        self.terms.last().expect("a configuration has at least one term")
    }

    /// The current term and its version: later configurations have greater stamps.
    pub fn stamp(&self) -> (Term, u32) {
        let t = self.current();
        (t.term, t.version)
    }

    /// The physical log `book` appends to in the current term.
    pub fn log_of(&self, book: BookId) -> LogId {
        book_to_log(book, self.n_logs)
    }

    /// The first term that has `log`, if any does.
    pub fn first_term_of(&self, log: LogId) -> Option<Term> {
        self.terms.iter().find(|t| t.logs.len() > log.0 as usize).map(|t| t.term)
    }

    /// The term in which `log` was added to a running cluster (`None` for the logs
    /// of the first term, and for logs that do not exist).
    pub fn added_at(&self, log: LogId) -> Option<Term> {
        self.first_term_of(log).filter(|&t| Some(t) != self.terms.first().map(|f| f.term))
    }

    /// Whether `engine` holds the index of `log`.
    pub fn indexes(&self, log: LogId, engine: NodeId) -> bool {
        self.indexers.get(log.0 as usize).is_none_or(|ix| ix.is_empty() || ix.contains(&engine))
    }

    /// The engines holding the index of `log`, in the order forwarders try them.
    pub fn indexers_of(&self, log: LogId) -> Vec<NodeId> {
        match self.indexers.get(log.0 as usize) {
            Some(ix) if !ix.is_empty() => ix.clone(),
            _ => self.current().engines.clone(),
        }
    }

    /// Whether the cluster runs the index tier (partial mode).
    pub fn partial(&self) -> bool {
        self.tier.is_some()
    }

    pub fn term(&self, term: Term) -> Option<&TermConfig> {
        // Terms are numbered consecutively from the first one in the history.
        let first = self.terms.first()?.term.0;
        let i = term.0.checked_sub(first)? as usize;
        self.terms.get(i)
    }
}
