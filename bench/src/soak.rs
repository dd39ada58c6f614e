//! The `soak` suite: honest clients beside hostile ones, for a bounded time, on one
//! `tally dev` node in this process with `--auth token` and small fair shares.
//!
//! ```text
//!   honest   4 clients, each on a book of its own: counter `incr`, an Idempotency-Key
//!            per increment, retried with it until 200
//!   flood    64 connections of one token on one book: the same, never honouring
//!            Retry-After (429 busy: the book's places and queue, the token's rate)
//!   hostile  a task per kind (catalog.rs): bad tokens, huge heads, malformed and
//!            truncated requests, oversized bodies, crafted keys, tags and books, a
//!            memory bomb, a trap, a spinning guest, calls nested past the limit,
//!            slow bodies; each answer checked against the documented one
//!   held     idle connections, slow heads and slow bodies (a byte a second) for the
//!            whole run: does the node ever cut them off?
//! ```
//!
//! The honest clients run in slices, alone and beside the others in turn (as the
//! `invoke` suite interleaves its targets), so that both see the same background load
//! of a shared machine; the suite records their p50 and p99 alone and beside and the
//! ratio, against a goal of [`P99_FACTOR_GOAL`] (recorded, not enforced). At the end
//! every book's counter must equal what its clients had acknowledged: nothing lost,
//! nothing applied twice; the sentinel book, which only refused requests name, must be
//! 0. The RSS (the node's: it runs in this process) is sampled every second and must
//! stay within [`RSS_GROWTH_MAX`] of its value after the warm-up. Last, bodies nearly
//! whole but never finished, many at once: the memory the node holds for them.
//!
//! The suite fails on a lost or duplicated increment, a sentinel that moved, or a node
//! that stopped answering; everything else is a figure.

mod catalog;
mod figures;
mod held;
mod honest;
mod hostile;
mod positions;
pub(crate) mod rss;
mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _};
use tally::dev::DevNode;
use tokio::sync::watch;

use crate::invoke::{agent, deploy_agent};
use crate::log::closed_loop_keeping;
use crate::report::{round_to, Report, Samples};
use crate::RunOptions;
use held::{Held, Hold};
use honest::{Incrementer, Seen};
use hostile::{Flooder, Gate, Ledger, Phase};

/// Honest clients, each with a book and a token of its own.
const HONEST_CLIENTS: usize = 4;
/// Connections of the flood, all with one token on one book.
const FLOOD_CONNECTIONS: usize = 64;
/// The goal for the honest clients' p99 beside the hostile ones, as a multiple of
/// their p99 alone.
const P99_FACTOR_GOAL: f64 = 2.0;
/// How much the RSS may grow past its value after the warm-up and still be bounded.
const RSS_GROWTH_MAX: f64 = 1.5;
/// Connections held for the whole run, of each manner.
const HELD: [(Hold, usize); 3] = [(Hold::Idle, 64), (Hold::SlowHead, 16), (Hold::SlowBody, 16)];
/// Bytes a slow body announces: under echo's `request_bytes_max`, so it is waited for.
const SLOW_BODY_BYTES: usize = 4000;
/// Bodies held nearly whole at the end, and the bytes each sends.
const HELD_BODIES: usize = 16;
const HELD_BODY_BYTES: usize = 4 << 20;
/// Points of the RSS series the report lists.
const RSS_POINTS: usize = 8;

/// The node's fair shares: small, so that the flood meets them.
const INVOCATIONS_MAX: u32 = 8;
const BOOK_INVOCATIONS_MAX: u32 = 2;
const BOOK_QUEUE_MAX: u32 = 8;
const QUEUE_WAIT_MS: u64 = 250;
const CALLER_RATE_MAX: u32 = 1000;

/// The books each kind of client uses.
pub(crate) struct Books {
    pub honest: Vec<u64>,
    pub flood: u64,
    /// Named only by requests that must be refused: its counter stays 0.
    pub sentinel: u64,
    /// Everything else hostile; nothing checks its state.
    pub hostile: u64,
}

impl Books {
    fn new() -> Books {
        Books { honest: (1..=HONEST_CLIENTS as u64).collect(), flood: 100, sentinel: 200, hostile: 300 }
    }
}

