//! The `invoke` suite: a 5-byte echo function invoked over HTTP, on Tally and on
//! `wasmtime serve` as the peer, both on this machine.
//!
//! ```text
//!   tally           C clients ──POST /v1/functions/hello/invoke──► DevNode gateway (in this
//!                                 process) ──► an instance of hello.wasm per invocation
//!   wasmtime-serve  C clients ──POST /──► `wasmtime serve` (a child process) ──► an
//!                                 instance of bench/guests/http-hello per request
//! ```
//!
//! Both functions return the request body; each response is checked against it. The
//! clients are tasks on a runtime of their own (two threads, as `wrk -t2`), each with
//! its own keep-alive connection (`http.rs`), in a closed loop: a client sends its next
//! request when the previous answer arrives. One client gives the latency of an
//! unloaded server, many give the throughput. Clients and servers share the machine's
//! cores, for both targets alike; a thread per client would cost a wake-up per request
//! and, at 32 clients, a share of the cores that caps the faster server.
//!
//! Like the `log` suite, the targets are measured in interleaved slices rather than one
//! after the other, so that both sample the same background load of a shared machine.
//! Then `wrk` (from Debian) loads each of the two once with 32 connections, so that
//! the suite's own clients, threads that cost a core's share, are not the only judge.
//! Last, the `probe` guest times a cache-hit `log.read-next`, a clock reading and an
//! exactly-once 1 KiB `log.append` from inside a function.
//!
//! `wasmtime serve` and the http-hello component come from `bench/setup.sh`. Where it
//! cannot install wasmtime, the suite says so and measures Tally alone.
//!
//! Tally runs the echo function of every SDK language, each as a target of its own
//! (`tally` is the Rust one, `tally-python`, `tally-ts`, `tally-go`, `tally-c` the
//! others, all built by `scripts/build-guests.sh`). For each, the suite also records
//! from Tally's `/metrics`, per client count, the means of an invocation's time in the
//! runtime, of an instantiation, of an instance's reset and of its peak linear memory,
//! the component's size and the time its deploy took
//! (compilation), and how its unloaded p50 compares with its goal: 1.5 times its
//! language's instantiation floor plus the Rust guest's overhead above its own floor.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use tally::dev::DevNode;

use crate::http::Http;
use crate::log::{closed_loop_keeping, Op};
use crate::report::{round_to, Report, Samples};
use crate::RunOptions;

/// What every request carries and every response must return.
pub(crate) const PAYLOAD: &[u8] = b"hello";
/// The client counts: latency unloaded, then throughput.
pub(crate) const CLIENTS: [usize; 2] = [1, 32];
/// The echo function in every SDK language: the case's target name, the component in
/// the guests directory, the name it is deployed under, and the language's floor, the
/// cost of instantiating it and calling `handle` in a bare wasmtime embedding as
/// measured when the SDKs were written (a JavaScript instance pays the engine's first
/// call on every invocation, since every invocation has a fresh instance).
const LANGUAGES: [(&str, &str, &str, f64); 5] = [
    ("tally", "hello", "hello", 15.0),
    ("tally-python", "python-hello", "hello-python", 700.0),
    ("tally-ts", "ts-hello", "hello-ts", 500.0),
    ("tally-go", "go-hello", "hello-go", 300.0),
    ("tally-c", "c-hello", "hello-c", 20.0),
];
/// How long one request may take before the suite gives up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a deploy may take: it compiles the component, and without the compiled
/// artifact cached (every run starts a node in a fresh directory) the 18 MB Python
/// component takes ~15 s on two cores.
const DEPLOY_TIMEOUT: Duration = Duration::from_secs(300);
/// How long `wasmtime serve` may take to compile the component and bind its port.
const PEER_START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long each part runs.
#[derive(Clone, Copy)]
pub(crate) struct Plan {
    /// Run once per target and client count before the slices, not counted:
    /// connections open, code and caches warm up.
    warmup: Duration,
    /// Each slice, per target and client count.
    slice: Duration,
    /// The start of each slice, not counted.
    slice_warmup: Duration,
    /// Slices per target and client count; `slices * slice` is a case's window.
    slices: u32,
    /// Calls per run of the `probe` guest.
    pub probe_reads: usize,
}

