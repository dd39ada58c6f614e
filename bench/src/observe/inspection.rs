//! The `observe` suite's second part: a book of about a million logged steps, then the
//! inspection APIs' times on it (see `mod.rs`).

use super::*;

/// The size of the second part's book.
pub(super) struct BookSize {
    pub(super) accounts: u64,
    /// The logged steps the load aims at.
    steps: u64,
    /// Runs of each SQL query and of each API call.
    sql_runs: usize,
    api_runs: usize,
}

impl BookSize {
    pub(super) fn new(options: &RunOptions) -> BookSize {
        if options.quick {
            BookSize { accounts: 1_000, steps: 20_000, sql_runs: 3, api_runs: 10 }
        } else {
            BookSize { accounts: 100_000, steps: 1_000_000, sql_runs: 7, api_runs: 30 }
        }
    }
}

/// A transfer of the load: between two different accounts, spread over all of them.
pub(super) fn transfer_input(i: u64, accounts: u64) -> String {
    assert!(accounts >= 2, "a transfer needs two accounts");
    // splitmix64: the pairs look random and are the same in every run.
    let mut h = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    let from = h % accounts;
    let to = (from + 1 + (h >> 32) % (accounts - 1)) % accounts;
    format!("transfer acct{from} acct{to} 1")
}

/// The second part: the book, then the inspection calls.
pub(super) fn inspection(report: &mut Report, size: &BookSize, tally: &Path, bank: &[u8]) -> anyhow::Result<()> {
    let node = DevProcess::start(tally, "inspection", &[])?;
    let url = node.url.clone();
    deploy(&url, "bank", bank)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("observe-load")
        .enable_all()
        .build()
        .context("starting the load's runtime")?;
    let invoke_url = format!("{url}/v1/functions/bank/invoke?book=1");
    let agent = crate::invoke::agent();
    let accounts = size.accounts;
    eprintln!("observe: filling book 1 with ~{} logged steps: {accounts} accounts opened, then transfers", size.steps);
    let started = Instant::now();
    load(&rt, &invoke_url, "opens", 0..accounts, accounts, Arc::new(|i| format!("open acct{i} 100")))?;
    // What an open and a transfer log, from the first invocation of the book (an open,
    // found by the listing) and a first transfer; the number of transfers follows.
    let page = get_json(&agent, &format!("{url}/v1/invocations?book=1&limit=1"))?;
    let first = page["invocations"][0]["invocation_id"].as_str().context("the listing names no invocation")?.to_owned();
    let open_steps = steps_of(&agent, &url, &first)?.len() as u64;
    let transfer_steps = marker(&url, "observe-first")?.steps;
    ensure!(open_steps > 0 && transfer_steps > 0, "an open logged {open_steps} steps, a transfer {transfer_steps}");
    let transfers = size.steps.saturating_sub(open_steps * accounts) / transfer_steps;
    let recent = RECENT_INVOCATIONS.min(transfers / 4);
    let transfer: Input = Arc::new(move |i| transfer_input(i, accounts));
    load(&rt, &invoke_url, "transfers", 0..transfers / 2, transfers, transfer.clone())?;
    let middle = marker(&url, "observe-middle")?;
    load(&rt, &invoke_url, "transfers", transfers / 2..transfers - recent, transfers, transfer.clone())?;
    let recent_marker = marker(&url, "observe-recent")?;
    load(&rt, &invoke_url, "transfers", transfers - recent..transfers, transfers, transfer)?;
    let last = marker(&url, "observe-last")?;
    let load_s = started.elapsed().as_secs_f64();
    // The markers are transfers too.
    let (transfers, invocations) = (transfers + 4, accounts + transfers + 4);
    let steps = open_steps * accounts + transfer_steps * transfers;
    eprintln!("observe: book 1 holds {steps} logged steps of {invocations} invocations, filled in {load_s:.1} s");
    report.record("book", "accounts", accounts as f64, "keys")?;
    report.record("book", "invocations", invocations as f64, "invocations")?;
    report.record("book", "steps_per_open", open_steps as f64, "steps")?;
    report.record("book", "steps_per_transfer", transfer_steps as f64, "steps")?;
    report.record("book", "steps_logged", steps as f64, "steps")?;
    report.record("book", "load_seconds", round_to(load_s, 1), "s")?;
    report.record("book", "load_throughput", round_to(invocations as f64 / load_s, 0), "invocations/s")?;

    let listing = format!("{url}/v1/invocations?book=1&limit=10");
    let (times, _) = timed(size.api_runs, || get_json(&agent, &listing))?;
    record_times(report, "api: GET /v1/invocations?book=1&limit=10", &times, None)?;

    let steps_sql = format!("SELECT count(*) FROM steps WHERE book = 1 AND invocation_id = '{}'", last.id);
    let case = "sql: steps WHERE invocation_id";
    let (times, answer) = timed(size.sql_runs, || sql(&agent, &url, &steps_sql))?;
    record_times(report, case, &times, Some(SQL_GOAL_MS))?;
    report.record(case, "count", answer.count()?, "rows")?;

    let invocations_sql = format!("SELECT count(*) FROM invocations WHERE book = 1 AND seqnum > {}", recent_marker.seqnum);
    let case = "sql: invocations WHERE seqnum > recent";
    let (times, answer) = timed(size.sql_runs, || sql(&agent, &url, &invocations_sql))?;
    record_times(report, case, &times, Some(SQL_GOAL_MS))?;
    report.record(case, "count", answer.count()?, "rows")?;

    let state = format!("SELECT key, value FROM state WHERE book = 1 AND table_name = 'accounts' AS OF {}", middle.seqnum);
    let case = "sql: state AS OF middle";
    let (times, answer) = timed(size.sql_runs, || sql(&agent, &url, &state))?;
    record_times(report, case, &times, Some(SQL_GOAL_MS))?;
    report.record(case, "rows", answer.rows.len() as f64, "rows")?;
    report.record(case, "truncated", f64::from(u8::from(answer.truncated)), "bool")?;
    let count = format!("SELECT count(*) FROM state WHERE book = 1 AND table_name = 'accounts' AS OF {}", middle.seqnum);
    let case = "sql: count(*) state AS OF middle";
    let (times, answer) = timed(size.sql_runs, || sql(&agent, &url, &count))?;
    record_times(report, case, &times, Some(SQL_GOAL_MS))?;
    report.record(case, "count", answer.count()?, "keys")?;

    let steps_url = format!("{url}/v1/invocations/{}/steps?book=1", last.id);
    let case = "api: GET /v1/invocations/{id}/steps";
    let (times, page) = timed(size.api_runs, || get_json(&agent, &steps_url))?;
    record_times(report, case, &times, Some(API_GOAL_MS))?;
    report.record(case, "steps", page["steps"].as_array().map_or(0, Vec::len) as f64, "steps")?;
    // acct0 was written last by the last marker; the last account opened, by whichever
    // transfer touched it last.
    for key in ["acct0".to_owned(), format!("acct{}", accounts - 1)] {
        let why = format!("{url}/v1/books/1/tables/accounts/why?key={key}");
        let (times, answer) = timed(size.api_runs, || get_json(&agent, &why))?;
        ensure!(answer["writer"].is_object(), "why {key}: no writer in {answer}");
        record_times(report, &format!("api: GET .../accounts/why?key={key}"), &times, Some(API_GOAL_MS))?;
    }

    // Once: every step of the book, to check the count above (it may pass a limit).
    let all = "SELECT count(*) FROM steps WHERE book = 1";
    let case = "sql: count(*) steps (whole book, once)";
    let started = Instant::now();
    match sql(&agent, &url, all) {
        Ok(answer) => {
            report.record(case, "time_ms", round_to(started.elapsed().as_secs_f64() * 1e3, 1), "ms")?;
            report.record(case, "count", answer.count()?, "steps")?;
        }
        Err(e) => eprintln!("observe: {all}: {e:#} (after {:.1} s)", started.elapsed().as_secs_f64()),
    }
    Ok(())
}

