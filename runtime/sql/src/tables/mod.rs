//! The tables, each a [`Source`]: the platform's (`functions`, `versions`,
//! `schedules`, `logs`, here), invocations and their steps (`invocations.rs`), and a
//! book's log and state (`book.rs`: `records`, `tables`, `state`, `objects`, `queues`).

mod book;
mod invocations;

use std::sync::Arc;

use rusqlite::Connection;
use tally_durable::decoded;
use tally_host::LogQuery;

use crate::env::Env;
use crate::vtab::{register as add, At, Page, Row, Scan, Source, Val};
use crate::SqlError;

pub fn register(conn: &Connection, env: &Arc<Env>) -> rusqlite::Result<()> {
    add::<Functions>(conn, env)?;
    add::<Versions>(conn, env)?;
    add::<Schedules>(conn, env)?;
    add::<Logs>(conn, env)?;
    add::<invocations::Invocations>(conn, env)?;
    add::<invocations::Steps>(conn, env)?;
    add::<book::Records>(conn, env)?;
    add::<book::Tables>(conn, env)?;
    add::<book::State>(conn, env)?;
    add::<book::Objects>(conn, env)?;
    add::<book::Queues>(conn, env)?;
    Ok(())
}

/// A value's bytes and how they decode (`tally_durable::decoded`): two cells.
pub(crate) fn bytes_cells(bytes: Option<&[u8]>) -> [Val; 2] {
    match bytes {
        None => [Val::Null, Val::Null],
        Some(b) => {
            let (encoding, text) = decoded(b);
            [Val::text(text), Val::text(encoding)]
        }
    }
}

/// The books a scan covers: the one it names, else every book an invocation used.
pub(crate) fn books(env: &Env, scan: &Scan) -> Result<Vec<u64>, SqlError> {
    if let Some(b) = scan.int("book") {
        return Ok(u64::try_from(b).ok().into_iter().collect());
    }
    env.block(|rt, ctx| async move {
        (rt.tables().books().await.map(|b| b.into_iter().map(|b| b.0).collect()).map_err(Into::into), ctx)
    })
}

/// The cells `functions` and `versions` share: a version of function `name`.
fn version_cells(name: &str, v: &tally_host::VersionInfo) -> Row {
    vec![
        Val::text(name),
        Val::u(u64::from(v.version)),
        Val::u(v.seqnum),
        Val::u(v.deployed_at_ms),
        Val::opt_text(v.deployed_by.clone()),
        Val::Int(i64::from(v.public)),
        Val::text(v.sha256.clone()),
        Val::u(v.size_bytes),
    ]
}

/// Every deployed function's current version.
pub struct Functions;

impl Source for Functions {
    const NAME: &'static str = "functions";
    const COLUMNS: &'static [&'static str] = &[
        "name TEXT",
        "version INTEGER",
        "seqnum INTEGER",
        "deployed_at_ms INTEGER",
        "deployed_by TEXT",
        "public INTEGER",
        "sha256 TEXT",
        "size_bytes INTEGER",
        "tables TEXT",
        "versions INTEGER",
    ];

    fn page(env: &Env, _scan: &Scan, _from: At) -> Result<Page, SqlError> {
        let rows = env
            .rt
            .registry
            .list()
            .into_iter()
            .filter_map(|f| {
                let v = f.versions.iter().rev().find(|v| v.seqnum <= env.at())?;
                let tables: serde_json::Map<String, serde_json::Value> =
                    v.tables.iter().map(|(t, p)| (t.clone(), p.name().into())).collect();
                let mut row = version_cells(&f.name, v);
                row.push(Val::text(serde_json::Value::Object(tables).to_string()));
                row.push(Val::u(f.versions.iter().filter(|v| v.seqnum <= env.at()).count() as u64));
                Some(row)
            })
            .collect();
        Ok(Page::last(rows))
    }
}

/// Every version of every function.
pub struct Versions;

