//! Configurations and metalog entries as stores wrote them before the current format:
//! read, never written. Each converts into today's value, and back (losing what the
//! old format lacks) for tests that write an old store.

use serde::{Deserialize, Serialize};

use super::{Configuration, LogTermConfig, SealedTail, ShardConfig, TermConfig, TierLayout};
use crate::message::{MetalogEntry, TrimCommand};
use crate::types::{LocalId, LogId, NodeId, ShardId, Term};

/// A metalog entry before configuration versions (its encoding ends where `version`
/// would begin): every entry of such a store is of version 0.
#[derive(Deserialize, Serialize)]
pub struct MetalogEntryV1 {
    pub term: Term,
    pub log: LogId,
    pub index: u64,
    pub start_position: u64,
    pub prev_cut: Vec<LocalId>,
    pub cut: Vec<LocalId>,
    pub trims: Vec<TrimCommand>,
}

impl From<MetalogEntryV1> for MetalogEntry {
    fn from(e: MetalogEntryV1) -> MetalogEntry {
        let MetalogEntryV1 { term, log, index, start_position, prev_cut, cut, trims } = e;
        MetalogEntry { term, log, index, start_position, prev_cut, cut, trims, version: 0 }
    }
}

#[derive(Deserialize, Serialize)]
struct ShardConfigV1 {
    shard: ShardId,
    engine: NodeId,
    incarnation: u64,
    replicas: Vec<NodeId>,
}

#[derive(Deserialize, Serialize)]
struct LogTermConfigV1 {
    log: LogId,
    sequencers: Vec<NodeId>,
    shards: Vec<ShardConfigV1>,
}

#[derive(Deserialize, Serialize)]
struct SealedTailV1 {
    len: u64,
    last: Option<MetalogEntryV1>,
}

#[derive(Deserialize, Serialize)]
struct TermConfigV1 {
    term: Term,
    logs: Vec<LogTermConfigV1>,
    engines: Vec<NodeId>,
    storage: Vec<NodeId>,
    sealed: Option<Vec<SealedTailV1>>,
}

impl From<TermConfigV1> for TermConfig {
    fn from(t: TermConfigV1) -> TermConfig {
        let shard = |s: ShardConfigV1| ShardConfig {
            shard: s.shard,
            engine: s.engine,
            incarnation: s.incarnation,
            replicas: s.replicas,
            since: 0,
            until: None,
        };
        let log = |l: LogTermConfigV1| LogTermConfig {
            log: l.log,
            sequencers: l.sequencers,
            shards: l.shards.into_iter().map(shard).collect(),
        };
        let tail = |t: SealedTailV1| SealedTail { len: t.len, last: t.last.map(MetalogEntry::from) };
        TermConfig {
            term: t.term,
            logs: t.logs.into_iter().map(log).collect(),
            engines: t.engines,
            storage: t.storage,
            sealed: t.sealed.map(|s| s.into_iter().map(tail).collect()),
            version: 0,
        }
    }
}

/// [`Configuration`] as stores wrote it before the index tier.
#[derive(Deserialize, Serialize)]
pub struct ConfigurationV1 {
    n_logs: u8,
    controller: NodeId,
    terms: Vec<TermConfigV1>,
    indexers: Vec<Vec<NodeId>>,
}

impl From<ConfigurationV1> for Configuration {
    fn from(v: ConfigurationV1) -> Configuration {
        ConfigurationV2 { n_logs: v.n_logs, controller: v.controller, terms: v.terms, indexers: v.indexers, tier: None }.into()
    }
}

/// [`TierLayout`] before aggregators.
#[derive(Deserialize, Serialize)]
pub struct TierLayoutV1 {
    shards: Vec<Vec<NodeId>>,
}

impl From<TierLayoutV1> for TierLayout {
    fn from(t: TierLayoutV1) -> TierLayout {
        TierLayout { shards: t.shards, aggregators: Vec::new() }
    }
}

