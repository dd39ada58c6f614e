//! The `state` suite: exactly-once state on Tally, as Halfmoon's Figure 10 and §6.3.
//!
//! ```text
//!   ops     one instance per protocol on a dev node (loopback QUIC log, fsync every
//!           batch), timing single state operations through the host's protocol code
//!           (what a guest's `state.get`/`state.put` runs, without the Wasm call):
//!           unsafe (raw store: the lower bound), read-optimized, write-optimized,
//!           symmetric (Boki-style, logs both: the peer), on RocksDB and PostgreSQL
//!   sweep   invocations of one operation each (init, a read or a write, result), the
//!           read ratio from 0 to 1, under read- and write-optimized: where they cross
//!   auto    the same mix on an `auto` table: which protocol the runtime settles on
//! ```
//!
//! The protocols are measured in interleaved rounds, so that all sample the same
//! disk (this machine's fsync time drifts between runs). Values are 256 bytes over 64
//! keys. PostgreSQL is a server of its own started by the suite (skipped, with a
//! message, where it cannot start).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use tally_durable::{Instance, InstanceId, Of, Outcome};
use tally_logsvc::{BookId, Context};
use tally_runtime::config::{Protocol, StoreKind};
use tally_runtime::dev::DevNode;
use tally_runtime::{Config, Runtime};
use tally_state::TempPostgres;

use crate::report::{micros, round_to, Latencies, Report};
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
}

pub async fn run(opts: &RunOptions) -> anyhow::Result<()> {
    let plan = if opts.quick {
        Plan { ops: 60, rounds: 3, sweep: 20, auto_window: Duration::from_millis(800) }
    } else {
        Plan { ops: 1500, rounds: 10, sweep: 200, auto_window: Duration::from_secs(2) }
    };
    let mut report = Report::new(
        "state",
        format!("{VALUE_BYTES}-byte values over {KEYS} keys; dev node: loopback QUIC log, fsync every batch"),
    );
    for store in [StoreKind::Rocksdb, StoreKind::Postgres] {
        let Some(node) = Node::start(store).await? else { continue };
        ops(&node, &plan, &mut report).await?;
        if store == StoreKind::Rocksdb {
            sweep(&node, &plan, &mut report).await?;
            auto(&node, &plan, &mut report).await?;
        }
        node.node.shutdown().await;
    }
    report.print_table();
    Ok(())
}

/// A dev node with its data (and PostgreSQL server) kept alive.
struct Node {
    node: DevNode,
    name: &'static str,
    _dir: tempfile::TempDir,
    _postgres: Option<TempPostgres>,
}

impl Node {
    async fn start(store: StoreKind) -> anyhow::Result<Option<Node>> {
        let dir = tempfile::tempdir()?;
        let mut config = Config { data_dir: dir.path().join("data"), listen: "127.0.0.1:0".into(), ..Config::default() };
        config.state.auto_interval_ms = 250;
        // The suite's instances run in-process, not as invocations of a deployed
        // function: the recovery scan must not take the long-lived ones for dead.
        config.state.reexecute_after_ms = 3_600_000;
        let (name, postgres) = match store {
            StoreKind::Rocksdb => ("rocksdb", None),
            StoreKind::Postgres => match tokio::task::spawn_blocking(TempPostgres::start).await? {
                Ok(server) => {
                    config.state.store = StoreKind::Postgres;
                    config.state.postgres = server.conninfo();
                    ("postgres", Some(server))
                }
                Err(e) => {
                    eprintln!("state: PostgreSQL cannot start here ({e}); measuring RocksDB only");
                    return Ok(None);
                }
            },
        };
        let node = DevNode::start(config).await.context("starting the dev node")?;
        Ok(Some(Node { node, name, _dir: dir, _postgres: postgres }))
    }

    fn runtime(&self) -> &Arc<Runtime> {
        &self.node.runtime
    }

