//! The `index` suite's memory of real processes (the spec's Measure 1(b)): the resident
//! memory of every process of a `tally cluster up` after growing numbers of appends, in
//! each index mode, one mode after the other.
//!
//! A cluster of 1 sequencer, 2 storage processes and 2 function nodes (partial mode: an
//! index tier of S = 2, R = 1 in the storage and sequencer processes) takes 1 KiB
//! exactly-once appends from 32 concurrent invocations of the `probe` guest
//! (`append-loop`), one book each, through the gateway; at each sample every process's
//! RSS (`/proc/<pid>/status`) is read. The record cache is full well before the first
//! sample (1 KiB records). Goal: in partial mode, a function node's RSS at the last
//! sample within 2% + 16 MiB of the first (its local index is bounded; complete mode's
//! index grows with the log, cold chunks spilled past `index_resident_bytes`).

use std::time::Instant;

use anyhow::{ensure, Context as _};
use tokio::task::JoinSet;

use crate::cluster::{release_tally, Processes};
use crate::http::Http;
use crate::report::Report;

const CLIENTS: u64 = 32;
/// Appends of one invocation.
const PER_CALL: u64 = 500;

/// Resident bytes of process `pid`.
fn rss_of(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).context("no VmRSS")?;
    Ok(kib.trim().trim_end_matches("kB").trim().parse::<u64>()? << 10)
}

/// The postings and stream-table bytes of process `name`'s index node, from its
/// metrics address (none without an index role).
fn index_bytes(p: &Processes, name: &str) -> anyhow::Result<Option<(u64, u64)>> {
    if name.starts_with("etcd") || name == "postgres" {
        return Ok(None);
    }
    let node = p.cluster.node_config(name)?;
    let (Some(addr), Some(token)) = (node.metrics, node.metrics_token_file) else { return Ok(None) };
    let bearer = format!("Bearer {}", std::fs::read_to_string(token)?.trim());
    let text = crate::invoke::agent()
        .get(format!("http://{addr}/metrics"))
        .header("authorization", &bearer)
        .call()?
        .body_mut()
        .read_to_string()?;
    let sum = |series: &str| -> u64 {
        let lines = text.lines().filter(|l| l.starts_with(series) && !l.starts_with('#'));
        lines.filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok()).sum()
    };
    Ok(Some((sum("tally_index_node_postings_bytes"), sum("tally_index_node_stream_table_bytes"))))
}

pub async fn run(report: &mut Report, sizes: &[u64]) -> anyhow::Result<()> {
    let guests = crate::invoke::guests().await?;
    let probe = std::fs::read(guests.join("probe.wasm")).context("reading probe.wasm")?;
    let tally = tokio::task::spawn_blocking(release_tally).await??;
    for partial in [true, false] {
        let mode = if partial { "partial" } else { "complete" };
        eprintln!("index: process RSS, {mode} mode");
        let (tally, shape) = (tally.clone(), crate::index_apps::shape(partial, None));
        let p = tokio::task::spawn_blocking(move || Processes::up_shaped(&tally, &shape)).await??;
        let (gateway, bearer) = (p.http("gateway")?, p.bearer()?);
        let url = format!("{gateway}/v1/functions/probe?timeout_ms=600000");
        let mut r = crate::invoke::deploy_agent().put(&url).header("authorization", &bearer).send(&probe[..])?;
        ensure!(r.status().as_u16() == 201, "deploying probe: {}", r.body_mut().read_to_string().unwrap_or_default());
        let pids: Vec<(String, u32)> = p.cluster.status()?.into_iter().filter_map(|s| Some((s.name, s.pid?))).collect();
        let mut appended = 0u64;
        let mut first: Vec<u64> = Vec::new();
        let started = Instant::now();
        for &target in sizes {
            let calls = (target - appended).div_ceil(PER_CALL);
            let mut tasks = JoinSet::new();
            for c in 0..CLIENTS {
                let n = calls / CLIENTS + u64::from(c < calls % CLIENTS);
                let mut http = Http::new(&format!("{gateway}/v1/functions/probe/invoke?book={}", 100 + c))?;
                let headers = format!("Authorization: {bearer}\r\n");
                tasks.spawn(async move {
                    for _ in 0..n {
                        let body = format!("append-loop {PER_CALL}");
                        let (status, answer) = http.send("POST", &headers, body.as_bytes(), false).await?;
                        ensure!(status == 200, "append-loop answered {status}: {}", String::from_utf8_lossy(&answer));
                    }
                    anyhow::Ok(())
                });
            }
            while let Some(t) = tasks.join_next().await {
                t??;
            }
            appended += calls * PER_CALL;
            let rate = appended as f64 / started.elapsed().as_secs_f64();
            eprintln!("index: {mode}: {appended} appends, {rate:.0}/s");
            let case = format!("rss,mode={mode},records={target}");
            report.record(&case, "appends_per_s", rate.round(), "appends/s")?;
            let mut now = Vec::new();
            for (name, pid) in &pids {
                let rss = rss_of(*pid)?;
                let role = name.rsplit_once('-').map_or(name.as_str(), |(r, _)| r);
                let process = format!("{case},process={name}");
                report.record(&process, "rss_mib", (rss >> 10) as f64 / 1024.0, "MiB")?;
                if let Some((postings, streams)) = index_bytes(&p, name)? {
                    report.record(&process, "index_postings_mib", postings as f64 / (1 << 20) as f64, "MiB")?;
                    report.record(&process, "index_stream_table_mib", streams as f64 / (1 << 20) as f64, "MiB")?;
                }
                if role == "function" {
                    now.push(rss);
                }
            }
            let largest = now.iter().copied().max().unwrap_or(0);
            report.record(&case, "function_rss_max_mib", (largest >> 10) as f64 / 1024.0, "MiB")?;
            if first.is_empty() {
                first = now;
            } else {
                let base = first.iter().copied().max().unwrap_or(0);
                let growth = largest as f64 - base as f64;
                report.record(&case, "function_rss_growth_mib", growth / (1 << 20) as f64, "MiB")?;
                report.record(
                    &case,
                    "function_rss_growth_allowed_mib",
                    (base as f64 * 0.02 + (16 << 20) as f64) / (1 << 20) as f64,
                    "MiB",
                )?;
            }
        }
        drop(p);
    }
    Ok(())
}
