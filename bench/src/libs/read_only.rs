//! The `libs` suite's read-only part: what a read-only exactly-once invocation costs
//! against a `hello` invocation (the echo, which touches nothing), on the same dev node,
//! one client, in interleaved slices. Each request is sent without a key, and with an
//! idempotency key of its own (so it is exactly-once across the client's retries); each
//! is compared with `hello` sent the same way:
//!
//! ```text
//!   hello            POST /v1/functions/hello/invoke     the echo
//!   login            POST /v1/functions/retwis/invoke    one object read
//!   profile                                              one object read
//!   timeline                                             a read-only transaction of 9 objects
//! ```
//!
//! Goal: each at most 1.3x `hello`'s p50 (`*_vs_hello_p50`). Where a case's time went
//! on the node: the mean of each part of the answers' `Server-Timing` (`server_<part>`,
//! `server_total` the whole of it; what the client saw beyond it is the gateway's HTTP
//! and the network).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::ensure;

use crate::http::Http;
use crate::report::{micros, round_to, Latencies, Report};
use crate::state::Rng;

/// The requests measured: name, and whether it is Retwis's (otherwise `hello`'s).
const REQUESTS: [(&str, bool); 4] = [("hello", false), ("login", true), ("profile", true), ("timeline", true)];

/// The parts of `Server-Timing` these requests spend time in, and their metrics.
const PARTS: [(&str, &str); 8] = [
    ("queue", "server_queue"),
    ("instantiate", "server_instantiate"),
    ("guest", "server_guest"),
    ("host-objects", "server_host_objects"),
    ("host-context", "server_host_context"),
    ("log", "server_log"),
    ("platform", "server_platform"),
    ("total", "server_total"),
];

/// Measures every request, unkeyed and keyed, in `slices` rounds of `slice` each.
pub async fn run(
    report: &mut Report,
    hello_url: &str,
    retwis_url: &str,
    users: u64,
    slice: Duration,
    slices: u32,
) -> anyhow::Result<()> {
    let cases: Vec<(&str, bool, bool)> =
        [false, true].into_iter().flat_map(|keyed| REQUESTS.map(|(name, retwis)| (name, retwis, keyed))).collect();
    eprintln!("libs: read-only: {} cases, {slices} interleaved slices of {} ms each", cases.len(), slice.as_millis());
    let mut hello = Http::new(hello_url)?;
    let mut retwis = Http::new(retwis_url)?;
    let mut rng = Rng(0x5eed_0f2e_ad00);
    let mut samples: Vec<Vec<u32>> = vec![Vec::new(); cases.len()];
    let mut sent = 0u64;
    // Per case: each part's sum of microseconds.
    let mut parts: Vec<BTreeMap<String, f64>> = vec![BTreeMap::new(); cases.len()];
    for round in 0..slices as usize {
        for k in 0..cases.len() {
            let i = (round + k) % cases.len();
            let (name, is_retwis, keyed) = cases[i];
            let end = Instant::now() + slice;
            while Instant::now() < end {
                let body = request_body(name, rng.next() % users);
                sent += 1;
                let key = keyed.then(|| format!("ro-{round}-{sent}"));
                let http = if is_retwis { &mut retwis } else { &mut hello };
                let start = Instant::now();
                let (status, answer) = http.post(body.as_bytes(), key.as_deref(), true).await?;
                let took = start.elapsed();
                ensure!(status == 200, "{body} answered {status}: {}", String::from_utf8_lossy(&answer));
                ensure!(name != "login" || answer == b"ok", "{body} answered {}", String::from_utf8_lossy(&answer));
                samples[i].push(micros(took));
                add_parts(&mut parts[i], &http.timing);
            }
        }
    }
    let mut p50s = Vec::new();
    for (((name, _, keyed), samples), parts) in cases.iter().zip(samples).zip(parts) {
        let n = samples.len().max(1) as f64;
        let latencies = Latencies::new(samples);
        let case = format!("read-only {name}{}", if *keyed { " keyed" } else { "" });
        record_parts(report, &case, &parts, n)?;
        let p50 = latencies.percentile(50.0).unwrap_or(0) as f64;
        report.record(&case, "p50", p50, "us")?;
        report.record(&case, "p99", latencies.percentile(99.0).unwrap_or(0) as f64, "us")?;
        p50s.push((case, *name, *keyed, p50));
    }
    for (case, name, keyed, p50) in &p50s {
        let hello = p50s.iter().find(|(_, n, k, _)| *n == "hello" && k == keyed).map_or(0.0, |h| h.3);
        if *name != "hello" && hello > 0.0 {
            report.record(case, "vs_hello_p50", round_to(p50 / hello, 2), "x")?;
        }
    }
    Ok(())
}

/// The requests `--only <request>-profile` runs alone ([`profile`]).
pub const PROFILED: [&str; 3] = ["login", "profile", "timeline"];

/// `request` alone, unkeyed, from one client for a profiler's `window` (after a warmup of
/// a tenth of it): its p50 and the mean of each part of `Server-Timing`.
pub async fn profile(report: &mut Report, url: &str, request: &str, users: u64, window: Duration) -> anyhow::Result<()> {
    let mut http = Http::new(url)?;
    let mut rng = Rng(0x5eed_0f2e_ad01);
    let (mut samples, mut parts) = (Vec::new(), BTreeMap::new());
    let warm = Instant::now() + window / 10;
    let mut end = None;
    while end.is_none_or(|end| Instant::now() < end) {
        let body = request_body(request, rng.next() % users);
        let start = Instant::now();
        let (status, answer) = http.post(body.as_bytes(), None, true).await?;
        let took = start.elapsed();
        ensure!(status == 200, "{body} answered {status}: {}", String::from_utf8_lossy(&answer));
        if end.is_some() {
            samples.push(micros(took));
            add_parts(&mut parts, &http.timing);
        } else if Instant::now() >= warm {
            eprintln!("libs: {request}-profile: pid {}, one client for {} s from now", std::process::id(), window.as_secs());
            end = Some(Instant::now() + window);
        }
    }
    let case = format!("read-only {request} profile");
    record_parts(report, &case, &parts, samples.len().max(1) as f64)?;
    report.record(&case, "p50", Latencies::new(samples).percentile(50.0).unwrap_or(0) as f64, "us")?;
    Ok(())
}

/// The input of request `name` (`hello`'s, or one of Retwis's) for `user`.
fn request_body(name: &str, user: u64) -> String {
    match name {
        "hello" => "hello".to_string(),
        "login" => format!("login {user} pw{user}"),
        other => format!("{other} {user}"),
    }
}

/// Records the mean of each of [`PARTS`] over `n` requests whose parts summed to `parts`.
fn record_parts(report: &mut Report, case: &str, parts: &BTreeMap<String, f64>, n: f64) -> anyhow::Result<()> {
    for (part, metric) in PARTS {
        report.record(case, metric, round_to(parts.get(part).copied().unwrap_or(0.0) / n, 1), "us")?;
    }
    Ok(())
}

/// Adds each part of a `Server-Timing` value (`name;dur=<ms>, ...`) to `parts`, in µs.
pub(super) fn add_parts(parts: &mut BTreeMap<String, f64>, timing: &str) {
    for part in timing.split(", ") {
        if let Some((name, ms)) = part.split_once(";dur=") {
            *parts.entry(name.to_string()).or_default() += ms.parse::<f64>().unwrap_or(0.0) * 1000.0;
        }
    }
}
