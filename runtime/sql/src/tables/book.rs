//! A book's log and state: `records` (its user records, by tag), `tables` (each table's
//! protocol history), `state` (each key's value, its protocol and when it was written),
//! `objects` and `queues` (Boki's libraries' views), all as of the query's position.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use tally_durable::{Protocol, Transition};
use tally_logsvc::{BookId, SeqNum, Tag};

use super::{books, bytes_cells};
use crate::env::Env;
use crate::vtab::{At, Page, Row, Scan, Source, Val};
use crate::SqlError;

/// Records per page.
const RECORDS_PAGE: usize = 512;
/// Keys per page of `state`.
const KEYS_PAGE: usize = 256;
/// Library records read to name a book's objects and queues at most.
const LIBRARY_RECORDS_MAX: usize = 1_000_000;

fn next_book(rows: Vec<Row>, books: &[u64], from: At) -> Page {
    let next = (from.0 as usize + 1 < books.len()).then_some((from.0 + 1, 0));
    Page { rows, next }
}

/// A tag given as a number or a name (hashed as the SDKs do).
fn tag_of(v: &Val) -> Tag {
    match v {
        Val::Int(i) => Tag(*i as u64),
        Val::Text(t) => t.parse().map(Tag).unwrap_or_else(|_| Tag::from_name(t)),
        _ => Tag::ALL,
    }
}

pub struct Records;

impl Source for Records {
    const NAME: &'static str = "records";
    const COLUMNS: &'static [&'static str] = &[
        "book INTEGER",
        "seqnum INTEGER",
        "tags TEXT",
        "data TEXT",
        "data_encoding TEXT",
        "aux TEXT",
        "aux_encoding TEXT",
        "tag HIDDEN",
    ];
    const EQ: &'static [&'static str] = &["book", "tag"];
    const RANGE: &'static [&'static str] = &["seqnum"];

    fn page(env: &Env, scan: &Scan, from: At) -> Result<Page, SqlError> {
        let books = books(env, scan)?;
        let Some(&book) = books.get(from.0 as usize) else { return Ok(Page::last(Vec::new())) };
        let (lo, hi) = scan.range("seqnum");
        let hi = hi.min(env.at());
        let tag = scan.eq.get("tag").map_or(Tag::ALL, tag_of);
        let start = from.1.max(lo);
        let found = env.block(|rt, mut ctx| async move {
            let mut out = Vec::new();
            let mut at = start;
            let mut more = false;
            while out.len() < RECORDS_PAGE {
                match rt.log().read_next(&mut ctx, BookId(book), tag, SeqNum(at)).await {
                    Ok(Some(r)) if r.seqnum.0 <= hi => {
                        at = r.seqnum.0.saturating_add(1);
                        more = at != u64::MAX;
                        out.push(r);
                    }
                    Ok(_) => {
                        more = false;
                        break;
                    }
                    Err(e) => return (Err(tally_durable::Error::from(e).into()), ctx),
                }
            }
            (Ok((out, more.then_some(at))), ctx)
        })?;
        let (records, next) = found;
        let rows = records
            .iter()
            .map(|r| {
                let tags = serde_json::Value::from(r.tags.iter().map(|t| t.0).collect::<Vec<u64>>()).to_string();
                let [data, data_encoding] = bytes_cells(Some(&r.data));
                let [aux, aux_encoding] = bytes_cells(r.aux.as_deref());
                vec![Val::u(book), Val::u(r.seqnum.0), Val::text(tags), data, data_encoding, aux, aux_encoding, Val::Null]
            })
            .collect();
        match next {
            Some(n) => Ok(Page { rows, next: Some((from.0, n)) }),
            None => Ok(next_book(rows, &books, from)),
        }
    }
}

