//! The `index` suite's application cases (the spec's Measure 5, the thesis's §7.6):
//! examples/bank's exactly-once transfers (two gets and two puts each, over HTTP with an
//! Idempotency-Key, as the `state` suite's `bank`), under write- and read-optimized
//! tables, on three dev nodes up together and loaded one at a time in interleaved
//! slices:
//!
//! ```text
//!   complete        every record indexed on the node (today's default)
//!   partial         index nodes in the process (S = 2, R = 1), the default local index
//!   partial-small   the same with the thesis's INDILOG-Small local index: a 160 KiB tag
//!                   cache (about 10^4 seqnums), 1.6 KiB per stream (about 100)
//! ```
//!
//! A dev node is one function node, so every book is routed to its owner (item 8).
//! Each target runs closed-loop (throughput, and the small index's against complete
//! mode's), then open-loop at half complete mode's throughput of its protocol (p50 and
//! p99 at a fixed offered load, queueing included) while the node's local hits and tier
//! reads are counted. Goals: at least 90% local hits with the default index; p50 and p99
//! at most 1.05x and 1.1x complete mode's. Every pair's balances are checked at the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tally_runtime::config::{IndexMode, LocalIndexConfig};
use tokio::sync::Mutex;
use tokio::task::JoinSet;

use crate::log::Op;
use crate::report::{micros, Latencies, Report};
use crate::state::{Bank, BankClient, Node, Pool, BANK_PROTOCOLS, PAIRS};

const CLIENTS: usize = 16;
const _: () = assert!(CLIENTS <= PAIRS, "every client has a pair of its own");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Complete,
    Partial,
    PartialSmall,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Complete, Mode::Partial, Mode::PartialSmall];

    fn name(self) -> &'static str {
        match self {
            Mode::Complete => "complete",
            Mode::Partial => "partial",
            Mode::PartialSmall => "partial-small",
        }
    }

    async fn start(self) -> anyhow::Result<Node> {
        eprintln!("index: starting a dev node for the application cases ({})", self.name());
        Node::start_with(None, |c| match self {
            Mode::Complete => {}
            Mode::Partial => c.index.mode = IndexMode::Partial,
            Mode::PartialSmall => {
                c.index.mode = IndexMode::Partial;
                c.index.local = LocalIndexConfig { tag_cache_bytes: 160 << 10, tag_bytes_max: 1_600, ..LocalIndexConfig::default() };
            }
        })
        .await
    }
}

/// One bank on one node, with its clients' moves so far.
struct Target {
    mode: Mode,
    bank: Bank,
    moves: Vec<u64>,
}

impl Target {
    async fn clients(&self) -> anyhow::Result<Vec<BankClient>> {
        self.bank.clients(CLIENTS, &self.moves).await
    }

    fn keep(&mut self, clients: &[BankClient]) {
        for c in clients {
            let (pair, made) = c.pair_moves();
            self.moves[pair] = made;
        }
    }
}

/// Local hits and tier reads of `node`'s engine so far (zero in complete mode).
fn hits(node: &Node) -> (u64, u64) {
    node.runtime().log().partial_stats().map_or((0, 0), |s| {
        let local = s.reads.tag_hits + s.reads.popularity_hits;
        (local, local + s.reads.tier_reads)
    })
}

/// Open loop at `rate` transfers per second over `clients` (each waits for its previous
/// transfer: a client behind schedule sends at once); latency from the time each
/// transfer was due.
async fn open(clients: Vec<BankClient>, rate: f64, window: Duration) -> anyhow::Result<(Vec<BankClient>, Vec<u32>)> {
    let start = Instant::now();
    let n = clients.len();
    let gap = Duration::from_secs_f64(n as f64 / rate.max(1.0));
    let out = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = JoinSet::new();
    for (i, mut c) in clients.into_iter().enumerate() {
        let out = out.clone();
        tasks.spawn(async move {
            let mut due = start + gap.mul_f64(i as f64 / n as f64);
            while due < start + window {
                tokio::time::sleep_until(due.into()).await;
                c.call().await?;
                out.lock().await.push(micros(due.elapsed()));
                due += gap;
            }
            anyhow::Ok(c)
        });
    }
    let mut back = Vec::with_capacity(n);
    while let Some(t) = tasks.join_next().await {
        back.push(t??);
    }
    let samples = std::mem::take(&mut *out.lock().await);
    Ok((back, samples))
}

