//! The `http` suite: HTTP functions (`docs/http.md`) on a Tally dev node in this process.
//!
//! ```text
//!   hello           tally           C clients ──POST /fn/hello/──► DevNode ──► http-hello
//!                   wasmtime-serve  C clients ──POST /──► `wasmtime serve` (a child) ──► http-hello
//!   call out        web-echo        C clients ──POST /fn/web/echo──► DevNode ──► http_probe
//!                   web-fetch       C clients ──GET /fn/web/fetch?to=…/x──► DevNode ──► http_probe
//!                                                 ──GET /x (recorded)──► upstream
//!                   upstream        C clients ──GET /x──► upstream (tokio, in this process)
//!   webhooks        <lang>          C clients ──POST /fn/hook-<lang>/hook, signed──► DevNode
//!                                                 ──► <lang>-webhook ──POST /sink──► upstream
//! ```
//!
//! Three groups of targets, each measured as the `invoke` suite measures (its helpers
//! are used here): closed-loop clients with a keep-alive connection each, on a runtime
//! of their own, at 1 and 32 clients, the targets of a group in interleaved slices;
//! every response is checked.
//!
//! 1. The same wasi:http component (`bench/guests/http-hello`, from `bench/setup.sh`)
//!    on Tally and under `wasmtime serve`, both echoing 5 bytes; then one `wrk` run of
//!    each. Ratios Tally/wasmtime-serve of req/s and p99.
//! 2. A call out, recorded: `http_probe` deployed as `web`, allowed to reach an upstream
//!    this process serves (200 `ok`, keep-alive). `web-echo` is an invocation with no
//!    call out, `web-fetch` one whose call out is logged, `upstream` the call alone; the
//!    `-keyed` ones carry an `Idempotency-Key` each, so both are exactly-once
//!    invocations that log an Init and a result. The goal: in an exactly-once
//!    invocation, the recorded call costs at most one exactly-once `log.append` (timed
//!    by the `probe` guest, as in `invoke`) more than the call itself, at one client:
//!    `p50(web-fetch-keyed) - p50(web-echo-keyed) <= p50(upstream) + p50(append)`.
//!    From the outside that difference also holds the call's wait for the invocation's
//!    Init, which the echo hides behind its guest's work; so the host's own means are
//!    recorded too (`/metrics`: the wait, the exchange, the log), and the log, what the
//!    recording adds to a plain call, against the mean of one append.
//! 3. The webhook of every SDK language (`webhooks.rs`).
//!
//! Numbers from a shared machine are rough; clients, node and upstream share its cores.

use std::time::Instant;

use anyhow::{ensure, Context as _};
use tally::dev::DevNode;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

use crate::http::Http;
use crate::invoke::{
    self, case, check_echo, deploy_agent, measure, measure_ops, Plan, Slices, Target, WasmtimeServe, CLIENTS, PAYLOAD,
};
use crate::log::Op;
use crate::report::{round_to, Report};
use crate::RunOptions;

