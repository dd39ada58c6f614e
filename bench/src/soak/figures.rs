//! The suite's figures: the honest clients alone and beside, every hostile kind's
//! answers, the held connections, the books' counts against what was acknowledged, and
//! the RSS series; each recorded, with a line for people where it says something.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _};

use super::held::Held;
use super::hostile::KindTally;
use super::{Books, Gathered, Tokens, Verdict, HELD, MODES, P99_FACTOR_GOAL, RSS_GROWTH_MAX, RSS_POINTS};
use crate::invoke::agent;
use crate::report::{round_to, Report, Samples};

/// The honest clients' figures alone and beside, and how beside compares.
pub(super) fn record_honest(report: &mut Report, verdict: &mut Verdict, g: &Gathered) -> anyhow::Result<()> {
    let mut figures = Vec::new();
    for (mode, (samples, seen)) in MODES.iter().zip(g.samples.iter().zip(&g.seen)) {
        let case = format!("honest,{mode}");
        let samples = Samples { latencies_us: samples.latencies_us.clone(), window: samples.window };
        let (throughput, latencies) = samples.finish();
        let p50 = f64::from(latencies.percentile(50.0).context("no honest increment was acknowledged")?);
        let p99 = f64::from(latencies.percentile(99.0).context("no honest increment was acknowledged")?);
        report.record(&case, "increments", latencies.len() as f64, "requests")?;
        report.record(&case, "throughput", throughput.round(), "requests/s")?;
        report.record(&case, "p50_us", p50, "us")?;
        report.record(&case, "p99_us", p99, "us")?;
        report.record(&case, "wrong_values", seen.wrong_values as f64, "requests")?;
        for (label, n) in &seen.attempts {
            report.record(&format!("{case},status={label}"), "attempts", *n as f64, "requests")?;
        }
        for shown in &seen.shown {
            verdict.lines.push(format!("WRONG VALUE {case}: {shown}"));
        }
        if seen.wrong_values > 0 {
            verdict
                .failed
                .push(format!("{} honest increments answered a count other than their own ({mode})", seen.wrong_values));
        }
        figures.push((throughput, p50, p99));
    }
    let [(t_alone, p50_alone, p99_alone), (t_beside, p50_beside, p99_beside)] = figures[..] else { unreachable!("two modes") };
    let p99_ratio = p99_beside / p99_alone;
    let case = "honest,beside/alone";
    report.record(case, "p50_ratio", round_to(p50_beside / p50_alone, 2), "ratio")?;
    report.record(case, "p99_ratio", round_to(p99_ratio, 2), "ratio")?;
    report.record(case, "throughput_ratio", round_to(t_beside / t_alone, 2), "ratio")?;
    report.record(case, "p99_goal", P99_FACTOR_GOAL, "ratio")?;
    let held = p99_ratio <= P99_FACTOR_GOAL;
    report.record(case, "p99_within_goal", f64::from(u8::from(held)), "bool")?;
    verdict.lines.push(format!(
        "honest p99 beside the hostile clients: {:.2}x alone ({p99_beside} vs {p99_alone} us); \
         goal at most {P99_FACTOR_GOAL}x: {}",
        p99_ratio,
        if held { "held" } else { "NOT HELD" }
    ));
    Ok(())
}

/// Each hostile kind's requests, answers by status and mismatches.
pub(super) fn record_kinds(
    report: &mut Report,
    verdict: &mut Verdict,
    kinds: &BTreeMap<&'static str, KindTally>,
) -> anyhow::Result<()> {
    let mut mismatches = 0;
    for (kind, tally) in kinds {
        let case = format!("kind={kind}");
        report.record(&case, "requests", tally.requests as f64, "requests")?;
        report.record(&case, "mismatches", tally.mismatches as f64, "requests")?;
        for (label, n) in &tally.answers {
            report.record(&format!("{case},status={label}"), "answers", *n as f64, "requests")?;
        }
        for shown in &tally.shown {
            verdict.lines.push(format!("MISMATCH {kind}: {shown}"));
        }
        mismatches += tally.mismatches;
    }
    verdict.lines.push(format!("hostile answers other than the documented one: {mismatches}"));
    Ok(())
}

/// Whether the node cut off the connections held for the whole run.
pub(super) fn record_held(report: &mut Report, verdict: &mut Verdict, held: &[Held]) -> anyhow::Result<()> {
    for (manner, _) in HELD {
        let of: Vec<&Held> = held.iter().filter(|h| h.hold == manner).collect();
        let closed = of.iter().filter(|h| h.closed_after.is_some()).count();
        let longest = of.iter().map(|h| h.open_for).max().unwrap_or_default();
        let case = format!("held={}", manner.name());
        report.record(&case, "connections", of.len() as f64, "connections")?;
        report.record(&case, "closed_by_node", closed as f64, "connections")?;
        report.record(&case, "held_max_s", round_to(longest.as_secs_f64(), 1), "s")?;
        if closed < of.len() {
            verdict.lines.push(format!(
                "FINDING held={}: the node kept {} of {} connections open for up to {:.0} s without a whole request",
                manner.name(),
                of.len() - closed,
                of.len(),
                longest.as_secs_f64()
            ));
        }
    }
    Ok(())
}

