//! `tally invocations` (a book's invocations, filtered, with their durations) and
//! `tally steps ID` (an invocation's logged steps, their values decoded).

use clap::Args;
use serde_json::Value;

use super::output::{text, Table};
use crate::{get_json, url_escape, Json, Remote};

#[derive(Args)]
pub struct InvocationsArgs {
    book: u64,
    #[arg(long)]
    function: Option<String>,
    /// running, sleeping, succeeded or failed.
    #[arg(long)]
    status: Option<String>,
    /// The invocation's key (`?key=`) or idempotency key.
    #[arg(long)]
    key: Option<String>,
    /// Started within this long before now (e.g. 10m, 1h).
    #[arg(long)]
    since: Option<String>,
    /// Took at least this long (e.g. 50ms, 2s).
    #[arg(long)]
    slower_than: Option<String>,
    /// Took at most this long.
    #[arg(long)]
    faster_than: Option<String>,
    #[arg(long)]
    limit: Option<usize>,
    /// The newest first.
    #[arg(long)]
    newest: bool,
    /// Where to go on: the `next` of the page before.
    #[arg(long)]
    after: Option<u64>,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

pub fn invocations(args: InvocationsArgs) -> anyhow::Result<()> {
    let mut query = vec![format!("book={}", args.book)];
    for (key, value) in [("function", args.function), ("status", args.status), ("key", args.key)] {
        if let Some(v) = value {
            query.push(format!("{key}={}", url_escape(&v)));
        }
    }
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let since = args.since.as_deref().map(super::duration_ms).transpose()?.map(|d| now_ms.saturating_sub(d));
    let min = args.slower_than.as_deref().map(super::duration_ms).transpose()?;
    let max = args.faster_than.as_deref().map(super::duration_ms).transpose()?;
    if args.newest {
        query.push("order=newest".into());
    }
    // A page's `next` goes on in the listing's order.
    let cursor = if args.newest { "before" } else { "after" };
    let numbers =
        [("since_ms", since), ("min_ms", min), ("max_ms", max), ("limit", args.limit.map(|l| l as u64)), (cursor, args.after)];
    for (key, value) in numbers {
        if let Some(v) = value {
            query.push(format!("{key}={v}"));
        }
    }
    get_json(&args.remote, &format!("/v1/invocations?{}", query.join("&")), &args.json, render_invocations)
}

/// `GET /v1/invocations`, for people.
pub fn render_invocations(body: &Value) -> String {
    let listed = body["invocations"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut out = if listed.is_empty() {
        format!("no invocations listed in book {}\n", text(&body["book"]))
    } else {
        let mut table = Table::new(&["INVOCATION", "FUNCTION", "STATUS", "STARTED", "TOOK", "TRACE"]);
        for i in listed {
            let status = match (&i["wake_at_ms"], &i["error_code"]) {
                (Value::Number(w), _) => format!("sleeping until {w} ms"),
                (_, Value::String(code)) => format!("failed: {code}"),
                _ => text(&i["status"]),
            };
            let took = i["duration_ms"].as_u64().map_or(String::new(), |ms| format!("{ms} ms"));
            let started = i["started_at_ms"].as_u64().map_or(String::new(), |ms| ms.to_string());
            table.row(vec![text(&i["invocation_id"]), text(&i["function"]), status, started, took, text(&i["trace_id"])]);
        }
        table.render()
    };
    if let Some(next) = body["next"].as_u64() {
        out.push_str(&format!("more may follow: --after {next}\n"));
    }
    out
}

#[derive(Args)]
pub struct StepsArgs {
    /// The invocation's ID (a child's is its root's, then `/step` of each call).
    id: String,
    #[arg(long, default_value_t = 0)]
    book: u64,
    /// The first step to show (the `next` of the page before).
    #[arg(long)]
    after: Option<u64>,
    #[arg(long)]
    limit: Option<usize>,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

pub fn steps(args: StepsArgs) -> anyhow::Result<()> {
    let mut path = format!("/v1/invocations/{}/steps?book={}", url_escape(&args.id), args.book);
    if let Some(after) = args.after {
        path.push_str(&format!("&after={after}"));
    }
    if let Some(limit) = args.limit {
        path.push_str(&format!("&limit={limit}"));
    }
    get_json(&args.remote, &path, &args.json, render_steps)
}

/// A value as the gateway decoded it, cut for a table.
fn shown(v: &Value) -> String {
    if v.is_null() {
        return String::new();
    }
    let t = text(&v["text"]);
    let t = if t.chars().count() > 40 { format!("{}…", t.chars().take(40).collect::<String>()) } else { t };
    match v["encoding"].as_str() {
        Some("hex") => format!("0x{t}"),
        _ => t,
    }
}

/// `GET /v1/invocations/{id}/steps`, for people.
pub fn render_steps(body: &Value) -> String {
    let mut out = format!("invocation {} of book {}", text(&body["invocation_id"]), text(&body["book"]));
    if let (Some(s), Some(e)) = (body["started_at_ms"].as_u64(), body["ended_at_ms"].as_u64()) {
        out.push_str(&format!(", took {} ms", e.saturating_sub(s)));
    }
    if let Some(t) = body["trace_id"].as_str() {
        out.push_str(&format!(", trace {t}"));
    }
    out.push('\n');
    if let Some(parts) = body["breakdown_us"].as_object().filter(|p| !p.is_empty()) {
        let parts: Vec<String> =
            parts.iter().map(|(p, us)| format!("{p} {:.2} ms", us.as_f64().unwrap_or(0.0) / 1000.0)).collect();
        out.push_str(&format!("time: {}\n", parts.join(", ")));
    }
    let mut table = Table::new(&["STEP", "SEQNUM", "KIND", "TABLE", "KEY", "PROTOCOL", "VALUE", "CHILD", "ATTEMPT"]);
    for s in body["steps"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let value = match s["error"].as_str() {
            Some(e) => format!("error: {e}"),
            None => shown(&s["value"]),
        };
        table.row(vec![
            text(&s["step"]),
            text(&s["seqnum"]),
            text(&s["kind"]),
            text(&s["table"]),
            shown(&s["key"]),
            text(&s["protocol"]),
            value,
            text(&s["child"]),
            text(&s["attempt"]),
        ]);
    }
    out.push_str(&table.render());
    if let Some(next) = body["next"].as_u64() {
        out.push_str(&format!("more may follow: --after {next}\n"));
    }
    out
}

#[derive(Args)]
pub struct SqlArgs {
    /// The query (read-only SQL; `AS OF <seqnum>` at its end reads the log's prefix).
    query: String,
    /// Read every table as of this seqnum.
    #[arg(long)]
    as_of: Option<u64>,
    /// Rows to print at most.
    #[arg(long)]
    limit: Option<usize>,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

pub fn sql(args: SqlArgs) -> anyhow::Result<()> {
    let body = serde_json::json!({ "sql": args.query, "as_of": args.as_of, "limit": args.limit }).to_string();
    let response = crate::agent(&args.remote.url)
        .post(format!("{}/v1/sql", args.remote.url))
        .header("content-type", "application/json")
        .send(body.as_bytes())?;
    crate::show(&crate::finish(response)?, &args.json, render_sql)
}

/// `POST /v1/sql`, for people: the rows as a table.
pub fn render_sql(body: &Value) -> String {
    let columns: Vec<String> = body["columns"].as_array().map(Vec::as_slice).unwrap_or_default().iter().map(text).collect();
    let names: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut table = Table::new(&names);
    let rows = body["rows"].as_array().map(Vec::as_slice).unwrap_or_default();
    for row in rows {
        let cells = row.as_array().map(Vec::as_slice).unwrap_or_default();
        table.row(cells.iter().map(|v| if v.is_null() { "NULL".to_string() } else { text(v) }).collect());
    }
    let mut out = table.render();
    out.push_str(&format!("{} rows", rows.len()));
    if body["truncated"].as_bool() == Some(true) {
        out.push_str(" (more matched: --limit, or narrow the query)");
    }
    if let Some(s) = body["as_of"].as_u64() {
        out.push_str(&format!(", as of seqnum {s}"));
    }
    out.push('\n');
    out
}

#[derive(Args)]
pub struct WhyArgs {
    book: u64,
    /// The state table (or, with --object, the durable object's name).
    table: String,
    /// The key (text).
    key: Option<String>,
    /// Explain a durable object's value instead (`tally why BOOK NAME --object`).
    #[arg(long)]
    object: bool,
    /// As of this seqnum.
    #[arg(long)]
    as_of: Option<u64>,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

pub fn why(args: WhyArgs) -> anyhow::Result<()> {
    let mut path = match (&args.key, args.object) {
        (None, true) => format!("/v1/books/{}/objects/{}/why?", args.book, url_escape(&args.table)),
        (Some(key), false) => format!("/v1/books/{}/tables/{}/why?key={}&", args.book, url_escape(&args.table), url_escape(key)),
        _ => anyhow::bail!("name a table and a key (tally why BOOK TABLE KEY), or an object (tally why BOOK NAME --object)"),
    };
    if let Some(s) = args.as_of {
        path.push_str(&format!("as_of={s}"));
    }
    get_json(&args.remote, &path, &args.json, render_why)
}

/// A lineage, for people.
pub fn render_why(body: &Value) -> String {
    let what = match body["object"].as_str() {
        Some(o) => format!("object {o}"),
        None => format!("{}/{}", text(&body["table"]), shown(&body["key"])),
    };
    let mut out = format!("{what} in book {}", text(&body["book"]));
    if let Some(s) = body["as_of"].as_u64() {
        out.push_str(&format!(" as of seqnum {s}"));
    }
    out.push_str(&format!(": {}\n", if body["value"].is_null() { "no value".into() } else { shown(&body["value"]) }));
    out.push_str(&format!("  protocol      {}\n", text(&body["protocol"])));
    if let Some(w) = body["written_at"].as_u64() {
        out.push_str(&format!("  written at    seqnum {w}\n"));
    }
    if let Some(m) = body["migrated_from"].as_u64() {
        out.push_str(&format!("  migrated from the write at seqnum {m} (a protocol switch carried it over)\n"));
    }
    let w = &body["writer"];
    if w.is_object() {
        out.push_str(&format!("  written by    {} ({})", text(&w["invocation_id"]), text(&w["function"])));
        if let Some(step) = w["step"].as_u64() {
            out.push_str(&format!(", step {step}"));
        }
        out.push_str(&format!(", attempt {}\n", text(&w["attempt"])));
        out.push_str(&format!("  its input     {}\n", shown(&w["input"])));
        if let Some(k) = w["key"].as_str() {
            out.push_str(&format!("  its key       {k}\n"));
        }
        if let Some(t) = w["trace_id"].as_str() {
            out.push_str(&format!("  its trace     {t}\n"));
        }
    } else if body["written_at"].is_u64() {
        out.push_str("  written by    (not found: its invocation's records are no longer kept)\n");
    }
    match (body["previous_kept"].as_bool(), &body["previous"]) {
        (Some(true), Value::Null) => out.push_str("  before it     no value\n"),
        (Some(true), p) => out.push_str(&format!("  before it     {}\n", shown(p))),
        _ if body["written_at"].is_u64() => out.push_str("  before it     (no longer kept)\n"),
        _ => {}
    }
    out
}
