//! The `libs` suite: Boki's workloads on Tally's libraries, each against what a user
//! would run instead, measured in the same run.
//!
//! ```text
//!   retwis  examples/retwis with Boki's mix (§7.3): UserLogin 15%, UserProfile 30%,
//!           GetTimeline 50% (a read-only transaction), NewTweet 5% (a read-write
//!           transaction), on uniformly random users of 10,000 (quick: 1,000), each
//!           followed by the next 4. Targets:
//!             tally        a dev node, clients invoking over HTTP (keep-alive)
//!             tally-noaux  a second dev node without aux-data views (Boki's Table 7
//!                          baseline: every object read replays from its checkpoint)
//!             postgres     the same application as a plain tokio-postgres client at
//!                          REPEATABLE READ, retried on serialization failures
//!           1 and 32 clients, the targets in interleaved slices; per request type p50
//!           and p99
//!   queue   examples/pipeline (Boki Table 6): P producers invoking `produce` (8
//!           messages of 1 KiB per invocation) and C consumers invoking `consume` (up
//!           to 8 messages, 100 ms pop timeout) on one queue, at P:C 4:16, 16:4 and
//!           8:8; against Redis streams with a consumer group (XADD; XREADGROUP COUNT 8
//!           BLOCK 100; XACK) with `appendfsync always`. Throughput of messages
//!           consumed, and delivery latency (pop time minus the push time the message
//!           carries). Each run drains its queue and checks that every message was
//!           delivered exactly once
//!   read-only  a read-only exactly-once invocation (Retwis's reads, without a key and
//!           with one) against `hello` on the same node: `read_only.rs`
//!   workflows  Beldi's travel and movie workflows at fixed request rates against
//!           their unsafe baseline (Boki Figure 12): `workflows.rs`
//!   retwis-profile  (only when asked for by `--only`) the `tally` target alone at 32
//!           clients for 20 s, its pid printed, for a profiler
//!   login-profile, profile-profile, timeline-profile  (likewise) that read-only
//!           request alone, unkeyed, from one client
//! ```
//!
//! PostgreSQL's Retwis is relational, one row per BokiStore object (`users`,
//! `timelines`, `tweets`, followers and timelines as arrays), which is how a
//! PostgreSQL user would write it and touches as many rows as Tally touches objects:
//! a tweet reads its author's row, inserts the tweet, updates the count and the
//! timelines of the author and the followers (the newest 32 IDs); a timeline read
//! reads the timeline row and its newest 8 tweets in one read-only transaction. The
//! server syncs every commit (`fsync`, `synchronous_commit`), as Tally's log does.
//!
//! After the runs, every target must hold, for every user that tweeted, as many
//! tweets in its count as the clients made, and timelines of the length those counts
//! give (all of them on PostgreSQL, a sample on Tally).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context as _};
use serde_json::Value;
use tally::dev::DevNode;
use tally_runtime::Config;
use tokio::task::JoinSet;
use tokio_postgres::error::SqlState;
use tokio_postgres::{IsolationLevel, Statement};

use crate::http::Http;
use crate::invoke::deploy_agent;
use crate::peers::Postgres;
use crate::report::{micros, round_to, Latencies, Report};
use crate::state::{connect, show, Rng};
use crate::RunOptions;

mod queue;
mod read_only;

struct Plan {
    /// Retwis users.
    users: u64,
    /// Timelines whose length is checked on each Tally node after the run.
    timelines_checked: u64,
    /// Run once per target and client count before its slices, not counted.
    warmup: Duration,
    /// Each slice, per target; the start of it is not counted.
    slice: Duration,
    slice_warmup: Duration,
    /// Slices per target and client count (Retwis), and per target and P:C (queues).
    slices: u32,
    /// How long the producers of one queue run produce.
    queue_window: Duration,
}