/// The tokens the clients use, made by the admin at the start.
pub(crate) struct Tokens {
    pub admin: String,
    /// `invoke` of counter, each on its honest book.
    pub honest: Vec<String>,
    /// `invoke` of counter on the flood's book.
    pub flood: String,
    /// `invoke`, unscoped: the hostile clients' own.
    pub hostile: String,
    /// `read`, unscoped.
    pub reader: String,
    /// An `invoke` token revoked at once.
    pub revoked: String,
}

/// How long each part runs.
struct Plan {
    /// Each slice, alone or beside.
    slice: Duration,
    /// The start of each slice, not counted.
    slice_warmup: Duration,
    /// Pairs of slices (alone and beside, in alternating order).
    rounds: u32,
}

impl Plan {
    fn new(options: &RunOptions) -> Plan {
        if options.quick {
            Plan { slice: Duration::from_secs(2), slice_warmup: Duration::from_millis(200), rounds: 3 }
        } else {
            Plan { slice: Duration::from_secs(4), slice_warmup: Duration::from_millis(300), rounds: 8 }
        }
    }
}

/// The components the suite deploys.
struct Components {
    counter: Vec<u8>,
    hello: Vec<u8>,
    faulty: Vec<u8>,
    steps: Vec<u8>,
}

pub async fn run(options: &RunOptions) -> anyhow::Result<()> {
    let plan = Plan::new(options);
    let started = Instant::now();
    let guests = crate::invoke::guests().await?;
    let read = |name: &str| std::fs::read(guests.join(format!("{name}.wasm"))).with_context(|| format!("reading {name}.wasm"));
    let components =
        Components { counter: read("counter")?, hello: read("hello")?, faulty: read("faulty")?, steps: read("steps")? };
    let data = tempfile::tempdir().context("creating a temporary data directory")?;
    let mut config = tally_runtime::Config {
        data_dir: data.path().join("data"),
        listen: "127.0.0.1:0".into(),
        auth: tally_runtime::config::AuthMode::Token,
        ..Default::default()
    };
    config.node.invocations_max = INVOCATIONS_MAX;
    config.node.book_invocations_max = BOOK_INVOCATIONS_MAX;
    config.node.book_queue_max = BOOK_QUEUE_MAX;
    config.node.queue_wait_ms = QUEUE_WAIT_MS;
    config.node.caller_rate_max = CALLER_RATE_MAX;
    let node = DevNode::start(config).await.context("starting a Tally dev node")?;
    let (addr, admin) = (node.addr.to_string(), node.admin_token.clone());
    let result = tokio::task::spawn_blocking(move || soak(&plan, &addr, admin, &components)).await;
    node.shutdown().await;
    let (report, verdict) = result??;
    report.print_table();
    eprintln!("\n{}", verdict.lines.join("\n"));
    eprintln!("soak: done in {:.1} s", started.elapsed().as_secs_f64());
    if !verdict.failed.is_empty() {
        bail!("{}", verdict.failed.join("; "));
    }
    Ok(())
}

/// What the suite concluded, beyond the figures: lines for people, and the checks
/// that failed.
#[derive(Default)]
struct Verdict {
    lines: Vec<String>,
    failed: Vec<String>,
}

/// What the run gathered, for the report.
struct Gathered {
    samples: [Samples; 2],
    seen: [Seen; 2],
    /// Every hostile kind's answers, and the later phases' too.
    ledger: Ledger,
    held: Vec<Held>,
    flooders: Vec<Flooder>,
    /// Each honest book's acknowledged increments.
    honest_acked: Vec<(u64, u64)>,
    rss: Vec<(Duration, f64)>,
    /// When the warm-up ended, on the RSS series' clock.
    warm: Duration,
}

const MODES: [&str; 2] = ["alone", "beside"];

