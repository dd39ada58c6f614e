//! The handle on one cluster's keys, the configuration's compare-and-swap and the
//! cluster's settings.
//!
//! The settings (`n_logs`, `n_meta`, `n_data`, the failure timeout) are written once, by
//! the first controller to start, except that [`ControlPlane::set_n_logs`] raises `n_logs`
//! (`tally cluster grow`); the leading controller reads it every second and adds the logs
//! in a new term. The configuration is written only with [`ControlPlane::cas_config`], a
//! compare-and-swap on the revision its writer loaded.

use std::fmt;

use bincode::Options;
use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse};
use serde::{Deserialize, Serialize};
#[cfg(test)]
use tally_log_core::TierLayout;
use tally_log_core::{Configuration, ConfigurationV1, ConfigurationV2, ConfigurationV3, MetalogMode, NodeId};

use crate::endpoints::{Endpoints, Retry};
use crate::error::{Error, Result};

/// The first byte of a stored configuration: how the rest is encoded. 4 is bincode
/// (fixed-width integers) of [`Configuration`]; 3, 2 and 1, still read, of
/// [`ConfigurationV3`] (before aggregators), [`ConfigurationV2`] (before versions) and
/// [`ConfigurationV1`] (before the index tier).
const CONFIG_FORMAT_BINCODE: u8 = 4;
const CONFIG_FORMAT_V3: u8 = 3;
const CONFIG_FORMAT_V2: u8 = 2;
const CONFIG_FORMAT_V1: u8 = 1;

/// The largest encoded configuration written, below etcd's default request limit
/// (1.5 MiB) with room for the request's framing. Decoding allows more, so that a
/// cluster whose etcd takes larger requests can still be read by every node.
const CONFIG_BYTES_MAX: usize = 1_400_000;
const CONFIG_DECODE_BYTES_MAX: u64 = 64 << 20;

const CLUSTER_NAME_MAX: usize = 64;

/// The mod revision of the `config` key in etcd: what a compare-and-swap expects.
/// [`Revision::ABSENT`] stands for "no configuration stored yet".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Revision(i64);

impl Revision {
    /// No configuration is stored: a compare-and-swap expecting it creates the key.
    pub const ABSENT: Revision = Revision(0);

    /// etcd's revision number (0 for [`Revision::ABSENT`]), for logs.
    pub fn get(self) -> i64 {
        self.0
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// The cluster's settings, fixed when its first controller starts
/// ([`ControlPlane::init_settings`]) and read by every controller after it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// Physical logs.
    pub n_logs: u8,
    /// Sequencers per metalog, the primary included.
    pub n_meta: usize,
    /// Storage replicas per shard.
    pub n_data: usize,
    /// A node silent this long is down.
    pub failure_timeout_ms: u64,
    /// Partial mode's index tier: shards and replicas of each (absent: complete mode,
    /// as clusters made before the index tier have).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexShape>,
    /// What an acknowledged append survives (`synced` for clusters made before the
    /// choice). Sequencers read it when they start.
    #[serde(default)]
    pub metalog: MetalogMode,
}

/// The index tier's shape (partial mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexShape {
    pub shards: usize,
    pub replicas: usize,
}

/// A handle on one cluster's keys in etcd (`/tally/<cluster>/…`, see the crate's doc).
/// Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct ControlPlane {
    pub(crate) etcd: Endpoints,
    pub(crate) keys: Keys,
}

impl fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlPlane").field("prefix", &self.keys.prefix).finish_non_exhaustive()
    }
}

