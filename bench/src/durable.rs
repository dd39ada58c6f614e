//! The `durable` suite: durable sleeps, schedules and promises, timed by the guest
//! itself where it can.
//!
//! ```text
//!   wake       S sleeps of 1.5 s, each past the function's 1 s time limit (so each
//!              suspends), submitted 50 ms apart: how late each woke (the guest reads
//!              the wall clock first thing after its sleep) against its logged wake time
//!   many       N sleeps of D ms submitted at once by C clients, on B books: submissions
//!              per second, the process's RSS before, while all sleep and after they
//!              woke, and how late each woke when they all wake within a few seconds of
//!              each other (the timers' accuracy under load)
//!   schedule   a schedule every 200 ms running the `nightly` example for T ticks: how
//!              late each tick's invocation first ran (the guest's recorded wall clock
//!              against the tick's time), and ticks fired against ticks due
//!   promise    a promise created by one invocation and awaited by another, completed
//!              once the other waits: in place (an await with a timeout, a synchronous
//!              caller), the time from the completion call to the caller's answer;
//!              suspended (no timeout), to the invocation's result
//! ```
//!
//! The dev node runs in this process, so its RSS is the node's. There is no peer in
//! this run (Temporal and Restate need servers and SDKs this machine does not have);
//! the physical limit of a wake is the timer's resolution, 1 ms.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bytes::Bytes;
use tally::dev::DevNode;
use tally_durable::InvocationStatus;
use tally_logsvc::{BookId, Context};
use tally_runtime::error::RuntimeError;
use tally_runtime::runtime::InvokeOptions;
use tokio::task::JoinSet;

use crate::memory::rss_bytes;
use crate::report::{round_to, Latencies, Report};
use crate::RunOptions;

const CLIENTS: usize = 64;
const BOOKS: u64 = 64;