fn soak(plan: &Plan, addr: &str, admin: String, components: &Components) -> anyhow::Result<(Report, Verdict)> {
    let url = format!("http://{addr}");
    let books = Books::new();
    let tokens = setup(&url, admin, &books, components)?;
    let gathered = run_clients(plan, addr, &tokens, &books)?;
    let mut report = Report::new(
        "soak",
        format!(
            "{HONEST_CLIENTS} honest counter clients alone and beside {FLOOD_CONNECTIONS} flooding connections and hostile \
             clients; dev node, --auth token, invocations_max={INVOCATIONS_MAX}, book_invocations_max={BOOK_INVOCATIONS_MAX}, \
             book_queue_max={BOOK_QUEUE_MAX}, queue_wait_ms={QUEUE_WAIT_MS}, caller_rate_max={CALLER_RATE_MAX}"
        ),
    );
    let mut verdict = Verdict::default();
    figures::record_honest(&mut report, &mut verdict, &gathered)?;
    positions(&mut report, &mut verdict, addr, &tokens, &books, &gathered.ledger)?;
    figures::record_kinds(&mut report, &mut verdict, &gathered.ledger.take())?;
    figures::record_held(&mut report, &mut verdict, &gathered.held)?;
    let slow_bodies = gathered.held.iter().filter(|h| h.hold == Hold::SlowBody && h.closed_after.is_none()).count();
    if slow_bodies > INVOCATIONS_MAX as usize {
        // Had each held a place, nothing else could have run while they were open.
        verdict.lines.push(format!(
            "{slow_bodies} slow bodies held open outnumber invocations_max ({INVOCATIONS_MAX}) and the honest clients went on: \
             a body being read holds no place"
        ));
    }
    figures::record_books(&mut report, &mut verdict, &url, &tokens, &books, &gathered)?;
    figures::record_rss(&mut report, &mut verdict, &gathered.rss, gathered.warm)?;
    held_bodies(&mut report, &mut verdict, addr, &tokens, &books)?;
    let alive = agent().get(format!("{url}/healthz")).call().is_ok_and(|r| r.status() == 200);
    report.record("node", "healthz_after", f64::from(u8::from(alive)), "bool")?;
    if !alive {
        verdict.failed.push("the node no longer answers /healthz".into());
    }
    Ok((report, verdict))
}

/// Deploys the functions and makes the tokens.
fn setup(url: &str, admin: String, books: &Books, c: &Components) -> anyhow::Result<Tokens> {
    let auth = format!("Bearer {admin}");
    // echo: a small request limit, for 413s. bomb: a 32 MiB memory limit, one attempt.
    // spin: a 200 ms timeout.
    let deploys: [(&str, &[u8], &str); 5] = [
        ("counter", &c.counter, ""),
        ("echo", &c.hello, "request_bytes_max=4096"),
        ("bomb", &c.faulty, "memory_bytes=33554432&retry_attempts=1"),
        ("spin", &c.faulty, "timeout_ms=200&retry_attempts=1"),
        ("steps", &c.steps, ""),
    ];
    for (name, component, query) in deploys {
        eprintln!("soak: deploying {name}");
        let mut response = deploy_agent()
            .put(format!("{url}/v1/functions/{name}?{query}"))
            .header("authorization", &auth)
            .send(component)
            .with_context(|| format!("deploying {name}"))?;
        let status = response.status().as_u16();
        ensure!(status == 201, "deploying {name}: {status} {}", response.body_mut().read_to_string().unwrap_or_default());
    }
    let make = |spec: serde_json::Value| -> anyhow::Result<String> {
        let mut response = agent()
            .post(format!("{url}/v1/tokens"))
            .header("authorization", &auth)
            .send(spec.to_string().as_bytes())
            .context("making a token")?;
        let status = response.status().as_u16();
        let body: serde_json::Value = serde_json::from_slice(&response.body_mut().read_to_vec()?)?;
        ensure!(status == 201, "making a token: {status} {body}");
        Ok(body["token"].as_str().context("a token")?.to_string())
    };
    let invoke =
        |name: String, book: u64| serde_json::json!({"role": "invoke", "functions": ["counter"], "books": [book], "name": name});
    let honest = books.honest.iter().map(|&b| make(invoke(format!("honest-{b}"), b))).collect::<anyhow::Result<_>>()?;
    let flood = make(invoke("flood".into(), books.flood))?;
    let hostile = make(serde_json::json!({"role": "invoke", "name": "hostile"}))?;
    let reader = make(serde_json::json!({"role": "read", "name": "reader"}))?;
    let revoked = make(serde_json::json!({"role": "invoke", "name": "revoked"}))?;
    let id = revoked.split('_').nth(1).context("a token's ID")?;
    let response = agent().delete(format!("{url}/v1/tokens/{id}")).header("authorization", &auth).call().context("revoking")?;
    ensure!(response.status() == 200, "revoking a token: {}", response.status());
    Ok(Tokens { admin, honest, flood, hostile, reader, revoked })
}