/// The key layout of one cluster.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(cluster: &str) -> Keys {
        Keys { prefix: format!("/tally/{cluster}/") }
    }

    pub(crate) fn config(&self) -> String {
        format!("{}config", self.prefix)
    }

    pub(crate) fn settings(&self) -> String {
        format!("{}settings", self.prefix)
    }

    pub(crate) fn leader(&self) -> String {
        format!("{}leader", self.prefix)
    }

    /// The prefix of every member key; it ends in '/', so member 1 never matches 10.
    pub(crate) fn members(&self) -> String {
        format!("{}members/", self.prefix)
    }

    pub(crate) fn member(&self, id: NodeId) -> String {
        format!("{}members/{}", self.prefix, id.0)
    }

    /// The node id a member key names; `None` for a key this crate did not write.
    pub(crate) fn member_id(&self, key: &[u8]) -> Option<NodeId> {
        let key = std::str::from_utf8(key).ok()?;
        let id = key.strip_prefix(&self.members())?;
        // `u32::from_str` takes a leading '+' and zeros; a key this crate wrote has
        // neither, and one id has one key.
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) || (id.len() > 1 && id.starts_with('0')) {
            return None;
        }
        id.parse().ok().map(NodeId)
    }
}

/// Refuses cluster names that would escape their prefix or make odd keys.
fn check_cluster_name(cluster: &str) -> Result<()> {
    if cluster.is_empty() || cluster.len() > CLUSTER_NAME_MAX {
        return Err(Error::InvalidArgument(format!(
            "cluster name {cluster:?} must have 1 to {CLUSTER_NAME_MAX} characters, it has {}",
            cluster.len()
        )));
    }
    if let Some(c) = cluster.chars().find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '-')) {
        return Err(Error::InvalidArgument(format!("cluster name {cluster:?} has {c:?}; only a-z, 0-9 and '-' are allowed")));
    }
    Ok(())
}

/// Refuses a TTL etcd would not keep, or one so long that a dead node lingers for hours.
pub(crate) fn check_ttl(ttl_s: i64) -> Result<()> {
    if !(1..=3600).contains(&ttl_s) {
        return Err(Error::InvalidArgument(format!("a lease TTL of {ttl_s} s is outside 1..=3600 s")));
    }
    Ok(())
}

fn bincode_options() -> impl Options {
    bincode::DefaultOptions::new().with_fixint_encoding().reject_trailing_bytes().with_limit(CONFIG_DECODE_BYTES_MAX)
}