pub async fn run(opts: &RunOptions) -> anyhow::Result<()> {
    let plan = if opts.quick {
        Plan {
            users: 1_000,
            timelines_checked: 50,
            warmup: Duration::from_millis(200),
            slice: Duration::from_millis(800),
            slice_warmup: Duration::from_millis(50),
            slices: 1,
            queue_window: Duration::from_millis(1_000),
        }
    } else {
        Plan {
            users: 10_000,
            timelines_checked: 200,
            warmup: Duration::from_millis(500),
            slice: Duration::from_secs(3),
            slice_warmup: Duration::from_millis(100),
            slices: 3,
            queue_window: Duration::from_secs(3),
        }
    };
    let started = Instant::now();
    let guests = crate::invoke::guests().await?;
    let retwis_component = std::fs::read(guests.join("retwis.wasm")).context("reading retwis.wasm")?;
    let pipeline_component = std::fs::read(guests.join("pipeline.wasm")).context("reading pipeline.wasm")?;
    let mut report = Report::new(
        "libs",
        "dev nodes: loopback QUIC log, fsync every batch; PostgreSQL: fsync and synchronous_commit on; \
         Redis: appendfsync always",
    );
    if opts.runs("retwis") {
        retwis(retwis_component.clone(), &plan, &mut report).await?;
    }
    // Not part of a full run: a window for a profiler (`perf record -p`).
    if opts.only.iter().any(|o| o == "retwis-profile") {
        retwis_profile(retwis_component.clone(), &plan, &mut report).await?;
    }
    if let Some(request) = opts.only.iter().find_map(|o| o.strip_suffix("-profile").filter(|r| read_only::PROFILED.contains(r))) {
        read_only_profile(retwis_component, request, &plan, &mut report).await?;
    }
    if opts.runs("queue") {
        queue::queues(pipeline_component, &plan, &mut report).await?;
    }
    report.print_table();
    // The workflows print a table of their own, under this suite's name.
    if opts.runs("workflows") {
        crate::workflows::run(opts).await?;
    }
    eprintln!("libs: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// A dev node with its data kept alive.
struct Node {
    node: DevNode,
    _dir: tempfile::TempDir,
}

impl Node {
    /// A node with default settings, but for the aux-data views of objects, queues and
    /// locks, on or off.
    async fn start(aux_views: bool) -> anyhow::Result<Node> {
        let dir = tempfile::tempdir()?;
        let mut config = Config { data_dir: dir.path().join("data"), listen: "127.0.0.1:0".into(), ..Config::default() };
        config.state.aux_views = aux_views;
        let node = DevNode::start(config).await.context("starting a dev node")?;
        Ok(Node { node, _dir: dir })
    }

    /// Deploys `component` as `function`; the URL that invokes it on `book`.
    async fn deploy(&self, function: &str, component: Vec<u8>, book: u64) -> anyhow::Result<String> {
        let url = self.node.url();
        let deploy_url = format!("{url}/v1/functions/{function}?timeout_ms=30000");
        tokio::task::spawn_blocking(move || {
            let mut response =
                deploy_agent().put(&deploy_url).send(&component[..]).with_context(|| format!("PUT {deploy_url}"))?;
            let status = response.status().as_u16();
            let text = response.body_mut().read_to_string().unwrap_or_default();
            ensure!(status == 201, "deploying at {deploy_url} answered {status}: {text}");
            anyhow::Ok(())
        })
        .await??;
        Ok(format!("{url}/v1/functions/{function}/invoke?book={book}"))
    }
}

/// POSTs `body` on `http` (with an Idempotency-Key if given); the answer, which must be
/// 200. Every request of the suite may be sent twice: reads have no effect, and every
/// invocation that pushes, pops or writes goes with a key.
async fn invoke(http: &mut Http, body: &str, key: Option<&str>) -> anyhow::Result<String> {
    let (status, answer) = http.post(body.as_bytes(), key, true).await?;
    let answer = String::from_utf8(answer).context("an answer that is not UTF-8")?;
    ensure!(status == 200, "{body:.60} answered {status}: {answer}");
    Ok(answer)
}

fn json(answer: &str) -> anyhow::Result<Value> {
    serde_json::from_str(answer).with_context(|| format!("an answer that is not JSON: {answer:.200}"))
}

/// The wall clock in µs since the Unix epoch, as the guests read it.
fn now_us() -> u64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_micros()).unwrap_or(u64::MAX)
}

