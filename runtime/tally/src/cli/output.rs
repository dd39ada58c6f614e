//! What the CLI prints for people: the gateway's JSON rendered as aligned tables. Every
//! command that uses these also takes `--json`, which prints the gateway's JSON as is.

use serde_json::Value;

/// Rows under a header, each column as wide as its widest cell, two spaces apart.
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table { headers: headers.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len());
        self.rows.push(cells);
    }

    /// The table as lines of text; the last column is not padded.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let Some(last) = row.len().checked_sub(1) else { continue };
            let mut line = String::new();
            for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
                line.push_str(cell);
                if i < last {
                    line.extend(std::iter::repeat_n(' ', width - cell.chars().count() + 2));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `GET /v1/functions`: one row per function, its current version.
pub fn functions(body: &Value) -> String {
    let functions = body["functions"].as_array().map(Vec::as_slice).unwrap_or_default();
    if functions.is_empty() {
        return "no functions deployed\n".into();
    }
    let mut table = Table::new(&["NAME", "VERSION", "SIZE", "MEMORY", "TIMEOUT", "TABLES", "DEPLOYED (UTC)"]);
    for f in functions {
        let current = &f["current"];
        let tables = match current["tables"].as_object() {
            Some(tables) if !tables.is_empty() => {
                tables.iter().map(|(t, p)| format!("{t}={}", p.as_str().unwrap_or("?"))).collect::<Vec<_>>().join(",")
            }
            _ => "-".into(),
        };
        table.row(vec![
            text(&f["name"]),
            text(&current["version"]),
            bytes(current["size_bytes"].as_u64()),
            bytes(current["limits"]["memory_bytes"].as_u64()),
            millis(current["limits"]["timeout_ms"].as_u64()),
            tables,
            current["deployed_at_ms"].as_u64().map_or_else(|| "-".into(), utc),
        ]);
    }
    table.render()
}

/// `PUT /v1/functions/{name}`: the new version.
pub fn deployed(body: &Value) -> String {
    let version = &body["version"];
    let sha = version["sha256"].as_str().unwrap_or_default();
    format!(
        "deployed {} version {} ({}, sha256 {})\n",
        text(&body["name"]),
        text(&version["version"]),
        bytes(version["size_bytes"].as_u64()),
        sha.get(..12).unwrap_or(sha)
    )
}

/// The longest data or aux cell of `tally book`; `--json` shows everything.
const CELL_CHARS_MAX: usize = 60;

/// `GET /v1/books/{id}/records`: one row per record, and how to read on.
pub fn records(body: &Value) -> String {
    let records = body["records"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut out = if records.is_empty() {
        format!("no records in book {} (tag {})\n", text(&body["book"]), text(&body["tag"]))
    } else {
        let mut table = Table::new(&["SEQNUM", "TAGS", "DATA", "AUX"]);
        for r in records {
            let tags = match r["tags"].as_array() {
                Some(tags) if !tags.is_empty() => tags.iter().map(text).collect::<Vec<_>>().join(","),
                _ => "-".into(),
            };
            let aux = if r["aux"].is_null() { "-".into() } else { blob(&r["aux"]) };
            table.row(vec![text(&r["seqnum"]), tags, blob(&r["data"]), aux]);
        }
        table.render()
    };
    if let Some(next) = body["next"].as_u64() {
        out.push_str(&format!("more records follow: --from {next}\n"));
    }
    out
}

/// `GET /v1/books/{id}/tables/{table}`: the protocol and its history.
pub fn table_status(body: &Value) -> String {
    let (book, table) = (text(&body["book"]), text(&body["table"]));
    if body["used"] != Value::Bool(true) {
        return format!("table {table} of book {book} has no records yet\n");
    }
    let auto = if body["auto"] == Value::Bool(true) { " (chosen by auto)" } else { "" };
    let mut out = format!("table {table} of book {book}: {}{auto}\n", text(&body["protocol"]));
    if let Some(s) = body["switching"].as_object() {
        out.push_str(&format!("switching from {} to {}\n", text(&s["from"]), text(&s["to"])));
    }
    let history = body["history"].as_array().map(Vec::as_slice).unwrap_or_default();
    if !history.is_empty() {
        let mut t = Table::new(&["SEQNUM", "EVENT", "BY"]);
        for h in history {
            let event = match h["begin"].as_object() {
                Some(b) => format!("switch {} -> {} began", text(&b["from"]), text(&b["to"])),
                None => format!("now {}", text(&h["end"])),
            };
            let by = if h["auto"] == Value::Bool(true) { "auto" } else { "operator" };
            t.row(vec![text(&h["seqnum"]), event, by.into()]);
        }
        out.push('\n');
        out.push_str(&t.render());
    }
    out
}

/// A JSON string without quotes, anything else as JSON.
pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        v => v.to_string(),
    }
}