/// What a load invocation of number `i` sends.
type Input = Arc<dyn Fn(u64) -> String + Send + Sync>;

/// Invokes `bank` with `input(i)` for every `i` of `range` from [`LOAD_CLIENTS`]
/// clients, each over a keep-alive connection; `of` is the phase's total, for progress.
fn load(
    rt: &tokio::runtime::Runtime,
    invoke_url: &str,
    what: &str,
    range: Range<u64>,
    of: u64,
    input: Input,
) -> anyhow::Result<()> {
    let next = Arc::new(AtomicU64::new(range.start));
    let started = Instant::now();
    rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..LOAD_CLIENTS {
            let (next, input, end) = (next.clone(), input.clone(), range.end);
            let mut http = Http::new(invoke_url)?;
            tasks.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= end {
                        return anyhow::Ok(());
                    }
                    let body = input(i);
                    // Sent again only when a reused connection failed: one more open of
                    // the same balance, or one more transfer; the counts are estimates.
                    let (status, answer) = http.post(body.as_bytes(), None, true).await?;
                    ensure!(status == 200, "{body:?} answered {status}: {}", String::from_utf8_lossy(&answer));
                }
            });
        }
        let mut report_at = Instant::now() + Duration::from_secs(5);
        loop {
            match tokio::time::timeout_at(report_at.into(), tasks.join_next()).await {
                Ok(None) => return anyhow::Ok(()),
                Ok(Some(joined)) => joined.context("a load client panicked")??,
                Err(_) => {
                    let done = next.load(Ordering::Relaxed).min(range.end);
                    let rate = (done - range.start) as f64 / started.elapsed().as_secs_f64();
                    eprintln!("observe: {what}: {done}/{of} ({rate:.0}/s)");
                    report_at += Duration::from_secs(5);
                }
            }
        }
    })
}