/// `p50` and `p99` of `latencies` under the two metric names, or a note when the case
/// had no such request (a short quick slice may make no tweet).
fn record_percentiles(report: &mut Report, case: &str, metrics: [&'static str; 2], latencies: &Latencies) -> anyhow::Result<()> {
    if latencies.len() == 0 {
        eprintln!("libs: {case}: no request for {}", metrics[0]);
        return Ok(());
    }
    crate::log::record_percentiles(report, case, metrics, latencies)
}

// --- Retwis -------------------------------------------------------------------------

/// The book Retwis's objects live in on the dev nodes.
const RETWIS_BOOK: u64 = 30;
/// Every user is followed by the next `FOLLOWERS` users.
const FOLLOWERS: u64 = 4;
/// The length of a timeline (`TIMELINE_LEN` of the example).
const TIMELINE_LEN: u64 = 32;
/// Users `init` creates per invocation.
const INIT_BATCH: u64 = 500;
/// The client counts: latency unloaded, then throughput.
const RETWIS_CLIENTS: [usize; 2] = [1, 32];

/// Boki's request types, with their share of the mix in percent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Request {
    Login,
    Profile,
    Timeline,
    Tweet,
}

const MIX: [(Request, u64, [&str; 2]); 4] = [
    (Request::Login, 15, ["login_p50", "login_p99"]),
    (Request::Profile, 30, ["profile_p50", "profile_p99"]),
    (Request::Timeline, 50, ["timeline_p50", "timeline_p99"]),
    (Request::Tweet, 5, ["tweet_p50", "tweet_p99"]),
];
const _: () = assert!(MIX[0].1 + MIX[1].1 + MIX[2].1 + MIX[3].1 == 100, "the mix adds up to 100%");

impl Request {
    fn index(self) -> usize {
        MIX.iter().position(|(r, _, _)| *r == self).expect("every request is in the mix")
    }

    /// The request a roll in 0..100 picks.
    fn of_roll(mut roll: u64) -> Request {
        for (request, percent, _) in MIX {
            if roll < percent {
                return request;
            }
            roll -= percent;
        }
        unreachable!("the mix adds up to 100%")
    }
}

/// Where Retwis runs.
enum Retwis {
    Tally { name: &'static str, invoke_url: String },
    Postgres { conninfo: String },
}

impl Retwis {
    /// Deploys the example on `node` and creates the users, `INIT_BATCH` an invocation.
    async fn tally(name: &'static str, node: &Node, component: Vec<u8>, users: u64) -> anyhow::Result<Retwis> {
        let invoke_url = node.deploy("retwis", component, RETWIS_BOOK).await?;
        let mut http = Http::new(&invoke_url)?;
        for first in (0..users).step_by(INIT_BATCH as usize) {
            let count = INIT_BATCH.min(users - first);
            let answer = json(
                &invoke(&mut http, &format!("init {first} {count} {FOLLOWERS} {users}"), Some(&format!("init-{first}"))).await?,
            )?;
            ensure!(answer["created"] == count, "{name}: init {first} {count} answered {answer}");
        }
        Ok(Retwis::Tally { name, invoke_url })
    }