pub async fn run(options: &RunOptions) -> anyhow::Result<()> {
    let plan = Plan::new(options);
    let started = Instant::now();
    let guests = invoke::guests().await?;
    let read = |file: &str| std::fs::read(guests.join(file)).with_context(|| format!("reading {file}"));
    let (probe, http_probe) = (read("probe.wasm")?, read("http_probe.wasm")?);
    let peer = tokio::task::spawn_blocking(|| invoke::setup_peer(&invoke::repo_root())).await?.context("bench/setup.sh")?;
    let http_hello = std::fs::read(&peer.http_hello).context("reading the http-hello component")?;
    let upstream = Upstream::start()?;

    let data = tempfile::tempdir().context("creating a temporary data directory")?;
    let config = tally_runtime::Config { data_dir: data.path().join("data"), listen: "127.0.0.1:0".into(), ..Default::default() };
    let node = DevNode::start(config).await.context("starting a Tally dev node")?;
    let url = node.url();
    let port = upstream.port;
    let result = tokio::task::spawn_blocking(move || {
        let title = format!(
            "HTTP functions, HTTP/1.1 keep-alive, one async connection per client; Tally dev node vs {} serve -Scli",
            peer.version
        );
        let mut report = Report::new("http", title);
        hello(&mut report, &plan, &url, &http_hello, &peer)?;
        call_out(&mut report, &plan, &url, &http_probe, &probe, port)?;
        crate::webhooks::measure(&mut report, &plan, &url, &guests, port)?;
        Ok::<_, anyhow::Error>(report)
    })
    .await;
    node.shutdown().await;
    drop(upstream);
    let report = result??;
    report.print_table();
    eprintln!("http: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// PUTs `component` as `name` (with `query`, and `headers` each `(name, value)`);
/// a deploy compiles, so it may take long.
pub(crate) fn deploy(url: &str, name: &str, query: &str, headers: &[(&str, &str)], component: &[u8]) -> anyhow::Result<()> {
    let deploy_url = format!("{url}/v1/functions/{name}{query}");
    let mut request = deploy_agent().put(&deploy_url);
    for (header, value) in headers {
        request = request.header(*header, *value);
    }
    let mut response = request.send(component).with_context(|| format!("PUT {deploy_url}"))?;
    let status = response.status().as_u16();
    let body = response.body_mut().read_to_string().unwrap_or_default();
    ensure!(status == 201, "deploying {name} answered {status}: {body}");
    Ok(())
}

/// Group 1: http-hello on Tally and under `wasmtime serve`.
fn hello(report: &mut Report, plan: &Plan, url: &str, component: &[u8], peer: &invoke::Peer) -> anyhow::Result<()> {
    deploy(url, "hello", "", &[], component)?;
    let server = WasmtimeServe::start(peer)?;
    let targets = [Target::new("tally", format!("{url}/fn/hello/")), Target::new("wasmtime-serve", server.url.clone())];
    measure(report, &targets, plan, |_, _| Ok(()))?;
    for clients in CLIENTS {
        let value = |target: &str, metric: &str| report.value(&case(target, clients), metric).expect("measured above");
        let throughput = value("tally", "invoke_throughput") / value("wasmtime-serve", "invoke_throughput");
        let p99 = value("tally", "invoke_p99_us") / value("wasmtime-serve", "invoke_p99_us");
        let case = case("tally/wasmtime-serve", clients);
        report.record(&case, "throughput_ratio", round_to(throughput, 2), "ratio")?;
        report.record(&case, "p99_ratio", round_to(p99, 2), "ratio")?;
    }
    invoke::external_load(report, &targets, plan)
}

/// One client of a target other than an echo: sends `method` with `headers` and `body`
/// to a URL, and checks the answer with `check`.
pub(crate) struct Requester {
    pub http: Http,
    pub name: &'static str,
    pub method: &'static str,
    /// Header lines, each ending in `\r\n`.
    pub headers: String,
    pub body: Vec<u8>,
    pub check: fn(&str, u16, &[u8]) -> anyhow::Result<()>,
    /// Each request carries an `Idempotency-Key` of its own (`<prefix>-<n>`): an
    /// exactly-once invocation, whose Init and result are logged.
    pub keys: Option<(String, u64)>,
}

impl Op for Requester {
    async fn call(&mut self) -> anyhow::Result<()> {
        let headers = match &mut self.keys {
            Some((prefix, n)) => {
                *n += 1;
                format!("{}idempotency-key: {prefix}-{n}\r\n", self.headers)
            }
            None => self.headers.clone(),
        };
        // Sent again only when a kept connection turned out closed; no check below
        // depends on how often a request arrived (a keyed one answers the same).
        let (status, body) = self.http.send(self.method, &headers, &self.body, true).await.with_context(|| self.name)?;
        (self.check)(self.name, status, &body)
    }
}

/// What the upstream answers.
const UPSTREAM_ANSWER: &[u8] = b"ok";

fn check_ok(name: &str, status: u16, body: &[u8]) -> anyhow::Result<()> {
    ensure!(
        status == 200 && body == UPSTREAM_ANSWER,
        "{name} answered {status} with {:?}, not 200 with \"ok\"",
        String::from_utf8_lossy(body)
    );
    Ok(())
}

/// Group 2: an invocation with no call out, one with a recorded call out, and the call.
fn call_out(report: &mut Report, plan: &Plan, url: &str, http_probe: &[u8], probe: &[u8], port: u16) -> anyhow::Result<()> {
    deploy(url, "web", &format!("?outbound=http%3A%2F%2F127.0.0.1%3A{port}"), &[], http_probe)?;
    let upstream_url = format!("http://127.0.0.1:{port}/x");
    let echo = format!("{url}/fn/web/echo");
    let fetch = format!("{url}/fn/web/fetch?to=http%3A%2F%2F127.0.0.1%3A{port}%2Fx");
    let check_echo = check_echo as fn(&str, u16, &[u8]) -> anyhow::Result<()>;
    let targets = [
        ("web-echo", "POST", echo.clone(), PAYLOAD, check_echo, false),
        ("web-fetch", "GET", fetch.clone(), &b""[..], check_ok, false),
        ("web-echo-keyed", "POST", echo, PAYLOAD, check_echo, true),
        ("web-fetch-keyed", "GET", fetch, &b""[..], check_ok, true),
        ("upstream", "GET", upstream_url, &b""[..], check_ok, false),
    ];
    let names: Vec<&str> = targets.iter().map(|t| t.0).collect();
    let run = format!("{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos());
    let next_client = std::cell::Cell::new(0u64);
    let new_op = |i: usize| {
        let (name, method, url, body, check, keyed) = &targets[i];
        next_client.set(next_client.get() + 1);
        let keys = keyed.then(|| (format!("bench-{run}-{name}-{}", next_client.get()), 0));
        Ok(Requester { http: Http::new(url)?, name, method, headers: String::new(), body: body.to_vec(), check: *check, keys })
    };
    // The host's own times of the calls out at one client, from its summaries.
    let metrics_url = format!("{url}/metrics");
    let [one, _] = CLIENTS;
    let mut scrapes = (String::new(), String::new());
    measure_ops(report, "http", &names, plan, new_op, |clients, slices| {
        match (clients == one, slices) {
            (true, Slices::Before) => scrapes.0 = invoke::scrape(&metrics_url)?,
            (true, Slices::After) => scrapes.1 = invoke::scrape(&metrics_url)?,
            _ => {}
        }
        Ok(())
    })?;
    let mean_us = |summary: &str| -> anyhow::Result<f64> {
        let get = |text: &str, part: &str| invoke::metric_value(text, &format!("{summary}_{part}"), "web").unwrap_or(0.0);
        let count = get(&scrapes.1, "count") - get(&scrapes.0, "count");
        ensure!(count > 0.0, "no call out was sent at one client");
        Ok((get(&scrapes.1, "sum") - get(&scrapes.0, "sum")) / count * 1e6)
    };
    let (wait, send, log) = (
        mean_us("tally_outgoing_wait_seconds")?,
        mean_us("tally_outgoing_send_seconds")?,
        mean_us("tally_outgoing_log_seconds")?,
    );

    // One exactly-once append, timed inside a function as the `invoke` suite does.
    invoke::guest_calls(report, url, probe, plan.probe_reads)?;
    let append = report.value("guest,log.append,exactly-once,1KiB", "guest_append_p50_us").context("the probe's append")?;
    let append_mean = report.value("guest,log.append,exactly-once,1KiB", "guest_append_mean_us").context("the probe's append")?;
    let p50 = |target: &str| report.value(&case(target, one), "invoke_p50_us").expect("measured above");
    // Unkeyed, the difference is all of an exactly-once invocation's cost: its Init and
    // result, logged because it made a call, and the call's record.
    let whole = p50("web-fetch") - p50("web-echo");
    // Keyed, both invocations log an Init and a result: the difference is the call and
    // its record.
    let recorded = p50("web-fetch-keyed") - p50("web-echo-keyed");
    let budget = p50("upstream") + append;
    report.record(&case("exactly-once-call", one), "fetch_minus_echo_p50_us", whole, "us")?;
    let case = case("recorded-call", one);
    report.record(&case, "fetch_minus_echo_p50_us", recorded, "us")?;
    report.record(&case, "upstream_plus_append_p50_us", round_to(budget, 1), "us")?;
    // At most 1 meets the goal; the excess is what the recording costs beyond it.
    report.record(&case, "recorded_over_budget_ratio", round_to(recorded / budget, 2), "ratio")?;
    report.record(&case, "recorded_over_budget_excess_us", round_to(recorded - budget, 1), "us")?;
    // Inside the host: a call waits for its invocation's Init (as any effect of an
    // exactly-once invocation must, recorded or not), is sent, and is logged. What the
    // recording adds to a plain call is the log: the goal is at most one append.
    report.record(&case, "call_wait_mean_us", round_to(wait, 1), "us")?;
    report.record(&case, "call_send_mean_us", round_to(send, 1), "us")?;
    report.record(&case, "call_log_mean_us", round_to(log, 1), "us")?;
    report.record(&case, "log_over_append_ratio", round_to(log / append_mean, 2), "ratio")?;
    Ok(())
}

/// An HTTP/1.1 server on a loopback port, answering every request 200 `ok` and keeping
/// the connection, on a runtime (one thread) of its own; stopped when dropped.
pub(crate) struct Upstream {
    pub port: u16,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Upstream {
    fn start() -> anyhow::Result<Upstream> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("upstream")
            .enable_all()
            .build()
            .context("starting the upstream's runtime")?;
        // Bound here, made a tokio listener on its runtime: this may run on another.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding the upstream")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a listener of this runtime");
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let _ = stream.set_nodelay(true);
                    if let Err(e) = serve(stream).await {
                        eprintln!("http: upstream: {e:#}");
                    }
                });
            }
        });
        Ok(Upstream { port, runtime: Some(runtime) })
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        // Without waiting: dropped where blocking is not allowed.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Answers the requests of one connection until it closes; reads bodies of either
/// framing (Tally sends a wasi:http body of unknown length chunked).
async fn serve(stream: tokio::net::TcpStream) -> anyhow::Result<()> {
    let mut stream = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if stream.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let (mut length, mut chunked) = (0, false);
        loop {
            line.clear();
            ensure!(stream.read_line(&mut line).await? > 0, "the connection closed in a request's headers");
            let Some((name, value)) = line.trim_end().split_once(':') else { break };
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse()?;
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.trim().eq_ignore_ascii_case("chunked");
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                stream.read_line(&mut line).await?;
                let size = usize::from_str_radix(line.trim_end().split(';').next().unwrap_or_default(), 16)?;
                body.resize(size + 2, 0);
                if size == 0 {
                    // The last chunk: no trailers expected, just the empty line.
                    line.clear();
                    stream.read_line(&mut line).await?;
                    break;
                }
                stream.read_exact(&mut body).await?;
            }
        } else {
            body.resize(length, 0);
            stream.read_exact(&mut body).await?;
        }
        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", UPSTREAM_ANSWER.len());
        stream.get_mut().write_all(&[answer.as_bytes(), UPSTREAM_ANSWER].concat()).await?;
    }
}