impl Plan {
    pub(crate) fn new(options: &RunOptions) -> Plan {
        let slice = Duration::from_millis(500);
        let slice_warmup = Duration::from_millis(20);
        if options.quick {
            Plan { warmup: Duration::from_millis(300), slice, slice_warmup, slices: 2, probe_reads: 2_000 }
        } else {
            Plan { warmup: Duration::from_secs(1), slice, slice_warmup, slices: 10, probe_reads: 20_000 }
        }
    }
}

/// A server the clients invoke the echo function on.
pub(crate) struct Target {
    /// The case's prefix: `tally` or `wasmtime-serve`.
    pub name: &'static str,
    /// Where a POST of the payload invokes the function.
    pub invoke_url: String,
    /// Header lines every request carries (each ending in `\r\n`): a cluster's token.
    pub headers: String,
}

impl Target {
    pub(crate) fn new(name: &'static str, invoke_url: String) -> Target {
        Target { name, invoke_url, headers: String::new() }
    }
}

/// The clients of one closed loop, kept across its warm-up and slices so that their
/// connections stay open: tasks on a runtime of their own ([`CLIENT_THREADS`] threads),
/// each with one keep-alive connection.
struct Clients<O> {
    invokers: Vec<O>,
}

impl<O> Clients<O> {
    fn new(count: usize, mut new_op: impl FnMut() -> anyhow::Result<O>) -> anyhow::Result<Clients<O>> {
        let invokers = (0..count).map(|_| new_op()).collect::<anyhow::Result<_>>()?;
        Ok(Clients { invokers })
    }
}

/// Threads of the clients' runtime: as many as `wrk -t2` would use.
const CLIENT_THREADS: usize = 2;

/// One client: POSTs the payload and checks the echo.
struct Invoker {
    http: Http,
    headers: String,
    name: &'static str,
}

impl Op for Invoker {
    async fn call(&mut self) -> anyhow::Result<()> {
        // The echo has no effect, so sending it again on a fresh connection is safe.
        let (status, body) = self.http.send("POST", &self.headers, PAYLOAD, true).await.with_context(|| self.name)?;
        check_echo(self.name, status, &body)
    }
}

pub(crate) fn agent() -> ureq::Agent {
    agent_with_timeout(REQUEST_TIMEOUT)
}

/// An agent for deploys, which compile (see `DEPLOY_TIMEOUT`).
pub(crate) fn deploy_agent() -> ureq::Agent {
    agent_with_timeout(DEPLOY_TIMEOUT)
}

fn agent_with_timeout(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(timeout)).build().into()
}