/// The stored form of a configuration: [`CONFIG_FORMAT_BINCODE`], then bincode.
pub(crate) fn encode_config(config: &Configuration) -> Result<Vec<u8>> {
    if config.terms.is_empty() {
        return Err(Error::InvalidArgument("a configuration without a term cannot be stored".into()));
    }
    let mut bytes = vec![CONFIG_FORMAT_BINCODE];
    bincode_options()
        .serialize_into(&mut bytes, config)
        .map_err(|e| Error::InvalidArgument(format!("encoding the configuration: {e}")))?;
    if bytes.len() > CONFIG_BYTES_MAX {
        return Err(Error::InvalidArgument(format!(
            "the encoded configuration has {} bytes, more than the {CONFIG_BYTES_MAX} etcd takes",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// Reads back what [`encode_config`] wrote; anything else is [`Error::Corrupt`].
pub(crate) fn decode_config(bytes: &[u8]) -> Result<Configuration> {
    match bytes.split_first() {
        None => Err(Error::Corrupt("the stored configuration is empty".into())),
        Some((&format @ (CONFIG_FORMAT_BINCODE | CONFIG_FORMAT_V3 | CONFIG_FORMAT_V2 | CONFIG_FORMAT_V1), rest)) => {
            let decoded = match format {
                CONFIG_FORMAT_V1 => bincode_options().deserialize::<ConfigurationV1>(rest).map(Configuration::from),
                CONFIG_FORMAT_V2 => bincode_options().deserialize::<ConfigurationV2>(rest).map(Configuration::from),
                CONFIG_FORMAT_V3 => bincode_options().deserialize::<ConfigurationV3>(rest).map(Configuration::from),
                _ => bincode_options().deserialize::<Configuration>(rest),
            };
            let config =
                decoded.map_err(|e| Error::Corrupt(format!("decoding the stored configuration (format {format}): {e}")))?;
            if config.terms.is_empty() {
                return Err(Error::Corrupt("the stored configuration has no term".into()));
            }
            Ok(config)
        }
        Some((format, _)) => Err(Error::Corrupt(format!(
            "the stored configuration has format byte {format}; this build reads formats {CONFIG_FORMAT_V1} to {CONFIG_FORMAT_BINCODE}"
        ))),
    }
}

pub(crate) fn decode_settings(bytes: &[u8]) -> Result<Settings> {
    serde_json::from_slice(bytes).map_err(|e| Error::Corrupt(format!("decoding the stored settings: {e}")))
}

impl ControlPlane {
    /// Connects to etcd at `endpoints` (`http://host:port`, one per etcd member) for
    /// the keys of `cluster`. Refuses a cluster name that is empty, longer than 64
    /// characters, or has anything but `a-z`, `0-9` and `-` ([`Error::InvalidArgument`]).
    /// Returns once a member answered a read, or fails with [`Error::Etcd`] after 2 s.
    ///
    /// Every call of the returned handle goes to one member and fails over to the next
    /// when that one fails; each is given up after 2 s (see [`Error::Etcd`]).
    #[tracing::instrument(name = "control.connect", skip_all, fields(cluster = %cluster))]
    pub async fn connect(endpoints: &[String], cluster: &str) -> Result<ControlPlane> {
        ControlPlane::connect_with(endpoints, cluster, None).await
    }

    /// [`ControlPlane::connect`] over TLS (`https://host:port` endpoints) with a client
    /// certificate, if `tls` is given: etcd's certificate must be issued by `tls`'s CA
    /// for [`crate::ETCD_SERVER_NAME`].
    pub async fn connect_with(endpoints: &[String], cluster: &str, tls: Option<&crate::EtcdTls>) -> Result<ControlPlane> {
        check_cluster_name(cluster)?;
        let plane = ControlPlane { etcd: Endpoints::new(endpoints, tls).await?, keys: Keys::new(cluster) };
        // The clients connect lazily; one read shows that etcd answers (and has a leader).
        plane.etcd.get("connecting to etcd", plane.keys.settings(), Some(GetOptions::new().with_count_only())).await?;
        Ok(plane)
    }

    /// The stored configuration and its revision (what [`ControlPlane::cas_config`]
    /// expects next), or `None` if no configuration was ever stored. A linearizable
    /// read: it sees every write that completed before it started.
    #[tracing::instrument(name = "control.load_config", skip_all)]
    pub async fn load_config(&self) -> Result<Option<(Configuration, Revision)>> {
        let answer = self.etcd.get("reading the configuration", self.keys.config(), None).await?;
        match answer.kvs().first() {
            None => Ok(None),
            Some(stored) => Ok(Some((decode_config(stored.value())?, Revision(stored.mod_revision())))),
        }
    }

    /// Stores `config` if the stored configuration is still at `expected` (for
    /// [`Revision::ABSENT`]: if none is stored), in one etcd transaction, and returns the
    /// new revision. Otherwise nothing is written and the answer is
    /// [`Error::Superseded`]: another writer got there first, so two controllers
    /// starting from the same revision can never both install a next configuration.
    ///
    /// This does not check leadership: the compare alone keeps configurations safe. A
    /// leader should still check [`Leadership::lost`](crate::Leadership::lost) first.
    /// After [`Error::Etcd`] the write may or may not have happened; retrying with the
    /// same `expected` gives `Superseded` if it did.
    #[tracing::instrument(name = "control.cas_config", skip_all, fields(%expected, term = config.terms.last().map(|t| t.term.0)))]
    pub async fn cas_config(&self, expected: Revision, config: &Configuration) -> Result<Revision> {
        let value = encode_config(config)?;
        let key = self.keys.config();
        let compare = if expected == Revision::ABSENT {
            Compare::create_revision(key.clone(), CompareOp::Equal, 0)
        } else {
            Compare::mod_revision(key.clone(), CompareOp::Equal, expected.0)
        };
        let txn = Txn::new().when([compare]).and_then([TxnOp::put(key, value, None)]);
        let answer = self.etcd.txn("writing the configuration", Retry::IfNotApplied, txn).await?;
        if !answer.succeeded() {
            return Err(Error::Superseded);
        }
        match answer.header().map(|h| h.revision()) {
            Some(revision) if revision > expected.0 => Ok(Revision(revision)),
            other => Err(Error::Corrupt(format!("etcd says it wrote the configuration at revision {other:?}, after {expected}"))),
        }
    }

    /// Stores `settings` unless settings are stored already, and returns what is stored
    /// afterwards: `settings` itself, or an earlier caller's, which win. One etcd
    /// transaction, so concurrent first controllers agree on one value.
    #[tracing::instrument(name = "control.init_settings", skip_all)]
    pub async fn init_settings(&self, settings: &Settings) -> Result<Settings> {
        let key = self.keys.settings();
        let value = serde_json::to_vec(settings).expect("settings are plain data");
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.clone(), value, None)])
            .or_else([TxnOp::get(key, None)]);
        // Harmless to repeat: a repeat finds the settings stored and reads them.
        let answer = self.etcd.txn("writing the settings", Retry::Always, txn).await?;
        if answer.succeeded() {
            return Ok(settings.clone());
        }
        for op in answer.op_responses() {
            if let TxnOpResponse::Get(got) = op {
                if let Some(stored) = got.kvs().first() {
                    return decode_settings(stored.value());
                }
            }
        }
        // The compare saw the key, so the read in the same transaction did too.
        Err(Error::Etcd("the settings key vanished inside one transaction".into()))
    }

    /// Raises the cluster's number of physical logs to `n_logs` (the leading controller
    /// reads it and adds the logs in a new term) and returns the settings now stored.
    /// Fails with [`Error::InvalidArgument`] for fewer logs than stored (logs are never
    /// removed) or more than 256, and when no settings are stored yet.
    #[tracing::instrument(name = "control.set_n_logs", skip_all, fields(n_logs))]
    pub async fn set_n_logs(&self, n_logs: u16) -> Result<Settings> {
        let key = self.keys.settings();
        loop {
            let answer = self.etcd.get("reading the settings", key.clone(), None).await?;
            let Some(stored) = answer.kvs().first() else {
                return Err(Error::InvalidArgument("the cluster has no settings yet: start a controller first".into()));
            };
            let (revision, mut settings) = (stored.mod_revision(), decode_settings(stored.value())?);
            let n = u8::try_from(n_logs).ok().filter(|&n| n >= settings.n_logs).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{n_logs} physical logs: the cluster has {}, logs are never removed, and 255 is the most",
                    settings.n_logs
                ))
            })?;
            if n == settings.n_logs {
                return Ok(settings);
            }
            settings.n_logs = n;
            let value = serde_json::to_vec(&settings).expect("settings are plain data");
            let txn = Txn::new().when([Compare::mod_revision(key.clone(), CompareOp::Equal, revision)]).and_then([TxnOp::put(
                key.clone(),
                value,
                None,
            )]);
            // Not applied: another writer changed the settings; read them again.
            if self.etcd.txn("writing the settings", Retry::IfNotApplied, txn).await?.succeeded() {
                return Ok(settings);
            }
        }
    }

    /// The cluster's settings, or `None` before any controller stored them.
    #[tracing::instrument(name = "control.settings", skip_all)]
    pub async fn settings(&self) -> Result<Option<Settings>> {
        let answer = self.etcd.get("reading the settings", self.keys.settings(), None).await?;
        answer.kvs().first().map(|stored| decode_settings(stored.value())).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tally_log_core::{LogId, LogTermConfig, Term, TermConfig};

    fn config() -> Configuration {
        Configuration {
            n_logs: 1,
            controller: NodeId(1),
            terms: vec![TermConfig {
                term: Term(1),
                logs: vec![LogTermConfig { log: LogId(0), sequencers: vec![NodeId(2)], shards: vec![] }],
                engines: vec![NodeId(4)],
                storage: vec![NodeId(3)],
                sealed: None,
                version: 0,
            }],
            indexers: vec![vec![]],
            tier: None,
        }
    }

    #[test]
    fn cluster_names() {
        let check = |name: &str, ok: bool| assert_eq!(check_cluster_name(name).is_ok(), ok, "{name:?}");
        check("prod", true);
        check("a-1", true);
        check(&"x".repeat(64), true);
        check(&"x".repeat(65), false);
        check("", false);
        check("a/b", false);
        check("Prod", false);
        check("a b", false);
        check("ü", false);
        let e = check_cluster_name("a/b").unwrap_err().to_string();
        assert!(e.contains("'/'"), "{e}");
    }

    #[test]
    fn configurations_round_trip_and_refuse_other_formats() {
        let c = config();
        let bytes = encode_config(&c).unwrap();
        assert_eq!(bytes[0], 4);
        assert_eq!(decode_config(&bytes).unwrap(), c);
        let tier = TierLayout { shards: vec![vec![NodeId(5), NodeId(6)]], aggregators: vec![NodeId(7)] };
        let aggregated = Configuration { tier: Some(tier.clone()), ..c.clone() };
        assert_eq!(decode_config(&encode_config(&aggregated).unwrap()).unwrap(), aggregated);
        let tiered = Configuration { tier: Some(TierLayout { aggregators: vec![], ..tier }), ..c.clone() };
        assert_eq!(decode_config(&encode_config(&tiered).unwrap()).unwrap(), tiered);
        // What builds before the index tier (format 1: no `tier`) and before versions
        // (format 2) stored still reads.
        let mut v1 = vec![1];
        bincode_options().serialize_into(&mut v1, &ConfigurationV1::from(&c)).unwrap();
        assert_eq!(decode_config(&v1).unwrap(), c);
        let mut v2 = vec![2];
        bincode_options().serialize_into(&mut v2, &ConfigurationV2::from(&tiered)).unwrap();
        assert_eq!(decode_config(&v2).unwrap(), tiered);
        // Format 3, before aggregators: a tier without them.
        let mut v3 = vec![3];
        bincode_options().serialize_into(&mut v3, &ConfigurationV3::from(&aggregated)).unwrap();
        assert_eq!(decode_config(&v3).unwrap(), tiered);

        let corrupt = |bytes: &[u8], expect: &str| {
            let e = decode_config(bytes).unwrap_err();
            assert!(matches!(e, Error::Corrupt(_)), "{e}");
            assert!(e.to_string().contains(expect), "{e} lacks {expect:?}");
        };
        corrupt(b"", "empty");
        let mut other = bytes.clone();
        other[0] = 5;
        corrupt(&other, "format byte 5");
        corrupt(&bytes[..bytes.len() - 1], "format 4");
        let mut longer = bytes.clone();
        longer.push(0);
        corrupt(&longer, "format 4");
        corrupt(b"\x01garbage", "format 1");
        corrupt(&[1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], "format 1");
    }

    #[test]
    fn member_keys() {
        let keys = Keys::new("c");
        assert_eq!(keys.member(NodeId(7)), "/tally/c/members/7");
        assert_eq!(keys.member_id(b"/tally/c/members/7"), Some(NodeId(7)));
        assert_eq!(keys.member_id(b"/tally/c/members/0"), Some(NodeId(0)));
        let bad = [&b"/tally/c/members/"[..], b"/tally/c/members/+7", b"/tally/c/members/07", b"/tally/c/members/x"];
        for bad in bad.into_iter().chain([&b"/tally/c2/members/7"[..]]) {
            assert_eq!(keys.member_id(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
