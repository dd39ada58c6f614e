//! The `libs` suite's workflows: Beldi's travel and movie workflows (examples/travel and
//! examples/movie, Boki §7.2) at fixed request rates, as Boki's Figure 12, against the
//! same workflows run unsafe.
//!
//! ```text
//!   travel  half `search <date>` (two steps, each a read-only transaction), half
//!           `reserve <user> <hotel> <flight> <date>` (a login step, then a booking step
//!           under two locks in one transaction), over 20 hotels and 20 flights of 10
//!           rooms and seats a day, 100 users and 10 dates
//!   movie   `compose <user> <movie> <rating> <text>` (four steps, the last one
//!           transaction), over 20 movies and 100 users
//! ```
//!
//! Each workflow runs on one dev node (loopback QUIC log, fsync every batch) deployed
//! twice: as `<workflow>`, whose steps are exactly-once child invocations over objects,
//! and as `<workflow>-unsafe`, the baseline that runs the same steps as plain calls
//! on an `unsafe` state table, without transactions or locks (see the examples' docs).
//! Each on a book of its own.
//!
//! The load is an open loop: request `i` of a slice is due at `i / rate` seconds from
//! its start and is sent then, whatever is still running, so a slow server meets the
//! same arrivals as a fast one; its latency counts from when it was due. At most
//! [`IN_FLIGHT_MAX`] requests run at once: a request due while that many run is not sent
//! and counts as behind (`workflow_behind`), which a rate the machine sustains keeps at
//! 0. Per rate, the two deployments run in interleaved slices (rotated each round), so
//! that both sample the same machine; each slice waits for its last requests. The
//! achieved rate is the requests answered over the slices' time.
//!
//! After the run, the sanity checks: on Tally, every date's rooms, seats and trips
//! agree with each other and with the reservations answered, no hotel or flight is
//! overbooked, and the movies list exactly the reviews composed with matching rating
//! counts. The unsafe baseline is checked too, but only reported (`unsafe_anomalies`):
//! under concurrency it may overbook and lose list entries, which is what it gives up.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use tally::dev::DevNode;
use tally_runtime::Config;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::http::Http;
use crate::report::{micros, round_to, Latencies, Report};
use crate::state::Rng;
use crate::RunOptions;

/// Requests of one deployment running at once at most.
const IN_FLIGHT_MAX: usize = 64;
const HOTELS: u64 = 20;
const FLIGHTS: u64 = 20;
/// Rooms of a hotel and seats of a flight, each day.
const CAPACITY: i64 = 10;
const USERS: u64 = 100;
const DATES: u64 = 10;
const MOVIES: u64 = 20;

struct Plan {
    /// The rates of each workflow, requests per second.
    travel_rates: &'static [u32],
    movie_rates: &'static [u32],
    /// Run once per deployment and rate before the slices, not counted.
    warmup: Duration,
    slice: Duration,
    /// Slices per deployment and rate.
    slices: u32,
}