impl Source for Versions {
    const NAME: &'static str = "versions";
    const COLUMNS: &'static [&'static str] = &[
        "function TEXT",
        "version INTEGER",
        "seqnum INTEGER",
        "deployed_at_ms INTEGER",
        "deployed_by TEXT",
        "public INTEGER",
        "sha256 TEXT",
        "size_bytes INTEGER",
        "current INTEGER",
    ];

    fn page(env: &Env, _scan: &Scan, _from: At) -> Result<Page, SqlError> {
        let mut rows = Vec::new();
        for f in env.rt.registry.list() {
            let current = f.versions.iter().rev().find(|v| v.seqnum <= env.at()).map(|v| v.seqnum);
            for v in f.versions.iter().filter(|v| v.seqnum <= env.at()) {
                let mut row = version_cells(&f.name, v);
                row.push(Val::Int(i64::from(current == Some(v.seqnum))));
                rows.push(row);
            }
        }
        Ok(Page::last(rows))
    }
}

/// The cluster's schedules, as they are now.
pub struct Schedules;

impl Source for Schedules {
    const NAME: &'static str = "schedules";
    const COLUMNS: &'static [&'static str] = &[
        "name TEXT",
        "function TEXT",
        "book INTEGER",
        "paused INTEGER",
        "next_tick_ms INTEGER",
        "last_tick_ms INTEGER",
        "last_invocation TEXT",
        "ticks_fired INTEGER",
        "ticks_skipped INTEGER",
        "triggered INTEGER",
        "last_error TEXT",
    ];

    fn page(env: &Env, _scan: &Scan, _from: At) -> Result<Page, SqlError> {
        let mut listed = Vec::new();
        let mut after = String::new();
        loop {
            let (page, next) =
                env.block(|rt, ctx| async move { (rt.schedules().list(&after, 256).await.map_err(Into::into), ctx) })?;
            listed.extend(page);
            env.scanned(Self::NAME, 0)?;
            match next {
                Some(n) if listed.len() < 100_000 => after = n,
                _ => break,
            }
        }
        let rows: Vec<Row> = listed
            .iter()
            .map(|s| {
                vec![
                    Val::text(s.name.clone()),
                    Val::text(s.spec.function.clone()),
                    Val::u(s.spec.book.0),
                    Val::Int(i64::from(s.paused)),
                    Val::opt_u(s.next_tick_ms),
                    Val::u(s.last_tick_ms),
                    Val::opt_text(s.last_invocation.clone()),
                    Val::u(s.ticks_fired),
                    Val::u(s.ticks_skipped),
                    Val::u(s.triggered),
                    Val::opt_text(s.last_error.clone()),
                ]
            })
            .collect();
        Ok(Page::last(rows))
    }
}

/// What this node's guests printed (its bounded store of lines).
pub struct Logs;

impl Source for Logs {
    const NAME: &'static str = "logs";
    const COLUMNS: &'static [&'static str] = &[
        "seq INTEGER",
        "at_ms INTEGER",
        "function TEXT",
        "version INTEGER",
        "book INTEGER",
        "invocation_id TEXT",
        "attempt INTEGER",
        "stream TEXT",
        "line TEXT",
    ];
    const EQ: &'static [&'static str] = &["function", "invocation_id"];

    fn page(env: &Env, scan: &Scan, from: At) -> Result<Page, SqlError> {
        // Lines are numbered from 1: after 0 is from the first.
        let q = LogQuery {
            function: scan.text("function"),
            id: scan.text("invocation_id"),
            since_ms: None,
            after: Some(from.1),
            limit: 1024,
        };
        let (found, next) = env.rt.logs.query(&q);
        let more = found.len() == q.limit;
        let rows: Vec<Row> = found
            .iter()
            .map(|e| {
                vec![
                    Val::u(e.seq),
                    Val::u(e.at_ms),
                    Val::text(e.function.clone()),
                    Val::u(u64::from(e.version)),
                    Val::u(e.book),
                    Val::text(e.id.clone()),
                    Val::u(u64::from(e.attempt)),
                    Val::text(e.stream),
                    Val::text(e.line.clone()),
                ]
            })
            .collect();
        Ok(Page { rows, next: more.then_some((0, next)) })
    }
}
