//! The `memory` suite: what a function node costs when nothing happens, and what it
//! holds while its books grow.
//!
//! ```text
//!   idle   a dev node (every role, the runtime and the gateway) in this process, no
//!          request: the process's CPU time over a window, in % of one core
//!   rss    the same node, C clients appending R-byte records to B books through the
//!          node's log client: the process's resident set (VmRSS) at the start and
//!          after each step of appends, and what each record added (since the start,
//!          and in this step)
//!   reads  then one client's read-next of one tag of a grown book from random seqnums:
//!          among its oldest 90% (index chunks spilled, records read from the store)
//!          and its newest 1% (in memory), alternately
//! ```
//!
//! Goals (issue 12): idle under 0.5% of a core; RSS flat while the books grow. The
//! process holds the whole node: its engine (index and record cache, the cache bounded
//! by `cache_bytes_max`, the index's full chunks past its bound spilled to a scratch
//! file), its storage node (its liveness index, bounded the same way, and RocksDB's
//! memtables and block cache, bounded) and its sequencer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use tally::dev::DevNode;
use tally_logsvc::{BookId, Context, SeqNum, Tag};
use tokio::task::JoinSet;

use crate::report::{micros, round_to, Latencies, Report};
use crate::state::Rng;
use crate::RunOptions;

const CLIENTS: u64 = 256;
const BOOKS: u64 = 16;
const RECORD_BYTES: usize = 100;

pub async fn run(opts: &RunOptions) -> anyhow::Result<()> {
    let (idle_window, steps): (Duration, &[u64]) = if opts.quick {
        (Duration::from_secs(3), &[100_000, 1_000_000])
    } else {
        (Duration::from_secs(30), &[1_000_000, 5_000_000, 10_000_000])
    };
    let mut report = Report::new(
        "memory",
        format!("dev node in this process; {CLIENTS} clients appending {RECORD_BYTES}-byte records to {BOOKS} books"),
    );
    let dir = tempfile::tempdir().context("creating a temporary data directory")?;
    let config = tally_runtime::Config { data_dir: dir.path().join("data"), listen: "127.0.0.1:0".into(), ..Default::default() };
    let node = DevNode::start(config).await.context("starting a Tally dev node")?;

    // Let the node settle (its first term, the registry's first sync) before idling.
    tokio::time::sleep(Duration::from_secs(2)).await;
    eprintln!("memory: idle for {} s", idle_window.as_secs());
    let cpu = cpu_seconds()?;
    tokio::time::sleep(idle_window).await;
    let used = cpu_seconds()? - cpu;
    report.record("dev-node,idle", "idle_cpu_percent", round_to(100.0 * used / idle_window.as_secs_f64(), 2), "%")?;

    let rss_start = rss_bytes()?;
    report.record("dev-node,appends=0", "rss_mib", mib(rss_start), "MiB")?;
    let (mut appended, mut rss_before) = (0, rss_start);
    for &target in steps {
        eprintln!("memory: appending up to {target} records");
        let started = Instant::now();
        append(&node, target - appended).await?;
        let took = started.elapsed();
        let rss = rss_bytes()?;
        let case = format!("dev-node,appends={}", count_name(target));
        report.record(&case, "rss_mib", mib(rss), "MiB")?;
        report.record(&case, "rss_growth_bytes_per_record", (rss.saturating_sub(rss_start) / target) as f64, "bytes")?;
        // What this step's records added: the bounded parts fill early (the record
        // cache in the first step, the indexes' resident chunks by ~4M records), so
        // flat RSS shows in the last step.
        let step = rss.saturating_sub(rss_before) as f64 / (target - appended) as f64;
        report.record(&case, "rss_step_bytes_per_record", round_to(step, 1), "bytes")?;
        let throughput = (target - appended) as f64 / took.as_secs_f64();
        report.record(&case, "append_throughput", throughput.round(), "records/s")?;
        (appended, rss_before) = (target, rss);
    }
    reads(&node, &mut report, if opts.quick { 2_000 } else { 10_000 }).await?;
    node.shutdown().await;
    report.print_table();
    Ok(())
}