impl From<&TierLayout> for TierLayoutV1 {
    fn from(t: &TierLayout) -> TierLayoutV1 {
        TierLayoutV1 { shards: t.shards.clone() }
    }
}

/// [`Configuration`] as stores wrote it before configuration versions.
#[derive(Deserialize, Serialize)]
pub struct ConfigurationV2 {
    n_logs: u8,
    controller: NodeId,
    terms: Vec<TermConfigV1>,
    indexers: Vec<Vec<NodeId>>,
    tier: Option<TierLayoutV1>,
}

impl From<ConfigurationV2> for Configuration {
    fn from(v: ConfigurationV2) -> Configuration {
        Configuration {
            n_logs: v.n_logs,
            controller: v.controller,
            terms: v.terms.into_iter().map(TermConfig::from).collect(),
            indexers: v.indexers,
            tier: v.tier.map(TierLayout::from),
        }
    }
}

/// [`Configuration`] as stores wrote it before aggregators.
#[derive(Deserialize, Serialize)]
pub struct ConfigurationV3 {
    n_logs: u8,
    controller: NodeId,
    terms: Vec<TermConfig>,
    indexers: Vec<Vec<NodeId>>,
    tier: Option<TierLayoutV1>,
}

impl From<ConfigurationV3> for Configuration {
    fn from(v: ConfigurationV3) -> Configuration {
        let tier = v.tier.map(TierLayout::from);
        Configuration { n_logs: v.n_logs, controller: v.controller, terms: v.terms, indexers: v.indexers, tier }
    }
}

impl From<&Configuration> for ConfigurationV3 {
    fn from(c: &Configuration) -> ConfigurationV3 {
        let tier = c.tier.as_ref().map(TierLayoutV1::from);
        ConfigurationV3 { n_logs: c.n_logs, controller: c.controller, terms: c.terms.clone(), indexers: c.indexers.clone(), tier }
    }
}

impl From<&MetalogEntry> for MetalogEntryV1 {
    fn from(e: &MetalogEntry) -> MetalogEntryV1 {
        let e = e.clone();
        MetalogEntryV1 {
            term: e.term,
            log: e.log,
            index: e.index,
            start_position: e.start_position,
            prev_cut: e.prev_cut,
            cut: e.cut,
            trims: e.trims,
        }
    }
}

impl From<&TermConfig> for TermConfigV1 {
    fn from(t: &TermConfig) -> TermConfigV1 {
        let shard = |s: &ShardConfig| ShardConfigV1 {
            shard: s.shard,
            engine: s.engine,
            incarnation: s.incarnation,
            replicas: s.replicas.clone(),
        };
        let log = |l: &LogTermConfig| LogTermConfigV1 {
            log: l.log,
            sequencers: l.sequencers.clone(),
            shards: l.shards.iter().map(shard).collect(),
        };
        let tail = |t: &SealedTail| SealedTailV1 { len: t.len, last: t.last.as_ref().map(MetalogEntryV1::from) };
        TermConfigV1 {
            term: t.term,
            logs: t.logs.iter().map(log).collect(),
            engines: t.engines.clone(),
            storage: t.storage.clone(),
            sealed: t.sealed.as_ref().map(|s| s.iter().map(tail).collect()),
        }
    }
}

impl From<&Configuration> for ConfigurationV1 {
    fn from(c: &Configuration) -> ConfigurationV1 {
        let terms = c.terms.iter().map(TermConfigV1::from).collect();
        ConfigurationV1 { n_logs: c.n_logs, controller: c.controller, terms, indexers: c.indexers.clone() }
    }
}

impl From<&Configuration> for ConfigurationV2 {
    fn from(c: &Configuration) -> ConfigurationV2 {
        let terms = c.terms.iter().map(TermConfigV1::from).collect();
        let tier = c.tier.as_ref().map(TierLayoutV1::from);
        ConfigurationV2 { n_logs: c.n_logs, controller: c.controller, terms, indexers: c.indexers.clone(), tier }
    }
}