    /// Creates the database `retwis` with every user, after checking that the server
    /// syncs every commit.
    async fn postgres(server: &Postgres, users: u64) -> anyhow::Result<Retwis> {
        let admin = connect(&server.conninfo("postgres")).await?;
        let (fsync, synchronous_commit) = (show(&admin, "fsync").await?, show(&admin, "synchronous_commit").await?);
        ensure!(
            fsync == "on" && synchronous_commit == "on",
            "PostgreSQL runs with fsync {fsync}, synchronous_commit {synchronous_commit}"
        );
        admin.batch_execute("CREATE DATABASE retwis").await?;
        let conninfo = server.conninfo("retwis");
        let client = connect(&conninfo).await?;
        client
            .batch_execute(&format!(
                "CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL, password text NOT NULL,
                     followers bigint[] NOT NULL, tweets bigint NOT NULL);
                 CREATE TABLE timelines (user_id bigint PRIMARY KEY, ids text[] NOT NULL);
                 CREATE TABLE tweets (id text PRIMARY KEY, author bigint NOT NULL, seq bigint NOT NULL, text text NOT NULL);
                 INSERT INTO users SELECT i, 'user' || i, 'pw' || i,
                     ARRAY(SELECT (i + k) % {users} FROM generate_series(1, {FOLLOWERS}) k), 0
                     FROM generate_series(0, {users} - 1) i;
                 INSERT INTO timelines SELECT i, '{{}}' FROM generate_series(0, {users} - 1) i;"
            ))
            .await?;
        let version = show(&client, "server_version").await?;
        eprintln!("libs: retwis: PostgreSQL {version}, REPEATABLE READ, unix socket");
        Ok(Retwis::Postgres { conninfo })
    }

    fn name(&self) -> &'static str {
        match self {
            Retwis::Tally { name, .. } => name,
            Retwis::Postgres { .. } => "postgres",
        }
    }

    async fn clients(&self, count: usize, users: u64) -> anyhow::Result<Vec<RetwisClient>> {
        let mut clients = Vec::with_capacity(count);
        for i in 0..count {
            let conn = match self {
                Retwis::Tally { invoke_url, .. } => Conn::Tally(Http::new(invoke_url)?),
                Retwis::Postgres { conninfo } => Conn::Postgres(PgRetwis::connect(conninfo).await?),
            };
            let name = format!("{count}c{i}");
            let rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (count as u64) << 32 ^ i as u64);
            clients.push(RetwisClient { conn, rng, users, name, made: 0, tweets: BTreeMap::new() });
        }
        Ok(clients)
    }

    /// Checks the store against the tweets the clients made, per author.
    async fn check(&self, tweets: &BTreeMap<u64, u64>, plan: &Plan) -> anyhow::Result<()> {
        let count = |user: u64| tweets.get(&user).copied().unwrap_or(0);
        // A user's timeline holds its own tweets and those of the users it follows.
        let timeline_len = |user: u64| {
            let followed: u64 = (1..=FOLLOWERS).map(|k| count((user + plan.users - k) % plan.users)).sum();
            TIMELINE_LEN.min(count(user) + followed)
        };
        let made: u64 = tweets.values().sum();
        match self {
            Retwis::Tally { name, invoke_url } => {
                let mut http = Http::new(invoke_url)?;
                for (&user, &n) in tweets {
                    let profile = json(&invoke(&mut http, &format!("profile {user}"), None).await?)?;
                    ensure!(profile["tweets"] == n, "{name}: user {user} made {n} tweets, its profile shows {profile}");
                }
                for user in (0..plan.users).step_by((plan.users / plan.timelines_checked) as usize) {
                    let timeline = json(&invoke(&mut http, &format!("timeline {user} {TIMELINE_LEN}"), None).await?)?;
                    let shown = timeline["tweets"].as_array().map_or(0, Vec::len) as u64;
                    ensure!(
                        shown == timeline_len(user),
                        "{name}: user {user}'s timeline shows {shown} tweets, not {}",
                        timeline_len(user)
                    );
                }
                eprintln!(
                    "libs: retwis: {name}: {made} tweets; every author's count and {} timelines check",
                    plan.timelines_checked
                );
            }
            Retwis::Postgres { conninfo } => {
                let client = connect(conninfo).await?;
                let counts: BTreeMap<u64, u64> = client
                    .query("SELECT id, tweets FROM users WHERE tweets > 0", &[])
                    .await?
                    .iter()
                    .map(|row| (row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64))
                    .collect();
                ensure!(counts == *tweets, "postgres: the users' counts differ from the tweets the clients made");
                let stored: i64 = client.query_one("SELECT count(*) FROM tweets", &[]).await?.get(0);
                ensure!(stored as u64 == made, "postgres: {stored} tweets stored, the clients made {made}");
                let lengths = client.query("SELECT user_id, cardinality(ids) FROM timelines", &[]).await?;
                for row in lengths {
                    let (user, len) = (row.get::<_, i64>(0) as u64, row.get::<_, i32>(1) as u64);
                    ensure!(
                        len == timeline_len(user),
                        "postgres: user {user}'s timeline holds {len}, not {}",
                        timeline_len(user)
                    );
                }
                eprintln!("libs: retwis: postgres: {made} tweets; every user's count and timeline check");
            }
        }
        Ok(())
    }
}