pub async fn run(options: &RunOptions) -> anyhow::Result<()> {
    let plan = Plan::new(options);
    let started = Instant::now();
    let guests = guests().await?;
    let probe = std::fs::read(guests.join("probe.wasm")).context("reading probe.wasm")?;
    let mut components = Vec::new();
    for (_, file, _, _) in LANGUAGES {
        let path = guests.join(format!("{file}.wasm"));
        components.push(std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?);
    }
    let peer = tokio::task::spawn_blocking(|| setup_peer(&repo_root())).await?;
    let peer = match peer {
        Ok(peer) => Some(peer),
        Err(e) => {
            eprintln!("invoke: NO PEER: wasmtime serve is not available ({e:#}); measuring Tally alone");
            None
        }
    };

    let data = tempfile::tempdir().context("creating a temporary data directory")?;
    let config = tally_runtime::Config { data_dir: data.path().join("data"), listen: "127.0.0.1:0".into(), ..Default::default() };
    let node = DevNode::start(config).await.context("starting a Tally dev node")?;
    let tally_url = node.url();
    let result = tokio::task::spawn_blocking(move || {
        let mut report = measure_all(&plan, &tally_url, &components, peer.as_ref())?;
        guest_calls(&mut report, &tally_url, &probe, plan.probe_reads)?;
        Ok::<_, anyhow::Error>(report)
    })
    .await;
    node.shutdown().await;
    let report = result??;

    report.print_table();
    eprintln!("invoke: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// What one host call costs a guest, timed inside it by the `probe` function
/// (`tests/guests/probe`): a cache-hit `log.read-next` (recorded), a reading of the
/// monotonic clock (which the exactly-once core keeps, to log it before the next
/// effect), and an exactly-once `log.append` of 1 KiB (durable when it returns; timed
/// one by one, each also logs the clock readings around it, so the mean of an untimed
/// loop of appends is measured too), each the best of three runs of `reads` calls (a
/// run is one invocation; the first warms the instance's code).
pub(crate) fn guest_calls(report: &mut Report, tally_url: &str, probe: &[u8], reads: usize) -> anyhow::Result<()> {
    let deploy_url = format!("{tally_url}/v1/functions/probe");
    let mut response = deploy_agent().put(&deploy_url).send(probe).with_context(|| format!("PUT {deploy_url}"))?;
    let status = response.status().as_u16();
    ensure!(status == 201, "deploying probe answered {status}: {}", response.body_mut().read_to_string().unwrap_or_default());
    let invoke_url = format!("{tally_url}/v1/functions/probe/invoke?book=7");
    // Appends wait for the disk: fewer of them.
    let probes: [(&str, usize, &str, [&'static str; 3]); 3] = [
        (
            "read-next",
            reads,
            "guest,log.read-next,cache-hit",
            ["guest_read_next_p50_us", "guest_read_next_p99_us", "guest_read_next_mean_us"],
        ),
        (
            "clock",
            reads,
            "guest,monotonic-clock.now",
            ["guest_clock_read_p50_us", "guest_clock_read_p99_us", "guest_clock_read_mean_us"],
        ),
        (
            "append",
            reads.min(200),
            "guest,log.append,exactly-once,1KiB",
            ["guest_append_p50_us", "guest_append_p99_us", "guest_append_mean_us"],
        ),
    ];
    for (op, count, case, metrics) in probes {
        let mut best: Option<[f64; 3]> = None;
        for _ in 0..3 {
            let mut response = agent().post(&invoke_url).send(format!("{op} {count}")).context("invoking probe")?;
            let status = response.status().as_u16();
            let body = response.body_mut().read_to_string().context("reading the probe's answer")?;
            ensure!(status == 200, "probe answered {status}: {body}");
            let ns: Vec<f64> = body.split_whitespace().map(str::parse).collect::<Result<_, _>>().context("the probe's answer")?;
            let [p50, p99, mean] = ns[..] else { bail!("the probe answered {body:?}, not three numbers") };
            if best.is_none_or(|b| p50 < b[0]) {
                best = Some([p50, p99, mean]);
            }
        }
        for (metric, ns) in metrics.into_iter().zip(best.expect("three runs")) {
            report.record(case, metric, round_to(ns / 1000.0, 3), "us")?;
        }
    }
    // Each timed append above also logs the clock readings around it; this mean over
    // an untimed loop is one append's cost.
    let count = reads.min(200);
    let mut best: Option<f64> = None;
    for _ in 0..3 {
        let mut response = agent().post(&invoke_url).send(format!("append-loop {count}")).context("invoking probe")?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string().context("reading the probe's answer")?;
        ensure!(status == 200, "probe answered {status}: {body}");
        let ns: f64 = body.trim().parse().with_context(|| format!("the probe answered {body:?}, not a number"))?;
        best = Some(best.map_or(ns, |b| b.min(ns)));
    }
    report.record(
        "guest,log.append,exactly-once,1KiB,untimed-loop",
        "guest_append_loop_mean_us",
        round_to(best.expect("three runs") / 1000.0, 3),
        "us",
    )?;
    Ok(())
}

/// Deploys the echo function of every language on Tally, starts the peer, measures
/// them all and stops the peer again.
fn measure_all(plan: &Plan, tally_url: &str, components: &[Vec<u8>], peer: Option<&Peer>) -> anyhow::Result<Report> {
    let mut targets = Vec::new();
    let mut deploys = Vec::new();
    for ((name, _, function, _), component) in LANGUAGES.iter().zip(components) {
        let deploy_url = format!("{tally_url}/v1/functions/{function}");
        let started = Instant::now();
        let mut response = deploy_agent().put(&deploy_url).send(&component[..]).with_context(|| format!("PUT {deploy_url}"))?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string().unwrap_or_default();
        ensure!(status == 201, "deploying {function} on Tally answered {status}: {body}");
        deploys.push(started.elapsed());
        targets.push(Target::new(name, format!("{tally_url}/v1/functions/{function}/invoke?book=0")));
    }

    let server = peer.map(WasmtimeServe::start).transpose()?;
    let mut title =
        format!("{}-byte echo over HTTP/1.1 keep-alive, one async connection per client; Tally dev node", PAYLOAD.len());
    if let (Some(peer), Some(server)) = (peer, &server) {
        title += &format!(" vs {} serve -Scli", peer.version);
        targets.push(Target::new("wasmtime-serve", server.url.clone()));
    }
    let mut report = Report::new("invoke", title);
    let metrics_url = format!("{tally_url}/metrics");
    // Tally's summaries around each client count's slices: the means at one client are
    // the runtime's own time, those at many add the wait for a core.
    let mut scrapes = Vec::new();
    measure(&mut report, &targets, plan, |clients, slices| {
        match slices {
            Slices::Before => scrapes.push((clients, scrape(&metrics_url)?, String::new())),
            Slices::After => scrapes.last_mut().expect("scraped before").2 = scrape(&metrics_url)?,
        }
        Ok(())
    })?;
    for (((name, _, function, floor_us), component), deploy) in LANGUAGES.iter().zip(components).zip(deploys) {
        report.record(name, "component_bytes", component.len() as f64, "bytes")?;
        report.record(name, "deploy_ms", deploy.as_millis() as f64, "ms")?;
        for (clients, before, after) in &scrapes {
            record_means(&mut report, &case(name, *clients), function, before, after)?;
        }
        // The goal: within 1.5 times the language's floor plus what the Rust guest pays
        // above its own floor (HTTP, routing, the host's bookkeeping).
        let [one, _] = CLIENTS;
        let p50 = |target: &str| report.value(&case(target, one), "invoke_p50_us").expect("measured above");
        let (_, _, _, rust_floor_us) = LANGUAGES[0];
        let overhead_us = (p50("tally") - rust_floor_us).max(0.0);
        let goal = 1.5 * (floor_us + overhead_us);
        report.record(&case(name, one), "p50_goal_ratio", round_to(p50(name) / goal, 2), "ratio")?;
    }
    if server.is_some() {
        record_ratios(&mut report)?;
    }
    external_load(&mut report, &targets, plan)?;
    Ok(report)
}

/// Connections of the external load generator's run.
const WRK_CONNECTIONS: usize = 32;

/// One run of an external load generator per target, so that the suite's own clients
/// are not the only judge: `wrk` (Debian's, installed when missing) with
/// `WRK_CONNECTIONS` keep-alive connections on two threads, POSTing the payload, for as
/// long as a case's slices. Skipped, with a message, where wrk cannot be had.
pub(crate) fn external_load(report: &mut Report, targets: &[Target], plan: &Plan) -> anyhow::Result<()> {
    let wrk = match crate::peers::debian_program("wrk", "wrk") {
        Ok(wrk) => wrk,
        Err(e) => {
            eprintln!("invoke: NO WRK: {e:#}; the external load run is skipped");
            return Ok(());
        }
    };
    let mut script = tempfile::NamedTempFile::new().context("creating wrk's script")?;
    let body = std::str::from_utf8(PAYLOAD).expect("the payload is text");
    writeln!(script, "wrk.method = \"POST\"\nwrk.body = \"{body}\"").context("writing wrk's script")?;
    let seconds = (plan.slice * plan.slices).as_secs().max(1);
    for target in targets.iter().filter(|t| matches!(t.name, "tally" | "wasmtime-serve")) {
        eprintln!("invoke: wrk on {} for {seconds} s", target.name);
        let out = Command::new(&wrk)
            .args(["-t2", &format!("-c{WRK_CONNECTIONS}"), &format!("-d{seconds}s"), "--latency", "-s"])
            .arg(script.path())
            .arg(&target.invoke_url)
            .output()
            .context("running wrk")?;
        let text = String::from_utf8_lossy(&out.stdout);
        ensure!(out.status.success(), "wrk failed on {}: {text}{}", target.name, String::from_utf8_lossy(&out.stderr));
        ensure!(!text.contains("Non-2xx"), "{} answered errors under wrk: {text}", target.name);
        let field = |prefix: &str| wrk_field(&text, prefix);
        let throughput: f64 = field("Requests/sec:").and_then(|v| v.parse().ok()).with_context(|| format!("wrk said {text}"))?;
        let case = format!("{},connections={WRK_CONNECTIONS},wrk", target.name);
        report.record(&case, "wrk_throughput", throughput.round(), "requests/s")?;
        for (metric, percent) in [("wrk_p50_us", "50%"), ("wrk_p99_us", "99%")] {
            let latency = field(percent).as_deref().and_then(wrk_micros).with_context(|| format!("wrk said {text}"))?;
            report.record(&case, metric, latency.round(), "us")?;
        }
    }
    let value = |target: &str| report.value(&format!("{target},connections={WRK_CONNECTIONS},wrk"), "wrk_throughput");
    if let (Some(tally), Some(peer)) = (value("tally"), value("wasmtime-serve")) {
        let case = format!("tally/wasmtime-serve,connections={WRK_CONNECTIONS},wrk");
        report.record(&case, "throughput_ratio", round_to(tally / peer, 2), "ratio")?;
    }
    Ok(())
}

/// What follows `prefix` on the first line of wrk's output that starts with it (after
/// indentation), trimmed.
pub(crate) fn wrk_field(text: &str, prefix: &str) -> Option<String> {
    text.lines().find_map(|l| l.trim().strip_prefix(prefix).map(str::trim).map(str::to_owned))
}

/// A latency as wrk prints it (`152.00us`, `1.23ms`, `2.00s`), in microseconds.
pub(crate) fn wrk_micros(text: &str) -> Option<f64> {
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e3)
    } else {
        (text.strip_suffix('s')?, 1e6)
    };
    number.trim().parse::<f64>().ok().map(|n| n * scale)
}

/// Where `measure` stands, for its hook: before a client count's measured slices (its
/// warm-up done) or after them.
pub(crate) enum Slices {
    Before,
    After,
}

/// Runs the closed loops of both targets at every client count in interleaved slices
/// and records throughput and latencies; `hook` runs before and after each client
/// count's measured slices.
pub(crate) fn measure(
    report: &mut Report,
    targets: &[Target],
    plan: &Plan,
    hook: impl FnMut(usize, Slices) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let names: Vec<&str> = targets.iter().map(|t| t.name).collect();
    let new_op = |i: usize| {
        Ok(Invoker { http: Http::new(&targets[i].invoke_url)?, headers: targets[i].headers.clone(), name: targets[i].name })
    };
    measure_ops(report, "invoke", &names, plan, new_op, hook)
}

/// [`measure`] with clients of any kind: `new_op(i)` makes a client of target `i` (of
/// `names`, the cases' prefixes); `bench` prefixes the progress lines.
pub(crate) fn measure_ops<O: Op>(
    report: &mut Report,
    bench: &str,
    names: &[&str],
    plan: &Plan,
    new_op: impl Fn(usize) -> anyhow::Result<O>,
    mut hook: impl FnMut(usize, Slices) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(CLIENT_THREADS)
        .thread_name("invoke-client")
        .enable_all()
        .build()
        .context("starting the clients' runtime")?;
    for clients in CLIENTS {
        eprintln!("{bench}: clients={clients}: {} interleaved slices of {} ms per target", plan.slices, plan.slice.as_millis());
        let mut pools: Vec<Clients<O>> =
            (0..names.len()).map(|i| Clients::new(clients, || new_op(i))).collect::<anyhow::Result<_>>()?;
        for pool in &mut pools {
            closed_loop(&rt, pool, plan.warmup, Duration::ZERO)?;
        }
        hook(clients, Slices::Before)?;
        let mut samples: Vec<Samples> = names.iter().map(|_| Samples::default()).collect();
        for round in 0..plan.slices as usize {
            for k in 0..names.len() {
                // Rotated, so that no target always follows the same one.
                let i = (round + k) % names.len();
                samples[i].extend(closed_loop(&rt, &mut pools[i], plan.slice_warmup, plan.slice - plan.slice_warmup)?);
            }
        }
        hook(clients, Slices::After)?;
        for (name, samples) in names.iter().zip(samples) {
            let case = case(name, clients);
            let (throughput, latencies) = samples.finish();
            report.record(&case, "invoke_throughput", throughput.round(), "requests/s")?;
            for (metric, percent) in [("invoke_p50_us", 50.0), ("invoke_p99_us", 99.0)] {
                let value = latencies.percentile(percent).context("a slice completed no request")?;
                report.record(&case, metric, f64::from(value), "us")?;
            }
        }
    }
    Ok(())
}

pub(crate) fn case(target: &str, clients: usize) -> String {
    format!("{target},clients={clients}")
}

/// Every client of `pool` invokes its target in a closed loop for `warmup + window`,
/// on the clients' runtime `rt`; the requests answered in `window` are counted.
fn closed_loop<O: Op>(
    rt: &tokio::runtime::Runtime,
    pool: &mut Clients<O>,
    warmup: Duration,
    window: Duration,
) -> anyhow::Result<Samples> {
    let invokers = std::mem::take(&mut pool.invokers);
    let (samples, invokers) = rt.block_on(closed_loop_keeping(invokers, warmup, window))?;
    pool.invokers = invokers;
    Ok(samples)
}

/// One request, checked: status 200 and the payload echoed.
fn invoke_once(agent: &ureq::Agent, target: &Target) -> anyhow::Result<()> {
    let mut response =
        agent.post(&target.invoke_url).send(PAYLOAD).with_context(|| format!("{}: POST {}", target.name, target.invoke_url))?;
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_vec().with_context(|| format!("{}: reading a response", target.name))?;
    check_echo(target.name, status, &body)
}

/// An answer of the echo function: status 200 and the payload.
pub(crate) fn check_echo(name: &str, status: u16, body: &[u8]) -> anyhow::Result<()> {
    if status != 200 || body != PAYLOAD {
        bail!(
            "{name} answered {status} with {:?}, not 200 with {:?}",
            String::from_utf8_lossy(body),
            String::from_utf8_lossy(PAYLOAD)
        );
    }
    Ok(())
}

/// One scrape of Tally's `/metrics`.
pub(crate) fn scrape(url: &str) -> anyhow::Result<String> {
    let mut response = agent().get(url).call().with_context(|| format!("GET {url}"))?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().with_context(|| format!("reading {url}"))?;
    ensure!(status == 200, "GET {url} answered {status}: {text}");
    Ok(text)
}

/// One function's means over the run, from its summaries in two scrapes: an
/// invocation's wall time inside the runtime (to its answer), an instantiation's, the
/// reset of an ended instance's slot (after the answer), and an instance's peak linear
/// memory.
fn record_means(report: &mut Report, case: &str, function: &str, before: &str, after: &str) -> anyhow::Result<()> {
    let mean = |summary: &str| {
        let get = |text: &str, part: &str| metric_value(text, &format!("{summary}_{part}"), function);
        // A series appears with its first sample, so one missing before the run but
        // there after it started at zero.
        let (sum0, count0) = (get(before, "sum").unwrap_or(0.0), get(before, "count").unwrap_or(0.0));
        let (sum1, count1) = (get(after, "sum")?, get(after, "count")?);
        (count1 > count0).then(|| (sum1 - sum0) / (count1 - count0))
    };
    let mut any = false;
    for (summary, metric, scale, unit) in [
        ("tally_invocation_seconds", "invocation_mean_us", 1e6, "us"),
        ("tally_instantiate_seconds", "instantiate_mean_us", 1e6, "us"),
        ("tally_instance_reset_seconds", "reset_mean_us", 1e6, "us"),
        ("tally_instance_memory_bytes", "instance_memory_mean_kib", 1.0 / 1024.0, "KiB"),
    ] {
        if let Some(mean) = mean(summary) {
            report.record(case, metric, round_to(mean * scale, 1), unit)?;
            any = true;
        }
    }
    if !any {
        eprintln!("invoke: MISSING: /metrics has no summaries of {function} for the run");
    }
    Ok(())
}

/// Tally against the peer: latency unloaded, throughput loaded; below 1 Tally is faster
/// for the latency, above 1 for the throughput.
fn record_ratios(report: &mut Report) -> anyhow::Result<()> {
    let [one, many] = CLIENTS;
    let value =
        |target: &str, clients: usize, metric: &str| report.value(&case(target, clients), metric).expect("measured above");
    let p50 = value("tally", one, "invoke_p50_us") / value("wasmtime-serve", one, "invoke_p50_us");
    let throughput = value("tally", many, "invoke_throughput") / value("wasmtime-serve", many, "invoke_throughput");
    report.record(&format!("tally/wasmtime-serve,clients={one}"), "p50_ratio", round_to(p50, 2), "ratio")?;
    report.record(&format!("tally/wasmtime-serve,clients={many}"), "throughput_ratio", round_to(throughput, 2), "ratio")?;
    Ok(())
}

/// The sample of the metric `name` with the label `function="<function>"` in a
/// Prometheus text exposition; `None` if there is none.
pub(crate) fn metric_value(text: &str, name: &str, function: &str) -> Option<f64> {
    let prefix = format!("{name}{{function=\"{function}\"}} ");
    text.lines().find_map(|line| line.strip_prefix(&prefix)?.trim().parse().ok())
}

/// Builds the guests off the async runtime; the directory holding them.
pub(crate) async fn guests() -> anyhow::Result<PathBuf> {
    tokio::task::spawn_blocking(|| build_guests(&repo_root())).await?
}

/// The repository's root directory.
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("bench/ is inside the repository").to_owned()
}

/// Runs `scripts/build-guests.sh`; returns the directory holding `hello.wasm`.
pub(crate) fn build_guests(root: &Path) -> anyhow::Result<PathBuf> {
    eprintln!("bench: building the guests (scripts/build-guests.sh)");
    let stdout = run_script(root, "scripts/build-guests.sh")?;
    let dir = stdout.lines().last().context("scripts/build-guests.sh printed no directory")?;
    Ok(PathBuf::from(dir))
}

/// What `bench/setup.sh` provides for the peer.
#[derive(Clone)]
pub(crate) struct Peer {
    wasmtime: PathBuf,
    /// `wasmtime --version`, for the table's title.
    pub version: String,
    pub http_hello: PathBuf,
}

/// Runs `bench/setup.sh`, which installs wasmtime and builds the http-hello component.
pub(crate) fn setup_peer(root: &Path) -> anyhow::Result<Peer> {
    eprintln!("invoke: setting up the peer (bench/setup.sh; a first run installs wasmtime)");
    let stdout = run_script(root, "bench/setup.sh")?;
    let field = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(PathBuf::from)
            .with_context(|| format!("bench/setup.sh printed no {key}="))
    };
    let wasmtime = field("wasmtime")?;
    let output = Command::new(&wasmtime).arg("--version").output().with_context(|| format!("running {}", wasmtime.display()))?;
    ensure!(output.status.success(), "{} --version failed", wasmtime.display());
    let version = String::from_utf8_lossy(&output.stdout).split_whitespace().take(2).collect::<Vec<_>>().join(" ");
    Ok(Peer { wasmtime, version, http_hello: field("http_hello")? })
}

