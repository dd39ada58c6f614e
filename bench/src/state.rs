//! The `state` suite: exactly-once state on Tally, as Halfmoon's Figure 10 and §6.3, and
//! against PostgreSQL, what a user would pick for durable state instead.
//!
//! ```text
//!   ops     one instance per protocol on a dev node (loopback QUIC log, fsync every
//!           batch), timing single state operations through the host's protocol code
//!           (what a guest's `state.get`/`state.put` runs, without the Wasm call):
//!           unsafe (raw store: the lower bound), read-optimized, write-optimized,
//!           symmetric (Boki-style, logs both: the peer), on RocksDB and PostgreSQL.
//!           A read-optimized write returns once taken: its version and record go
//!           with the instance's next record, so its p50 is the call's own, and its
//!           share of a log append shows in its p99 (every 32nd write flushes) and in
//!           the cases below, which count whole invocations
//!   sweep   invocations of one operation each (init, a read or a write, result), the
//!           read ratio from 0 to 1, under read- and write-optimized: where they cross
//!   shapes  invocations started as the gateway starts them (the Init deferred), each
//!           of reads and writes in one order (`r`, `w`, `rw`, `wr`, `rrw`, `wrr`,
//!           `wrwr`), under read- and write-optimized: which is faster for which order
//!   auto    the sweep's mixes on an `auto` table: which protocol the runtime settles
//!           on, and how often that is the one the sweep found faster
//!   mix     32 workers, each an instance of its own doing reads and writes half and
//!           half at random on keys of its own, under write- and read-optimized: the
//!           throughput of the RocksDB node against the PostgreSQL node
//!   bank    examples/bank transfers (two gets, two puts) invoked over HTTP with an
//!           Idempotency-Key on the RocksDB node (an async keep-alive client per
//!           connection, like PostgreSQL's), write- and read-optimized, against
//!           the same transfers as PostgreSQL transactions by a plain client
//!           (tokio-postgres: BEGIN, SELECT .. FOR UPDATE of both rows, UPDATE of
//!           both, COMMIT), 1 and 32 clients; and the log records a transfer appends
//!           on Tally (counted between marker records appended around each slice);
//!           then the same transfers under external load generators, so that the
//!           suite's clients are not the only judge: `wrk` on Tally, `pgbench` (with
//!           the same transaction as a script) on PostgreSQL, 1 and 32 connections
//!           each (one generator process per run, outside the suite's runtime)
//! ```
//!
//! The protocols of `ops` and `sweep` are measured in interleaved rounds, and the
//! targets of `mix` and `bank` in interleaved slices, so that all sample the same disk
//! (this machine's fsync time drifts between runs). Values are 256 bytes over 64 keys.
//! Both nodes, one with each store, run from the start to the end of the suite.
//!
//! PostgreSQL is a server of its own started by the suite (skipped, with a message,
//! where it cannot start) with its default durability, `fsync` and `synchronous_commit`
//! on, as Tally's RocksDB store and log sync every write; it holds the PostgreSQL
//! node's state and, in a database of its own, the plain client's accounts.
//!
//! In `mix` every worker owns its keys (every 32nd): a write-optimized put takes effect
//! only if its version, the writer's (cursor, counter), is newer than the stored one,
//! so on shared keys a worker with an older cursor would skip its store write and the
//! mix would measure that contention rather than the store. In `bank` every client
//! moves money between a pair of accounts of its own, one unit from x to y a transfer:
//! the bank's transfers are not transactions across concurrent transfers of one
//! account. Each transfer checks the balances it saw against the client's count of its
//! moves, and after the run both stores must hold, for every pair, the same total and
//! as many moves as its client made.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use bytes::Bytes;
use tally::dev::DevNode;
use tally_durable::{Instance, InstanceId, Of, Outcome};
use tally_logsvc::{BookId, Context, LogClient, SeqNum};
use tally_runtime::config::{Protocol, StoreKind};
use tally_runtime::{Config, Runtime};
use tokio_postgres::{Client, NoTls, Statement};

use crate::http::Http;
use crate::invoke::{agent, deploy_agent, wrk_field, wrk_micros};
use crate::log::{closed_loop_keeping, record_percentiles, Op};
use crate::peers::Postgres;
use crate::report::{nanos, round_to, Latencies, Report, Samples};
use crate::RunOptions;

const VALUE_BYTES: usize = 256;
const KEYS: u64 = 64;
const PROTOCOLS: [Protocol; 4] = [Protocol::Unsafe, Protocol::ReadOptimized, Protocol::WriteOptimized, Protocol::Symmetric];

struct Plan {
    /// Operations of each kind per protocol, over all rounds.
    ops: usize,
    rounds: usize,
    /// Invocations per read ratio and protocol in the sweep.
    sweep: usize,
    /// How long the `auto` table runs each mix.
    auto_window: Duration,
    /// Run once per target of `mix` and `bank` before its slices, not counted.
    warmup: Duration,
    /// Each slice of `mix` and `bank`, per target.
    slice: Duration,
    /// The start of each slice, not counted: the clients' pipeline fills.
    slice_warmup: Duration,
    /// Slices per target; `slices * slice` is a case's window.
    slices: u32,
}