/// Runs the clients: the held connections and the hostile tasks for the whole run, the
/// honest clients in slices alone and beside.
fn run_clients(plan: &Plan, addr: &str, tokens: &Tokens, books: &Books) -> anyhow::Result<Gathered> {
    let runtime = |name: &str, threads: usize| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name(name)
            .enable_all()
            .build()
            .with_context(|| format!("starting the {name} runtime"))
    };
    let honest_rt = runtime("soak-honest", 2)?;
    let hostile_rt = runtime("soak-hostile", 1)?;
    let sampler = rss::Sampler::start()?;

    // Held connections: for the whole run, ended by `stop_held`. Each task ends when
    // told to or when the node closes its connection.
    let (stop_held, held_stop) = watch::channel(false);
    let slow_head = held::slow_body_head(
        &format!("/v1/functions/echo/invoke?book={}", books.hostile),
        &catalog::bearer(&tokens.hostile),
        SLOW_BODY_BYTES,
    );
    let held_tasks: Vec<_> = HELD
        .iter()
        .flat_map(|&(manner, count)| std::iter::repeat_n(manner, count))
        .map(|manner| hostile_rt.spawn(held::hold(addr.to_string(), manner, slow_head.clone(), held_stop.clone())))
        .collect();

    // Hostile kinds and the flood: each task works while the gate is open and ends
    // when it closes for good; a task that fails panics, which the join reports.
    let gate = Arc::new(Gate::new());
    let ledger = Ledger::default();
    let mut kind_tasks = Vec::new();
    for kind in catalog::kinds(tokens, books) {
        let kind = Arc::new(kind);
        for index in 0..kind.tasks {
            kind_tasks.push(hostile_rt.spawn(hostile::run_kind(
                addr.to_string(),
                kind.clone(),
                index,
                gate.clone(),
                ledger.clone(),
            )));
        }
    }
    let flood_tasks: Vec<_> = (0..FLOOD_CONNECTIONS)
        .map(|i| {
            let flooder = Flooder::new(addr, books.flood, &tokens.flood, format!("flood-{i}"));
            hostile_rt.spawn(hostile::flood(flooder, gate.clone(), ledger.clone()))
        })
        .collect();

    let url = |book: u64| format!("http://{addr}/v1/functions/counter/invoke?book={book}");
    let mut clients: Vec<Incrementer> = books
        .honest
        .iter()
        .zip(&tokens.honest)
        .map(|(&book, token)| Incrementer::new(book, &url(book), token, format!("honest-{book}")))
        .collect::<anyhow::Result<_>>()?;
    let slice = |clients: Vec<Incrementer>, beside: bool| -> anyhow::Result<(Samples, Vec<Incrementer>)> {
        if beside {
            hostile_rt.block_on(gate.set(Phase::On));
        }
        let done = honest_rt.block_on(closed_loop_keeping(clients, plan.slice_warmup, plan.slice - plan.slice_warmup));
        if beside {
            hostile_rt.block_on(gate.set(Phase::Off));
        }
        done
    };
    eprintln!("soak: warm-up, one slice alone and one beside");
    for beside in [false, true] {
        clients = slice(clients, beside)?.1;
    }
    for c in &mut clients {
        c.seen = Seen::default();
    }
    let warm = sampler.started.elapsed();
    eprintln!("soak: {} rounds of a {} ms slice alone and one beside", plan.rounds, plan.slice.as_millis());
    let mut samples = [Samples::default(), Samples::default()];
    let mut seen = [Seen::default(), Seen::default()];
    for round in 0..plan.rounds {
        // Alternating which comes first, so that neither always follows the other.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for mode in order {
            let (taken, kept) = slice(clients, mode == 1)?;
            clients = kept;
            samples[mode].extend(taken);
            for c in &mut clients {
                seen[mode].merge(std::mem::take(&mut c.seen));
            }
        }
    }
    hostile_rt.block_on(gate.set(Phase::Stop));
    let flooders = hostile_rt.block_on(async {
        for task in kind_tasks {
            task.await.context("a hostile client panicked")?;
        }
        let mut flooders = Vec::new();
        for task in flood_tasks {
            flooders.push(task.await.context("a flooding client panicked")?);
        }
        anyhow::Ok(flooders)
    })?;
    stop_held.send_replace(true);
    let held = hostile_rt.block_on(async {
        let mut held = Vec::new();
        for task in held_tasks {
            held.push(task.await.context("a held connection panicked")?);
        }
        anyhow::Ok(held)
    })?;
    let rss = sampler.stop();
    Ok(Gathered {
        samples,
        seen,
        ledger,
        held,
        flooders,
        honest_acked: clients.iter().map(|c| (c.book, c.acked)).collect(),
        rss,
        warm,
    })
}