/// Runs a bash script of the repository with stderr passed through; returns its stdout.
fn run_script(root: &Path, script: &str) -> anyhow::Result<String> {
    let output = Command::new("bash")
        .arg(root.join(script))
        .current_dir(root)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {script}"))?;
    ensure!(output.status.success(), "{script} failed ({})", output.status);
    String::from_utf8(output.stdout).with_context(|| format!("{script} printed something other than UTF-8"))
}

/// A `wasmtime serve` child process; killed when dropped.
pub(crate) struct WasmtimeServe {
    child: Child,
    /// Where it serves, as it announced.
    pub url: String,
}

impl WasmtimeServe {
    /// Starts it on a free loopback port and waits until it serves. `-Scli`: Rust's
    /// standard library on wasm32-wasip2 imports wasi:cli/environment, which `wasmtime
    /// serve` links only with the CLI interfaces enabled.
    pub(crate) fn start(peer: &Peer) -> anyhow::Result<WasmtimeServe> {
        let mut child = Command::new(&peer.wasmtime)
            .args(["serve", "-Scli", "--addr", "127.0.0.1:0"])
            .arg(&peer.http_hello)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} serve", peer.wasmtime.display()))?;
        let stderr = child.stderr.take().expect("piped");
        // The port it bound is only in its first line on stderr. The thread then passes
        // the rest of that stderr through, and ends when the process does.
        let (announced, url) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("wasmtime-serve-stderr".into())
            .spawn(move || {
                let mut announced = Some(announced);
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { return };
                    match line.strip_prefix("Serving HTTP on ") {
                        Some(url) if announced.is_some() => {
                            let _ = announced.take().expect("checked").send(url.trim().to_owned());
                        }
                        _ => {
                            let _ = writeln!(std::io::stderr(), "wasmtime serve: {line}");
                        }
                    }
                }
            })
            .context("spawning the stderr reader")?;
        let mut server = WasmtimeServe { child, url: String::new() };
        server.url = match url.recv_timeout(PEER_START_TIMEOUT) {
            Ok(url) => url,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                bail!("wasmtime serve did not announce its address within {PEER_START_TIMEOUT:?}")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = server.child.wait().context("waiting for wasmtime serve")?;
                bail!("wasmtime serve exited ({status}) before serving")
            }
        };
        invoke_once(&agent(), &Target::new("wasmtime-serve", server.url.clone()))
            .context("the first request to wasmtime serve")?;
        eprintln!("invoke: {} serves {} at {}", peer.version, peer.http_hello.display(), server.url);
        Ok(server)
    }
}

impl Drop for WasmtimeServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_latencies_are_read_in_their_units() {
        assert_eq!(wrk_micros("152.00us"), Some(152.0));
        assert_eq!(wrk_micros("1.25ms"), Some(1250.0));
        assert_eq!(wrk_micros("2.00s"), Some(2_000_000.0));
        assert_eq!(wrk_micros("fast"), None);
    }

    #[test]
    fn metric_values_are_read_by_function() {
        let text = "\
# TYPE tally_instantiate_seconds summary
tally_instantiate_seconds_sum{function=\"hello\"} 0.5
tally_instantiate_seconds_sum{function=\"hello-go\"} 0.25
tally_instantiate_seconds_count{function=\"hello\"} 10
";
        assert_eq!(metric_value(text, "tally_instantiate_seconds_sum", "hello"), Some(0.5));
        assert_eq!(metric_value(text, "tally_instantiate_seconds_sum", "hello-go"), Some(0.25));
        assert_eq!(metric_value(text, "tally_instantiate_seconds_count", "hello-go"), None);
        assert_eq!(metric_value(text, "tally_instantiate_seconds", "hello"), None);
    }
}