/// One client's `log.read-next` of one tag of a grown book, from a random seqnum:
/// among its oldest 90% (index chunks spilled, records long out of the record cache,
/// read from the store) and among its newest 1% (in memory), alternately.
async fn reads(node: &DevNode, report: &mut Report, count: usize) -> anyhow::Result<()> {
    let log = node.runtime.log();
    let mut ctx = Context::new();
    let (book, tag) = (BookId(1), Tag(1));
    let first = log.read_next(&mut ctx, book, tag, SeqNum::MIN).await?.context("the book has records")?.seqnum.0;
    let last = log.read_prev(&mut ctx, book, tag, SeqNum::MAX).await?.context("the book has records")?.seqnum.0;
    let span = last - first;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut old, mut recent) = (Vec::with_capacity(count), Vec::with_capacity(count));
    for i in 0..2 * count {
        let (from, samples) = if i % 2 == 0 {
            (first + rng.next() % (span / 10 * 9).max(1), &mut old)
        } else {
            (last - rng.next() % (span / 100).max(1), &mut recent)
        };
        let started = Instant::now();
        log.read_next(&mut ctx, book, tag, SeqNum(from)).await?.context("a record at or after a seqnum of the book")?;
        samples.push(micros(started.elapsed()));
    }
    for (case, samples) in [("dev-node,read-next,oldest-90%", old), ("dev-node,read-next,newest-1%", recent)] {
        let latencies = Latencies::new(samples);
        report.record(case, "read_p50_us", f64::from(latencies.percentile(50.0).expect("samples")), "us")?;
        report.record(case, "read_p99_us", f64::from(latencies.percentile(99.0).expect("samples")), "us")?;
    }
    Ok(())
}

/// `count` appends by `CLIENTS` clients, spread over the books.
async fn append(node: &DevNode, count: u64) -> anyhow::Result<()> {
    let left = Arc::new(AtomicU64::new(count));
    let data = Bytes::from(vec![b'r'; RECORD_BYTES]);
    let mut tasks = JoinSet::new();
    for c in 0..CLIENTS {
        let (log, left, data) = (node.runtime.log().clone(), left.clone(), data.clone());
        tasks.spawn(async move {
            let mut ctx = Context::new();
            let book = BookId(1 + c % BOOKS);
            while left.try_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok() {
                log.append(&mut ctx, book, &[Tag(1 + c % 4)], data.clone()).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.context("an appender panicked")??;
    }
    Ok(())
}

fn count_name(n: u64) -> String {
    match n {
        n if n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}K", n / 1_000),
        n => n.to_string(),
    }
}

fn mib(bytes: u64) -> f64 {
    round_to(bytes as f64 / f64::from(1 << 20), 1)
}

/// This process's resident set, from /proc/self/status.
pub(crate) fn rss_bytes() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .context("no VmRSS in /proc/self/status")?;
    Ok(kib * 1024)
}

/// CPU time (user and system) this process has used, from /proc/self/stat.
pub(crate) fn cpu_seconds() -> anyhow::Result<f64> {
    cpu_seconds_of("self")
}

/// The CPU time (user and system) process `pid` (or `self`) has used, in seconds.
pub(crate) fn cpu_seconds_of(pid: &str) -> anyhow::Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // The command name may hold spaces; the fields after it are plain.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).with_context(|| format!("a malformed {path}"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).with_context(|| format!("a malformed {path}"));
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    Ok((ticks(11)? + ticks(12)?) as f64 / USER_HZ)
}

/// The unit of /proc's CPU times: Linux reports them in USER_HZ, 100 per second on
/// every architecture it runs on (`getconf CLK_TCK`).
const USER_HZ: f64 = 100.0;
