//! The `index` suite's read cases (the spec's Measure 2): what a read costs on each path.
//!
//! One loopback cluster per configuration (3 sequencers, 3 storage nodes, 2 engines;
//! every message on QUIC, as between processes), all up together and loaded one at a
//! time in interleaved slices. Each holds a chain of 1 KiB records in one book, appended
//! by the other engine, and read once in order first (the local index and the
//! popularity cache see every read key, and with the record cache on, the reader's cache
//! holds every record). Then clients read random records of the chain:
//!
//! ```text
//!   complete-local        complete mode, the reader indexes the log
//!   complete-forwarded    complete mode, indexers_per_log = 1: the reader forwards
//!                         (the thesis's Boki-no-index node)
//!   partial-tag-cache     partial mode (S = 2, R = 1), a tag-cache hit (type 1)
//!   partial-popularity    partial mode, no tag cache: a popularity hit (type 1)
//!   partial-tier-exact    partial mode, no local index, the bound is the record: the
//!                         shard holding it has storage send it (type 2)
//!   partial-tier-closest  partial mode, no local index, the bound lies between records:
//!                         the reader takes the closest of the shards' candidates and
//!                         reads it (type 3)
//!   partial-tier-aggregator  the same through one aggregator node, which has storage
//!                         send the record to the reader
//! ```
//!
//! With the record cache on and off (`cache_bytes_max` 0 on every engine: every record
//! comes from storage, as the thesis's §7.1 measured), at 1 and 16 clients. Reported per
//! case: p50 and p99 at the caller, and this process's CPU per 1,000 reads (every role
//! runs in it).

use std::time::Instant;

use anyhow::Context as _;
use bytes::Bytes;
use tally_logsvc::tier::LocalBounds;
use tally_logsvc::{BookId, Cluster, ClusterBuilder, Context, LogClient, SeqNum, Tag};

use crate::memory::cpu_seconds;
use crate::report::{micros, Latencies, Report};

const BOOK: BookId = BookId(1);
const SHARDS: usize = 2;
const SLICES: usize = 5;
pub const CLIENTS: [usize; 2] = [1, 16];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    CompleteLocal,
    CompleteForwarded,
    TagCache,
    Popularity,
    TierExact,
    TierClosest,
    /// Type 3 through one aggregator node (`aggregators = 1`).
    Aggregated,
}

impl Path {
    pub const ALL: [Path; 7] = [
        Path::CompleteLocal,
        Path::CompleteForwarded,
        Path::TagCache,
        Path::Popularity,
        Path::TierExact,
        Path::TierClosest,
        Path::Aggregated,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Path::CompleteLocal => "complete-local",
            Path::CompleteForwarded => "complete-forwarded",
            Path::TagCache => "partial-tag-cache",
            Path::Popularity => "partial-popularity",
            Path::TierExact => "partial-tier-exact",
            Path::TierClosest => "partial-tier-closest",
            Path::Aggregated => "partial-tier-aggregator",
        }
    }

    /// The configuration this path runs on; the two tier paths share one.
    fn setup(self) -> Path {
        if self == Path::TierExact {
            Path::TierClosest
        } else {
            self
        }
    }

    fn configure(self, b: &mut ClusterBuilder) {
        let tier = |b: &mut ClusterBuilder, local: Option<LocalBounds>| {
            b.tier = Some((SHARDS, 1));
            b.engine_config.local_index = local;
        };
        match self {
            Path::CompleteLocal => {}
            Path::CompleteForwarded => b.indexers_per_log = Some(1),
            Path::TagCache => tier(b, Some(LocalBounds::default())),
            Path::Popularity => tier(b, Some(LocalBounds { tag_cache_bytes: 0, tag_bytes_max: 0, ..LocalBounds::default() })),
            Path::TierExact | Path::TierClosest => tier(b, None),
            Path::Aggregated => {
                tier(b, None);
                b.aggregators = 1;
            }
        }
    }
}

/// One path: the engine that reads, and the chain it reads.
struct Setup {
    path: Path,
    reader: LogClient,
    chain: Vec<SeqNum>,
}

/// A cluster of one configuration, and its directory.
type Running = (Cluster, tempfile::TempDir);