/// An invocation the suite knows: its ID, the seqnum it started at (its init step's)
/// and its logged steps.
struct Known {
    id: String,
    seqnum: u64,
    steps: u64,
}

/// A transfer from acct0 to acct1 with the idempotency key `key`, which names it.
fn marker(url: &str, key: &str) -> anyhow::Result<Known> {
    let (status, body) = post(url, "bank", 1, "transfer acct0 acct1 1", Some(key))?;
    ensure!(status == 200, "the marker {key} answered {status}: {body}");
    let id = InstanceId::keyed("bank", key)?.to_string();
    let steps = steps_of(&crate::invoke::agent(), url, &id)?;
    let seqnum = steps.iter().filter_map(|s| s["seqnum"].as_u64()).min().with_context(|| format!("{key}: no step"))?;
    Ok(Known { id, seqnum, steps: steps.len() as u64 })
}

/// The logged steps of invocation `id` of book 1 (one page: every one of a transfer).
fn steps_of(agent: &ureq::Agent, url: &str, id: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let page = get_json(agent, &format!("{url}/v1/invocations/{id}/steps?book=1"))?;
    page["steps"].as_array().cloned().with_context(|| format!("no steps in {page}"))
}

fn get_json(agent: &ureq::Agent, url: &str) -> anyhow::Result<serde_json::Value> {
    let mut response = agent.get(url).call().with_context(|| format!("GET {url}"))?;
    let status = response.status().as_u16();
    let body = response.body_mut().with_config().limit(64 << 20).read_to_vec().with_context(|| format!("reading {url}"))?;
    ensure!(status == 200, "GET {url} answered {status}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).with_context(|| format!("GET {url} answered something other than JSON"))
}

/// An answer of `POST /v1/sql`.
struct SqlAnswer {
    rows: Vec<serde_json::Value>,
    truncated: bool,
}

impl SqlAnswer {
    /// The one value of a `count(*)`.
    fn count(&self) -> anyhow::Result<f64> {
        self.rows.first().and_then(|row| row[0].as_f64()).context("a count(*) answered no number")
    }
}

fn sql(agent: &ureq::Agent, url: &str, query: &str) -> anyhow::Result<SqlAnswer> {
    let body = serde_json::json!({ "sql": query }).to_string();
    let mut response = agent
        .post(format!("{url}/v1/sql"))
        .header("content-type", "application/json")
        .send(body.as_bytes())
        .with_context(|| format!("POST /v1/sql {query}"))?;
    let status = response.status().as_u16();
    let text = response.body_mut().with_config().limit(64 << 20).read_to_vec().context("reading a SQL answer")?;
    ensure!(status == 200, "{query}: {status} {}", String::from_utf8_lossy(&text));
    let answer: serde_json::Value = serde_json::from_slice(&text).context("a SQL answer that is not JSON")?;
    Ok(SqlAnswer {
        rows: answer["rows"].as_array().cloned().context("a SQL answer without rows")?,
        truncated: answer["truncated"].as_bool().unwrap_or(false),
    })
}

/// Runs `call` `runs` times: the wall time of each and the last answer.
fn timed<T>(runs: usize, mut call: impl FnMut() -> anyhow::Result<T>) -> anyhow::Result<(Latencies, T)> {
    assert!(runs > 0, "timing needs a run");
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let started = Instant::now();
        last = Some(call()?);
        times.push(micros(started.elapsed()));
    }
    Ok((Latencies::new(times), last.expect("runs > 0")))
}

/// The median and the longest of `times`, in ms, and the goal if there is one.
fn record_times(report: &mut Report, case: &str, times: &Latencies, goal_ms: Option<f64>) -> anyhow::Result<()> {
    let ms = |percent: f64| round_to(f64::from(times.percentile(percent).expect("timed runs")) / 1e3, 2);
    let (median, max) = (ms(50.0), ms(100.0));
    report.record(case, "median_ms", median, "ms")?;
    report.record(case, "max_ms", max, "ms")?;
    if let Some(goal) = goal_ms {
        report.record(case, "goal_ms", goal, "ms")?;
        if median > goal {
            eprintln!("observe: OVER GOAL: {case}: median {median} ms > {goal} ms");
        }
    }
    Ok(())
}
