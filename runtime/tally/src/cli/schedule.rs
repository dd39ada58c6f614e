//! `tally schedule ...`: schedules over the gateway's `/v1/schedules` routes.

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::output::{text, utc, Table};
use crate::{agent, finish, get_json, show, url_escape, Json, Remote};

#[derive(Subcommand)]
pub enum ScheduleVerb {
    /// Create a schedule, or replace its definition: FUNCTION is invoked on BOOK with
    /// INPUT at every tick of --every or --cron, each tick once.
    Put(Box<PutArgs>),
    /// Show one schedule.
    Get(NameArgs),
    /// List the schedules.
    List(ListArgs),
    /// Delete a schedule (invocations it started run on).
    Delete(NameArgs),
    /// Pause a schedule: ticks due while it is paused never fire.
    Pause(NameArgs),
    /// Resume a paused schedule.
    Resume(NameArgs),
    /// Start the schedule's invocation now and print its ID.
    Trigger(NameArgs),
}

#[derive(Args)]
pub struct PutArgs {
    name: String,
    #[arg(long)]
    function: String,
    #[arg(long, default_value_t = 0)]
    book: u64,
    /// The invocations' input, as text.
    #[arg(long, default_value = "")]
    input: String,
    /// An interval: milliseconds, or a number with ms, s, m, h or d. Ticks are the
    /// multiples of it since the Unix epoch.
    #[arg(long, conflicts_with = "cron", required_unless_present = "cron")]
    every: Option<String>,
    /// A cron expression (five fields, or @hourly, @daily, ...), in UTC.
    #[arg(long)]
    cron: Option<String>,
    /// What a tick does while the last invocation still runs: skip, buffer_one or
    /// allow_all.
    #[arg(long)]
    overlap: Option<String>,
    /// What happens to ticks missed while no node drove the schedule: latest, all or
    /// none.
    #[arg(long)]
    catch_up: Option<String>,
    /// Create it paused.
    #[arg(long)]
    paused: bool,
    /// Of an HTTP function: each tick is a request with this method (default POST),
    /// with INPUT as its body.
    #[arg(long)]
    method: Option<String>,
    /// Of an HTTP function: the request's path below the function (default /).
    #[arg(long)]
    path: Option<String>,
    /// Of an HTTP function: a request header, NAME:VALUE (repeatable).
    #[arg(long = "header", value_name = "NAME:VALUE")]
    headers: Vec<String>,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
pub struct NameArgs {
    name: String,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
pub struct ListArgs {
    /// Schedules on the page at most (1 to 1000).
    #[arg(long)]
    limit: Option<usize>,
    /// List the schedules named after this (the `next` of the page before).
    #[arg(long)]
    after: Option<String>,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

pub fn run(verb: ScheduleVerb) -> anyhow::Result<()> {
    match verb {
        ScheduleVerb::Put(a) => put(*a),
        ScheduleVerb::Get(a) => get_json(&a.remote, &path(&a.name), &a.json, schedule),
        ScheduleVerb::List(a) => {
            let mut query = vec![format!("limit={}", a.limit.unwrap_or(100))];
            if let Some(after) = &a.after {
                query.push(format!("after={}", url_escape(after)));
            }
            get_json(&a.remote, &format!("/v1/schedules?{}", query.join("&")), &a.json, schedules)
        }
        ScheduleVerb::Delete(a) => {
            finish(agent(&a.remote.url).delete(format!("{}{}", a.remote.url, path(&a.name))).call()?)?;
            println!("deleted schedule {}", a.name);
            Ok(())
        }
        ScheduleVerb::Pause(a) => post(&a, "pause", schedule),
        ScheduleVerb::Resume(a) => post(&a, "resume", schedule),
        ScheduleVerb::Trigger(a) => post(&a, "trigger", |v| format!("{}\n", text(&v["invocation_id"]))),
    }
}

fn path(name: &str) -> String {
    format!("/v1/schedules/{}", url_escape(name))
}

fn put(a: PutArgs) -> anyhow::Result<()> {
    let mut body = json!({ "function": a.function, "book": a.book, "input": a.input });
    if a.method.is_some() || a.path.is_some() || !a.headers.is_empty() {
        let headers = crate::headers(&a.headers)?;
        let method = a.method.as_deref().unwrap_or("POST");
        let path = a.path.as_deref().unwrap_or("/");
        body["request"] = json!({ "method": method, "path": path, "headers": headers, "body": a.input });
        body.as_object_mut().expect("an object").remove("input");
    }
    match (&a.every, &a.cron) {
        (Some(every), _) => body["every_ms"] = json!(super::duration_ms(every)?),
        (None, Some(cron)) => body["cron"] = json!(cron),
        (None, None) => unreachable!("clap requires one"),
    }
    for (key, value) in [("overlap", &a.overlap), ("catch_up", &a.catch_up)] {
        if let Some(v) = value {
            body[key] = json!(v);
        }
    }
    if a.paused {
        body["paused"] = json!(true);
    }
    let url = format!("{}{}", a.remote.url, path(&a.name));
    let response = agent(&url).put(&url).header("content-type", "application/json").send(body.to_string().as_bytes())?;
    show(&finish(response)?, &a.json, schedule)
}

fn post(a: &NameArgs, action: &str, render: fn(&Value) -> String) -> anyhow::Result<()> {
    let url = format!("{}{}/{action}", a.remote.url, path(&a.name));
    show(&finish(agent(&url).post(&url).send_empty()?)?, &a.json, render)
}

/// When a schedule ticks, as people say it.
fn timing(v: &Value) -> String {
    match (&v["every_ms"], &v["cron"]) {
        (Value::Number(ms), _) => format!("every {}", super::output::millis(ms.as_u64())),
        (_, Value::String(c)) => format!("cron {c}"),
        _ => "-".into(),
    }
}

/// A time in UTC, or `-` for none (or 0: never).
fn when(v: &Value) -> String {
    v.as_u64().filter(|&t| t > 0).map_or_else(|| "-".into(), utc)
}

/// One schedule.
pub fn schedule(v: &Value) -> String {
    let state = if v["paused"] == Value::Bool(true) { "paused" } else { "active" };
    let mut out = format!(
        "schedule {}: {} on book {}, {} ({state})\n",
        text(&v["name"]),
        text(&v["function"]),
        text(&v["book"]),
        timing(v)
    );
    out.push_str(&format!("  overlap {}, catch-up {}\n", text(&v["overlap"]), text(&v["catch_up"])));
    out.push_str(&format!("  next tick       {}\n", when(&v["next_tick_ms"])));
    out.push_str(&format!("  last tick       {}\n", when(&v["last_tick_ms"])));
    out.push_str(&format!("  last invocation {}\n", text(&v["last_invocation_id"])));
    out.push_str(&format!(
        "  ticks fired {}, skipped {}; triggered {}\n",
        text(&v["ticks_fired"]),
        text(&v["ticks_skipped"]),
        text(&v["triggered"])
    ));
    if let Some(e) = v["last_error"].as_str() {
        out.push_str(&format!("  last error: {e}\n"));
    }
    out
}

/// `GET /v1/schedules`: one row per schedule.
pub fn schedules(body: &Value) -> String {
    let listed = body["schedules"].as_array().map(Vec::as_slice).unwrap_or_default();
    if listed.is_empty() {
        return "no schedules\n".into();
    }
    let mut table = Table::new(&["NAME", "FUNCTION", "BOOK", "WHEN", "STATE", "NEXT TICK (UTC)", "FIRED"]);
    for v in listed {
        let state = if v["paused"] == Value::Bool(true) { "paused" } else { "active" };
        table.row(vec![
            text(&v["name"]),
            text(&v["function"]),
            text(&v["book"]),
            timing(v),
            state.into(),
            when(&v["next_tick_ms"]),
            text(&v["ticks_fired"]),
        ]);
    }
    let mut out = table.render();
    if let Some(next) = body["next"].as_str() {
        out.push_str(&format!("more: --after {next}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_render_for_people() {
        let v = json!({
            "name": "nightly", "function": "report", "book": 3, "cron": "0 2 * * *", "overlap": "skip",
            "catch_up": "latest", "paused": false, "next_tick_ms": 1_795_744_800_000u64, "last_tick_ms": 0,
            "last_invocation_id": null, "ticks_fired": 0, "ticks_skipped": 0, "triggered": 1, "last_error": "tick 5: boom",
        });
        let shown = schedule(&v);
        assert!(shown.starts_with("schedule nightly: report on book 3, cron 0 2 * * * (active)\n"), "{shown}");
        assert!(shown.contains("next tick       2026-11-27 02:00:00\n"), "{shown}");
        assert!(shown.contains("last tick       -\n") && shown.contains("last invocation -\n"), "{shown}");
        assert!(shown.contains("last error: tick 5: boom"), "{shown}");
        let listed = schedules(&json!({ "schedules": [v, { "name": "s", "every_ms": 1000, "paused": true }] }));
        assert!(listed.contains("nightly  report    3     cron 0 2 * * *  active  2026-11-27 02:00:00  0"), "{listed}");
        assert!(listed.contains("every 1 s"), "{listed}");
        assert_eq!(schedules(&json!({ "schedules": [] })), "no schedules\n");
    }
}
