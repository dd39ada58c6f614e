//! `invocations` (a book's roots, from its INSTANCES stream) and `steps` (each
//! invocation's step log, its children's after it). A constraint on `book` reads one
//! book, on `function` skips other functions' invocations in the listing, on
//! `invocation_id` reads that invocation only, and on `seqnum` starts the listing
//! there.

use tally_durable::{ListFilter, ListedStatus, StepView};
use tally_logsvc::BookId;

use super::{books, bytes_cells};
use crate::env::Env;
use crate::vtab::{At, Page, Row, Scan, Source, Val};
use crate::SqlError;

/// Invocations listed per page.
const PAGE: usize = 256;

pub struct Invocations;

impl Source for Invocations {
    const NAME: &'static str = "invocations";
    const COLUMNS: &'static [&'static str] = &[
        "book INTEGER",
        "invocation_id TEXT",
        "function TEXT",
        "version INTEGER",
        "version_seqnum INTEGER",
        "status TEXT",
        "error_code TEXT",
        "key TEXT",
        "seqnum INTEGER",
        "started_at_ms INTEGER",
        "ended_at_ms INTEGER",
        "duration_ms INTEGER",
        "trace_id TEXT",
        "breakdown TEXT",
    ];
    const EQ: &'static [&'static str] = &["book", "function", "invocation_id"];
    const RANGE: &'static [&'static str] = &["seqnum"];

    fn page(env: &Env, scan: &Scan, from: At) -> Result<Page, SqlError> {
        let books = books(env, scan)?;
        let Some(&book) = books.get(from.0 as usize) else { return Ok(Page::last(Vec::new())) };
        let (lo, hi) = scan.range("seqnum");
        let after = match scan.text("invocation_id") {
            // An ID: its Init's seqnum, where a listing of one finds it.
            Some(id) => match init_seqnum(env, book, &id)? {
                Some(s) => s.max(from.1),
                None => return Ok(next_book(Vec::new(), &books, from)),
            },
            None => from.1.max(lo),
        };
        let filter = ListFilter { function: scan.text("function"), as_of: env.as_of, ..ListFilter::default() };
        let limit = if scan.eq.contains_key("invocation_id") { 1 } else { PAGE };
        let (listed, next) = env.block(|rt, mut ctx| async move {
            (rt.invocations().list(&mut ctx, BookId(book), &filter, after, limit).await.map_err(Into::into), ctx)
        })?;
        let numbers: std::collections::HashMap<u64, u32> =
            env.rt.registry.list().iter().flat_map(|f| f.versions.iter().map(|v| (v.seqnum, v.version))).collect();
        let rows: Vec<Row> = listed
            .iter()
            .map(|l| {
                let error = match l.status {
                    ListedStatus::Failed(code) => Val::text(code),
                    _ => Val::Null,
                };
                let breakdown: serde_json::Map<String, serde_json::Value> =
                    l.parts.iter().map(|(p, us)| (p.clone(), (*us).into())).collect();
                vec![
                    Val::u(book),
                    Val::text(l.id.to_string()),
                    Val::text(l.function.clone()),
                    Val::opt_u(numbers.get(&l.version).map(|n| u64::from(*n))),
                    Val::u(l.version),
                    Val::text(l.status.name()),
                    error,
                    Val::opt_text(l.key.clone()),
                    Val::u(l.seqnum),
                    Val::opt_u(l.started_ms),
                    Val::opt_u(l.ended_ms),
                    Val::opt_u(l.started_ms.zip(l.ended_ms).map(|(s, e)| e.saturating_sub(s))),
                    Val::opt_text(l.trace.map(|t| t.trace_hex())),
                    Val::text(serde_json::Value::Object(breakdown).to_string()),
                ]
            })
            .collect();
        match next {
            Some(n) if n <= hi && !scan.eq.contains_key("invocation_id") => Ok(Page { rows, next: Some((from.0, n)) }),
            _ => Ok(next_book(rows, &books, from)),
        }
    }
}

/// `rows`, then the next book's first page (if there is one).
fn next_book(rows: Vec<Row>, books: &[u64], from: At) -> Page {
    let next = (from.0 as usize + 1 < books.len()).then_some((from.0 + 1, 0));
    Page { rows, next }
}