pub async fn run(opts: &RunOptions) -> anyhow::Result<()> {
    let plan = if opts.quick {
        Plan {
            ops: 60,
            rounds: 3,
            sweep: 20,
            auto_window: Duration::from_millis(800),
            warmup: Duration::from_millis(100),
            slice: Duration::from_millis(300),
            slice_warmup: Duration::from_millis(20),
            slices: 2,
        }
    } else {
        Plan {
            ops: 1500,
            rounds: 10,
            sweep: 200,
            auto_window: Duration::from_secs(2),
            warmup: Duration::from_millis(500),
            slice: Duration::from_secs(2),
            slice_warmup: Duration::from_millis(50),
            slices: 3,
        }
    };
    let started = Instant::now();
    let guests = crate::invoke::guests().await?;
    let bank_component = std::fs::read(guests.join("bank.wasm")).context("reading bank.wasm")?;
    let postgres = match tokio::task::spawn_blocking(Postgres::start).await? {
        Ok(server) => Some(server),
        Err(e) => {
            eprintln!("state: PostgreSQL cannot start here ({e:#}); measuring Tally alone");
            None
        }
    };
    let rocksdb = Node::start(None).await?;
    let pg_node = match &postgres {
        Some(server) => Some(Node::start(Some(server)).await?),
        None => None,
    };
    let mut report = Report::new(
        "state",
        format!(
            "{VALUE_BYTES}-byte values over {KEYS} keys; dev node: loopback QUIC log, fsync every batch; \
             PostgreSQL: fsync and synchronous_commit on"
        ),
    );
    ops(&rocksdb, &plan, &mut report).await?;
    let faster = sweep(&rocksdb, &plan, &mut report).await?;
    shapes(&rocksdb, &plan, &mut report).await?;
    auto(&rocksdb, &plan, &faster, &mut report).await?;
    let mut nodes = vec![&rocksdb];
    if let Some(node) = &pg_node {
        ops(node, &plan, &mut report).await?;
        nodes.push(node);
    }
    mix(&nodes, &plan, &mut report).await?;
    bank(&rocksdb, postgres.as_ref(), bank_component, &plan, &mut report).await?;
    if let Some(node) = pg_node {
        node.node.shutdown().await;
    }
    rocksdb.node.shutdown().await;
    drop(postgres);
    report.print_table();
    eprintln!("state: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// A dev node with its data kept alive.
struct Node {
    node: DevNode,
    name: &'static str,
    _dir: tempfile::TempDir,
}

impl Node {
    /// A node whose state is in `postgres`, or in its own RocksDB without one.
    async fn start(postgres: Option<&Postgres>) -> anyhow::Result<Node> {
        let dir = tempfile::tempdir()?;
        let mut config = Config { data_dir: dir.path().join("data"), listen: "127.0.0.1:0".into(), ..Config::default() };
        config.state.auto_interval_ms = 250;
        // The suite's instances run in-process, not as invocations of a deployed
        // function: the recovery scan must not take the long-lived ones for dead.
        config.state.reexecute_after_ms = 3_600_000;
        let name = match postgres {
            None => "rocksdb",
            Some(server) => {
                config.state.store = StoreKind::Postgres;
                config.state.postgres = server.conninfo("postgres");
                "postgres"
            }
        };
        let node = DevNode::start(config).await.with_context(|| format!("starting the {name} dev node"))?;
        Ok(Node { node, name, _dir: dir })
    }

    fn runtime(&self) -> &Arc<Runtime> {
        &self.node.runtime
    }

    /// A fresh instance on `book` whose tables `tables` use the given protocols.
    /// An instance of a root invocation; `lazy` as the gateway starts one without a
    /// key (its Init waits for its first record).
    fn instance(&self, book: u64, tables: &BTreeMap<String, Protocol>, id: String, lazy: bool) -> Instance {
        let of = Of {
            id: InstanceId::keyed("bench", &id).expect("bench IDs are printable"),
            book: BookId(book),
            function: "bench".into(),
            version: 0,
            input: Some(Bytes::new()),
            declared: Arc::new(tables.clone()),
            crash: None,
            key: None,
            defer_init: lazy,
            forgettable: false,
        };
        self.runtime().durable().instance(of)
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k{}", i % KEYS).into_bytes()
}

fn value() -> Option<Bytes> {
    Some(Bytes::from(vec![b'v'; VALUE_BYTES]))
}

/// A small deterministic generator (xorshift64*), for key and operation choices.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn abort(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Figure 10: one read and one write under each protocol.
async fn ops(node: &Node, plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("state: single operations on {}", node.name);
    let tables: BTreeMap<String, Protocol> = PROTOCOLS.iter().map(|p| (p.name().to_string(), *p)).collect();
    let book = 100;
    let mut ctx = Context::new();
    let mut inst = node.instance(book, &tables, format!("bench-ops-{}", node.name), false);
    for p in PROTOCOLS {
        for k in 0..KEYS {
            inst.put(&mut ctx, p.name(), &key(k), value()).await.map_err(abort)?;
        }
    }
    let mut reads: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    let mut writes: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    let per_round = plan.ops / plan.rounds;
    let mut i = 0;
    // Each round times a run of reads, then a run of writes, of each protocol in
    // turn: an operation is timed among operations of its kind, not in the wake of
    // another kind's fsyncs (a read-optimized write leaves the log's replicas busy
    // for a while after it is acknowledged).
    for _ in 0..plan.rounds {
        for p in PROTOCOLS {
            for _ in 0..per_round {
                i += 1;
                let started = Instant::now();
                inst.get(&mut ctx, p.name(), &key(i)).await.map_err(abort)?;
                reads.entry(p.name()).or_default().push(nanos(started.elapsed()));
            }
            for _ in 0..per_round {
                i += 1;
                let started = Instant::now();
                inst.put(&mut ctx, p.name(), &key(i), value()).await.map_err(abort)?;
                writes.entry(p.name()).or_default().push(nanos(started.elapsed()));
            }
        }
    }
    inst.finish(&mut ctx, Outcome::Ok(Bytes::new())).await.map_err(abort)?;
    // Timed in nanoseconds: a read served in place takes a microsecond or two, where
    // whole microseconds would make the ratio to the unsafe read meaningless.
    let us = |ns: u32| round_to(f64::from(ns) / 1000.0, 3);
    for (kind, samples) in [("read", reads), ("write", writes)] {
        let base = Latencies::new(samples[Protocol::Unsafe.name()].clone()).percentile(50.0).unwrap_or(1).max(1);
        for p in PROTOCOLS {
            // The mean too: read- and write-optimized writes wait in the instance and
            // are logged or stored together (every 32nd write here), so their p50 is
            // not what a write costs; the mean spreads that cost over the run.
            let mean = samples[p.name()].iter().map(|&ns| f64::from(ns)).sum::<f64>() / samples[p.name()].len().max(1) as f64;
            let l = Latencies::new(samples[p.name()].clone());
            let case = format!("{}/{}/{kind}", node.name, p.name());
            let p50 = l.percentile(50.0).unwrap_or(0);
            report.record(&case, "p50", us(p50), "us")?;
            report.record(&case, "p99", us(l.percentile(99.0).unwrap_or(0)), "us")?;
            report.record(&case, "mean", round_to(mean / 1000.0, 3), "us")?;
            report.record(&case, "p50_vs_unsafe", round_to(f64::from(p50) / f64::from(base), 2), "x")?;
        }
    }
    Ok(())
}

/// One invocation of one operation: init, a read (with probability `read_ratio`) or a
/// write of a random key, result.
async fn one_op(
    node: &Node,
    book: u64,
    tables: &BTreeMap<String, Protocol>,
    table: &str,
    id: String,
    read: bool,
    k: u64,
) -> anyhow::Result<()> {
    shaped(node, book, tables, table, id, if read { "r" } else { "w" }, false, k).await
}

/// One invocation of the operations `shape` names in order (`r` a read, `w` a write, of
/// keys from `k` on), then its result; started `lazy` or not (`Node::instance`).
#[allow(clippy::too_many_arguments)]
async fn shaped(
    node: &Node,
    book: u64,
    tables: &BTreeMap<String, Protocol>,
    table: &str,
    id: String,
    shape: &str,
    lazy: bool,
    k: u64,
) -> anyhow::Result<()> {
    let mut ctx = Context::new();
    let mut inst = node.instance(book, tables, id, lazy);
    for (i, op) in shape.bytes().enumerate() {
        let key = key(k + i as u64);
        match op {
            b'r' => drop(inst.get(&mut ctx, table, &key).await.map_err(abort)?),
            _ => inst.put(&mut ctx, table, &key, value()).await.map_err(abort)?,
        }
    }
    inst.finish(&mut ctx, Outcome::Ok(Bytes::new())).await.map_err(abort)?;
    Ok(())
}

/// The protocols that `sweep` and `shapes` compare.
const TWO_PROTOCOLS: [Protocol; 2] = [Protocol::ReadOptimized, Protocol::WriteOptimized];

/// A table per protocol of [`TWO_PROTOCOLS`] in `book`, named after it, every key
/// written once (by invocations named after `case`).
async fn seeded_tables(node: &Node, book: u64, case: &str) -> anyhow::Result<BTreeMap<String, Protocol>> {
    let tables: BTreeMap<String, Protocol> = TWO_PROTOCOLS.iter().map(|p| (p.name().to_string(), *p)).collect();
    for p in TWO_PROTOCOLS {
        for k in 0..KEYS {
            one_op(node, book, &tables, p.name(), format!("{case}-seed-{}-{k}", p.name()), false, k).await?;
        }
    }
    Ok(tables)
}

/// Invocation shapes of the `shapes` case: the order of an invocation's reads and
/// writes, which is what decides each protocol's log appends and store syncs.
const SHAPES: [&str; 7] = ["r", "w", "rw", "wr", "rrw", "wrr", "wrwr"];

/// Mean invocation latency per shape under read- and write-optimized, invocations
/// started as the gateway starts them, the protocols alternating invocation by
/// invocation; and which is faster (0 read-, 1 write-optimized).
async fn shapes(node: &Node, plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("state: invocation shapes");
    let (book, protocols) = (250, TWO_PROTOCOLS);
    let tables = seeded_tables(node, book, "shapes").await?;
    let mut rng = Rng(0x51_7cc1_b727_220a);
    let mut n = 0;
    for shape in SHAPES {
        let mut totals = [Duration::ZERO; 2];
        for _ in 0..plan.sweep {
            let k = rng.next();
            for (i, p) in protocols.iter().enumerate() {
                n += 1;
                let started = Instant::now();
                shaped(node, book, &tables, p.name(), format!("shapes-{n}"), shape, true, k).await?;
                totals[i] += started.elapsed();
            }
        }
        let mean = totals.map(|t| t.as_secs_f64() * 1e6 / plan.sweep as f64);
        for (i, p) in protocols.iter().enumerate() {
            report.record(&format!("shape={shape}/{}", p.name()), "mean_latency", round_to(mean[i], 0), "us")?;
        }
        let faster = if mean[1] < mean[0] { 1.0 } else { 0.0 };
        report.record(&format!("shape={shape}"), "faster", faster, "0=read,1=write")?;
    }
    Ok(())
}

/// §6.3: mean invocation latency against the read ratio, read- vs write-optimized.
/// Returns the faster protocol per ratio (in tenths).
async fn sweep(node: &Node, plan: &Plan, report: &mut Report) -> anyhow::Result<BTreeMap<u32, Protocol>> {
    eprintln!("state: read-ratio sweep");
    let (book, protocols) = (200, TWO_PROTOCOLS);
    let tables = seeded_tables(node, book, "sweep").await?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut crossover = None;
    let mut faster = BTreeMap::new();
    let mut n = 0;
    for tenth in 0..=10 {
        let ratio = f64::from(tenth) / 10.0;
        let mut mean = BTreeMap::new();
        let mut totals = [Duration::ZERO; 2];
        // Interleaved: the two protocols alternate invocation by invocation.
        for _ in 0..plan.sweep {
            let (read, k) = (rng.unit() < ratio, rng.next());
            for (i, p) in protocols.iter().enumerate() {
                n += 1;
                let started = Instant::now();
                one_op(node, book, &tables, p.name(), format!("sweep-{n}"), read, k).await?;
                totals[i] += started.elapsed();
            }
        }
        for (i, p) in protocols.iter().enumerate() {
            let us = totals[i].as_secs_f64() * 1e6 / plan.sweep as f64;
            mean.insert(p.name(), us);
            report.record(&format!("sweep/read_ratio={ratio:.1}/{}", p.name()), "mean_latency", round_to(us, 0), "us")?;
        }
        let ro_faster = mean["read-optimized"] < mean["write-optimized"];
        faster.insert(tenth, if ro_faster { Protocol::ReadOptimized } else { Protocol::WriteOptimized });
        if crossover.is_none() && ro_faster {
            crossover = Some(ratio);
        }
    }
    match crossover {
        Some(ratio) => report.record("sweep", "first_read_ratio_where_read_optimized_is_faster", ratio, "ratio")?,
        None => eprintln!("state: read-optimized was never faster in the sweep"),
    }
    Ok(faster)
}

/// The `auto` table under each mix: the protocol it ends on (0 read-optimized, 1
/// write-optimized), starting from wherever the previous mix left it; and the share of
/// the mixes where that is the one the sweep found `faster`.
async fn auto(node: &Node, plan: &Plan, faster: &BTreeMap<u32, Protocol>, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("state: auto");
    let book = 300;
    let tables: BTreeMap<String, Protocol> = [("auto".to_string(), Protocol::Auto)].into_iter().collect();
    let rt = node.runtime();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut n = 0;
    let mixes = [0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 0.5, 0.0];
    let mut agreed = 0;
    for ratio in mixes {
        let started = Instant::now();
        while started.elapsed() < plan.auto_window {
            n += 1;
            one_op(node, book, &tables, "auto", format!("auto-{n}"), rng.unit() < ratio, rng.next()).await?;
        }
        // Let a switch the last window started finish.
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            let st = rt.tables().status(BookId(book), "auto").await?.context("the auto table is in use")?;
            if st.switching.is_none() || Instant::now() > deadline {
                break st;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let picked = if status.protocol == Protocol::ReadOptimized { 0.0 } else { 1.0 };
        report.record(&format!("auto/read_ratio={ratio:.1}"), "protocol", picked, "0=read,1=write")?;
        if faster.get(&((ratio * 10.0_f64).round() as u32)) == Some(&status.protocol) {
            agreed += 1;
        }
    }
    report.record("auto", "picked_the_faster", round_to(f64::from(agreed) / mixes.len() as f64, 2), "share")?;
    Ok(())
}

/// Workers of the mix.
const MIX_WORKERS: usize = 32;
const _: () = assert!((KEYS as usize).is_multiple_of(MIX_WORKERS), "every worker owns as many keys");
/// The protocols of the mix, each on a table named after it.
const MIX_PROTOCOLS: [Protocol; 2] = [Protocol::WriteOptimized, Protocol::ReadOptimized];

/// One worker of the mix: an instance of its own that reads or writes, half and half at
/// random, one of the keys it owns.
struct MixWorker {
    inst: Instance,
    ctx: Context,
    rng: Rng,
    keys: Vec<Vec<u8>>,
    /// The table the current case uses.
    table: &'static str,
}

impl Op for MixWorker {
    async fn call(&mut self) -> anyhow::Result<()> {
        let i = (self.rng.next() % self.keys.len() as u64) as usize;
        if self.rng.next() & 1 == 0 {
            let got = self.inst.get(&mut self.ctx, self.table, &self.keys[i]).await.map_err(abort)?;
            // Every key was written before the run, so a read finds a value.
            ensure!(got.is_some_and(|v| v.len() == VALUE_BYTES), "a read of a written key in {} found no value", self.table);
        } else {
            self.inst.put(&mut self.ctx, self.table, &self.keys[i], value()).await.map_err(abort)?;
        }
        Ok(())
    }
}

/// Clients measured in slices: their closed loop runs once a slice, and their samples
/// add up over the slices.
struct Pool<O> {
    ops: Vec<O>,
    samples: Samples,
}

impl<O: Op> Pool<O> {
    fn new(ops: Vec<O>) -> Pool<O> {
        Pool { ops, samples: Samples::default() }
    }

    /// One closed loop of every client, counted unless `window` is zero.
    async fn run(&mut self, warmup: Duration, window: Duration) -> anyhow::Result<()> {
        let (samples, ops) = closed_loop_keeping(std::mem::take(&mut self.ops), warmup, window).await?;
        self.ops = ops;
        if window > Duration::ZERO {
            self.samples.extend(samples);
        }
        Ok(())
    }
}

/// The 50/50 mix on every node's store, each protocol a case, the nodes in interleaved
/// slices.
async fn mix(nodes: &[&Node], plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    let book = 400;
    let tables: BTreeMap<String, Protocol> = MIX_PROTOCOLS.iter().map(|p| (p.name().to_string(), *p)).collect();
    let mut workers_by_node = Vec::new();
    for node in nodes {
        let mut workers = Vec::new();
        for w in 0..MIX_WORKERS {
            let keys = (w as u64..KEYS).step_by(MIX_WORKERS).map(key).collect();
            let inst = node.instance(book, &tables, format!("bench-mix-{}-{w}", node.name), false);
            let mut worker = MixWorker { inst, ctx: Context::new(), rng: Rng(0x9e37_79b9_7f4a_7c15 + w as u64), keys, table: "" };
            for p in MIX_PROTOCOLS {
                for k in &worker.keys {
                    worker.inst.put(&mut worker.ctx, p.name(), k, value()).await.map_err(abort)?;
                }
            }
            workers.push(worker);
        }
        workers_by_node.push(workers);
    }
    for p in MIX_PROTOCOLS {
        eprintln!(
            "state: 50/50 mix, {}, {MIX_WORKERS} workers: {} interleaved slices of {} ms per store",
            p.name(),
            plan.slices,
            plan.slice.as_millis()
        );
        let mut pools: Vec<Pool<MixWorker>> = workers_by_node
            .drain(..)
            .map(|mut workers| {
                workers.iter_mut().for_each(|w| w.table = p.name());
                Pool::new(workers)
            })
            .collect();
        for pool in &mut pools {
            pool.run(plan.warmup, Duration::ZERO).await?;
        }
        for round in 0..plan.slices as usize {
            for k in 0..pools.len() {
                // Rotated, so that no store always follows the same one.
                let i = (round + k) % pools.len();
                pools[i].run(plan.slice_warmup, plan.slice - plan.slice_warmup).await?;
            }
        }
        let case = |node: &Node| format!("{}/{},workers={MIX_WORKERS}", node.name, p.name());
        for (node, pool) in nodes.iter().zip(pools) {
            let (throughput, latencies) = pool.samples.finish();
            report.record(&case(node), "mix_throughput", throughput.round(), "ops/s")?;
            record_percentiles(report, &case(node), ["mix_p50", "mix_p99"], &latencies)?;
            workers_by_node.push(pool.ops);
        }
        if let [rocksdb, postgres] = nodes {
            let throughput = |node: &Node| report.value(&case(node), "mix_throughput").expect("recorded above");
            let ratio = round_to(throughput(rocksdb) / throughput(postgres), 2);
            report.record(&case(rocksdb), "mix_throughput_vs_postgres", ratio, "x")?;
        }
    }
    for workers in workers_by_node {
        for mut w in workers {
            w.inst.finish(&mut w.ctx, Outcome::Ok(Bytes::new())).await.map_err(abort)?;
        }
    }
    Ok(())
}

/// The client counts of `bank`: latency unloaded, then throughput.
const BANK_CLIENTS: [usize; 2] = [1, 32];
/// Pairs of accounts, one per client of the largest count.
const PAIRS: usize = 32;
const _: () = assert!(BANK_CLIENTS[1] == PAIRS, "every client has a pair of its own");
/// The protocols the bank runs under on Tally, each deployed as a function of its own
/// on a book of its own (a table's protocol is the book's table's).
const BANK_PROTOCOLS: [(Protocol, u64); 2] = [(Protocol::WriteOptimized, 20), (Protocol::ReadOptimized, 21)];
/// Every account's balance when opened.
const OPENING: i64 = 1_000_000;

fn accounts(pair: usize) -> [String; 2] {
    [format!("p{pair}x"), format!("p{pair}y")]
}

/// The balances a pair must show after `moves` transfers of one unit from x to y.
fn balances_after(moves: u64) -> [i64; 2] {
    let moves = i64::try_from(moves).expect("fewer than 2^63 transfers");
    [OPENING - moves, OPENING + moves]
}

/// Where `bank` transfers money.
enum Bank {
    /// The bank function on the RocksDB node, over its gateway.
    Tally { protocol: Protocol, invoke_url: String, log: LogClient },
    /// Transactions of a plain client on the `bank` database.
    Postgres { conninfo: String },
}

impl Bank {
    /// Deploys the bank as `bank-<protocol>` with its table `accounts` under
    /// `protocol`, and opens every account on `book`.
    async fn tally(node: &Node, protocol: Protocol, book: u64, component: Vec<u8>) -> anyhow::Result<Bank> {
        let url = node.node.url();
        let function = format!("bank-{}", protocol.name());
        let deploy_url = format!("{url}/v1/functions/{function}?tables=accounts:{}", protocol.name());
        let invoke_url = format!("{url}/v1/functions/{function}/invoke?book={book}");
        tokio::task::spawn_blocking({
            let invoke_url = invoke_url.clone();
            move || {
                let agent = agent();
                let mut response =
                    deploy_agent().put(&deploy_url).send(&component[..]).with_context(|| format!("PUT {deploy_url}"))?;
                let status = response.status().as_u16();
                let text = response.body_mut().read_to_string().unwrap_or_default();
                ensure!(status == 201, "deploying {function} answered {status}: {text}");
                for account in (0..PAIRS).flat_map(accounts) {
                    let key = format!("open-{account}");
                    let opened = post_ok(&agent, &invoke_url, format!("open {account} {OPENING}"), Some(&key))?;
                    ensure!(opened == "ok", "opening {account} answered {opened:?}");
                }
                anyhow::Ok(())
            }
        })
        .await??;
        Ok(Bank::Tally { protocol, invoke_url, log: node.runtime().log().clone() })
    }

    /// Creates the database `bank` with every account, after checking that the server
    /// syncs every commit.
    async fn postgres(server: &Postgres) -> anyhow::Result<Bank> {
        let admin = connect(&server.conninfo("postgres")).await?;
        let (fsync, synchronous_commit) = (show(&admin, "fsync").await?, show(&admin, "synchronous_commit").await?);
        ensure!(
            fsync == "on" && synchronous_commit == "on",
            "PostgreSQL runs with fsync {fsync}, synchronous_commit {synchronous_commit}"
        );
        let (version, wal_sync_method) = (show(&admin, "server_version").await?, show(&admin, "wal_sync_method").await?);
        admin.batch_execute("CREATE DATABASE bank").await?;
        let conninfo = server.conninfo("bank");
        let client = connect(&conninfo).await?;
        client.batch_execute("CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL)").await?;
        for account in (0..PAIRS).flat_map(accounts) {
            client.execute("INSERT INTO accounts VALUES ($1, $2)", &[&account, &OPENING]).await?;
        }
        eprintln!("state: bank: PostgreSQL {version}, fsync and synchronous_commit on ({wal_sync_method}), unix socket");
        Ok(Bank::Postgres { conninfo })
    }

    fn name(&self) -> String {
        match self {
            Bank::Tally { protocol, .. } => format!("tally/{}", protocol.name()),
            Bank::Postgres { .. } => "postgres".into(),
        }
    }

    fn case(&self, clients: usize) -> String {
        format!("{},clients={clients}", self.name())
    }

    /// `count` clients on the first pairs, with `moves` made on each pair so far.
    async fn clients(&self, count: usize, moves: &[u64]) -> anyhow::Result<Vec<BankClient>> {
        let mut clients = Vec::with_capacity(count);
        for (pair, &moves) in moves.iter().enumerate().take(count) {
            clients.push(match self {
                Bank::Tally { invoke_url, .. } => BankClient::Tally(TallyTransfer { http: Http::new(invoke_url)?, pair, moves }),
                Bank::Postgres { conninfo } => BankClient::Postgres(PgTransfer::connect(conninfo, pair, moves).await?),
            });
        }
        Ok(clients)
    }

    /// The balances of every pair, as the store holds them.
    async fn balances(&self) -> anyhow::Result<Vec<[i64; 2]>> {
        match self {
            Bank::Tally { invoke_url, .. } => {
                let invoke_url = invoke_url.clone();
                tokio::task::spawn_blocking(move || {
                    let agent = agent();
                    let balance = |account: &str| -> anyhow::Result<i64> {
                        let text = post_ok(&agent, &invoke_url, format!("balance {account}"), None)?;
                        text.parse().with_context(|| format!("the balance of {account} is {text:?}"))
                    };
                    (0..PAIRS)
                        .map(|pair| {
                            let [x, y] = accounts(pair);
                            Ok([balance(&x)?, balance(&y)?])
                        })
                        .collect()
                })
                .await?
            }
            Bank::Postgres { conninfo } => {
                let client = connect(conninfo).await?;
                let balances: BTreeMap<String, i64> = client
                    .query("SELECT id, balance FROM accounts", &[])
                    .await?
                    .iter()
                    .map(|row| (row.get(0), row.get(1)))
                    .collect();
                (0..PAIRS)
                    .map(|pair| {
                        let [x, y] = accounts(pair).map(|a| balances.get(&a).copied().with_context(|| format!("no account {a}")));
                        Ok([x?, y?])
                    })
                    .collect()
            }
        }
    }

    /// Every transfer's answer was checked against its pair's count of moves; the store
    /// must now hold exactly `moves[pair]` moves for every pair, every pair its opening
    /// total, and as many moves in all as the clients made.
    async fn check(&self, moves: &[u64]) -> anyhow::Result<()> {
        let balances = self.balances().await?;
        for (pair, ([x, y], &made)) in balances.iter().zip(moves).enumerate() {
            ensure!(x + y == 2 * OPENING, "{}: pair {pair} holds {x} + {y}, not {}", self.name(), 2 * OPENING);
            ensure!(
                [*x, *y] == balances_after(made),
                "{}: pair {pair} holds {x} {y} after its client made {made} transfers",
                self.name()
            );
        }
        let stored: i64 = balances.iter().map(|[_, y]| y - OPENING).sum();
        let made: u64 = moves.iter().sum();
        ensure!(stored == made as i64, "{}: the store shows {stored} transfers, the clients made {made}", self.name());
        eprintln!("state: bank: {}: {made} transfers; every pair's total and moves check", self.name());
        Ok(())
    }

    /// The log's position now (a record appended to a book of the suite's own), on Tally.
    async fn log_position(&self) -> anyhow::Result<Option<SeqNum>> {
        let Bank::Tally { log, .. } = self else { return Ok(None) };
        let marker = log.append(&mut Context::new(), BookId(MARKER_BOOK), &[], Bytes::from_static(b"mark")).await?;
        Ok(Some(marker))
    }
}

/// The book of the position markers around Tally's slices.
const MARKER_BOOK: u64 = 22;

/// A client of `bank`: moves one unit from x to y of its pair, one transfer at a time.
enum BankClient {
    Tally(TallyTransfer),
    Postgres(PgTransfer),
}

impl BankClient {
    fn pair_moves(&self) -> (usize, u64) {
        match self {
            BankClient::Tally(t) => (t.pair, t.moves),
            BankClient::Postgres(t) => (t.pair, t.moves),
        }
    }
}

impl Op for BankClient {
    async fn call(&mut self) -> anyhow::Result<()> {
        match self {
            BankClient::Tally(t) => t.transfer().await,
            BankClient::Postgres(t) => t.transfer().await,
        }
    }
}

/// A transfer as an invocation of the bank function, exactly-once across retries (an
/// Idempotency-Key per transfer), on an HTTP/1.1 keep-alive connection of its own. The
/// client is async on the suite's runtime, as PostgreSQL's is, so that neither side's
/// clients take a thread per connection from the cores the servers share.
struct TallyTransfer {
    http: Http,
    pair: usize,
    /// Transfers of this pair so far.
    moves: u64,
}

impl TallyTransfer {
    async fn transfer(&mut self) -> anyhow::Result<()> {
        let [x, y] = accounts(self.pair);
        let moves = self.moves + 1;
        let key = format!("{x}-{moves}");
        // Sending a transfer again on a fresh connection is safe under its key.
        let (status, answer) = self.http.post(format!("transfer {x} {y} 1").as_bytes(), Some(&key), true).await?;
        let answer = String::from_utf8_lossy(&answer);
        ensure!(status == 200, "transfer {moves} of pair {} answered {status}: {answer}", self.pair);
        let [from, to] = balances_after(moves);
        ensure!(answer == format!("ok {from} {to}"), "transfer {moves} of pair {} answered {answer:?}", self.pair);
        self.moves = moves;
        Ok(())
    }
}

/// POSTs `body` to `url` (with an Idempotency-Key if given); the answer, which must be 200.
fn post_ok(agent: &ureq::Agent, url: &str, body: String, key: Option<&str>) -> anyhow::Result<String> {
    let mut request = agent.post(url);
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    let mut response = request.send(&body).with_context(|| format!("POST {url}"))?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().with_context(|| format!("reading the answer of POST {url}"))?;
    ensure!(status == 200, "POST {url} {body:?} answered {status}: {text}");
    Ok(text)
}

/// A transfer as a PostgreSQL transaction on a connection of its own: both rows locked
/// in a fixed order (x, then y), both updated, committed.
struct PgTransfer {
    client: Client,
    select: Statement,
    update: Statement,
    pair: usize,
    moves: u64,
}

impl PgTransfer {
    async fn connect(conninfo: &str, pair: usize, moves: u64) -> anyhow::Result<PgTransfer> {
        let client = connect(conninfo).await?;
        let select = client.prepare("SELECT balance FROM accounts WHERE id = $1 FOR UPDATE").await?;
        let update = client.prepare("UPDATE accounts SET balance = $2 WHERE id = $1").await?;
        Ok(PgTransfer { client, select, update, pair, moves })
    }

    async fn transfer(&mut self) -> anyhow::Result<()> {
        let [x, y] = accounts(self.pair);
        let tx = self.client.transaction().await?;
        let from: i64 = tx.query_one(&self.select, &[&x]).await?.get(0);
        let to: i64 = tx.query_one(&self.select, &[&y]).await?.get(0);
        ensure!([from, to] == balances_after(self.moves), "pair {} held {from} {to} after {} transfers", self.pair, self.moves);
        tx.execute(&self.update, &[&x, &(from - 1)]).await?;
        tx.execute(&self.update, &[&y, &(to + 1)]).await?;
        tx.commit().await?;
        self.moves += 1;
        Ok(())
    }
}

/// A connection to PostgreSQL. Its driver runs as a task that ends when the client is
/// dropped, or on a connection error, which the client's next call reports.
pub(crate) async fn connect(conninfo: &str) -> anyhow::Result<Client> {
    let (client, connection) = tokio_postgres::connect(conninfo, NoTls).await.context("connecting to PostgreSQL")?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// A setting of the PostgreSQL server.
pub(crate) async fn show(client: &Client, setting: &str) -> anyhow::Result<String> {
    Ok(client.query_one(&format!("SHOW {setting}"), &[]).await?.get(0))
}

/// Transfers on Tally under each protocol and on PostgreSQL, at each client count, in
/// interleaved slices; then the check of every pair's balances on every side.
async fn bank(
    node: &Node,
    postgres: Option<&Postgres>,
    component: Vec<u8>,
    plan: &Plan,
    report: &mut Report,
) -> anyhow::Result<()> {
    let mut banks = Vec::new();
    for (protocol, book) in BANK_PROTOCOLS {
        banks.push(Bank::tally(node, protocol, book, component.clone()).await?);
    }
    if let Some(server) = postgres {
        banks.push(Bank::postgres(server).await?);
    }
    let mut moves = vec![vec![0u64; PAIRS]; banks.len()];
    // Per Tally bank: log records appended, and transfers made, in its slices.
    let mut appended = vec![(0u64, 0u64); banks.len()];
    for clients in BANK_CLIENTS {
        eprintln!(
            "state: bank, {clients} clients: {} interleaved slices of {} ms per target",
            plan.slices,
            plan.slice.as_millis()
        );
        let mut pools = Vec::new();
        for (bank, moves) in banks.iter().zip(&moves) {
            let mut pool = Pool::new(bank.clients(clients, moves).await?);
            pool.run(plan.warmup, Duration::ZERO).await?;
            pools.push(pool);
        }
        for round in 0..plan.slices as usize {
            for k in 0..banks.len() {
                // Rotated, so that no target always follows the same one.
                let i = (round + k) % banks.len();
                let transfers = |pool: &Pool<BankClient>| pool.ops.iter().map(|c| c.pair_moves().1).sum::<u64>();
                let (before, made_before) = (banks[i].log_position().await?, transfers(&pools[i]));
                pools[i].run(plan.slice_warmup, plan.slice - plan.slice_warmup).await?;
                if let (Some(before), Some(after)) = (before, banks[i].log_position().await?) {
                    assert_eq!((before.term(), before.log()), (after.term(), after.log()), "a dev node has one log and one term");
                    // The records between the two markers, the later marker excluded.
                    appended[i].0 += after.position() - before.position() - 1;
                    appended[i].1 += transfers(&pools[i]) - made_before;
                }
            }
        }
        for (i, (bank, pool)) in banks.iter().zip(pools).enumerate() {
            let case = bank.case(clients);
            let (throughput, latencies) = pool.samples.finish();
            report.record(&case, "bank_transfer_throughput", throughput.round(), "transfers/s")?;
            record_percentiles(report, &case, ["bank_transfer_p50", "bank_transfer_p99"], &latencies)?;
            for client in pool.ops {
                let (pair, made) = client.pair_moves();
                moves[i][pair] = made;
            }
        }
        let postgres_case = format!("postgres,clients={clients}");
        if let Some(pg) = report.value(&postgres_case, "bank_transfer_throughput") {
            for bank in banks.iter().filter(|b| matches!(b, Bank::Tally { .. })) {
                let case = bank.case(clients);
                let tally = report.value(&case, "bank_transfer_throughput").expect("recorded above");
                report.record(&case, "bank_vs_postgres", round_to(tally / pg, 2), "x")?;
            }
        }
    }
    for ((bank, moves), (records, transfers)) in banks.iter().zip(&moves).zip(appended) {
        if matches!(bank, Bank::Tally { .. }) {
            let per_transfer = round_to(records as f64 / transfers.max(1) as f64, 2);
            report.record(&bank.name(), "log_records_per_transfer", per_transfer, "records")?;
        }
        bank.check(moves).await?;
    }
    tokio::task::spawn_blocking({
        let (banks, slice, slices) = (banks.iter().map(Bank::external).collect::<Vec<_>>(), plan.slice, plan.slices);
        move || bank_external(&banks, slice, slices)
    })
    .await??
    .into_iter()
    .try_for_each(|(case, metric, value, unit)| report.record(&case, metric, value, unit))?;
    Ok(())
}

/// A bank target as an external load generator drives it.
enum External {
    /// `wrk` POSTing transfers to the invoke URL, each with an Idempotency-Key.
    Tally { name: String, invoke_url: String },
    /// `pgbench` running the transfer as a script on the `bank` database.
    Postgres { conninfo: String },
}

impl Bank {
    fn external(&self) -> External {
        match self {
            Bank::Tally { invoke_url, .. } => External::Tally { name: self.name(), invoke_url: invoke_url.clone() },
            Bank::Postgres { conninfo } => External::Postgres { conninfo: conninfo.clone() },
        }
    }
}

/// Connections of the external load generators' runs: one (a lone client, judged
/// without the suite's client sharing the node's runtime), and one per pair.
const EXTERNAL_CONNECTIONS: [usize; 2] = [1, PAIRS];
const _: () = assert!(PAIRS == 32, "WRK_BANK_SCRIPT spreads its two threads over 32 pairs");

/// wrk's script for Tally: transfers on the pairs (each of wrk's two threads takes its
/// 16 of the 32 in turn; a lone thread takes the first 16), an Idempotency-Key each, unique across runs (the run is wrk's first
/// argument); every answer that is not a 200 `ok ...` counts as bad, and the total is
/// printed as `BAD <n>`.
const WRK_BANK_SCRIPT: &str = r#"
local threads = {}
function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end
function init(args)
  run = args[1]
  sent = 0
  bad = 0
end
function request()
  sent = sent + 1
  local pair = (id * 16 + sent % 16) % 32
  wrk.headers["Idempotency-Key"] = "external-" .. run .. "-" .. id .. "-" .. sent
  return wrk.format("POST", nil, nil, "transfer p" .. pair .. "x p" .. pair .. "y 1")
end
function response(status, headers, body)
  if status ~= 200 or string.sub(body, 1, 3) ~= "ok " then
    bad = bad + 1
  end
end
function done(summary, latency, requests)
  local total = 0
  for _, thread in ipairs(threads) do
    total = total + thread:get("bad")
  end
  io.write(string.format("BAD %d\n", total))
end
"#;

/// pgbench's script: the transfer of the suite's plain client (both rows locked in a
/// fixed order, both updated), on the client's own pair (`client_id` is 0..connections).
const PGBENCH_BANK_SCRIPT: &str = "\
BEGIN;
SELECT balance FROM accounts WHERE id = 'p' || :client_id || 'x' FOR UPDATE;
SELECT balance FROM accounts WHERE id = 'p' || :client_id || 'y' FOR UPDATE;
UPDATE accounts SET balance = balance - 1 WHERE id = 'p' || :client_id || 'x';
UPDATE accounts SET balance = balance + 1 WHERE id = 'p' || :client_id || 'y';
COMMIT;
";

/// The means of a target's slices: (transfers per second, mean latency in us).
fn mean_of(slices: &[(f64, f64)]) -> (f64, f64) {
    let n = slices.len().max(1) as f64;
    slices.iter().fold((0.0, 0.0), |(t, m), (st, sm)| (t + st / n, m + sm / n))
}

/// The bank under external load generators, so that the suite's own clients (tasks on
/// the runtime that also runs the Tally node) are not the only judge: `wrk` for each
/// Tally target, `pgbench` (PostgreSQL's own) for PostgreSQL, with
/// each of `EXTERNAL_CONNECTIONS` connections (on at most two threads), in `slices` interleaved
/// slices of `slice`. Transfers of concurrent wrk requests may share a pair, which the
/// bank does not serialise, so balances are not checked here (the suite's clients
/// checked them above); every answer is. Returns the measurements; skipped, with a
/// message, where a generator cannot be had.
fn bank_external(
    targets: &[External],
    slice: Duration,
    slices: u32,
) -> anyhow::Result<Vec<(String, &'static str, f64, &'static str)>> {
    let generators = crate::peers::debian_program("wrk", "wrk")
        .and_then(|wrk| Ok((wrk, crate::peers::debian_program("pgbench", "postgresql-client")?)));
    let (wrk, pgbench) = match generators {
        Ok(found) => found,
        Err(e) => {
            eprintln!("state: bank: NO EXTERNAL LOAD GENERATOR: {e:#}; the external run is skipped");
            return Ok(vec![]);
        }
    };
    let dir = tempfile::tempdir().context("creating the generators' scripts")?;
    let (wrk_script, pg_script) = (dir.path().join("bank.lua"), dir.path().join("bank.sql"));
    std::fs::write(&wrk_script, WRK_BANK_SCRIPT).context("writing wrk's script")?;
    std::fs::write(&pg_script, PGBENCH_BANK_SCRIPT).context("writing pgbench's script")?;
    let seconds = slice.as_secs().max(1).to_string();
    let mut out = Vec::new();
    for connections in EXTERNAL_CONNECTIONS {
        eprintln!("state: bank: external load generators, {connections} connections: {slices} interleaved slices of {seconds} s per target");
        out.extend(bank_external_at(targets, connections, (&wrk, &pgbench), (&wrk_script, &pg_script), &seconds, slices)?);
    }
    Ok(out)
}

/// One external run of `connections` connections, on at most two threads of each
/// generator (and at most one per connection).
fn bank_external_at(
    targets: &[External],
    connections: usize,
    (wrk, pgbench): (&std::path::Path, &std::path::Path),
    (wrk_script, pg_script): (&std::path::Path, &std::path::Path),
    seconds: &str,
    slices: u32,
) -> anyhow::Result<Vec<(String, &'static str, f64, &'static str)>> {
    let threads = connections.min(2);
    let (wrk_threads, pg_threads, conns) = (format!("-t{threads}"), format!("-j{threads}"), connections.to_string());
    // Per target: transfers per second and mean latency (us), one entry per slice.
    let mut measured: Vec<Vec<(f64, f64)>> = vec![Vec::new(); targets.len()];
    for round in 0..slices as usize {
        for k in 0..targets.len() {
            let i = (round + k) % targets.len();
            measured[i].push(match &targets[i] {
                External::Tally { name, invoke_url } => {
                    let out = std::process::Command::new(wrk)
                        .args([&wrk_threads, "-c", &conns, "-d", seconds, "-s"])
                        .arg(wrk_script)
                        .args([invoke_url, "--", &round.to_string()])
                        .output()
                        .context("running wrk")?;
                    let text = String::from_utf8_lossy(&out.stdout);
                    ensure!(out.status.success(), "wrk failed on {name}: {text}{}", String::from_utf8_lossy(&out.stderr));
                    ensure!(!text.contains("Non-2xx") && text.contains("BAD 0"), "{name} answered errors under wrk: {text}");
                    let throughput = wrk_field(&text, "Requests/sec:").and_then(|v| v.parse().ok());
                    // `Latency  <mean> <stdev> <max> <+/- stdev>`, the first line of thread stats.
                    let mean = wrk_field(&text, "Latency").and_then(|v| wrk_micros(v.split_whitespace().next()?));
                    throughput.zip(mean).with_context(|| format!("wrk said {text}"))?
                }
                External::Postgres { conninfo } => {
                    let out = std::process::Command::new(pgbench)
                        .args(["-n", "-M", "prepared", "-c", &conns, &pg_threads, "-T", seconds, "-f"])
                        .arg(pg_script)
                        .arg(conninfo)
                        .output()
                        .context("running pgbench")?;
                    let text = String::from_utf8_lossy(&out.stdout);
                    ensure!(out.status.success(), "pgbench failed: {text}{}", String::from_utf8_lossy(&out.stderr));
                    ensure!(text.contains("number of failed transactions: 0"), "transfers failed under pgbench: {text}");
                    let field = |prefix: &str| {
                        text.lines().find_map(|l| l.trim().strip_prefix(prefix)?.split_whitespace().next()?.parse::<f64>().ok())
                    };
                    let mean_ms = field("latency average =");
                    field("tps =").zip(mean_ms.map(|ms| ms * 1000.0)).with_context(|| format!("pgbench said {text}"))?
                }
            });
        }
    }
    let postgres = targets.iter().zip(&measured).find(|(t, _)| matches!(t, External::Postgres { .. })).map(|(_, m)| mean_of(m).0);
    let mut out = Vec::new();
    for (target, slices) in targets.iter().zip(&measured) {
        let (throughput, latency) = mean_of(slices);
        let case = match target {
            External::Tally { name, .. } => format!("{name},connections={connections},wrk"),
            External::Postgres { .. } => format!("postgres,connections={connections},pgbench"),
        };
        out.push((case.clone(), "bank_external_throughput", throughput.round(), "transfers/s"));
        out.push((case.clone(), "bank_external_latency_mean", latency.round(), "us"));
        if let (External::Tally { .. }, Some(pg)) = (target, postgres.filter(|&pg| pg > 0.0)) {
            out.push((case, "bank_external_vs_postgres", round_to(throughput / pg, 2), "x"));
        }
    }
    Ok(out)
}
