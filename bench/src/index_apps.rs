//! The `index` suite's application cases (the spec's Measure 5, the thesis's §7.6):
//! examples/bank's exactly-once transfers (two gets and two puts each, POSTed with an
//! Idempotency-Key through the gateway, which routes each book to its owner among the
//! function nodes: item 8), under write- and read-optimized tables, on three process
//! clusters of `tally cluster up`, up together and loaded one at a time in interleaved
//! slices:
//!
//! ```text
//!   complete        1 sequencer, 2 storage, 2 function nodes, each indexing the log
//!   partial         the same, with an index tier (S = 2, R = 1, in the storage and
//!                   sequencer processes) and the default local index (about 20 MiB)
//!   partial-small   the same with the thesis's INDILOG-Small local index: a 160 KiB
//!                   tag cache (about 10^4 seqnums), 1.6 KiB per stream (about 100)
//! ```
//!
//! Each target runs closed-loop (throughput, and the small index's against complete
//! mode's), then open-loop at half complete mode's throughput of its protocol (p50 and
//! p99 at a fixed offered load, queueing included), while the function nodes' `/metrics`
//! count local hits and tier reads, and `/proc` the CPU time of the function processes
//! and of the others. Goals: at least 90% local hits with the default index; p50 and
//! p99 at most 1.05x and 1.1x complete mode's. Every pair's balances are checked last.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use tally::cluster::{IndexShape, Shape};
use tally_runtime::config::{LocalIndexConfig, Protocol};
use tokio::sync::Mutex;
use tokio::task::JoinSet;

use crate::cluster::{release_tally, Processes};
use crate::http::Http;
use crate::log::Op;
use crate::memory::cpu_seconds_of;
use crate::report::{micros, Latencies, Report, Samples};

const CLIENTS: usize = 16;
/// Books per protocol: the pairs spread over them, and they over the function nodes.
const BOOKS: u64 = 4;
pub(crate) const PROTOCOLS: [(Protocol, u64); 2] = [(Protocol::WriteOptimized, 20), (Protocol::ReadOptimized, 30)];
const OPENING: i64 = 1_000_000;

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

    fn shape(self) -> Shape {
        let small = LocalIndexConfig { tag_cache_bytes: 160 << 10, tag_bytes_max: 1_600, ..LocalIndexConfig::default() };
        shape(self != Mode::Complete, (self == Mode::PartialSmall).then_some(small))
    }
}

/// The index suite's process clusters: 1 sequencer, 2 storage processes, 2 function
/// nodes, a gateway; partial mode (`partial`) with S = 2, R = 1 and no aggregator.
pub(crate) fn shape(partial: bool, local_index: Option<LocalIndexConfig>) -> Shape {
    Shape {
        controllers: 1,
        sequencers: 1,
        storage: 2,
        functions: 2,
        gateways: 1,
        plain_http: true,
        index: partial.then_some(IndexShape { shards: 2, replicas: 1 }),
        aggregators: 0,
        local_index,
        ..Shape::default()
    }
}

/// A running cluster: its gateway, its function nodes' URLs, and every process's pid.
struct Target {
    mode: Mode,
    /// Taken down when dropped.
    _processes: Processes,
    gateway: String,
    bearer: String,
    functions: Vec<String>,
    pids: Vec<(String, u32)>,
}

impl Target {
    fn start(mode: Mode, tally: &std::path::Path) -> anyhow::Result<Target> {
        let processes = Processes::up_shaped(tally, &mode.shape())?;
        let gateway = processes.http("gateway")?;
        let bearer = processes.bearer()?;
        let status = processes.cluster.status()?;
        let functions = status
            .iter()
            .filter(|p| p.name.starts_with("function-"))
            .map(|p| Ok(format!("http://{}", p.http.as_ref().context("a function node's HTTP address")?)))
            .collect::<anyhow::Result<_>>()?;
        let pids = status.iter().filter_map(|p| Some((p.name.clone(), p.pid?))).collect();
        Ok(Target { mode, _processes: processes, gateway, bearer, functions, pids })
    }

    fn invoke_url(&self, protocol: Protocol, book: u64) -> String {
        format!("{}/v1/functions/bank-{}/invoke?book={book}", self.gateway, protocol.name())
    }

    /// Deploys the bank under `protocol` and opens every client's pair.
    fn deploy(&self, protocol: Protocol, first_book: u64, component: &[u8]) -> anyhow::Result<()> {
        let url = format!("{}/v1/functions/bank-{}?tables=accounts:{}", self.gateway, protocol.name(), protocol.name());
        let mut r = crate::invoke::deploy_agent().put(&url).header("authorization", &self.bearer).send(component)?;
        ensure!(r.status().as_u16() == 201, "deploying the bank: {}", r.body_mut().read_to_string().unwrap_or_default());
        let agent = crate::invoke::agent();
        for pair in 0..CLIENTS {
            for account in accounts(pair) {
                let url = self.invoke_url(protocol, book_of(first_book, pair));
                let post =
                    agent.post(&url).header("authorization", &self.bearer).header("idempotency-key", &format!("open-{account}"));
                let text = post.send(&format!("open {account} {OPENING}"))?.body_mut().read_to_string()?;
                ensure!(text == "ok", "opening {account}: {text}");
            }
        }
        Ok(())
    }

