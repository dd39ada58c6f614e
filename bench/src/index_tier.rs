//! The `index` suite's tier cases (the spec's Measure 4, the thesis's §7.2): what the
//! index tier costs a mixed workload against complete mode.
//!
//! Three loopback clusters (3 sequencers, 3 storage nodes; every message on QUIC), up
//! together, loaded one at a time in interleaved slices:
//!
//! ```text
//!   complete      2 engines, each indexing every log
//!   boki-remote   3 engines, one indexing (indexers_per_log = 1); the clients use the
//!                 two that forward their reads to it (the thesis's Boki-remote)
//!   partial       2 engines with the thesis's small local index (INDILOG-Small: a
//!                 160 KiB tag cache, 1.6 KiB per stream), S = 2, R = 1
//!   partial-s6    the same with S = 6: what a wider fan-out costs per lookup
//! ```
//!
//! Workloads, per client: `balanced` (an append, then a read) and `read-heavy` (95%
//! reads); the reads take the appended record, its neighbour, the stream's head or its
//! tail in turn. `high` locality reads the client's own book (what it appends to), `low`
//! reads a random one of `LOW_BOOKS` books filled before (most of them out of the small
//! tag cache). Each runs closed-loop (throughput), then open-loop at half complete mode's
//! throughput with one client doing conditional appends on its own stream beside it
//! (latency at a fixed offered load, queueing included). Reported: throughput and its
//! ratio to complete mode, p50/p99 of reads, appends and conditional appends, the
//! partial mode's local hit ratio, the index nodes' requests per tier read (one per
//! shard asked), and this process's CPU per 1,000 operations (every role runs in it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use tally_logsvc::tier::LocalBounds;
use tally_logsvc::{BookId, Cluster, ClusterBuilder, Context, LogClient, SeqNum, Tag};
use tokio::sync::Mutex;
use tokio::task::JoinSet;

use crate::memory::cpu_seconds;
use crate::report::{micros, Latencies, Report};

const CLIENTS: usize = 16;
const LOW_BOOKS: u64 = 4_000;
const LOW_RECORDS: u64 = 4;
const TAG: Tag = Tag(7);
static FRESH: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Complete,
    BokiRemote,
    Partial,
    PartialWide,
}

impl Mode {
    const ALL: [Mode; 4] = [Mode::Complete, Mode::BokiRemote, Mode::Partial, Mode::PartialWide];