/// The (book, table) pairs a scan covers.
fn tables_of(env: &Env, scan: &Scan) -> Result<Vec<(u64, String)>, SqlError> {
    let books = books(env, scan)?;
    let only = scan.text("table_name");
    env.block(|rt, ctx| async move {
        let mut out = Vec::new();
        for book in books {
            match rt.tables().list(BookId(book)).await {
                Ok(tables) => out.extend(tables.into_iter().filter(|t| only.as_ref().is_none_or(|o| o == t)).map(|t| (book, t))),
                Err(e) => return (Err(e.into()), ctx),
            }
        }
        (Ok(out), ctx)
    })
}

pub struct Tables;

impl Source for Tables {
    const NAME: &'static str = "tables";
    const COLUMNS: &'static [&'static str] = &[
        "book INTEGER",
        "table_name TEXT",
        "seqnum INTEGER",
        "transition TEXT",
        "protocol TEXT",
        "from_protocol TEXT",
        "to_protocol TEXT",
        "auto INTEGER",
    ];
    const EQ: &'static [&'static str] = &["book", "table_name"];

    fn page(env: &Env, scan: &Scan, _from: At) -> Result<Page, SqlError> {
        let mut rows = Vec::new();
        for (book, table) in tables_of(env, scan)? {
            let t = table.clone();
            let history = env.block(|rt, mut ctx| async move {
                (rt.tables().history(&mut ctx, BookId(book), &t).await.map_err(Into::into), ctx)
            })?;
            for (seqnum, transition) in history.into_iter().filter(|(s, _)| *s <= env.at()) {
                let name = |p: Protocol| Val::text(p.name());
                let (kind, protocol, from, to, auto) = match transition {
                    Transition::End { protocol, auto, .. } => ("end", name(protocol), Val::Null, Val::Null, auto),
                    Transition::Begin { from, to, auto, .. } => ("begin", Val::Null, name(from), name(to), auto),
                };
                rows.push(vec![
                    Val::u(book),
                    Val::text(table.clone()),
                    Val::u(seqnum),
                    Val::text(kind),
                    protocol,
                    from,
                    to,
                    Val::Int(auto.into()),
                ]);
            }
        }
        Ok(Page::last(rows))
    }
}

pub struct State;

impl Source for State {
    const NAME: &'static str = "state";
    const COLUMNS: &'static [&'static str] = &[
        "book INTEGER",
        "table_name TEXT",
        "key TEXT",
        "key_encoding TEXT",
        "value TEXT",
        "value_encoding TEXT",
        "protocol TEXT",
        "written_at INTEGER",
    ];
    const EQ: &'static [&'static str] = &["book", "table_name", "key"];

    fn page(env: &Env, scan: &Scan, from: At) -> Result<Page, SqlError> {
        let tables = tables_of(env, scan)?;
        let Some((book, table)) = tables.get(from.0 as usize).cloned() else { return Ok(Page::last(Vec::new())) };
        let keys: Arc<Vec<Bytes>> = match scan.text("key") {
            Some(k) => Arc::new(vec![Bytes::from(k)]),
            None => env.keys(book, &table)?,
        };
        let start = from.1 as usize;
        let end = (start + KEYS_PAGE).min(keys.len());
        let page_keys: Vec<Bytes> = keys.get(start..end).unwrap_or_default().to_vec();
        let at = env.as_of;
        let t = table.clone();
        let values = env.block(|rt, mut ctx| async move {
            let mut out = Vec::new();
            let history = match rt.tables().history(&mut ctx, BookId(book), &t).await {
                Ok(h) => h,
                Err(e) => return (Err(e.into()), ctx),
            };
            for key in page_keys {
                match rt.tables().value_at(&mut ctx, BookId(book), &t, &history, &key, at).await {
                    Ok(v) => out.push((key, v)),
                    Err(e) => return (Err(e.into()), ctx),
                }
            }
            (Ok(out), ctx)
        })?;
        let rows = values
            .into_iter()
            .filter(|(_, v)| v.value.is_some())
            .map(|(key, v)| {
                let [k, key_encoding] = bytes_cells(Some(&key));
                let [value, value_encoding] = bytes_cells(v.value.as_deref());
                vec![
                    Val::u(book),
                    Val::text(table.clone()),
                    k,
                    key_encoding,
                    value,
                    value_encoding,
                    Val::text(v.protocol),
                    Val::opt_u(v.written_at),
                ]
            })
            .collect();
        let next = if end < keys.len() {
            Some((from.0, end as u64))
        } else {
            (from.0 as usize + 1 < tables.len()).then_some((from.0 + 1, 0))
        };
        Ok(Page { rows, next })
    }
}