/// A client's connection to its target.
enum Conn {
    Tally(Http),
    Postgres(PgRetwis),
}

/// One client of the mix, making one request at a time on users chosen at random.
struct RetwisClient {
    conn: Conn,
    rng: Rng,
    users: u64,
    /// Unique among the suite's clients: names its tweets.
    name: String,
    /// Tweets made so far.
    made: u64,
    /// Tweets made per author.
    tweets: BTreeMap<u64, u64>,
}

impl RetwisClient {
    /// One request of the mix, its answer checked; which one it was.
    async fn request(&mut self) -> anyhow::Result<Request> {
        let request = Request::of_roll(self.rng.next() % 100);
        let user = self.rng.next() % self.users;
        let tweet_id = format!("{}-{}", self.name, self.made);
        match &mut self.conn {
            Conn::Tally(http) => match request {
                Request::Login => {
                    let answer = invoke(http, &format!("login {user} pw{user}"), None).await?;
                    ensure!(answer == "ok", "login {user} answered {answer}");
                }
                Request::Profile => {
                    let profile = json(&invoke(http, &format!("profile {user}"), None).await?)?;
                    ensure!(profile["name"] == format!("user{user}"), "profile {user} answered {profile}");
                }
                Request::Timeline => {
                    let timeline = json(&invoke(http, &format!("timeline {user}"), None).await?)?;
                    let tweets = timeline["tweets"].as_array().with_context(|| format!("timeline {user} answered {timeline}"))?;
                    ensure!(tweets.iter().all(Value::is_object), "timeline {user} names a tweet its snapshot lacks: {timeline}");
                }
                Request::Tweet => {
                    let input = format!("tweet {user} tweet {tweet_id}");
                    let answer = json(&invoke(http, &input, Some(&tweet_id)).await?)?;
                    ensure!(answer["seq"].is_u64(), "{input} answered {answer}");
                }
            },
            Conn::Postgres(pg) => pg.request(request, user, &tweet_id).await?,
        }
        if request == Request::Tweet {
            self.made += 1;
            *self.tweets.entry(user).or_default() += 1;
        }
        Ok(request)
    }
}

/// Retwis as a PostgreSQL client writes it.
struct PgRetwis {
    client: tokio_postgres::Client,
    login: Statement,
    profile: Statement,
    timeline: Statement,
    tweets: Statement,
    author: Statement,
    insert: Statement,
    count: Statement,
    push: Statement,
}

