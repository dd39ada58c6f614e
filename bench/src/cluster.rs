//! The `cluster` suite: the shared log as a cluster, and what a reconfiguration costs.
//!
//! ```text
//!   appends, L logs   C clients ──append──► engines (2) ──► storage ×3 (n_data=3), sequencers ×3
//!                     on 64 books spread over the L physical logs (L = 1, 2, 4)
//!   appends, dev      the same clients on `tally dev`'s shape: 1 sequencer, 1 storage
//!                     node, 1 engine, n_data=1
//!   reconfiguration   32 clients appending while storage node 0 of 4 is killed (n_data=3):
//!                     the latency timeline in 50 ms buckets, the time from the kill to the
//!                     first append acknowledged in the new term, and to normal latency
//!   invocations       C clients ──POST hello──► gateway process ──► 1 or 2 function node
//!                     processes (`tally cluster up`, the release binary, each cluster
//!                     with its own etcd, PostgreSQL, sequencer and storage node), and
//!                     straight to the one function node, to see what the gateway costs
//! ```
//!
//! Every node has its own QUIC endpoint and RocksDB directory in this process (the
//! loopback cluster that the multi-process `tally cluster` runs as one process per
//! node), all on this machine's one disk: more physical logs add sequencing and
//! metalog parallelism, not disks. The append cases run in interleaved slices, so each
//! samples the same disk. Boki (§7, Figure 11) reports ~16 ms for its reconfiguration
//! protocol and ~100 ms until latency is normal again; here the failure is detected
//! by missed heartbeats (the controller's failure timeout, 1 s by default, here 300 ms).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use bytes::Bytes;
use tally::cluster::{wait_healthy, ClusterDir, Shape as ClusterShape};
use tally_logsvc::store::FsyncPolicy;
use tally_logsvc::{BookId, Cluster, ClusterBuilder, Context, LogClient, SeqNum, Term};
use tempfile::TempDir;

use crate::log::{closed_loop, progress, record_percentiles, Op};
use crate::report::{round_to, Report, Samples};
use crate::RunOptions;

const RECORD_BYTES: usize = 1024;
const BOOKS: u64 = 64;
const CLIENTS: usize = 64;
const LOGS: [u8; 3] = [1, 2, 4];
const RECONFIG_CLIENTS: usize = 32;
const FAILURE_TIMEOUT_US: u64 = 300_000;
const BUCKET: Duration = Duration::from_millis(50);

/// Appends 1 KiB records to one book with its own context; the clients of a case
/// spread over the books, hence over the physical logs, and over the engines.
struct BookAppender {
    client: LogClient,
    book: BookId,
    ctx: Context,
    data: Bytes,
}

impl Op for BookAppender {
    async fn call(&mut self) -> anyhow::Result<()> {
        self.client.append(&mut self.ctx, self.book, &[], self.data.clone()).await.context("append")?;
        Ok(())
    }
}

fn appenders(cluster: &Cluster, engines: usize, clients: usize) -> Vec<BookAppender> {
    let data = Bytes::from(vec![7u8; RECORD_BYTES]);
    (0..clients)
        .map(|c| BookAppender {
            client: cluster.client(c % engines),
            book: BookId(1 + c as u64 % BOOKS),
            ctx: Context::new(),
            data: data.clone(),
        })
        .collect()
}

struct Shape {
    case: String,
    cluster: Cluster,
    engines: usize,
    _dir: TempDir,
}

async fn start(case: String, configure: impl FnOnce(&mut ClusterBuilder)) -> anyhow::Result<Shape> {
    let dir = tempfile::tempdir().context("creating the cluster directory")?;
    let mut b = ClusterBuilder::new(dir.path());
    b.sequencers = 3;
    b.storage_nodes = 3;
    b.engines = 2;
    b.n_data = 3;
    b.n_meta = 3;
    b.fsync = FsyncPolicy::default();
    configure(&mut b);
    let engines = b.engines as usize;
    progress(&format!("starting {case}"));
    let cluster = b.build().await.context("starting the loopback cluster")?;
    Ok(Shape { case, cluster, engines, _dir: dir })
}