impl Setup {
    async fn start(path: Path, cached: bool, n: usize, clusters: &mut Vec<Running>) -> anyhow::Result<Setup> {
        let dir = tempfile::tempdir().context("creating the cluster directory")?;
        let mut b = ClusterBuilder::new(dir.path());
        b.sequencers = 3;
        b.storage_nodes = 3;
        b.engines = 2;
        b.n_data = 3;
        b.local_delivery = false;
        if !cached {
            b.engine_config.cache_bytes_max = 0;
        }
        path.configure(&mut b);
        let cluster = b.build().await.context("starting the loopback cluster")?;
        // In complete mode with one indexer, read through the engine that forwards.
        let reader = match path {
            Path::CompleteForwarded => {
                let config = cluster.configuration().context("no configuration")?;
                let log = tally_logsvc::book_to_log(BOOK, cluster.n_logs());
                (0..2).find(|&i| !config.indexes(log, cluster.engine_id(i))).context("no forwarding engine")?
            }
            _ => 0,
        };
        let writer = cluster.client(1 - reader);
        let data = Bytes::from(vec![7u8; 1024]);
        let mut ctx = Context::new();
        let mut chain = Vec::with_capacity(n);
        for _ in 0..n {
            chain.push(writer.append(&mut ctx, BOOK, &[], data.clone()).await.context("append")?);
        }
        let setup = Setup { path, reader: cluster.client(reader), chain };
        clusters.push((cluster, dir));
        // Every read key once, in order, from one context that moves with the reads.
        for i in 0..n - 1 {
            let (bound, want) = setup.key(i);
            let found = setup.reader.read_next(&mut ctx, BOOK, Tag::ALL, bound).await.context("read_next")?;
            anyhow::ensure!(found.as_ref().map(|r| r.seqnum) == Some(want), "{}: warming read {i} found {found:?}", path.name());
        }
        Ok(setup)
    }

    /// Read `i`'s bound and answer: the record itself for an exact read, else the one
    /// after a bound just past record `i`.
    fn key(&self, i: usize) -> (SeqNum, SeqNum) {
        match self.path {
            Path::TierExact => (self.chain[i + 1], self.chain[i + 1]),
            _ => (SeqNum(self.chain[i].0 + 1), self.chain[i + 1]),
        }
    }

    /// `clients` clients read `reads` random records in all; their latencies.
    async fn slice(&self, clients: usize, reads: usize, seed: usize) -> anyhow::Result<Vec<u32>> {
        let per = reads.div_ceil(clients);
        let tasks: Vec<_> = (0..clients)
            .map(|c| {
                let reader = self.reader.clone();
                let keys: Vec<(SeqNum, SeqNum)> =
                    (0..per).map(|k| self.key((seed * 7_919 + c * 104_729 + k * 15_485_863) % (self.chain.len() - 1))).collect();
                tokio::spawn(async move {
                    let mut ctx = Context::new();
                    let mut latencies = Vec::with_capacity(keys.len());
                    for (bound, want) in keys {
                        let sent = Instant::now();
                        let found = reader.read_next(&mut ctx, BOOK, Tag::ALL, bound).await.context("read_next")?;
                        latencies.push(micros(sent.elapsed()));
                        anyhow::ensure!(found.as_ref().map(|r| r.seqnum) == Some(want), "read {bound:?} found {found:?}");
                    }
                    anyhow::Ok(latencies)
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await??);
        }
        Ok(all)
    }
}

pub async fn run(report: &mut Report, reads: usize) -> anyhow::Result<()> {
    for cached in [true, false] {
        let cache = if cached { "on" } else { "off" };
        let mut setups: Vec<Setup> = Vec::new();
        let mut clusters: Vec<Running> = Vec::new();
        for path in Path::ALL {
            let setup = match setups.iter().find(|s| s.path == path.setup()) {
                Some(s) => Setup { path, reader: s.reader.clone(), chain: s.chain.clone() },
                None => {
                    eprintln!("index: starting a cluster for {} (record cache {cache})", path.name());
                    let started = Setup::start(path.setup(), cached, reads.min(2_000), &mut clusters).await;
                    Setup { path, ..started.with_context(|| format!("read case {}", path.name()))? }
                }
            };
            setups.push(setup);
        }
        for clients in CLIENTS {
            let mut latencies = vec![Vec::new(); setups.len()];
            let mut cpu = vec![0.0; setups.len()];
            let mut resends = vec![0; setups.len()];
            let resent = |s: &Setup| s.reader.partial_stats().map_or(0, |r| r.reads.tier_resends);
            for slice in 0..SLICES {
                for (i, s) in setups.iter().enumerate() {
                    let (before, resent_before) = (cpu_seconds()?, resent(s));
                    let l =
                        s.slice(clients, reads / SLICES, slice).await.with_context(|| format!("reads of {}", s.path.name()))?;
                    cpu[i] += cpu_seconds()? - before;
                    resends[i] += resent(s) - resent_before;
                    latencies[i].extend(l);
                }
            }
            for (i, s) in setups.iter().enumerate() {
                let case = format!("read,{},cache={cache},clients={clients}", s.path.name());
                let count = latencies[i].len();
                let l = Latencies::new(std::mem::take(&mut latencies[i]));
                report.record(&case, "read_p50_us", f64::from(l.percentile(50.0).unwrap_or(0)), "us")?;
                report.record(&case, "read_p99_us", f64::from(l.percentile(99.0).unwrap_or(0)), "us")?;
                report.record(&case, "cpu_ms_per_1k_reads", cpu[i] * 1e6 / count.max(1) as f64, "ms")?;
                report.record(&case, "lookups_resent", resends[i] as f64, "asks")?;
            }
        }
        drop(setups);
        for (cluster, _dir) in clusters {
            cluster.shutdown().await;
        }
    }
    Ok(())
}