pub async fn run(report: &mut Report, quick: bool) -> anyhow::Result<()> {
    let (slices, window) = if quick { (1, Duration::from_millis(800)) } else { (3, Duration::from_secs(2)) };
    let guests = crate::invoke::guests().await?;
    let component = std::fs::read(guests.join("bank.wasm")).context("reading bank.wasm")?;
    let mut nodes = Vec::new();
    for mode in Mode::ALL {
        nodes.push((mode, mode.start().await.with_context(|| format!("application cases, {}", mode.name()))?));
    }
    let result = async {
        for (protocol, book) in BANK_PROTOCOLS {
            let mut targets = Vec::new();
            for (mode, node) in &nodes {
                let bank = Bank::tally(node, protocol, book, component.clone()).await?;
                targets.push(Target { mode: *mode, bank, moves: vec![0; PAIRS] });
            }
            let case = |t: &Target| format!("apps,bank,{},mode={}", protocol.name(), t.mode.name());
            eprintln!("index: application cases, bank under {}", protocol.name());
            // Closed loop, for throughput.
            let mut pools = Vec::new();
            for t in &targets {
                let mut pool = Pool::new(t.clients().await?);
                pool.run(Duration::from_millis(200), Duration::ZERO).await?;
                pools.push(pool);
            }
            for round in 0..slices {
                for k in 0..targets.len() {
                    let i = (round + k) % targets.len();
                    pools[i].run(Duration::from_millis(50), window).await?;
                }
            }
            let mut throughput = Vec::new();
            for (t, pool) in targets.iter_mut().zip(pools) {
                t.keep(&pool.ops);
                let (per_s, latencies) = pool.samples.finish();
                report.record(&case(t), "throughput_transfers_per_s", per_s.round(), "transfers/s")?;
                report.record(&case(t), "closed_p50_us", f64::from(latencies.percentile(50.0).unwrap_or(0)), "us")?;
                throughput.push(per_s);
            }
            for (t, per_s) in targets.iter().zip(&throughput) {
                report.record(&case(t), "throughput_to_complete", per_s / throughput[0].max(1e-9), "x")?;
            }
            // Open loop at half complete mode's throughput, for latency and hits.
            let rate = throughput[0] / 2.0;
            let mut samples = vec![Vec::new(); targets.len()];
            let mut counted = vec![(0u64, 0u64); targets.len()];
            for round in 0..slices {
                for k in 0..targets.len() {
                    let i = (round + k) % targets.len();
                    let node = &nodes[i].1;
                    let before = hits(node);
                    let (clients, mut s) = open(targets[i].clients().await?, rate, window).await?;
                    let after = hits(node);
                    targets[i].keep(&clients);
                    samples[i].append(&mut s);
                    counted[i] = (counted[i].0 + after.0 - before.0, counted[i].1 + after.1 - before.1);
                }
            }
            let mut p = Vec::new();
            for (t, s) in targets.iter().zip(samples) {
                let l = Latencies::new(s);
                let (p50, p99) = (f64::from(l.percentile(50.0).unwrap_or(0)), f64::from(l.percentile(99.0).unwrap_or(0)));
                report.record(&case(t), "offered_transfers_per_s", rate.round(), "transfers/s")?;
                report.record(&case(t), "p50_us", p50, "us")?;
                report.record(&case(t), "p99_us", p99, "us")?;
                p.push((p50, p99));
            }
            for (i, t) in targets.iter().enumerate().skip(1) {
                report.record(&case(t), "p50_to_complete", p[i].0 / p[0].0.max(1.0), "x")?;
                report.record(&case(t), "p99_to_complete", p[i].1 / p[0].1.max(1.0), "x")?;
                let (local, all) = counted[i];
                report.record(&case(t), "local_hit_ratio", local as f64 / all.max(1) as f64, "ratio")?;
                let transfers = rate * window.as_secs_f64() * slices as f64;
                report.record(&case(t), "reads_per_transfer", all as f64 / transfers, "reads")?;
                report.record(&case(t), "tier_reads_per_transfer", (all - local) as f64 / transfers, "reads")?;
            }
            for t in &targets {
                t.bank.check(&t.moves).await.with_context(|| format!("{}", case(t)))?;
            }
        }
        anyhow::Ok(())
    }
    .await;
    for (_, node) in nodes {
        node.shutdown().await;
    }
    result
}