/// The seqnum of invocation `id`'s Init, if its step log has one.
fn init_seqnum(env: &Env, book: u64, id: &str) -> Result<Option<u64>, SqlError> {
    let id = id.to_string();
    env.block(|rt, mut ctx| async move {
        let found = rt.invocations().steps(&mut ctx, BookId(book), &id, 0, 1).await;
        let out = match found {
            Ok(page) => Ok(page.steps.first().map(|s| s.seqnum)),
            Err(tally_durable::Error::InvocationNotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        };
        (out, ctx)
    })
}

pub struct Steps;

/// Steps of one invocation read at most (past them a query sees the first ones).
const STEPS_MAX: usize = 100_000;

impl Source for Steps {
    const NAME: &'static str = "steps";
    const COLUMNS: &'static [&'static str] = &[
        "book INTEGER",
        "root_id TEXT",
        "invocation_id TEXT",
        "step INTEGER",
        "seqnum INTEGER",
        "kind TEXT",
        "table_name TEXT",
        "key TEXT",
        "key_encoding TEXT",
        "protocol TEXT",
        "value TEXT",
        "value_encoding TEXT",
        "error TEXT",
        "child TEXT",
        "function TEXT",
        "attempt INTEGER",
        "detail TEXT",
    ];
    const EQ: &'static [&'static str] = &["book", "invocation_id", "root_id", "function"];
    const RANGE: &'static [&'static str] = &["seqnum"];

    fn page(env: &Env, scan: &Scan, from: At) -> Result<Page, SqlError> {
        let books = books(env, scan)?;
        let Some(&book) = books.get(from.0 as usize) else { return Ok(Page::last(Vec::new())) };
        let (lo, hi) = scan.range("seqnum");
        // One invocation: its own steps.
        if let Some(id) = scan.text("invocation_id") {
            let rows = steps_of(env, book, &id, &id, lo, hi, false)?;
            return Ok(next_book(rows, &books, from));
        }
        // A page of roots (of a function), each with its descendants.
        let root = scan.text("root_id");
        let after = match &root {
            Some(id) => match init_seqnum(env, book, id)? {
                Some(s) => s.max(from.1),
                None => return Ok(next_book(Vec::new(), &books, from)),
            },
            None => from.1,
        };
        let filter = ListFilter { function: scan.text("function"), as_of: env.as_of, ..ListFilter::default() };
        let limit = if root.is_some() { 1 } else { 16 };
        let (listed, next) = env.block(|rt, mut ctx| async move {
            (rt.invocations().list(&mut ctx, BookId(book), &filter, after, limit).await.map_err(Into::into), ctx)
        })?;
        let mut rows = Vec::new();
        for l in &listed {
            let id = l.id.to_string();
            rows.extend(steps_of(env, book, &id, &id, lo, hi, true)?);
        }
        match next {
            Some(n) if n <= hi && root.is_none() => Ok(Page { rows, next: Some((from.0, n)) }),
            _ => Ok(next_book(rows, &books, from)),
        }
    }
}

/// The steps of invocation `id` (of root `root`) within seqnums `lo..=hi` and the
/// query's position, then (`children`) its children's, depth first.
fn steps_of(env: &Env, book: u64, root: &str, id: &str, lo: u64, hi: u64, children: bool) -> Result<Vec<Row>, SqlError> {
    let owned = id.to_string();
    let page = env.block(|rt, mut ctx| async move {
        let found = rt.invocations().steps(&mut ctx, BookId(book), &owned, 0, STEPS_MAX).await;
        let out = match found {
            Ok(page) => Ok(page.steps),
            Err(tally_durable::Error::InvocationNotFound(_)) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        };
        (out, ctx)
    })?;
    let mut rows = Vec::new();
    let mut calls = Vec::new();
    for s in page.iter().filter(|s| s.seqnum <= env.at()) {
        if children {
            calls.extend(s.child.clone());
        }
        if (lo..=hi).contains(&s.seqnum) {
            rows.push(step_row(book, root, id, s));
        }
    }
    for child in calls {
        env.check_time()?;
        rows.extend(steps_of(env, book, root, &child, lo, hi, true)?);
    }
    Ok(rows)
}

fn step_row(book: u64, root: &str, id: &str, s: &StepView) -> Row {
    let [key, key_encoding] = bytes_cells(s.key.as_deref());
    let [value, value_encoding] = bytes_cells(s.value.as_deref());
    vec![
        Val::u(book),
        Val::text(root),
        Val::text(id),
        Val::u(s.step),
        Val::u(s.seqnum),
        Val::text(s.kind),
        Val::opt_text(s.table.clone()),
        key,
        key_encoding,
        Val::opt_text(s.protocol.clone()),
        value,
        value_encoding,
        Val::opt_text(s.error.clone()),
        Val::opt_text(s.child.clone()),
        Val::opt_text(s.function.clone()),
        Val::u(u64::from(s.attempt)),
        Val::text(s.detail.clone()),
    ]
}