impl PgRetwis {
    async fn connect(conninfo: &str) -> anyhow::Result<PgRetwis> {
        let client = connect(conninfo).await?;
        Ok(PgRetwis {
            login: client.prepare("SELECT password FROM users WHERE id = $1").await?,
            profile: client.prepare("SELECT name, followers, tweets FROM users WHERE id = $1").await?,
            timeline: client.prepare("SELECT ids FROM timelines WHERE user_id = $1").await?,
            tweets: client.prepare("SELECT id, author, seq, text FROM tweets WHERE id = ANY($1)").await?,
            author: client.prepare("SELECT followers, tweets FROM users WHERE id = $1").await?,
            insert: client.prepare("INSERT INTO tweets (id, author, seq, text) VALUES ($1, $2, $3, $4)").await?,
            count: client.prepare("UPDATE users SET tweets = $2 WHERE id = $1").await?,
            push: client
                .prepare(&format!(
                    "UPDATE timelines SET ids = CASE WHEN cardinality(ids) < {TIMELINE_LEN} THEN ids ELSE ids[2:] END || $2::text
                     WHERE user_id = ANY($1)"
                ))
                .await?,
            client,
        })
    }

    async fn request(&mut self, request: Request, user: u64, tweet_id: &str) -> anyhow::Result<()> {
        let user = user as i64;
        match request {
            Request::Login => {
                let password: String = self.client.query_one(&self.login, &[&user]).await?.get(0);
                ensure!(password == format!("pw{user}"), "user {user}'s password is {password:?}");
            }
            Request::Profile => {
                let row = self.client.query_one(&self.profile, &[&user]).await?;
                let (name, _followers, _tweets): (String, Vec<i64>, i64) = (row.get(0), row.get(1), row.get(2));
                ensure!(name == format!("user{user}"), "user {user} is named {name:?}");
            }
            Request::Timeline => loop {
                match self.timeline(user).await {
                    Err(e) if retryable(&e) => continue,
                    done => break done?,
                }
            },
            Request::Tweet => loop {
                match self.tweet(user, tweet_id).await {
                    Err(e) if retryable(&e) => continue,
                    done => break done?,
                }
            },
        }
        Ok(())
    }

    /// GetTimeline: the timeline and its newest 8 tweets, in one snapshot.
    async fn timeline(&mut self, user: i64) -> Result<(), tokio_postgres::Error> {
        let tx = self.client.build_transaction().isolation_level(IsolationLevel::RepeatableRead).read_only(true).start().await?;
        let ids: Vec<String> = tx.query_one(&self.timeline, &[&user]).await?.get(0);
        let newest: Vec<&String> = ids.iter().rev().take(8).collect();
        let tweets = tx.query(&self.tweets, &[&newest]).await?;
        tx.commit().await?;
        assert_eq!(tweets.len(), newest.len(), "user {user}'s timeline names tweets its snapshot lacks");
        Ok(())
    }

    /// NewTweet: reads the author's followers and count, inserts the tweet, updates the
    /// count and the timelines.
    async fn tweet(&mut self, user: i64, id: &str) -> Result<(), tokio_postgres::Error> {
        let tx = self.client.build_transaction().isolation_level(IsolationLevel::RepeatableRead).start().await?;
        let row = tx.query_one(&self.author, &[&user]).await?;
        let (mut readers, tweets): (Vec<i64>, i64) = (row.get(0), row.get(1));
        let seq = tweets + 1;
        tx.execute(&self.insert, &[&id, &user, &seq, &format!("tweet {id}")]).await?;
        tx.execute(&self.count, &[&user, &seq]).await?;
        readers.push(user);
        tx.execute(&self.push, &[&readers, &id]).await?;
        tx.commit().await
    }
}

/// A conflict that PostgreSQL resolves by aborting a transaction, which then runs again.
fn retryable(e: &tokio_postgres::Error) -> bool {
    matches!(e.code(), Some(code) if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED)
}

/// What one target measured at one client count over its slices.
#[derive(Default)]
struct RetwisSamples {
    /// Latencies per request type, in the order of `MIX`.
    latencies_us: [Vec<u32>; 4],
    window: Duration,
}