    fn name(self) -> &'static str {
        match self {
            Mode::Complete => "complete",
            Mode::BokiRemote => "boki-remote",
            Mode::Partial => "partial",
            Mode::PartialWide => "partial-s6",
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Workload {
    reads_per_100: u32,
    high: bool,
}

impl Workload {
    fn name(self) -> String {
        let mix = if self.reads_per_100 == 50 { "balanced" } else { "read-heavy" };
        format!("{mix},locality={}", if self.high { "high" } else { "low" })
    }
}

/// A running cluster, and the engines its clients use.
struct Setup {
    mode: Mode,
    cluster: Cluster,
    _dir: tempfile::TempDir,
    clients: Vec<LogClient>,
}

impl Setup {
    async fn start(mode: Mode) -> anyhow::Result<Setup> {
        let dir = tempfile::tempdir().context("creating the cluster directory")?;
        let mut b = ClusterBuilder::new(dir.path());
        b.sequencers = 3;
        b.storage_nodes = 3;
        b.n_data = 3;
        b.engines = 2;
        b.local_delivery = false;
        match mode {
            Mode::Complete => {}
            Mode::BokiRemote => {
                b.engines = 3;
                b.indexers_per_log = Some(1);
            }
            Mode::Partial | Mode::PartialWide => {
                b.tier = Some((if mode == Mode::Partial { 2 } else { 6 }, 1));
                let small = LocalBounds { tag_cache_bytes: 160 << 10, tag_bytes_max: 1_600, ..LocalBounds::default() };
                b.engine_config.local_index = Some(small);
            }
        }
        eprintln!("index: starting a cluster for the tier cases ({})", mode.name());
        let cluster = b.build().await.context("starting the loopback cluster")?;
        let config = cluster.configuration().context("no configuration")?;
        let engines: Vec<usize> = match mode {
            Mode::BokiRemote => {
                let log = tally_logsvc::book_to_log(BookId(0), cluster.n_logs());
                (0..3).filter(|&i| !config.indexes(log, cluster.engine_id(i))).collect()
            }
            _ => vec![0, 1],
        };
        let clients = engines.iter().map(|&i| cluster.client(i)).collect();
        let setup = Setup { mode, cluster, _dir: dir, clients };
        setup.fill().await?;
        Ok(setup)
    }

    /// `LOW_RECORDS` records in each of `LOW_BOOKS` books, from every client at once.
    async fn fill(&self) -> anyhow::Result<()> {
        let mut tasks = JoinSet::new();
        for c in 0..CLIENTS as u64 {
            let client = self.clients[c as usize % self.clients.len()].clone();
            tasks.spawn(async move {
                let mut ctx = Context::new();
                for book in (c..LOW_BOOKS).step_by(CLIENTS) {
                    for _ in 0..LOW_RECORDS {
                        client.append(&mut ctx, BookId(1_000 + book), &[TAG], Bytes::from_static(&[1; 256])).await?;
                    }
                }
                anyhow::Ok(())
            });
        }
        while let Some(t) = tasks.join_next().await {
            t??;
        }
        Ok(())
    }

    /// Requests the index nodes received, and the engines' tier reads, so far.
    async fn lookups(&self) -> (u64, u64) {
        let requests = self.cluster.index_reports().await.iter().map(|r| r.stats.requests).sum();
        let reads = self.clients.iter().filter_map(|c| c.partial_stats()).map(|s| s.reads.tier_reads).sum();
        (requests, reads)
    }

    fn hits(&self) -> (u64, u64) {
        self.clients.iter().filter_map(|c| c.partial_stats()).fold((0, 0), |(h, t), s| {
            let local = s.reads.tag_hits + s.reads.popularity_hits;
            (h + local, t + local + s.reads.tier_reads)
        })
    }
}

/// One client's state: its book, context, last append, and a counter for its turns.
struct Client {
    client: LogClient,
    ctx: Context,
    book: BookId,
    last: Option<SeqNum>,
    turn: u64,
}

#[derive(Default)]
struct Samples {
    reads: Vec<u32>,
    appends: Vec<u32>,
    conds: Vec<u32>,
}

impl Client {
    /// One request of workload `w`; its kind (true for a read) and latency.
    async fn step(&mut self, w: Workload) -> anyhow::Result<bool> {
        self.turn += 1;
        let t = self.turn;
        let read = match w.reads_per_100 {
            50 => t.is_multiple_of(2),
            r => (t * 37) % 100 < u64::from(r),
        };
        if !read || self.last.is_none() {
            let data = Bytes::from_static(&[2; 256]);
            self.last = Some(self.client.append(&mut self.ctx, self.book, &[TAG], data).await.context("append")?);
            return Ok(false);
        }
        let book = if w.high { self.book } else { BookId(1_000 + (t * 2_654_435_761) % LOW_BOOKS) };
        let last = self.last.expect("appended");
        let (c, ctx) = (&self.client, &mut self.ctx);
        match (t / 2) % 4 {
            0 if w.high => c.read_next(ctx, book, TAG, last).await,
            1 => c.read_prev(ctx, book, TAG, SeqNum(last.0.saturating_sub(1))).await,
            2 => c.read_next(ctx, book, TAG, SeqNum::MIN).await,
            _ => c.read_prev(ctx, book, TAG, SeqNum::MAX).await,
        }
        .context("read")?;
        Ok(true)
    }
}

fn clients(setup: &Setup) -> Vec<Client> {
    (0..CLIENTS)
        .map(|c| Client {
            client: setup.clients[c % setup.clients.len()].clone(),
            ctx: Context::new(),
            book: BookId(100 + c as u64),
            last: None,
            turn: c as u64,
        })
        .collect()
}

/// Closed loop: every client back to back for `window`; requests per second.
async fn closed(setup: &Setup, w: Workload, window: Duration) -> anyhow::Result<f64> {
    let end = Instant::now() + window;
    let mut tasks = JoinSet::new();
    for mut c in clients(setup) {
        tasks.spawn(async move {
            let mut n = 0u64;
            while Instant::now() < end {
                c.step(w).await?;
                n += 1;
            }
            anyhow::Ok(n)
        });
    }
    let mut n = 0;
    while let Some(t) = tasks.join_next().await {
        n += t??;
    }
    Ok(n as f64 / window.as_secs_f64())
}

/// Open loop at `rate` requests per second over the clients (each waits for its
/// previous request: a client behind schedule sends at once), with one more client
/// doing conditional appends on its own stream every 10 ms. Latency from the time each
/// request was due.
async fn open(setup: &Setup, w: Workload, rate: f64, window: Duration, samples: &mut Samples) -> anyhow::Result<()> {
    let start = Instant::now();
    let gap = Duration::from_secs_f64(CLIENTS as f64 / rate.max(1.0));
    let out = Arc::new(Mutex::new(Samples::default()));
    let mut tasks = JoinSet::new();
    for (i, mut c) in clients(setup).into_iter().enumerate() {
        let out = out.clone();
        tasks.spawn(async move {
            let mut due = start + gap.mul_f64(i as f64 / CLIENTS as f64);
            while due < start + window {
                tokio::time::sleep_until(due.into()).await;
                let read = c.step(w).await?;
                let l = micros(due.elapsed());
                let mut o = out.lock().await;
                if read {
                    o.reads.push(l)
                } else {
                    o.appends.push(l)
                }
                due += gap;
            }
            anyhow::Ok(())
        });
    }
    let (client, out2) = (setup.clients[0].clone(), out.clone());
    // A fresh stream each time: its count starts at 0.
    let book = BookId(900_000 + FRESH.fetch_add(1, Ordering::Relaxed));
    tasks.spawn(async move {
        let mut ctx = Context::new();
        let tag = Tag(11);
        let mut count = 0;
        while start.elapsed() < window {
            let sent = Instant::now();
            client.cond_append(&mut ctx, book, &[tag], Bytes::from_static(&[3; 64]), tag, count).await.context("cond append")?;
            out2.lock().await.conds.push(micros(sent.elapsed()));
            count += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        anyhow::Ok(())
    });
    while let Some(t) = tasks.join_next().await {
        t??;
    }
    let mut o = out.lock().await;
    samples.reads.append(&mut o.reads);
    samples.appends.append(&mut o.appends);
    samples.conds.append(&mut o.conds);
    Ok(())
}

pub async fn run(report: &mut Report, quick: bool) -> anyhow::Result<()> {
    let (slices, window) = if quick { (1, Duration::from_millis(800)) } else { (3, Duration::from_secs(2)) };
    let mut setups = Vec::new();
    for mode in Mode::ALL {
        setups.push(Setup::start(mode).await.with_context(|| format!("tier cases, {}", mode.name()))?);
    }
    let workloads = [
        Workload { reads_per_100: 50, high: true },
        Workload { reads_per_100: 95, high: true },
        Workload { reads_per_100: 50, high: false },
        Workload { reads_per_100: 95, high: false },
    ];
    let result = async {
        for w in workloads {
            eprintln!("index: tier cases, {}", w.name());
            let n = Mode::ALL.len();
            let (mut throughput, mut cpu, mut lookups) = (vec![0.0; n], vec![0.0; n], vec![(0u64, 0u64); n]);
            for _ in 0..slices {
                for (i, s) in setups.iter().enumerate() {
                    let (before, asked) = (cpu_seconds()?, s.lookups().await);
                    throughput[i] += closed(s, w, window).await.with_context(|| format!("{} closed", s.mode.name()))?;
                    cpu[i] += cpu_seconds()? - before;
                    let now = s.lookups().await;
                    lookups[i] = (lookups[i].0 + now.0 - asked.0, lookups[i].1 + now.1 - asked.1);
                }
            }
            let rate = throughput[0] / slices as f64 / 2.0;
            let mut samples: Vec<Samples> = (0..n).map(|_| Samples::default()).collect();
            let mut hits = vec![(0u64, 0u64); n];
            for _ in 0..slices {
                for (i, s) in setups.iter().enumerate() {
                    let before = s.hits();
                    open(s, w, rate, window, &mut samples[i]).await.with_context(|| format!("{} open", s.mode.name()))?;
                    let after = s.hits();
                    hits[i].0 += after.0 - before.0;
                    hits[i].1 += after.1 - before.1;
                }
            }
            for (i, s) in setups.iter().enumerate() {
                let case = format!("tier,{},mode={}", w.name(), s.mode.name());
                let t = throughput[i] / slices as f64;
                report.record(&case, "throughput_ops_per_s", t, "ops/s")?;
                report.record(&case, "throughput_to_complete", t / (throughput[0] / slices as f64).max(1e-9), "x")?;
                let ops = t * window.as_secs_f64() * slices as f64;
                report.record(&case, "cpu_ms_per_1k_ops", cpu[i] * 1e6 / ops.max(1.0), "ms")?;
                report.record(&case, "offered_ops_per_s", rate, "ops/s")?;
                let sm = std::mem::take(&mut samples[i]);
                for (what, l) in [("read", sm.reads), ("append", sm.appends), ("cond_append", sm.conds)] {
                    let l = Latencies::new(l);
                    let (p50, p99) = (l.percentile(50.0).unwrap_or(0), l.percentile(99.0).unwrap_or(0));
                    let (m50, m99) = match what {
                        "read" => ("read_p50_us", "read_p99_us"),
                        "append" => ("append_p50_us", "append_p99_us"),
                        _ => ("cond_append_p50_us", "cond_append_p99_us"),
                    };
                    report.record(&case, m50, f64::from(p50), "us")?;
                    report.record(&case, m99, f64::from(p99), "us")?;
                }
                if matches!(s.mode, Mode::Partial | Mode::PartialWide) {
                    report.record(&case, "local_hit_ratio", hits[i].0 as f64 / hits[i].1.max(1) as f64, "ratio")?;
                    let (requests, reads) = lookups[i];
                    report.record(&case, "index_requests_per_tier_read", requests as f64 / reads.max(1) as f64, "requests")?;
                    report.record(&case, "tier_reads_per_1k_ops", reads as f64 * 1e3 / ops.max(1.0), "reads")?;
                }
            }
        }
        anyhow::Ok(())
    }
    .await;
    for s in setups {
        s.cluster.shutdown().await;
    }
    result
}