pub async fn run(opts: &RunOptions) -> anyhow::Result<()> {
    let plan = if opts.quick {
        Plan {
            travel_rates: &[100],
            movie_rates: &[50],
            warmup: Duration::from_millis(300),
            slice: Duration::from_secs(1),
            slices: 2,
        }
    } else {
        Plan {
            travel_rates: &[50, 100, 200, 400],
            movie_rates: &[25, 50, 100, 200],
            warmup: Duration::from_millis(500),
            slice: Duration::from_secs(3),
            slices: 3,
        }
    };
    let started = Instant::now();
    let guests = crate::invoke::guests().await?;
    let dir = tempfile::tempdir()?;
    let mut config = Config { data_dir: dir.path().join("data"), listen: "127.0.0.1:0".into(), ..Config::default() };
    // A workflow holds an instance of its function for its frontend and one for the
    // step it runs: room for every request in flight of every deployment.
    config.limits.concurrency_max = 4 * IN_FLIGHT_MAX as u32;
    let node = DevNode::start(config).await.context("starting the dev node")?;
    let mut report = Report::new(
        "libs",
        format!(
            "travel and movie workflows, open loop, latency from each request's due time; dev node: loopback QUIC log, \
             fsync every batch; at most {IN_FLIGHT_MAX} requests in flight per deployment"
        ),
    );
    for (workflow, rates) in [(Workflow::Travel, plan.travel_rates), (Workflow::Movie, plan.movie_rates)] {
        let component = std::fs::read(guests.join(format!("{}.wasm", workflow.name())))
            .with_context(|| format!("reading {}.wasm", workflow.name()))?;
        let mut targets = Vec::new();
        for (mode, book) in [(Mode::Tally, workflow.book()), (Mode::Unsafe, workflow.book() + 1)] {
            targets.push(Target::deploy(&node.url(), workflow, mode, book, &component).await?);
        }
        for &rate in rates {
            eprintln!(
                "libs: {} at {rate} requests/s: {} interleaved slices of {} ms per deployment",
                workflow.name(),
                plan.slices,
                plan.slice.as_millis()
            );
            let mut runs: Vec<Run> = targets.iter().map(|_| Run::default()).collect();
            for target in &targets {
                target.slice(rate, plan.warmup).await?;
            }
            for round in 0..plan.slices as usize {
                for k in 0..targets.len() {
                    let i = (round + k) % targets.len();
                    runs[i].add(targets[i].slice(rate, plan.slice).await?);
                }
            }
            for (target, run) in targets.iter().zip(runs) {
                let case = format!("{} {} rps={rate}", workflow.name(), target.mode.name());
                let latencies = Latencies::new(run.latencies_us);
                ensure!(latencies.len() > 0, "no request of {case} was answered");
                for (metric, percent) in [("workflow_latency_p50", 50.0), ("workflow_latency_p99", 99.0)] {
                    let us = latencies.percentile(percent).expect("checked non-empty");
                    report.record(&case, metric, round_to(f64::from(us) / 1000.0, 2), "ms")?;
                }
                let achieved = latencies.len() as f64 / run.window.as_secs_f64();
                report.record(&case, "workflow_rate", round_to(achieved, 1), "requests/s")?;
                report.record(&case, "workflow_behind", run.behind as f64, "requests")?;
            }
            let p50 = |mode: Mode| {
                let case = format!("{} {} rps={rate}", workflow.name(), mode.name());
                report.value(&case, "workflow_latency_p50").expect("recorded above")
            };
            let ratio = round_to(p50(Mode::Tally) / p50(Mode::Unsafe).max(0.01), 2);
            report.record(&format!("{} tally rps={rate}", workflow.name()), "p50_vs_unsafe", ratio, "x")?;
        }
        for target in &targets {
            let anomalies = target.check().await?;
            match target.mode {
                Mode::Tally => ensure!(anomalies == 0, "{} on Tally: {anomalies} anomalies", workflow.name()),
                Mode::Unsafe => {
                    report.record(&format!("{} unsafe", workflow.name()), "unsafe_anomalies", anomalies as f64, "units")?
                }
            }
        }
    }
    node.shutdown().await;
    report.print_table();
    eprintln!("libs: workflows done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Workflow {
    Travel,
    Movie,
}

impl Workflow {
    fn name(self) -> &'static str {
        match self {
            Workflow::Travel => "travel",
            Workflow::Movie => "movie",
        }
    }

    /// The book of the Tally deployment; the unsafe one's is the next.
    fn book(self) -> u64 {
        match self {
            Workflow::Travel => 70,
            Workflow::Movie => 72,
        }
    }

    fn init(self) -> String {
        match self {
            Workflow::Travel => format!("init {HOTELS} {CAPACITY} {FLIGHTS} {CAPACITY} {USERS}"),
            Workflow::Movie => format!("init {MOVIES} {USERS}"),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Tally,
    Unsafe,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Tally => "tally",
            Mode::Unsafe => "unsafe",
        }
    }
}

/// What a deployment's requests were answered, for the checks.
#[derive(Default)]
struct Answers {
    /// Reservations answered `reserved`, per date.
    reserved: BTreeMap<String, i64>,
    /// Reviews answered `composed`.
    composed: i64,
}