/// Every client runs requests one at a time until `warmup + window` has passed; what
/// finished within the window is counted.
async fn retwis_loop(
    clients: Vec<RetwisClient>,
    warmup: Duration,
    window: Duration,
    samples: &mut RetwisSamples,
) -> anyhow::Result<Vec<RetwisClient>> {
    let from = Instant::now() + warmup;
    let end = from + window;
    let mut tasks = JoinSet::new();
    for mut client in clients {
        tasks.spawn(async move {
            let mut latencies: [Vec<u32>; 4] = Default::default();
            while Instant::now() < end {
                let sent = Instant::now();
                let request = client.request().await?;
                let done = Instant::now();
                if (from..end).contains(&done) {
                    latencies[request.index()].push(micros(done - sent));
                }
            }
            anyhow::Ok((client, latencies))
        });
    }
    let mut kept = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (client, latencies) = joined.context("a Retwis client panicked")??;
        for (all, some) in samples.latencies_us.iter_mut().zip(latencies) {
            all.extend(some);
        }
        kept.push(client);
    }
    samples.window += window;
    Ok(kept)
}

async fn retwis(component: Vec<u8>, plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("libs: retwis: creating {} users on each target", plan.users);
    let nodes = [("tally", Node::start(true).await?), ("tally-noaux", Node::start(false).await?)];
    let mut targets = Vec::new();
    for (name, node) in &nodes {
        targets.push(Retwis::tally(name, node, component.clone(), plan.users).await?);
    }
    let postgres = match tokio::task::spawn_blocking(Postgres::start).await? {
        Ok(server) => Some(server),
        Err(e) => {
            eprintln!("libs: retwis: PostgreSQL cannot start here ({e:#}); measuring Tally alone");
            None
        }
    };
    if let Some(server) = &postgres {
        targets.push(Retwis::postgres(server, plan.users).await?);
    }
    // Tweets made per author, per target, over every client count.
    let mut tweets = vec![BTreeMap::<u64, u64>::new(); targets.len()];
    for clients in RETWIS_CLIENTS {
        eprintln!(
            "libs: retwis, {clients} clients: {} interleaved slices of {} ms per target",
            plan.slices,
            plan.slice.as_millis()
        );
        let mut pools = Vec::new();
        for target in &targets {
            let pool = target.clients(clients, plan.users).await?;
            pools.push(retwis_loop(pool, plan.warmup, Duration::ZERO, &mut RetwisSamples::default()).await?);
        }
        let mut samples: Vec<RetwisSamples> = targets.iter().map(|_| RetwisSamples::default()).collect();
        for round in 0..plan.slices as usize {
            for k in 0..targets.len() {
                // Rotated, so that no target always follows the same one.
                let i = (round + k) % targets.len();
                let pool = std::mem::take(&mut pools[i]);
                pools[i] = retwis_loop(pool, plan.slice_warmup, plan.slice - plan.slice_warmup, &mut samples[i]).await?;
            }
        }
        for ((target, samples), (pool, tweets)) in targets.iter().zip(samples).zip(pools.into_iter().zip(&mut tweets)) {
            let case = format!("{} clients={clients}", target.name());
            let requests: usize = samples.latencies_us.iter().map(Vec::len).sum();
            report.record(&case, "retwis_throughput", (requests as f64 / samples.window.as_secs_f64()).round(), "ops/s")?;
            for ((_, _, metrics), latencies) in MIX.iter().zip(samples.latencies_us) {
                record_percentiles(report, &case, *metrics, &Latencies::new(latencies))?;
            }
            for client in pool {
                for (user, n) in client.tweets {
                    *tweets.entry(user).or_default() += n;
                }
            }
        }
        if let Some(pg) = report.value(&format!("postgres clients={clients}"), "retwis_throughput") {
            for (name, _) in &nodes {
                let case = format!("{name} clients={clients}");
                let tally = report.value(&case, "retwis_throughput").expect("recorded above");
                report.record(&case, "retwis_vs_postgres", round_to(tally / pg, 2), "x")?;
            }
        }
    }
    for (target, tweets) in targets.iter().zip(&tweets) {
        target.check(tweets, plan).await?;
    }
    if let Some(Retwis::Tally { invoke_url, .. }) = targets.first() {
        let hello = std::fs::read(crate::invoke::guests().await?.join("hello.wasm")).context("reading hello.wasm")?;
        let hello_url = nodes[0].1.deploy("hello", hello, RETWIS_BOOK).await?;
        read_only::run(report, &hello_url, invoke_url, plan.users, plan.slice / 2, plan.slices).await?;
    }
    for (_, node) in nodes {
        node.node.shutdown().await;
    }
    drop(postgres);
    Ok(())
}