/// A gateway blob (`{"text": ..., "base64": ...}`): its text, escaped and cut short, or
/// its base64 when it is not UTF-8.
fn blob(v: &Value) -> String {
    let shown = match v["text"].as_str() {
        Some(t) => t.escape_debug().to_string(),
        None => format!("base64:{}", v["base64"].as_str().unwrap_or_default()),
    };
    if shown.chars().count() <= CELL_CHARS_MAX {
        return shown;
    }
    let cut: String = shown.chars().take(CELL_CHARS_MAX - 3).collect();
    format!("{cut}...")
}

fn bytes(n: Option<u64>) -> String {
    let Some(n) = n else { return "-".into() };
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{n} B"),
        _ if value.fract() == 0.0 => format!("{value:.0} {}", UNITS[unit]),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}

pub(crate) fn millis(ms: Option<u64>) -> String {
    match ms {
        None => "-".into(),
        Some(ms) if ms >= 1000 && ms % 1000 == 0 => format!("{} s", ms / 1000),
        Some(ms) => format!("{ms} ms"),
    }
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS` in UTC.
pub(crate) fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (year, month, day) = tally_durable::civil_from_days(secs / 86_400);
    let rem = secs % 86_400;
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// `GET /v1/books/{id}/queues/{name}`: the messages waiting, per shard.
pub fn queue(v: &Value) -> String {
    let name = v["queue"].as_str().unwrap_or("?");
    let mut out = format!("queue {name:?} of book {}: {} waiting\n", v["book"], v["pending"]);
    let mut table = Table::new(&["SHARD", "WAITING", "OLDEST SEQNUM"]);
    for s in v["shards"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let oldest = s["oldest"].as_u64().map_or("-".to_string(), |o| o.to_string());
        table.row(vec![s["shard"].to_string(), s["pending"].to_string(), oldest]);
    }
    out.push_str(&table.render());
    out
}

/// `GET /v1/books/{id}/locks/{name}`: who holds it.
pub fn lock(v: &Value) -> String {
    let name = v["lock"].as_str().unwrap_or("?");
    match v["holder"].as_str() {
        Some(holder) => format!("lock {name:?} of book {} is held by invocation {holder}\n", v["book"]),
        None => format!("lock {name:?} of book {} is free\n", v["book"]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn columns_align_to_the_widest_cell() {
        let mut t = Table::new(&["A", "LONGER"]);
        t.row(vec!["wide cell".into(), "x".into()]);
        t.row(vec!["y".into(), "z".into()]);
        assert_eq!(t.render(), "A          LONGER\nwide cell  x\ny          z\n");
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
        assert_eq!(utc(1_795_484_813_000), "2026-11-24 01:46:53");
    }

    #[test]
    fn sizes_and_times_read_like_a_person_wrote_them() {
        assert_eq!(bytes(Some(512)), "512 B");
        assert_eq!(bytes(Some(128 << 20)), "128 MiB");
        assert_eq!(bytes(Some(13_405)), "13.1 KiB");
        assert_eq!(millis(Some(10_000)), "10 s");
        assert_eq!(millis(Some(1_500)), "1500 ms");
    }

    #[test]
    fn records_show_text_escaped_binary_as_base64_and_where_to_go_on() {
        let body = json!({
            "book": 1, "tag": 0, "next": 77,
            "records": [
                { "seqnum": 5, "tags": [9, 10], "data": { "text": "a\nb", "base64": "YQpi" }, "aux": null },
                { "seqnum": 6, "tags": [], "data": { "text": null, "base64": "/w==" }, "aux": { "text": "s", "base64": "cw==" } },
            ],
        });
        assert_eq!(
            records(&body),
            "SEQNUM  TAGS  DATA         AUX\n5       9,10  a\\nb         -\n6       -     base64:/w==  s\nmore records follow: --from 77\n"
        );
    }

    #[test]
    fn long_data_is_cut() {
        let long = "x".repeat(100);
        let shown = blob(&json!({ "text": long, "base64": "" }));
        assert_eq!(shown.chars().count(), CELL_CHARS_MAX);
        assert!(shown.ends_with("..."));
    }
}