/// Every book's counter against what its clients had acknowledged.
pub(super) fn record_books(
    report: &mut Report,
    verdict: &mut Verdict,
    url: &str,
    tokens: &Tokens,
    books: &Books,
    g: &Gathered,
) -> anyhow::Result<()> {
    let count = |book: u64| -> anyhow::Result<u64> {
        let mut response = agent()
            .post(format!("{url}/v1/functions/counter/invoke?book={book}"))
            .header("authorization", &format!("Bearer {}", tokens.admin))
            .send(&b"get"[..])
            .with_context(|| format!("reading the counter of book {book}"))?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string()?;
        ensure!(status == 200, "reading the counter of book {book}: {status} {body}");
        body.trim().parse().with_context(|| format!("the counter of book {book} is {body:?}"))
    };
    // `unsure` increments were sent and never acknowledged: each may or may not count.
    let (mut lost, mut duplicated) = (0u64, 0u64);
    let mut compare = |acked: u64, unsure: u64, counted: u64| {
        lost += acked.saturating_sub(counted);
        duplicated += counted.saturating_sub(acked + unsure);
    };
    let mut honest = (0, 0);
    for &(book, acked) in &g.honest_acked {
        let counted = count(book)?;
        compare(acked, 0, counted);
        honest = (honest.0 + acked, honest.1 + counted);
    }
    let flood_acked: u64 = g.flooders.iter().map(|f| f.acked).sum();
    let unresolved = g.flooders.iter().filter(|f| f.unresolved()).count() as u64;
    let flood_counted = count(books.flood)?;
    compare(flood_acked, unresolved, flood_counted);
    let sentinel = count(books.sentinel)?;
    let case = "books";
    report.record(case, "honest_acked", honest.0 as f64, "increments")?;
    report.record(case, "honest_counted", honest.1 as f64, "increments")?;
    report.record(case, "flood_acked", flood_acked as f64, "increments")?;
    report.record(case, "flood_counted", flood_counted as f64, "increments")?;
    report.record(case, "flood_unresolved", unresolved as f64, "increments")?;
    report.record(case, "sentinel_counted", sentinel as f64, "increments")?;
    report.record(case, "lost", lost as f64, "increments")?;
    report.record(case, "duplicated", duplicated as f64, "increments")?;
    verdict.lines.push(format!(
        "acknowledged increments: honest {} counted {}, flood {flood_acked} counted {flood_counted} ({unresolved} unresolved); \
         lost {lost}, duplicated {duplicated}; sentinel {sentinel}",
        honest.0, honest.1
    ));
    if lost > 0 || duplicated > 0 {
        verdict.failed.push(format!("{lost} acknowledged increments lost, {duplicated} applied twice"));
    }
    if sentinel > 0 {
        verdict.failed.push(format!("a refused request incremented the sentinel book {sentinel} times"));
    }
    Ok(())
}

/// The RSS series: its range, its value after the warm-up and at the end, and a few
/// points of it.
pub(super) fn record_rss(
    report: &mut Report,
    verdict: &mut Verdict,
    rss: &[(Duration, f64)],
    warm: Duration,
) -> anyhow::Result<()> {
    let Some(&(_, last)) = rss.last() else { bail!("no RSS sample") };
    let min = rss.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
    let max = rss.iter().map(|s| s.1).fold(0.0, f64::max);
    let warmed = rss.iter().find(|(t, _)| *t >= warm).map_or(last, |s| s.1);
    let bounded = last <= RSS_GROWTH_MAX * warmed;
    // The growth over the second half of the run, per minute: near 0 once the node's
    // caches and buffers are full.
    let (half_t, half_mib) = rss[rss.len() / 2];
    let end_t = rss.last().expect("a sample").0;
    let slope = if end_t > half_t { (last - half_mib) / (end_t - half_t).as_secs_f64() * 60.0 } else { 0.0 };
    let case = "rss";
    report.record(case, "rss_mib_min", round_to(min, 1), "MiB")?;
    report.record(case, "rss_mib_max", round_to(max, 1), "MiB")?;
    report.record(case, "rss_mib_after_warmup", round_to(warmed, 1), "MiB")?;
    report.record(case, "rss_mib_last", round_to(last, 1), "MiB")?;
    report.record(case, "last_over_warmup", round_to(last / warmed, 2), "ratio")?;
    report.record(case, "bounded", f64::from(u8::from(bounded)), "bool")?;
    report.record(case, "growth_second_half", round_to(slope, 1), "MiB/min")?;
    let step = rss.len().div_ceil(RSS_POINTS).max(1);
    let mut points: Vec<usize> = (0..rss.len()).step_by(step).collect();
    if points.last() != Some(&(rss.len() - 1)) {
        points.push(rss.len() - 1);
    }
    for (t, mib) in points.into_iter().map(|i| rss[i]) {
        report.record(&format!("rss,t={:.0}s", t.as_secs_f64()), "rss_mib", round_to(mib, 1), "MiB")?;
    }
    verdict.lines.push(format!(
        "RSS {min:.0} to {max:.0} MiB; {warmed:.0} MiB after the warm-up, {last:.0} MiB at the end ({slope:.0} MiB/min over the \
         second half): {}",
        if bounded { "bounded" } else { "NOT BOUNDED" }
    ));
    Ok(())
}
