//! `tally logs FUNCTION`: what a function's guests printed, and the platform's lines about
//! them, over `GET /v1/logs`; `--follow` goes on printing new lines until interrupted.

use std::io::BufRead as _;

use anyhow::bail;
use clap::Args;
use serde_json::Value;

use super::output::utc;
use crate::{agent, finish, url_escape, Json, Remote};

#[derive(Args)]
pub struct LogsArgs {
    function: String,
    /// Only the lines of this invocation.
    #[arg(long)]
    id: Option<String>,
    /// Only lines written since this long ago (e.g. 90s, 10m, 2h).
    #[arg(long)]
    since: Option<String>,
    /// At most this many lines (the last ones) before following.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Go on printing new lines as they come.
    #[arg(long, short)]
    follow: bool,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

pub fn run(args: LogsArgs) -> anyhow::Result<()> {
    let mut url = format!("{}/v1/logs?function={}&limit={}", args.remote.url, url_escape(&args.function), args.limit);
    if let Some(id) = &args.id {
        url.push_str(&format!("&id={}", url_escape(id)));
    }
    if let Some(since) = &args.since {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as u64;
        url.push_str(&format!("&since_ms={}", now.saturating_sub(super::duration_ms(since)?)));
    }
    if !args.follow {
        let body: Value = serde_json::from_slice(&finish(agent(&url).get(&url).call()?)?)?;
        for entry in body["entries"].as_array().into_iter().flatten() {
            emit(entry, args.json.json);
        }
        return Ok(());
    }
    url.push_str("&follow=true");
    let response = agent(&url).get(&url).call()?;
    if !response.status().is_success() {
        finish(response)?;
        bail!("the gateway refused to follow the logs");
    }
    for line in std::io::BufReader::new(response.into_body().into_reader()).lines() {
        let line = line?;
        match serde_json::from_str::<Value>(&line) {
            Ok(entry) => emit(&entry, args.json.json),
            Err(_) => println!("{line}"),
        }
    }
    Ok(())
}

/// One entry: `2026-12-05 04:30:00.123 hello@1 <id> #1 stdout  the line`.
fn emit(entry: &Value, json: bool) {
    if json {
        println!("{entry}");
        return;
    }
    let ms = entry["at_ms"].as_u64().unwrap_or(0);
    println!(
        "{}.{:03} {}@{} {} #{} {:<6} {}",
        utc(ms),
        ms % 1000,
        entry["function"].as_str().unwrap_or("?"),
        entry["version"],
        entry["id"].as_str().unwrap_or("?"),
        entry["attempt"],
        entry["stream"].as_str().unwrap_or("?"),
        entry["line"].as_str().unwrap_or("")
    );
}