pub async fn run(options: &RunOptions) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut report = Report::new(
        "cluster",
        format!(
            "1 KiB records on {BOOKS} books, {CLIENTS} clients, fsync {}; loopback clusters, one disk",
            FsyncPolicy::default()
        ),
    );
    let (slices, slice) = if options.quick { (2, Duration::from_millis(400)) } else { (8, Duration::from_millis(600)) };

    let mut shapes = Vec::new();
    for logs in LOGS {
        shapes.push(start(format!("append_logs_{logs}_n_data_3"), |b| b.n_logs = logs).await?);
    }
    shapes.push(
        start("append_dev_shape_n_data_1".into(), |b| {
            (b.sequencers, b.storage_nodes, b.engines, b.n_meta, b.n_data) = (1, 1, 1, 1, 1);
        })
        .await?,
    );
    // Interleaved slices, rotating the order each round.
    let mut samples: Vec<Samples> = shapes.iter().map(|_| Samples::default()).collect();
    for s in &shapes {
        closed_loop(appenders(&s.cluster, s.engines, CLIENTS), Duration::from_millis(300), slice).await?;
    }
    for round in 0..slices {
        for k in 0..shapes.len() {
            let i = (k + round) % shapes.len();
            let s = &shapes[i];
            let got = closed_loop(appenders(&s.cluster, s.engines, CLIENTS), Duration::from_millis(50), slice).await?;
            samples[i].extend(got);
        }
    }
    for (s, samples) in shapes.iter().zip(samples) {
        let (throughput, latencies) = samples.finish();
        report.record(&s.case, "append_throughput", round_to(throughput, 0), "records/s")?;
        record_percentiles(&mut report, &s.case, ["append_p50", "append_p99"], &latencies)?;
    }
    for s in shapes {
        s.cluster.shutdown().await;
    }
    let one = report.value("append_logs_1_n_data_3", "append_throughput").expect("measured");
    for logs in LOGS {
        let case = format!("append_logs_{logs}_n_data_3");
        let t = report.value(&case, "append_throughput").expect("measured");
        report.record(&case, "vs_one_log_ratio", round_to(t / one, 3), "ratio")?;
    }

    reconfiguration(&mut report).await?;
    let plan = crate::invoke::Plan::new(options);
    let report = tokio::task::spawn_blocking(move || invocations(report, &plan)).await??;
    report.print_table();
    eprintln!("cluster: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Kills a storage node under load and follows the latency of the appends that go on.
async fn reconfiguration(report: &mut Report) -> anyhow::Result<()> {
    let mut s = start("reconfiguration".into(), |b| {
        b.storage_nodes = 4;
        b.failure_timeout_us = FAILURE_TIMEOUT_US;
    })
    .await?;
    let term = s.cluster.configuration().map_or(Term(0), |c| c.current().term);
    // (completed at, latency, term of the seqnum) of every append.
    let log: Arc<Mutex<Vec<(Instant, Duration, Term)>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();
    for a in appenders(&s.cluster, s.engines, RECONFIG_CLIENTS) {
        let (log, stop) = (log.clone(), stop.clone());
        let mut a = a;
        tasks.spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let sent = Instant::now();
                let seqnum: SeqNum = a.client.append(&mut a.ctx, a.book, &[], a.data.clone()).await?;
                log.lock().expect("not poisoned").push((Instant::now(), sent.elapsed(), seqnum.term()));
            }
            anyhow::Ok(())
        });
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed_at = Instant::now();
    s.cluster.kill_storage(0).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    while let Some(t) = tasks.join_next().await {
        t.context("an appender panicked")??;
    }
    let log = std::mem::take(&mut *log.lock().expect("not poisoned"));
    let before: Vec<u32> = log
        .iter()
        .filter(|(at, _, _)| *at < killed_at && *at + Duration::from_secs(1) > killed_at)
        .map(|(_, l, _)| l.as_micros() as u32)
        .collect();
    let normal = crate::report::Latencies::new(before);
    let normal_p50 = normal.percentile(50.0).context("appends before the kill")?;
    let first_new = log.iter().filter(|(_, _, t)| *t > term).map(|(at, _, _)| *at).min().context("no append in a new term")?;
    // Normal again: the first 50 ms bucket after the new term whose p50 is within 1.5x
    // of the p50 before the kill.
    let mut normal_at = None;
    let mut timeline = String::new();
    let mut bucket_start = killed_at - Duration::from_millis(500);
    let end = log.iter().map(|(at, _, _)| *at).max().unwrap_or(killed_at);
    while bucket_start < end {
        let mut lat: Vec<u32> = log
            .iter()
            .filter(|(at, _, _)| *at >= bucket_start && *at < bucket_start + BUCKET)
            .map(|(_, l, _)| l.as_micros() as u32)
            .collect();
        let n = lat.len();
        lat.sort_unstable();
        let p50 = lat.get(n / 2).copied();
        let offset = bucket_start.saturating_duration_since(killed_at).as_millis() as i64
            - killed_at.saturating_duration_since(bucket_start).as_millis() as i64;
        timeline += &format!("  {offset:>6} ms: {n:>5} acks, p50 {}\n", p50.map_or("-".into(), |p| format!("{p} us")));
        if normal_at.is_none() && bucket_start >= first_new && p50.is_some_and(|p| f64::from(p) <= 1.5 * f64::from(normal_p50)) {
            normal_at = Some(bucket_start + BUCKET);
        }
        bucket_start += BUCKET;
    }
    eprintln!("cluster: latency timeline around the kill of a storage node (t=0):\n{timeline}");
    let case = "reconfiguration_storage_kill";
    report.record(case, "p50_before_kill", f64::from(normal_p50), "us")?;
    report.record(case, "kill_to_new_term_ack", round_to((first_new - killed_at).as_secs_f64() * 1000.0, 1), "ms")?;
    let normal_ms = normal_at.map_or(f64::NAN, |t| round_to((t - killed_at).as_secs_f64() * 1000.0, 1));
    report.record(case, "kill_to_normal_latency", normal_ms, "ms")?;
    report.record(case, "failure_timeout", FAILURE_TIMEOUT_US as f64 / 1000.0, "ms")?;
    s.cluster.shutdown().await;
    Ok(())
}