/// One deployment of a workflow, with its connections and its answers so far.
struct Target {
    workflow: Workflow,
    mode: Mode,
    invoke_url: String,
    /// Idle keep-alive connections; at most one per request in flight.
    connections: Arc<Mutex<Vec<Http>>>,
    answers: Arc<Mutex<Answers>>,
    rng: Mutex<Rng>,
}

/// A deployment's counted slices.
#[derive(Default)]
struct Run {
    latencies_us: Vec<u32>,
    behind: u64,
    window: Duration,
}

impl Run {
    fn add(&mut self, slice: Run) {
        self.latencies_us.extend(slice.latencies_us);
        self.behind += slice.behind;
        self.window += slice.window;
    }
}

impl Target {
    /// Deploys the workflow as `mode` asks and runs its `init` on `book`.
    async fn deploy(url: &str, workflow: Workflow, mode: Mode, book: u64, component: &[u8]) -> anyhow::Result<Target> {
        let (function, query) = match mode {
            Mode::Tally => (workflow.name().to_string(), String::new()),
            Mode::Unsafe => (format!("{}-unsafe", workflow.name()), format!("?tables={}:unsafe", workflow.name())),
        };
        let deploy_url = format!("{url}/v1/functions/{function}{query}");
        let invoke_url = format!("{url}/v1/functions/{function}/invoke?book={book}");
        let target = Target {
            workflow,
            mode,
            invoke_url,
            connections: Arc::default(),
            answers: Arc::default(),
            rng: Mutex::new(Rng(0x9e37_79b9_7f4a_7c15 ^ book)),
        };
        tokio::task::spawn_blocking({
            let component = component.to_vec();
            move || {
                let mut response = crate::invoke::deploy_agent()
                    .put(&deploy_url)
                    .send(&component[..])
                    .with_context(|| format!("PUT {deploy_url}"))?;
                let status = response.status().as_u16();
                let text = response.body_mut().read_to_string().unwrap_or_default();
                ensure!(status == 201, "deploying {function} answered {status}: {text}");
                anyhow::Ok(())
            }
        })
        .await??;
        let answer = target.request(workflow.init()).await?;
        ensure!(answer == "ok", "{} init answered {answer:?}", workflow.name());
        Ok(target)
    }

    /// The next request's input.
    fn next_input(&self) -> String {
        let mut rng = self.rng.lock().expect("not poisoned");
        let mut below = |n: u64| rng.next() % n;
        let date = below(DATES);
        match self.workflow {
            Workflow::Travel if below(2) == 0 => format!("search d{date}"),
            Workflow::Travel => {
                let (user, hotel, flight) = (below(USERS), below(HOTELS), below(FLIGHTS));
                format!("reserve u{user} h{hotel} f{flight} d{date}")
            }
            Workflow::Movie => {
                let (user, movie, rating) = (below(USERS), below(MOVIES), below(11));
                format!("compose u{user} m{movie} {rating} A review of m{movie} by u{user}, rated {rating}.")
            }
        }
    }

    /// POSTs `input` on a connection of the pool; the answer, which must be 200.
    async fn request(&self, input: String) -> anyhow::Result<String> {
        request(&self.connections, &self.invoke_url, input).await
    }

    /// Runs the open loop at `rate` for `duration`, then waits for its requests.
    async fn slice(&self, rate: u32, duration: Duration) -> anyhow::Result<Run> {
        let interval = Duration::from_secs_f64(1.0 / f64::from(rate));
        let in_flight = Arc::new(Semaphore::new(IN_FLIGHT_MAX));
        let mut requests = JoinSet::new();
        let mut run = Run::default();
        let start = tokio::time::Instant::now();
        for i in 0.. {
            let due = start + interval * i;
            if due >= start + duration {
                break;
            }
            tokio::time::sleep_until(due).await;
            let Ok(permit) = in_flight.clone().try_acquire_owned() else {
                run.behind += 1;
                continue;
            };
            let input = self.next_input();
            let (connections, url, answers) = (self.connections.clone(), self.invoke_url.clone(), self.answers.clone());
            requests.spawn(async move {
                let answer = request(&connections, &url, input.clone()).await;
                let latency = due.elapsed();
                drop(permit);
                observe(&answers, &input, &answer?)?;
                anyhow::Ok(micros(latency))
            });
            // Reaps what finished, so that the set holds only what is in flight.
            while let Some(done) = requests.try_join_next() {
                run.latencies_us.push(done??);
            }
        }
        while let Some(done) = requests.join_next().await {
            run.latencies_us.push(done??);
        }
        run.window = duration;
        Ok(run)
    }

