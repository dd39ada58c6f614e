//! The `observe` suite: what the latency breakdown and traces cost an invocation, and
//! how fast the inspection APIs answer on a book of about a million logged steps.
//!
//! ```text
//!   instrumentation  the same clients ──POST invoke──► three `tally dev` processes, in
//!                    interleaved slices (1 and 32 clients, as the `invoke` suite's):
//!     compiled-out   the release binary built with `tally-host/unobserved` (a target
//!                    directory of its own): no probe, no breakdown, no Server-Timing
//!     off            the release binary: every invocation's breakdown, no export
//!     on             the same with --otlp-endpoint: every execution's spans posted as
//!                    OTLP/HTTP protobuf ──► a receiver in this process that counts them
//!     on `hello` (the echo, book 0) and `bank` (`transfer a b 1`, book 1)
//!
//!   inspection       one `tally dev` (release), `bank` on book 1: accounts opened, then
//!                    transfers between them until the book holds ~1M logged steps
//!                    (20K with --quick); then, several runs of each (median, max):
//!     POST /v1/sql   the steps of one invocation, the invocations after a recent
//!                    seqnum, the accounts table AS OF a seqnum from the middle of the load
//!     GET /v1/invocations/{id}/steps          what `tally steps` calls
//!     GET /v1/books/1/tables/accounts/why     what `tally why` calls
//! ```
//!
//! The three nodes of the first part are child processes alike (a node in this process
//! would share its allocator and runtime with the clients), each over a data directory
//! and a CLI configuration directory of its own, on loopback. The goals: `off` within
//! noise of `compiled-out` (at most 1% less throughput), `on` at least 95% of `off`.
//! The receiver counts the bytes of the bodies it is posted and their spans; divided by
//! the invocations the `on` node counted in its `/metrics`, they are the telemetry an
//! invocation costs. Each workload first sends a few requests one at a time to every
//! node: each answer of `off` and `on` must carry `Server-Timing` and no answer of
//! `compiled-out` may; those requests also give the spans of an unloaded invocation.
//! The telemetry is then counted per client count, its warm-up and slices together:
//! the exporter drops spans when its bounded queue is full, which only load shows, as a
//! `spans_kept_ratio` below 1.
//!
//! The book of the second part is filled by 32 clients over keep-alive connections;
//! the steps an open and a transfer log are counted on the first of each, and set how
//! many transfers make the million. Transfers with idempotency keys mark the middle of
//! the load, a point shortly before its end and its end, so that their IDs (derived
//! from the keys) and seqnums are known. The timings are the client's wall time of each
//! request, on a node that is idle but for them. The accounts table holds 100K keys
//! (1K with --quick), the size of book the `AS OF` goal names; the SQL engine answers
//! at most `rows_max` rows (10K by default), so the same query's `count(*)` runs beside
//! it to read every key. Last, one `count(*)` of the whole book's steps checks the
//! count.

use std::io::{BufRead as _, BufReader};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use tally_durable::InstanceId;
use tempfile::TempDir;

use crate::http::Http;
use crate::invoke::{case, check_echo, deploy_agent, measure_ops, repo_root, scrape, Plan, Slices, CLIENTS, PAYLOAD};
use crate::log::Op;
use crate::report::{micros, round_to, Latencies, Report};
use crate::RunOptions;

mod inspection;
mod receiver;

use inspection::{inspection, BookSize};

use receiver::*;