    /// A fresh instance on `book` whose tables `tables` use the given protocols.
    fn instance(&self, book: u64, tables: &BTreeMap<String, Protocol>, id: String) -> Instance {
        let of = Of {
            id: InstanceId::keyed("bench", &id).expect("bench IDs are printable"),
            book: BookId(book),
            function: "bench".into(),
            version: 0,
            input: Some(Bytes::new()),
            declared: Arc::new(tables.clone()),
            crash: None,
        };
        Instance::new(self.runtime().durable.clone(), of)
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k{}", i % KEYS).into_bytes()
}

fn value() -> Option<Bytes> {
    Some(Bytes::from(vec![b'v'; VALUE_BYTES]))
}

/// A small deterministic generator (xorshift64*), for key and operation choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn unit(&mut self) -> f64 {
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
    let mut inst = node.instance(book, &tables, format!("bench-ops-{}", node.name));
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
                reads.entry(p.name()).or_default().push(micros(started.elapsed()));
            }
            for _ in 0..per_round {
                i += 1;
                let started = Instant::now();
                inst.put(&mut ctx, p.name(), &key(i), value()).await.map_err(abort)?;
                writes.entry(p.name()).or_default().push(micros(started.elapsed()));
            }
        }
    }
    inst.finish(&mut ctx, Outcome::Ok(Bytes::new())).await.map_err(abort)?;
    for (kind, samples) in [("read", reads), ("write", writes)] {
        let base = Latencies::new(samples[Protocol::Unsafe.name()].clone()).percentile(50.0).unwrap_or(1).max(1);
        for p in PROTOCOLS {
            let l = Latencies::new(samples[p.name()].clone());
            let case = format!("{}/{}/{kind}", node.name, p.name());
            let p50 = l.percentile(50.0).unwrap_or(0);
            report.record(&case, "p50", f64::from(p50), "us")?;
            report.record(&case, "p99", f64::from(l.percentile(99.0).unwrap_or(0)), "us")?;
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
    let mut ctx = Context::new();
    let mut inst = node.instance(book, tables, id);
    if read {
        inst.get(&mut ctx, table, &key(k)).await.map_err(abort)?;
    } else {
        inst.put(&mut ctx, table, &key(k), value()).await.map_err(abort)?;
    }
    inst.finish(&mut ctx, Outcome::Ok(Bytes::new())).await.map_err(abort)?;
    Ok(())
}

/// §6.3: mean invocation latency against the read ratio, read- vs write-optimized.
async fn sweep(node: &Node, plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("state: read-ratio sweep");
    let book = 200;
    let protocols = [Protocol::ReadOptimized, Protocol::WriteOptimized];
    let tables: BTreeMap<String, Protocol> = protocols.iter().map(|p| (p.name().to_string(), *p)).collect();
    for p in protocols {
        for k in 0..KEYS {
            one_op(node, book, &tables, p.name(), format!("sweep-seed-{}-{k}", p.name()), false, k).await?;
        }
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut crossover = None;
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
        if crossover.is_none() && mean["read-optimized"] < mean["write-optimized"] {
            crossover = Some(ratio);
        }
    }
    match crossover {
        Some(ratio) => report.record("sweep", "first_read_ratio_where_read_optimized_is_faster", ratio, "ratio")?,
        None => eprintln!("state: read-optimized was never faster in the sweep"),
    }
    Ok(())
}

/// The `auto` table under each mix: the protocol it ends on (0 read-optimized, 1
/// write-optimized), starting from wherever the previous mix left it.
async fn auto(node: &Node, plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("state: auto");
    let book = 300;
    let tables: BTreeMap<String, Protocol> = [("auto".to_string(), Protocol::Auto)].into_iter().collect();
    let rt = node.runtime();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut n = 0;
    for ratio in [0.0, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0, 0.5, 0.0] {
        let started = Instant::now();
        while started.elapsed() < plan.auto_window {
            n += 1;
            one_op(node, book, &tables, "auto", format!("auto-{n}"), rng.unit() < ratio, rng.next()).await?;
        }
        // Let a switch the last window started finish.
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            let st = rt.durable.table_status(BookId(book), "auto").await?.context("the auto table is in use")?;
            if st.switching.is_none() || Instant::now() > deadline {
                break st;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let picked = if status.protocol == Protocol::ReadOptimized { 0.0 } else { 1.0 };
        report.record(&format!("auto/read_ratio={ratio:.1}"), "protocol", picked, "0=read,1=write")?;
    }
    Ok(())
}