    /// The sanity checks: the number of anomalies found (overbooked rooms and seats,
    /// bookings or reviews miscounted or lost), which must be 0 on Tally.
    async fn check(&self) -> anyhow::Result<u64> {
        let answers = std::mem::take(&mut *self.answers.lock().expect("not poisoned"));
        let mut anomalies = 0;
        match self.workflow {
            Workflow::Travel => {
                for date in (0..DATES).map(|d| format!("d{d}")) {
                    let audit = self.request(format!("audit {date}")).await?;
                    let counts: Vec<i64> = audit.split(' ').skip(1).step_by(2).map(str::parse).collect::<Result<_, _>>()?;
                    let reserved = answers.reserved.get(&date).copied().unwrap_or(0);
                    anomalies += counts.iter().map(|&c| c.abs_diff(reserved)).sum::<u64>();
                    let search = self.request(format!("search {date}")).await?;
                    let left = search.split([' ', ';']).filter_map(|w| w.split_once(':'));
                    for (name, left) in left {
                        let left: i64 = left.parse().with_context(|| format!("{name} in {search:?}"))?;
                        anomalies += u64::try_from(-left).unwrap_or(0);
                    }
                }
                let reserved: i64 = answers.reserved.values().sum();
                eprintln!(
                    "libs: travel {}: {reserved} reservations; rooms, seats and trips checked: {anomalies} anomalies",
                    self.mode.name()
                );
            }
            Workflow::Movie => {
                let mut listed = 0i64;
                for movie in 0..MOVIES {
                    let reviews = self.request(format!("reviews m{movie}")).await?;
                    let mut lines = reviews.lines();
                    let head = lines.next().context("a count and a sum")?;
                    let count: i64 = head.split(' ').next().unwrap_or_default().parse().with_context(|| format!("{head:?}"))?;
                    let entries = lines.count() as i64;
                    anomalies += count.abs_diff(entries);
                    listed += entries;
                }
                anomalies += listed.abs_diff(answers.composed);
                if self.mode == Mode::Tally {
                    let audit = self.request("audit".into()).await?;
                    ensure!(audit == format!("reviews {}", answers.composed), "movie audit: {audit}");
                }
                eprintln!(
                    "libs: movie {}: {} reviews composed, {listed} listed: {anomalies} anomalies",
                    self.mode.name(),
                    answers.composed
                );
            }
        }
        Ok(anomalies)
    }
}

/// POSTs `input` to `url` on an idle connection of `connections` (or a new one), and
/// gives the connection back; the answer, which must be 200.
async fn request(connections: &Mutex<Vec<Http>>, url: &str, input: String) -> anyhow::Result<String> {
    let idle = connections.lock().expect("not poisoned").pop();
    let mut http = match idle {
        Some(http) => http,
        None => Http::new(url)?,
    };
    // Not resent on a fresh connection: an invocation without a key may have run.
    let (status, answer) = http.post(input.as_bytes(), None, false).await?;
    connections.lock().expect("not poisoned").push(http);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    ensure!(status == 200, "{input:?} answered {status}: {answer}");
    Ok(answer)
}

/// Counts what `answer` says was done.
fn observe(answers: &Mutex<Answers>, input: &str, answer: &str) -> anyhow::Result<()> {
    let mut answers = answers.lock().expect("not poisoned");
    if let Some(rest) = input.strip_prefix("reserve ") {
        let date = rest.rsplit(' ').next().expect("a reserve names a date");
        match answer.split(' ').next() {
            Some("reserved") => *answers.reserved.entry(date.to_string()).or_default() += 1,
            Some("full" | "busy") => {}
            _ => anyhow::bail!("{input:?} answered {answer:?}"),
        }
    } else if input.starts_with("compose ") {
        ensure!(answer.starts_with("composed "), "{input:?} answered {answer:?}");
        answers.composed += 1;
    }
    Ok(())
}