/// The three builds and flags of the first part, in the order of each workload's names.
const TARGETS: [&str; 3] = ["compiled-out", "off", "on"];
/// The feature that compiles the breakdown and the traces out.
const UNOBSERVED: &str = "tally-host/unobserved";
/// Requests each node answers one at a time before a workload's slices.
const SANITY_REQUESTS: usize = 20;
/// How long a `tally dev` process may take to print its URL.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Quiet time after which the receiver has all the spans of what came before: more
/// than two of the exporter's ticks (500 ms).
const SETTLE_QUIET: Duration = Duration::from_millis(1_200);
/// The longest the receiver waits to settle.
const SETTLE_MAX: Duration = Duration::from_secs(30);
/// The largest OTLP request the receiver reads (the exporter's batches are 1024 spans).
const OTLP_BODY_BYTES_MAX: usize = 64 << 20;
/// Concurrent clients that fill the book of the second part.
const LOAD_CLIENTS: usize = 32;
/// Invocations after the `recent` marker, which the invocations query counts.
const RECENT_INVOCATIONS: u64 = 1_000;
/// The goals of the inspection calls.
const SQL_GOAL_MS: f64 = 1_000.0;
const API_GOAL_MS: f64 = 50.0;

/// A workload of the first part.
#[derive(Clone, Copy)]
enum Workload {
    /// The echo function, book 0.
    Hello,
    /// `transfer a b 1` on book 1, after `open a 100` and `open b 100`.
    Bank,
}

impl Workload {
    fn function(self) -> &'static str {
        match self {
            Workload::Hello => "hello",
            Workload::Bank => "bank",
        }
    }

    /// The cases' prefixes, one per target.
    fn names(self) -> [&'static str; 3] {
        match self {
            Workload::Hello => ["hello/compiled-out", "hello/off", "hello/on"],
            Workload::Bank => ["bank/compiled-out", "bank/off", "bank/on"],
        }
    }

    fn invoke_url(self, url: &str) -> String {
        match self {
            Workload::Hello => format!("{url}/v1/functions/hello/invoke?book=0"),
            Workload::Bank => format!("{url}/v1/functions/bank/invoke?book=1"),
        }
    }

    fn input(self) -> &'static [u8] {
        match self {
            Workload::Hello => PAYLOAD,
            Workload::Bank => b"transfer a b 1",
        }
    }

    /// An answer of the workload: the echo, or `ok <from> <to>`.
    fn check(self, name: &str, status: u16, body: &[u8]) -> anyhow::Result<()> {
        match self {
            Workload::Hello => check_echo(name, status, body),
            Workload::Bank => {
                ensure!(
                    status == 200 && body.starts_with(b"ok "),
                    "{name} answered {status} with {:?}, not 200 with `ok <from> <to>`",
                    String::from_utf8_lossy(body)
                );
                Ok(())
            }
        }
    }
}

/// One client of the first part: POSTs the workload's input and checks the answer.
struct Caller {
    http: Http,
    workload: Workload,
    name: &'static str,
}

impl Op for Caller {
    async fn call(&mut self) -> anyhow::Result<()> {
        // Sent again only when a reused connection failed: an echo, or one more
        // transfer of 1 between the same two accounts, which no check counts.
        let (status, body) = self.http.send("POST", "", self.workload.input(), true).await.with_context(|| self.name)?;
        self.workload.check(self.name, status, &body)
    }
}