/// A dev node (aux views on) with Retwis deployed and its users made: the `tally`
/// target alone, for a profiler.
async fn retwis_alone(component: Vec<u8>, plan: &Plan) -> anyhow::Result<(Node, Retwis)> {
    let node = Node::start(true).await?;
    let target = Retwis::tally("tally", &node, component, plan.users).await?;
    Ok((node, target))
}

/// How long a profiler's window lasts.
const PROFILE_WINDOW: Duration = Duration::from_secs(20);

/// Retwis on the `tally` node alone at 32 clients for `PROFILE_WINDOW`, after a warmup:
/// no other target shares the process's CPU while a profiler looks.
async fn retwis_profile(component: Vec<u8>, plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    let (node, target) = retwis_alone(component, plan).await?;
    let clients = RETWIS_CLIENTS[1];
    let pool = target.clients(clients, plan.users).await?;
    let pool = retwis_loop(pool, Duration::from_secs(2), Duration::ZERO, &mut RetwisSamples::default()).await?;
    eprintln!("libs: retwis-profile: pid {}, {clients} clients for {} s from now", std::process::id(), PROFILE_WINDOW.as_secs());
    let mut samples = RetwisSamples::default();
    retwis_loop(pool, Duration::ZERO, PROFILE_WINDOW, &mut samples).await?;
    let requests: usize = samples.latencies_us.iter().map(Vec::len).sum();
    let case = format!("tally-profile clients={clients}");
    report.record(&case, "retwis_throughput", (requests as f64 / samples.window.as_secs_f64()).round(), "ops/s")?;
    report.record(&case, "rss", crate::soak::rss::rss_mib()?.round(), "MiB")?;
    node.node.shutdown().await;
    Ok(())
}

/// One read-only request of Retwis (`login`, `profile` or `timeline`), unkeyed, from one
/// client on the `tally` target alone for `PROFILE_WINDOW`, after a warmup.
async fn read_only_profile(component: Vec<u8>, request: &str, plan: &Plan, report: &mut Report) -> anyhow::Result<()> {
    let (node, target) = retwis_alone(component, plan).await?;
    // Timelines full of tweets, as after the mix: 32 clients for a while.
    retwis_loop(
        target.clients(RETWIS_CLIENTS[1], plan.users).await?,
        Duration::ZERO,
        plan.slice * 3,
        &mut RetwisSamples::default(),
    )
    .await?;
    let Retwis::Tally { invoke_url, .. } = target else { unreachable!() };
    read_only::profile(report, &invoke_url, request, plan.users, PROFILE_WINDOW).await?;
    node.node.shutdown().await;
    Ok(())
}

// --- Queues -------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_gives_each_request_its_share_of_rolls() {
        let mut shares = [0u64; 4];
        for roll in 0..100 {
            shares[Request::of_roll(roll).index()] += 1;
        }
        assert_eq!(shares, [15, 30, 50, 5]);
        assert_eq!(Request::of_roll(0), Request::Login);
        assert_eq!(Request::of_roll(99), Request::Tweet);
    }
}