/// The objects and queues of `book` as of the query's position.
fn names(env: &Env, book: u64) -> Result<tally_durable::LibraryNames, SqlError> {
    let at = env.at();
    env.block(|rt, mut ctx| async move {
        (rt.libraries().names(&mut ctx, BookId(book), at, LIBRARY_RECORDS_MAX).await.map_err(Into::into), ctx)
    })
}

/// The books a scan of a library's table covers, the one `from` is at, and the names
/// of its objects or queues (`pick`) the scan asks for; `None` past the last book.
type Named = (Vec<u64>, u64, Vec<String>);

fn named(
    env: &Env,
    scan: &Scan,
    from: At,
    pick: fn(tally_durable::LibraryNames) -> BTreeSet<String>,
) -> Result<Option<Named>, SqlError> {
    let books = books(env, scan)?;
    let Some(&book) = books.get(from.0 as usize) else { return Ok(None) };
    let names = match scan.text("name") {
        Some(n) => vec![n],
        None => pick(names(env, book)?).into_iter().collect(),
    };
    Ok(Some((books, book, names)))
}

pub struct Objects;

impl Source for Objects {
    const NAME: &'static str = "objects";
    const COLUMNS: &'static [&'static str] = &["book INTEGER", "name TEXT", "value TEXT"];
    const EQ: &'static [&'static str] = &["book", "name"];

    fn page(env: &Env, scan: &Scan, from: At) -> Result<Page, SqlError> {
        let Some((books, book, names)) = named(env, scan, from, |n| n.objects)? else { return Ok(Page::last(Vec::new())) };
        let at = env.at();
        let values = env.block(|rt, mut ctx| async move {
            let mut out = Vec::new();
            for name in names {
                match rt.libraries().object_at(&mut ctx, BookId(book), &name, "", at).await {
                    Ok(v) => out.push((name, v)),
                    Err(e) => return (Err(e.into()), ctx),
                }
            }
            (Ok(out), ctx)
        })?;
        let rows = values.into_iter().map(|(name, v)| vec![Val::u(book), Val::text(name), Val::opt_text(v)]).collect();
        Ok(next_book(rows, &books, from))
    }
}

pub struct Queues;

impl Source for Queues {
    const NAME: &'static str = "queues";
    const COLUMNS: &'static [&'static str] = &["book INTEGER", "name TEXT", "shard INTEGER", "pending INTEGER", "oldest INTEGER"];
    const EQ: &'static [&'static str] = &["book", "name"];

    fn page(env: &Env, scan: &Scan, from: At) -> Result<Page, SqlError> {
        let Some((books, book, names)) = named(env, scan, from, |n| n.queues)? else { return Ok(Page::last(Vec::new())) };
        let at = env.at();
        let shards = env.block(|rt, mut ctx| async move {
            let mut out = Vec::new();
            for name in names {
                match rt.libraries().queue_at(&mut ctx, BookId(book), &name, at).await {
                    Ok(s) => out.push((name, s)),
                    Err(e) => return (Err(e.into()), ctx),
                }
            }
            (Ok(out), ctx)
        })?;
        let rows = shards
            .into_iter()
            .flat_map(|(name, shards)| {
                shards.into_iter().map(move |s| {
                    vec![Val::u(book), Val::text(name.clone()), Val::u(s.shard), Val::u(s.pending), Val::opt_u(s.oldest)]
                })
            })
            .collect();
        Ok(next_book(rows, &books, from))
    }
}