    /// The function nodes' reads by path so far: (local hits, all).
    fn hits(&self) -> anyhow::Result<(u64, u64)> {
        let agent = crate::invoke::agent();
        let mut out = (0, 0);
        for url in &self.functions {
            let text =
                agent.get(format!("{url}/metrics")).header("authorization", &self.bearer).call()?.body_mut().read_to_string()?;
            let value = |path: &str| {
                let line = format!("tally_index_reads_total{{path=\"{path}\"}} ");
                text.lines().find_map(|l| l.strip_prefix(line.as_str())).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            };
            let local = value("tag_cache") + value("popularity");
            out = (out.0 + local, out.1 + local + value("tier"));
        }
        Ok(out)
    }

    /// CPU seconds so far of the function processes, and of the others.
    fn cpu(&self) -> (f64, f64) {
        self.pids.iter().fold((0.0, 0.0), |(f, o), (name, pid)| {
            let s = cpu_seconds_of(&pid.to_string()).unwrap_or(0.0);
            if name.starts_with("function-") {
                (f + s, o)
            } else {
                (f, o + s)
            }
        })
    }
}

fn accounts(pair: usize) -> [String; 2] {
    [format!("p{pair}x"), format!("p{pair}y")]
}

fn book_of(first_book: u64, pair: usize) -> u64 {
    first_book + pair as u64 % BOOKS
}

/// One client: moves one unit from x to y of its pair, a transfer at a time, and checks
/// the balances each answer shows against its count of moves.
struct Transfer {
    http: Http,
    bearer: String,
    pair: usize,
    moves: u64,
}

impl Op for Transfer {
    async fn call(&mut self) -> anyhow::Result<()> {
        let [x, y] = accounts(self.pair);
        let moves = self.moves + 1;
        // Each run's clusters are new: a key names one transfer of one pair.
        let headers = format!("Authorization: {}\r\nIdempotency-Key: {x}-{moves}\r\n", self.bearer);
        let (status, answer) = self.http.send("POST", &headers, format!("transfer {x} {y} 1").as_bytes(), true).await?;
        let answer = String::from_utf8_lossy(&answer);
        ensure!(status == 200, "transfer {moves} of pair {} answered {status}: {answer}", self.pair);
        let want = format!("ok {} {}", OPENING - moves as i64, OPENING + moves as i64);
        ensure!(answer == want, "transfer {moves} of pair {} answered {answer:?}, not {want:?}", self.pair);
        self.moves = moves;
        Ok(())
    }
}

/// Open loop at `rate` transfers per second over `clients` (each waits for its previous
/// transfer: a client behind schedule sends at once); latency from the time each
/// transfer was due.
async fn open(clients: Vec<Transfer>, rate: f64, window: Duration) -> anyhow::Result<(Vec<Transfer>, Vec<u32>)> {
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
    back.sort_by_key(|c| c.pair);
    let samples = std::mem::take(&mut *out.lock().await);
    Ok((back, samples))
}

/// Closed loop: every client back to back for `window` after `warmup`.
async fn closed(clients: Vec<Transfer>, warmup: Duration, window: Duration) -> anyhow::Result<(Vec<Transfer>, Samples)> {
    let (samples, mut clients) = crate::log::closed_loop_keeping(clients, warmup, window).await?;
    clients.sort_by_key(|c| c.pair);
    Ok((clients, samples))
}

/// Every pair holds exactly the moves its client made.
fn check(t: &Target, protocol: Protocol, first_book: u64, clients: &[Transfer]) -> anyhow::Result<()> {
    let agent = crate::invoke::agent();
    for c in clients {
        for (account, want) in accounts(c.pair).iter().zip([OPENING - c.moves as i64, OPENING + c.moves as i64]) {
            let url = t.invoke_url(protocol, book_of(first_book, c.pair));
            let text = agent
                .post(&url)
                .header("authorization", &t.bearer)
                .send(&format!("balance {account}"))?
                .body_mut()
                .read_to_string()?;
            ensure!(text == want.to_string(), "{}: {account} holds {text} after {} transfers", t.mode.name(), c.moves);
        }
    }
    Ok(())
}