/// A process cluster of `tally cluster up` that is taken down when dropped.
pub(crate) struct Processes {
    pub(crate) cluster: ClusterDir,
    _dir: TempDir,
}

impl Processes {
    fn up(tally: &Path, functions: u32) -> anyhow::Result<Processes> {
        // Plain HTTP: the suite's clients speak HTTP/1.1 over raw sockets.
        let shape = ClusterShape {
            controllers: 1,
            sequencers: 1,
            storage: 1,
            functions,
            gateways: 1,
            plain_http: true,
            ..ClusterShape::default()
        };
        Processes::up_shaped(tally, &shape)
    }

    /// A cluster of `shape` (its HTTP API in the clear: the suites' clients speak
    /// HTTP/1.1 over raw sockets).
    pub(crate) fn up_shaped(tally: &Path, shape: &ClusterShape) -> anyhow::Result<Processes> {
        ensure!(shape.plain_http, "the suites' clients speak plain HTTP");
        let dir = tempfile::tempdir().context("creating the cluster directory")?;
        let cluster = ClusterDir::init(dir.path(), "bench", "127.0.0.1", shape)?;
        progress(&format!("starting a process cluster with {} function node(s)", shape.functions));
        cluster.up(tally)?;
        wait_healthy(&cluster, Duration::from_secs(90))?;
        Ok(Processes { cluster, _dir: dir })
    }

    /// `Authorization: Bearer <the admin token>`.
    pub(crate) fn bearer(&self) -> anyhow::Result<String> {
        let token = std::fs::read_to_string(self.cluster.dir.join("ca").join("admin.token"))?;
        Ok(format!("Bearer {}", token.trim()))
    }

    pub(crate) fn http(&self, role: &str) -> anyhow::Result<String> {
        let status = self.cluster.status()?;
        let p = status.iter().find(|p| p.name.starts_with(role)).with_context(|| format!("no {role} process"))?;
        Ok(format!("http://{}", p.http.as_ref().context("no HTTP address")?))
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        let _ = self.cluster.down(Duration::from_secs(10));
    }
}

/// The release `tally` binary, next to this one: built if it is missing or stale.
pub(crate) fn release_tally() -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    progress("building the release tally binary");
    let status = Command::new(cargo).args(["build", "--release", "--quiet", "-p", "tally", "--bin", "tally"]).status()?;
    ensure!(status.success(), "cargo build --release --bin tally failed");
    let exe = std::env::current_exe()?;
    let tally = exe.parent().context("the bench binary's directory")?.join("tally");
    ensure!(tally.exists(), "{} is missing after the build", tally.display());
    Ok(tally)
}

/// Invocations of the echo function through a gateway to one function node and to two,
/// and straight to the one, in interleaved slices.
fn invocations(mut report: Report, plan: &crate::invoke::Plan) -> anyhow::Result<Report> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("bench/ is inside the repository");
    let hello = std::fs::read(crate::invoke::build_guests(root)?.join("hello.wasm"))?;
    let tally = release_tally()?;
    let one = Processes::up(&tally, 1)?;
    let two = Processes::up(&tally, 2)?;
    let mut targets = Vec::new();
    for (name, p, role) in
        [("gateway-1-function", &one, "gateway"), ("gateway-2-functions", &two, "gateway"), ("function-direct", &one, "function")]
    {
        let url = p.http(role)?;
        let bearer = p.bearer()?;
        if role == "gateway" {
            let deploy = crate::invoke::deploy_agent().put(format!("{url}/v1/functions/hello")).header("authorization", &bearer);
            let mut r = deploy.send(&hello[..])?;
            ensure!(r.status().as_u16() == 201, "deploying hello: {}", r.body_mut().read_to_string().unwrap_or_default());
        }
        let mut target = crate::invoke::Target::new(name, format!("{url}/v1/functions/hello/invoke?book=0"));
        target.headers = format!("Authorization: {bearer}\r\n");
        targets.push(target);
    }
    crate::invoke::measure(&mut report, &targets, plan, |_, _| Ok(()))?;
    for clients in [1, 32] {
        let value = |name: &str| report.value(&format!("{name},clients={clients}"), "invoke_throughput").expect("measured");
        let ratio = value("gateway-2-functions") / value("gateway-1-function");
        report.record(&format!("gateway-2-functions,clients={clients}"), "vs_one_function_ratio", round_to(ratio, 3), "ratio")?;
    }
    Ok(report)
}