/// Requests with positions past the log's end, and one with a reached position beside
/// them.
fn positions(
    report: &mut Report,
    verdict: &mut Verdict,
    addr: &str,
    tokens: &Tokens,
    books: &Books,
    ledger: &Ledger,
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting a runtime")?;
    let timed = rt.block_on(positions::phase(addr, books.hostile, &catalog::bearer(&tokens.hostile), ledger))?;
    for t in &timed {
        report.record(
            &format!("positions,request={},status={}", t.name, t.answer),
            "took_ms",
            t.took.as_millis() as f64,
            "ms",
        )?;
    }
    let session = &timed[0];
    if session.took > positions::SESSION_WAIT_MAX {
        let others: Vec<String> =
            timed[1..].iter().map(|t| format!("{} ({} in {} ms)", t.name, t.answer, t.took.as_millis())).collect();
        verdict.lines.push(format!(
            "FINDING positions: a request with a reached Tally-Position took {} ms ({}) beside requests with positions past \
             the log's end: {}",
            session.took.as_millis(),
            session.answer,
            others.join(", ")
        ));
    }
    Ok(())
}

/// Bodies nearly whole, never finished, many at once: what the node holds for them.
fn held_bodies(report: &mut Report, verdict: &mut Verdict, addr: &str, tokens: &Tokens, books: &Books) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting a runtime")?;
    let head = held::slow_body_head(
        &format!("/v1/functions/counter/invoke?book={}", books.hostile),
        &catalog::bearer(&tokens.hostile),
        HELD_BODY_BYTES + 1,
    );
    let before = rss::rss_mib()?;
    let bodies = rt.block_on(held::held_bodies(addr, &head, HELD_BODIES, HELD_BODY_BYTES));
    // The node reads what the kernel has buffered on its own time.
    std::thread::sleep(Duration::from_secs(1));
    let holding = rss::rss_mib()?;
    let held = bodies.streams.len();
    drop(bodies);
    std::thread::sleep(Duration::from_secs(1));
    let after = rss::rss_mib()?;
    let case = "held-bodies";
    report.record(case, "connections", held as f64, "connections")?;
    report.record(case, "body_mib_each", (HELD_BODY_BYTES >> 20) as f64, "MiB")?;
    report.record(case, "rss_mib_before", round_to(before, 1), "MiB")?;
    report.record(case, "rss_mib_holding", round_to(holding, 1), "MiB")?;
    report.record(case, "rss_mib_after_close", round_to(after, 1), "MiB")?;
    // Each body is buffered whole as it comes (`RequestBody::read`): half of them held
    // is already their memory.
    let grown = holding - before;
    let bodies_mib = (held * HELD_BODY_BYTES) as f64 / f64::from(1 << 20);
    let line = format!(
        "held-bodies: {held} bodies of {} MiB, each one byte short, held {grown:.0} MiB more RSS \
         ({before:.0} -> {holding:.0} MiB; {after:.0} MiB once closed)",
        HELD_BODY_BYTES >> 20
    );
    verdict.lines.push(if grown > bodies_mib / 2.0 {
        format!("FINDING {line}: nothing bounds how many there are")
    } else {
        line
    });
    Ok(())
}