pub async fn run(report: &mut Report, quick: bool) -> anyhow::Result<()> {
    let (slices, window) = if quick { (1, Duration::from_millis(800)) } else { (3, Duration::from_secs(2)) };
    let guests = crate::invoke::guests().await?;
    let component = std::fs::read(guests.join("bank.wasm")).context("reading bank.wasm")?;
    let tally = tokio::task::spawn_blocking(release_tally).await??;
    let mut targets = Vec::new();
    for mode in Mode::ALL {
        eprintln!("index: starting a process cluster for the application cases ({})", mode.name());
        let tally = tally.clone();
        targets.push(tokio::task::spawn_blocking(move || Target::start(mode, &tally)).await??);
    }
    let targets = Arc::new(targets);
    for (protocol, first_book) in PROTOCOLS {
        eprintln!("index: application cases, bank under {}", protocol.name());
        let mut clients = Vec::new();
        for i in 0..targets.len() {
            let (all, component) = (targets.clone(), component.clone());
            tokio::task::spawn_blocking(move || all[i].deploy(protocol, first_book, &component)).await??;
            let t = &targets[i];
            let make = |pair| -> anyhow::Result<Transfer> {
                let http = Http::new(&t.invoke_url(protocol, book_of(first_book, pair)))?;
                Ok(Transfer { http, bearer: t.bearer.clone(), pair, moves: 0 })
            };
            clients.push((0..CLIENTS).map(make).collect::<anyhow::Result<Vec<_>>>()?);
        }
        let case = |t: &Target| format!("apps,bank,{},mode={}", protocol.name(), t.mode.name());
        // Closed loop, for throughput; then open loop at half complete mode's, for
        // latency, local hits and CPU per transfer.
        let mut samples: Vec<Samples> = (0..targets.len()).map(|_| Samples::default()).collect();
        for round in 0..slices {
            for k in 0..targets.len() {
                let i = (round + k) % targets.len();
                let warmup = Duration::from_millis(if round == 0 { 300 } else { 50 });
                let (back, s) = closed(std::mem::take(&mut clients[i]), warmup, window).await?;
                clients[i] = back;
                samples[i].extend(s);
            }
        }
        let throughput: Vec<f64> = samples.into_iter().map(|s| s.finish().0).collect();
        let rate = throughput[0] / 2.0;
        let mut latencies = vec![Vec::new(); targets.len()];
        let mut hits = vec![(0u64, 0u64); targets.len()];
        let mut cpu = vec![(0.0, 0.0); targets.len()];
        let mut transfers = vec![0u64; targets.len()];
        for round in 0..slices {
            for k in 0..targets.len() {
                let i = (round + k) % targets.len();
                let t = &targets[i];
                let (h0, c0) = (t.hits()?, t.cpu());
                let made = |c: &[Transfer]| c.iter().map(|c| c.moves).sum::<u64>();
                let before = made(&clients[i]);
                let (back, mut l) = open(std::mem::take(&mut clients[i]), rate, window).await?;
                let (h1, c1) = (t.hits()?, t.cpu());
                transfers[i] += made(&back) - before;
                clients[i] = back;
                latencies[i].append(&mut l);
                hits[i] = (hits[i].0 + h1.0 - h0.0, hits[i].1 + h1.1 - h0.1);
                cpu[i] = (cpu[i].0 + c1.0 - c0.0, cpu[i].1 + c1.1 - c0.1);
            }
        }
        let mut p = Vec::new();
        for (i, t) in targets.iter().enumerate() {
            let c = case(t);
            report.record(&c, "throughput_transfers_per_s", throughput[i].round(), "transfers/s")?;
            report.record(&c, "throughput_to_complete", throughput[i] / throughput[0].max(1e-9), "x")?;
            let l = Latencies::new(std::mem::take(&mut latencies[i]));
            let (p50, p99) = (f64::from(l.percentile(50.0).unwrap_or(0)), f64::from(l.percentile(99.0).unwrap_or(0)));
            report.record(&c, "offered_transfers_per_s", rate.round(), "transfers/s")?;
            report.record(&c, "p50_us", p50, "us")?;
            report.record(&c, "p99_us", p99, "us")?;
            p.push((p50, p99));
            let transfers = transfers[i].max(1) as f64;
            report.record(&c, "function_cpu_ms_per_1k", cpu[i].0 * 1e6 / transfers, "ms")?;
            report.record(&c, "other_cpu_ms_per_1k", cpu[i].1 * 1e6 / transfers, "ms")?;
            if t.mode != Mode::Complete {
                report.record(&c, "p50_to_complete", p50 / p[0].0.max(1.0), "x")?;
                report.record(&c, "p99_to_complete", p99 / p[0].1.max(1.0), "x")?;
                let (local, all) = hits[i];
                report.record(&c, "local_hit_ratio", local as f64 / all.max(1) as f64, "ratio")?;
                report.record(&c, "reads_per_transfer", all as f64 / transfers, "reads")?;
                report.record(&c, "tier_reads_per_transfer", (all - local) as f64 / transfers, "reads")?;
            }
        }
        for (i, t) in targets.iter().enumerate() {
            check(t, protocol, first_book, &clients[i]).with_context(|| case(t))?;
        }
        let made: u64 = clients.iter().flatten().map(|c| c.moves).sum();
        eprintln!("index: bank under {}: {made} transfers; every pair's balances check", protocol.name());
    }
    drop(targets);
    Ok(())
}