pub async fn run(opts: &RunOptions) -> anyhow::Result<()> {
    let (spread, many, many_ms) = if opts.quick { (20, 1_000, 4_000) } else { (100, 10_000, 15_000) };
    let guests = crate::invoke::guests().await?;
    let clocks = std::fs::read(guests.join("clocks.wasm")).context("reading clocks.wasm")?;
    let nightly = std::fs::read(guests.join("nightly.wasm")).context("reading nightly.wasm")?;
    let steps = std::fs::read(guests.join("steps.wasm")).context("reading steps.wasm")?;
    let dir = tempfile::tempdir().context("creating a temporary data directory")?;
    let config = tally_runtime::Config { data_dir: dir.path().join("data"), listen: "127.0.0.1:0".into(), ..Default::default() };
    let node = DevNode::start(config).await.context("starting a Tally dev node")?;
    let mut limits = node.runtime.config.limits;
    limits.timeout_ms = 1_000;
    node.runtime.deploy("clocks", Bytes::from(clocks), limits, Default::default()).await.context("deploying clocks")?;
    let defaults = node.runtime.config.limits;
    node.runtime.deploy("nightly", Bytes::from(nightly), defaults, Default::default()).await.context("deploying nightly")?;
    node.runtime.deploy("steps", Bytes::from(steps), defaults, Default::default()).await.context("deploying steps")?;
    let mut report = Report::new(
        "durable",
        format!("durable sleeps in a dev node in this process; {CLIENTS} clients; no peer (see the module doc)"),
    );

    let ticks = if opts.quick { 25 } else { 150 };
    eprintln!("durable: a schedule every {TICK_MS} ms for {ticks} ticks");
    schedule_jitter(&node, &mut report, ticks).await?;
    let promises = if opts.quick { 20 } else { 100 };
    eprintln!("durable: {promises} promises completed while awaited, in place and suspended");
    promise_latency(&node, &mut report, promises).await?;

    eprintln!("durable: {spread} sleeps of 1.5 s, 50 ms apart");
    let mut tasks = JoinSet::new();
    for i in 0..spread {
        let rt = node.runtime.clone();
        tasks.spawn(async move {
            tokio::time::sleep(Duration::from_millis(50 * i as u64)).await;
            let key = format!("spread-{i}");
            let (id, wake) = submit(&rt, BookId(1), 1_500, &key).await?;
            lateness(&rt, BookId(1), &id, wake).await
        });
    }
    let late = collect(&mut tasks).await?;
    record_lateness(&mut report, "sleep=1.5s,one-at-a-time", late)?;

    eprintln!("durable: {many} sleeps of {many_ms} ms at once");
    let rss_before = rss_bytes()?;
    let next = Arc::new(AtomicUsize::new(0));
    let asleep = Arc::new(Mutex::new(Vec::with_capacity(many)));
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..CLIENTS {
        let (rt, next, asleep) = (node.runtime.clone(), next.clone(), asleep.clone());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= many {
                    return Ok::<_, anyhow::Error>(());
                }
                let book = BookId(2 + i as u64 % BOOKS);
                let (id, wake) = submit(&rt, book, many_ms, &format!("many-{i}")).await?;
                asleep.lock().expect("not poisoned").push((book, id, wake));
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    let took = started.elapsed();
    let rss_asleep = rss_bytes()?;
    let case = format!("sleeps={many},sleep={}s", many_ms / 1000);
    report.record(&case, "sleep_submit_throughput", (many as f64 / took.as_secs_f64()).round(), "sleeps/s")?;
    report.record(&case, "rss_before_mib", mib(rss_before), "MiB")?;
    report.record(&case, "rss_asleep_mib", mib(rss_asleep), "MiB")?;
    report.record(
        &case,
        "rss_per_sleeping_invocation_bytes",
        (rss_asleep.saturating_sub(rss_before) / many as u64) as f64,
        "bytes",
    )?;
    let asleep = std::mem::take(&mut *asleep.lock().expect("not poisoned"));
    if started.elapsed() >= Duration::from_millis(many_ms) {
        eprintln!("durable: WARNING: submitting took longer than the sleeps; some woke before all were asleep");
    }
    let mut tasks = JoinSet::new();
    let asleep = Arc::new(Mutex::new(asleep));
    for _ in 0..CLIENTS {
        let (rt, asleep) = (node.runtime.clone(), asleep.clone());
        tasks.spawn(async move {
            let mut late = Vec::new();
            loop {
                let Some((book, id, wake)) = asleep.lock().expect("not poisoned").pop() else { return Ok(late) };
                late.extend(lateness(&rt, book, &id, wake).await?);
            }
        });
    }
    let late = collect(&mut tasks).await?;
    report.record(&case, "rss_after_mib", mib(rss_bytes()?), "MiB")?;
    record_lateness(&mut report, &case, late)?;
    node.shutdown().await;
    report.print_table();
    Ok(())
}

/// The interval of the measured schedule.
const TICK_MS: u64 = 200;

/// A schedule every `TICK_MS` running `nightly` on its own book for `ticks` ticks.
async fn schedule_jitter(node: &DevNode, report: &mut Report, ticks: u64) -> anyhow::Result<()> {
    use tally_durable::{CatchUp, Overlap, ScheduleSpec, Timing};
    let book = BookId(500);
    let spec = ScheduleSpec {
        function: "nightly".into(),
        book,
        input: Bytes::new(),
        timing: Timing::EveryMs(TICK_MS),
        overlap: Overlap::Skip,
        catch_up: CatchUp::Latest,
    };
    let durable = node.runtime.durable();
    let start = now_ms();
    durable.schedules().put("jitter", spec, None).await.context("defining the schedule")?;
    tokio::time::sleep(Duration::from_millis(ticks * TICK_MS)).await;
    durable.schedules().delete("jitter").await.context("deleting the schedule")?;
    let end = now_ms();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut late = Vec::new();
    let mut ctx = tally_logsvc::Context::new();
    let mut from = tally_logsvc::SeqNum(0);
    let tag = tally_logsvc::Tag::from_name("nightly");
    while let Some(r) = node.runtime.log().read_next(&mut ctx, book, tag, from).await? {
        from = tally_logsvc::SeqNum(r.seqnum.0 + 1);
        let summary: serde_json::Value = serde_json::from_slice(&r.data).context("a summary")?;
        let ran = summary["ran_at_ms"].as_u64().context("ran_at_ms")?;
        // Attributed to the latest tick at or before it: exact while ticks run less
        // than an interval late.
        late.push(u32::try_from(ran % TICK_MS).unwrap_or(u32::MAX));
    }
    let due = end / TICK_MS - start / TICK_MS;
    let case = format!("every={TICK_MS}ms,ticks={ticks}");
    report.record(&case, "ticks_fired", late.len() as f64, "ticks")?;
    report.record(&case, "ticks_due", due as f64, "ticks")?;
    let late = Latencies::new(late);
    for (metric, p) in [("tick_late_p50_ms", 50.0), ("tick_late_p99_ms", 99.0), ("tick_late_max_ms", 100.0)] {
        report.record(&case, metric, f64::from(late.percentile(p).unwrap_or(0)), "ms")?;
    }
    Ok(())
}

/// `n` promises of book 501, each created by one invocation and awaited by another,
/// completed once the awaiting one waits: its answer's latency from the completion.
async fn promise_latency(node: &DevNode, report: &mut Report, n: usize) -> anyhow::Result<()> {
    let rt = &node.runtime;
    let book = BookId(501);
    let keyed =
        |key: String| InvokeOptions { idempotency_key: Some(key), retry_key: None, crash_after: None, delay_ms: 0, key: None };
    let mut in_place = Vec::new();
    let mut suspended = Vec::new();
    for i in 0..n {
        let promise = rt.invoke_with("steps", book, Bytes::from_static(b"script promise"), keyed(format!("p-{i}"))).await?;
        let promise = String::from_utf8(promise)?;
        // In place: a synchronous caller's await with a timeout, within the in-place limit.
        let (r, p) = (rt.clone(), promise.clone());
        let waiting = tokio::spawn(async move {
            let out = r.invoke_with("steps", book, Bytes::from(format!("script await {p} 900")), keyed(format!("w-{i}"))).await;
            (out, Instant::now())
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let completed = Instant::now();
        rt.invocations().complete_promise(&mut Context::new(), book, &promise, Bytes::from_static(b"yes")).await?;
        let (out, answered) = waiting.await?;
        if out? != b"yes" {
            bail!("an await in place did not get the value");
        }
        in_place.push(u32::try_from(answered.duration_since(completed).as_micros()).unwrap_or(u32::MAX));
        // Suspended: no timeout; the completion wakes it.
        let promise = rt.invoke_with("steps", book, Bytes::from_static(b"script promise"), keyed(format!("q-{i}"))).await?;
        let promise = String::from_utf8(promise)?;
        let id =
            match rt.invoke_with("steps", book, Bytes::from(format!("script await {promise}")), keyed(format!("s-{i}"))).await {
                Err(RuntimeError::Suspended { id, .. }) => id,
                other => bail!("an await with no timeout answered {other:?}"),
            };
        let completed = Instant::now();
        rt.invocations().complete_promise(&mut Context::new(), book, &promise, Bytes::from_static(b"yes")).await?;
        loop {
            match rt.invocation(&mut Context::new(), book, &id).await? {
                InvocationStatus::Finished(Ok(_)) => break,
                InvocationStatus::Finished(Err(e)) => bail!("a suspended await failed: {e}"),
                _ => tokio::time::sleep(Duration::from_micros(200)).await,
            }
        }
        suspended.push(u32::try_from(completed.elapsed().as_micros()).unwrap_or(u32::MAX));
    }
    for (case, micros) in [("await=in-place", in_place), ("await=suspended", suspended)] {
        let l = Latencies::new(micros);
        for (metric, p) in [("promise_complete_to_answer_p50_us", 50.0), ("promise_complete_to_answer_p99_us", 99.0)] {
            report.record(case, metric, f64::from(l.percentile(p).unwrap_or(0)), "us")?;
        }
    }
    Ok(())
}

/// Starts `nap`-less `doze MS` under `key`: it must suspend. Returns its ID and wake time.
async fn submit(rt: &Arc<tally_runtime::Runtime>, book: BookId, ms: u64, key: &str) -> anyhow::Result<(String, u64)> {
    let opts =
        InvokeOptions { idempotency_key: Some(key.to_string()), retry_key: None, crash_after: None, delay_ms: 0, key: None };
    match rt.invoke_with("clocks", book, Bytes::from(format!("doze {ms}")), opts).await {
        Err(RuntimeError::Suspended { id, wake_ms }) => Ok((id, wake_ms)),
        Ok(out) => bail!("a sleep of {ms} ms answered at once: {}", String::from_utf8_lossy(&out)),
        Err(e) => bail!("a sleep of {ms} ms failed: {e}"),
    }
}

/// Waits (polling from its wake time on) until the sleeping invocation answers, and
/// returns how many milliseconds after its wake time it woke.
async fn lateness(rt: &Arc<tally_runtime::Runtime>, book: BookId, id: &str, wake: u64) -> anyhow::Result<Vec<u32>> {
    loop {
        let now = now_ms();
        if now < wake {
            tokio::time::sleep(Duration::from_millis(wake - now)).await;
            continue;
        }
        match rt.invocation(&mut Context::new(), book, id).await? {
            InvocationStatus::Finished(Ok(out)) => {
                let text = String::from_utf8_lossy(&out);
                let woke: u64 =
                    text.strip_prefix("woke=").and_then(|w| w.parse().ok()).with_context(|| format!("the answer {text:?}"))?;
                if woke < wake {
                    bail!("invocation {id} woke at {woke}, before its wake time {wake}");
                }
                return Ok(vec![u32::try_from(woke - wake).unwrap_or(u32::MAX)]);
            }
            InvocationStatus::Finished(Err(e)) => bail!("invocation {id} failed: {e}"),
            InvocationStatus::Running | InvocationStatus::Sleeping { .. } => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

async fn collect(tasks: &mut JoinSet<anyhow::Result<Vec<u32>>>) -> anyhow::Result<Vec<u32>> {
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done??);
    }
    Ok(all)
}

fn record_lateness(report: &mut Report, case: &str, late_ms: Vec<u32>) -> anyhow::Result<()> {
    let late = Latencies::new(late_ms);
    for (metric, p) in [("wake_late_p50_ms", 50.0), ("wake_late_p99_ms", 99.0), ("wake_late_max_ms", 100.0)] {
        report.record(case, metric, f64::from(late.percentile(p).unwrap_or(0)), "ms")?;
    }
    Ok(())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn mib(bytes: u64) -> f64 {
    round_to(bytes as f64 / (1 << 20) as f64, 1)
}