pub async fn run(options: &RunOptions) -> anyhow::Result<()> {
    let plan = Plan::new(options);
    let size = BookSize::new(options);
    let started = Instant::now();
    let guests = crate::invoke::guests().await?;
    let report = tokio::task::spawn_blocking(move || -> anyhow::Result<Report> {
        let hello = std::fs::read(guests.join("hello.wasm")).context("reading hello.wasm")?;
        let bank = std::fs::read(guests.join("bank.wasm")).context("reading bank.wasm")?;
        let builds = Instant::now();
        let tally = build_tally(None)?;
        let unobserved = build_tally(Some(UNOBSERVED))?;
        eprintln!("observe: the builds took {:.1} s", builds.elapsed().as_secs_f64());
        let mut report = Report::new(
            "observe",
            format!(
                "tally dev processes (release); instrumentation: compiled out, off, on (OTLP to loopback); \
                 inspection: bank on book 1, {} accounts",
                size.accounts
            ),
        );
        let part = Instant::now();
        instrumentation(&mut report, &plan, [unobserved.as_path(), tally.as_path(), tally.as_path()], &hello, &bank)?;
        eprintln!("observe: instrumentation cost measured in {:.1} s", part.elapsed().as_secs_f64());
        let part = Instant::now();
        inspection(&mut report, &size, &tally, &bank)?;
        eprintln!("observe: inspection measured in {:.1} s", part.elapsed().as_secs_f64());
        Ok(report)
    })
    .await??;
    report.print_table();
    eprintln!("observe: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Builds the release `tally` binary, with `features` in a target directory of its own
/// (`<target>/unobserved`) if given, and returns its path. Cargo rebuilds only what
/// changed; the first build with features is a second whole release build.
fn build_tally(features: Option<&str>) -> anyhow::Result<PathBuf> {
    // This binary is `<target>/release/tally-bench`.
    let exe = std::env::current_exe().context("finding the bench binary")?;
    let release = exe.parent().context("the bench binary's directory")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(repo_root()).args(["build", "--release", "--quiet", "-p", "tally", "--bin", "tally"]);
    let dir = match features {
        None => {
            eprintln!("observe: building the release tally binary");
            release.to_owned()
        }
        Some(features) => {
            let target = release.parent().context("the target directory")?.join("unobserved");
            eprintln!(
                "observe: building the release tally binary with {features} in {} (a second release build: \
                 slow the first time, incremental after)",
                target.display()
            );
            command.args(["--features", features, "--target-dir"]).arg(&target);
            target.join("release")
        }
    };
    let status = command.status().context("running cargo build")?;
    ensure!(status.success(), "cargo build --release --bin tally {features:?} failed ({status})");
    let tally = dir.join("tally");
    ensure!(tally.exists(), "{} is missing after the build", tally.display());
    Ok(tally)
}

/// The first part: the three nodes, both workloads, the ratios and the telemetry.
fn instrumentation(report: &mut Report, plan: &Plan, binaries: [&Path; 3], hello: &[u8], bank: &[u8]) -> anyhow::Result<()> {
    let receiver = Receiver::start()?;
    let endpoint = format!("http://{}", receiver.addr);
    let mut nodes = Vec::new();
    for (name, binary) in TARGETS.into_iter().zip(binaries) {
        let args: &[&str] = if name == "on" { &["--otlp-endpoint", &endpoint] } else { &[] };
        let node = DevProcess::start(binary, name, args)?;
        deploy(&node.url, "hello", hello)?;
        deploy(&node.url, "bank", bank)?;
        for account in ["a", "b"] {
            let (status, body) = post(&node.url, "bank", 1, &format!("open {account} 100"), None)?;
            ensure!(status == 200, "{name}: opening account {account} answered {status}: {body}");
        }
        nodes.push(node);
    }
    eprintln!(
        "observe: OTLP receiver at {endpoint}; nodes: {}",
        nodes.iter().map(|n| n.url.as_str()).collect::<Vec<_>>().join(" ")
    );
    for workload in [Workload::Hello, Workload::Bank] {
        measure_workload(report, plan, &nodes, &receiver, workload)?;
    }
    Ok(())
}

/// One workload on the three nodes: the sanity requests, the slices, the ratios and
/// the telemetry of `on`.
fn measure_workload(
    report: &mut Report,
    plan: &Plan,
    nodes: &[DevProcess],
    receiver: &Receiver,
    workload: Workload,
) -> anyhow::Result<()> {
    let names = workload.names();
    let function = workload.function();
    let on = &nodes[2].url;
    let start = (receiver.settle(), invocations_of(on, function)?);
    for ((node, name), target) in nodes.iter().zip(names).zip(TARGETS) {
        let with_header = sanity(&workload.invoke_url(&node.url), workload, name)?;
        report.record(name, "server_timing_responses", with_header as f64, "responses")?;
        let expect = if target == "compiled-out" { 0 } else { SANITY_REQUESTS };
        ensure!(
            with_header == expect,
            "{name}: {with_header} of {SANITY_REQUESTS} answers carried Server-Timing, not {expect}: \
             the binary is not the build its name says"
        );
    }
    let unloaded = (receiver.settle(), invocations_of(on, function)?);
    let unloaded_spans = record_telemetry(report, &format!("{function}/on,one_at_a_time"), start, unloaded)?;

    // The receiver's counts after each client count's slices (with its warm-up before
    // them); settling waits outside the slices.
    let mut readings = Vec::new();
    let urls: Vec<String> = nodes.iter().map(|n| workload.invoke_url(&n.url)).collect();
    let new_op = |i: usize| Ok(Caller { http: Http::new(&urls[i])?, workload, name: names[i] });
    measure_ops(report, "observe", &names, plan, new_op, |clients, at| {
        if matches!(at, Slices::After) {
            readings.push((clients, (receiver.settle(), invocations_of(on, function)?)));
        }
        Ok(())
    })?;
    let mut from = unloaded;
    for (clients, to) in readings {
        let case = format!("{}/on,clients={clients},warm-up+slices", function);
        let spans = record_telemetry(report, &case, from, to)?;
        // Below 1 when the exporter dropped spans: its queue was full.
        report.record(&case, "spans_kept_ratio", round_to(spans / unloaded_spans, 3), "ratio")?;
        from = to;
    }

    for clients in CLIENTS {
        for (target, base, goal) in [(names[1], names[0], 0.99), (names[2], names[1], 0.95)] {
            let ratio_case = format!("{target}/{},clients={clients}", base.rsplit('/').next().expect("a name"));
            for (metric, ratio) in
                [("invoke_throughput", "throughput_ratio"), ("invoke_p50_us", "p50_ratio"), ("invoke_p99_us", "p99_ratio")]
            {
                let value = |name: &str| report.value(&case(name, clients), metric).expect("measured above");
                let r = round_to(value(target) / value(base), 3);
                report.record(&ratio_case, ratio, r, "ratio")?;
                if metric == "invoke_throughput" && r < goal {
                    eprintln!("observe: BELOW GOAL: {ratio_case} throughput ratio {r} < {goal}");
                }
            }
        }
    }
    Ok(())
}

/// Sends [`SANITY_REQUESTS`] of `workload` one at a time; how many answers carried
/// `Server-Timing`. Prints the first one's.
fn sanity(invoke_url: &str, workload: Workload, name: &str) -> anyhow::Result<usize> {
    let agent = crate::invoke::agent();
    let mut with_header = 0;
    for i in 0..SANITY_REQUESTS {
        let mut response = agent.post(invoke_url).send(workload.input()).with_context(|| format!("{name}: POST {invoke_url}"))?;
        let timing = response.headers().get("server-timing").map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_vec().with_context(|| format!("{name}: reading an answer"))?;
        workload.check(name, status, &body)?;
        if let Some(timing) = timing {
            if i == 0 {
                eprintln!("observe: {name}: Server-Timing: {timing}");
            }
            with_header += 1;
        }
    }
    Ok(with_header)
}

/// The telemetry of `on` between two (receiver, invocations) readings; the spans per
/// invocation.
fn record_telemetry(report: &mut Report, case: &str, from: (Received, u64), to: (Received, u64)) -> anyhow::Result<f64> {
    let invocations = to.1.saturating_sub(from.1);
    ensure!(invocations > 0, "{case}: the node counted no invocation");
    let n = invocations as f64;
    let spans = (to.0.spans - from.0.spans) as f64 / n;
    report.record(case, "invocations", n, "invocations")?;
    report.record(case, "otlp_bytes_per_invocation", round_to((to.0.bytes - from.0.bytes) as f64 / n, 0), "bytes")?;
    report.record(case, "spans_per_invocation", round_to(spans, 2), "spans")?;
    report.record(case, "otlp_posts", (to.0.posts - from.0.posts) as f64, "requests")?;
    ensure!(spans > 0.0, "{case}: the receiver got no span");
    Ok(spans)
}

/// Every invocation of `function` the node at `url` counted, whatever its outcome.
fn invocations_of(url: &str, function: &str) -> anyhow::Result<u64> {
    let text = scrape(&format!("{url}/metrics"))?;
    Ok(invocations_in(&text, function))
}

fn invocations_in(metrics: &str, function: &str) -> u64 {
    let prefix = format!("tally_invocations_total{{function=\"{function}\",");
    let total: f64 = metrics
        .lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .filter_map(|rest| rest.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    total as u64
}

fn deploy(url: &str, name: &str, component: &[u8]) -> anyhow::Result<()> {
    let mut response =
        deploy_agent().put(format!("{url}/v1/functions/{name}")).send(component).with_context(|| format!("deploying {name}"))?;
    let status = response.status().as_u16();
    ensure!(status == 201, "deploying {name} answered {status}: {}", response.body_mut().read_to_string().unwrap_or_default());
    Ok(())
}

/// One invocation, with an idempotency key if given: the status and the answer.
fn post(url: &str, function: &str, book: u64, input: &str, key: Option<&str>) -> anyhow::Result<(u16, String)> {
    let mut request = crate::invoke::agent().post(format!("{url}/v1/functions/{function}/invoke?book={book}"));
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let mut response = request.send(input.as_bytes()).with_context(|| format!("invoking {function} with {input:?}"))?;
    let status = response.status().as_u16();
    Ok((status, response.body_mut().read_to_string().context("reading an answer")?))
}

/// A `tally dev` child process on loopback, over a temporary data directory; killed
/// when dropped.
struct DevProcess {
    child: Child,
    /// Its gateway, as it announced.
    url: String,
    _dir: TempDir,
}

impl DevProcess {
    /// Starts `tally dev` with extra `args` and waits for its URL, the first line of
    /// its stdout. `name` prefixes what it prints on stderr.
    fn start(binary: &Path, name: &'static str, args: &[&str]) -> anyhow::Result<DevProcess> {
        let dir = tempfile::tempdir().context("creating a data directory")?;
        let mut child = Command::new(binary)
            .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(args)
            .env("RUST_LOG", "warn")
            // Where it saves its admin token for the CLI: not the user's configuration.
            .env("TALLY_CONFIG_DIR", dir.path().join("cli"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} dev", binary.display()))?;
        let (stdout, stderr) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
        // The threads end when the process does; the stdout one keeps reading past the
        // URL so that nothing the node prints later meets a closed pipe.
        let (announced, url) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name(format!("tally-dev-{name}-stdout"))
            .spawn(move || {
                let mut lines = BufReader::new(stdout).lines();
                if let Some(Ok(line)) = lines.next() {
                    let _ = announced.send(line);
                }
                lines.map_while(Result::ok).for_each(|line| eprintln!("tally dev ({name}): {line}"));
            })
            .context("spawning a stdout reader")?;
        std::thread::Builder::new()
            .name(format!("tally-dev-{name}-stderr"))
            .spawn(move || {
                BufReader::new(stderr).lines().map_while(Result::ok).for_each(|line| eprintln!("tally dev ({name}): {line}"));
            })
            .context("spawning a stderr reader")?;
        let mut node = DevProcess { child, url: String::new(), _dir: dir };
        let line = match url.recv_timeout(START_TIMEOUT) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => bail!("tally dev ({name}) printed no URL within {START_TIMEOUT:?}"),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = node.child.wait().context("waiting for tally dev")?;
                bail!("tally dev ({name}) exited ({status}) before serving")
            }
        };
        node.url = line
            .trim()
            .rsplit(' ')
            .next()
            .filter(|u| u.starts_with("http://"))
            .with_context(|| format!("tally dev ({name}) printed {line:?}, not its URL"))?
            .to_owned();
        Ok(node)
    }
}

impl Drop for DevProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::inspection::transfer_input;
    use super::*;

    /// A length-delimited protobuf field.
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        assert!(number < 16 && bytes.len() < 1 << 14);
        let len = bytes.len();
        let len = if len < 128 { vec![len as u8] } else { vec![len as u8 | 0x80, (len >> 7) as u8] };
        [&[number << 3 | 2][..], &len, bytes].concat()
    }

    #[test]
    fn spans_are_counted_across_resources_and_scopes() {
        let span = |name: &[u8]| field(2, &[field(1, &[0xab; 16]), field(5, name), vec![0x39, 1, 0, 0, 0, 0, 0, 0, 0]].concat());
        let scope = |spans: &[Vec<u8>]| field(2, &[field(1, &field(1, b"tally")), spans.concat()].concat());
        let resource = |scopes: &[Vec<u8>]| field(1, &[field(1, &field(1, b"service.name")), scopes.concat()].concat());
        assert_eq!(spans_in(b""), 0);
        assert_eq!(spans_in(&resource(&[])), 0);
        assert_eq!(spans_in(&resource(&[scope(&[span(b"a"), span(b"b")])])), 2);
        let two = [resource(&[scope(&[span(b"a")]), scope(&[span(b"b"), span(b"c")])]), resource(&[scope(&[span(b"d")])])];
        assert_eq!(spans_in(&two.concat()), 4);
        // Other fields (a varint, a fixed64) are skipped; bytes that look like fields
        // inside a span's name are not spans.
        let odd = [vec![0x08, 0x96, 0x01], resource(&[scope(&[span(&field(2, b"x")), vec![0x19, 0, 0, 0, 0, 0, 0, 0, 0]])])];
        assert_eq!(spans_in(&odd.concat()), 1);
        // A body cut short counts what came before the cut.
        let whole = resource(&[scope(&[span(b"a")])]);
        assert_eq!(spans_in(&[whole.clone(), whole[..whole.len() - 3].to_vec()].concat()), 1);
    }

    #[test]
    fn the_receiver_answers_and_counts_posts() {
        let receiver = Receiver::start().expect("a receiver");
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let span = |name: &[u8]| field(2, &field(5, name));
        let body = field(1, &field(2, &[span(b"a"), span(b"b")].concat()));
        for _ in 0..2 {
            let response = agent.post(format!("http://{}/v1/traces", receiver.addr)).send(&body[..]).expect("a post");
            assert_eq!(response.status().as_u16(), 200);
        }
        let response = agent.post(format!("http://{}/v1/metrics", receiver.addr)).send(&body[..]).expect("a post");
        assert_eq!(response.status().as_u16(), 404);
        assert_eq!(receiver.received(), Received { posts: 2, bytes: 2 * body.len() as u64, spans: 4 });
    }

    #[test]
    fn invocations_are_summed_over_outcomes_of_one_function() {
        let text = "\
tally_invocations_total{function=\"hello\",outcome=\"ok\"} 10
tally_invocations_total{function=\"hello\",outcome=\"trap\"} 2
tally_invocations_total{function=\"hello-go\",outcome=\"ok\"} 7
";
        assert_eq!(invocations_in(text, "hello"), 12);
        assert_eq!(invocations_in(text, "bank"), 0);
    }

    #[test]
    fn transfers_are_between_two_different_accounts() {
        for accounts in [2, 3, 1_000] {
            for i in 0..1_000 {
                let input = transfer_input(i, accounts);
                let words: Vec<&str> = input.split(' ').collect();
                assert_ne!(words[1], words[2], "{input}");
                for account in &words[1..3] {
                    let n: u64 = account.strip_prefix("acct").expect("acct<i>").parse().expect("a number");
                    assert!(n < accounts, "{input}");
                }
            }
        }
    }
}
