//! The glue between SQLite's virtual tables and a [`Source`]: one eponymous table per
//! source, whose constraints on the source's pushable columns (equality, and ranges on
//! numbers) reach the source as a [`Scan`], and whose rows it pulls a page at a time
//! (so a scan holds one page, never a whole table). SQLite checks every constraint
//! again on what the source returns: a source may return more than asked, never less.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::marker::PhantomData;
use std::sync::Arc;

use rusqlite::types::{ToSqlOutput, Value as SqlValue, ValueRef};
use rusqlite::vtab::{
    eponymous_only_module, Context, Filters, IndexConstraintOp, IndexInfo, VTab, VTabConfig, VTabConnection, VTabCursor,
};
use rusqlite::{ffi, Connection, ToSql};

use crate::env::Env;
use crate::SqlError;

/// One cell.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Null,
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
}

impl Val {
    /// A seqnum or a count (those past `i64::MAX`, which no log reaches in practice,
    /// show as `i64::MAX`).
    pub fn u(n: u64) -> Val {
        Val::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }

    pub fn opt_u(n: Option<u64>) -> Val {
        n.map_or(Val::Null, Val::u)
    }

    pub fn text(s: impl Into<String>) -> Val {
        Val::Text(s.into())
    }

    pub fn opt_text(s: Option<impl Into<String>>) -> Val {
        s.map_or(Val::Null, |s| Val::Text(s.into()))
    }
}

impl ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Val::Null => ToSqlOutput::Owned(SqlValue::Null),
            Val::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Val::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Val::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

pub type Row = Vec<Val>;

/// What a query asks of a source's pushable columns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scan {
    /// `column = value`.
    pub eq: BTreeMap<&'static str, Val>,
    /// `column >= n` and `column <= n` (`>` and `<` taken as one past).
    pub min: BTreeMap<&'static str, i64>,
    pub max: BTreeMap<&'static str, i64>,
}

impl Scan {
    pub fn int(&self, column: &str) -> Option<i64> {
        match self.eq.get(column) {
            Some(Val::Int(i)) => Some(*i),
            Some(Val::Text(t)) => t.parse().ok(),
            _ => None,
        }
    }

    pub fn text(&self, column: &str) -> Option<String> {
        match self.eq.get(column) {
            Some(Val::Text(t)) => Some(t.clone()),
            Some(Val::Int(i)) => Some(i.to_string()),
            _ => None,
        }
    }

    /// The range `column` must fall in, from the equalities and bounds on it.
    pub fn range(&self, column: &str) -> (u64, u64) {
        let clamp = |i: i64| u64::try_from(i).unwrap_or(0);
        match self.int(column) {
            Some(v) => (clamp(v), clamp(v)),
            None => (
                self.min.get(column).map_or(0, |&m| clamp(m)),
                self.max.get(column).map_or(u64::MAX, |&m| if m < 0 { 0 } else { m as u64 }),
            ),
        }
    }
}

/// Where a scan is: an outer position (a book's index, say) and an inner one (a
/// seqnum in it); `(0, 0)` first.
pub type At = (u64, u64);

/// A page of rows, and where the next page starts (`None`: this was the last).
pub struct Page {
    pub rows: Vec<Row>,
    pub next: Option<At>,
}

impl Page {
    pub fn last(rows: Vec<Row>) -> Page {
        Page { rows, next: None }
    }
}

/// A table of the SQL engine.
pub trait Source: Send + Sync + 'static {
    const NAME: &'static str;
    /// The columns, as `CREATE TABLE x(...)` declares them.
    const COLUMNS: &'static [&'static str];
    /// Columns a scan can take an equality on.
    const EQ: &'static [&'static str] = &[];
    /// Integer columns a scan can take a range on.
    const RANGE: &'static [&'static str] = &[];

    /// The page of rows that starts at `from` (`(0, 0)` first; a page's `next` after).
    fn page(env: &Env, scan: &Scan, from: At) -> Result<Page, SqlError>;
}

/// Registers `S` as an eponymous table of `conn`.
pub fn register<S: Source>(conn: &Connection, env: &Arc<Env>) -> rusqlite::Result<()> {
    conn.create_module(S::NAME, eponymous_only_module::<Tab<S>>(), Some(env.clone()))
}

#[repr(C)]
pub struct Tab<S: Source> {
    base: ffi::sqlite3_vtab,
    env: Arc<Env>,
    source: PhantomData<S>,
}

/// A constraint taken: its column and what it bounds.
#[derive(Clone, Copy)]
enum Taken {
    Eq,
    Min(i64),
    Max(i64),
}

unsafe impl<'vtab, S: Source> VTab<'vtab> for Tab<S> {
    type Aux = Arc<Env>;
    type Cursor = Cursor<'vtab, S>;

    fn connect(db: &mut VTabConnection, aux: Option<&Arc<Env>>, _args: &[&[u8]]) -> rusqlite::Result<(String, Self)> {
        db.config(VTabConfig::DirectOnly)?;
        let env = aux.cloned().ok_or_else(|| rusqlite::Error::ModuleError("a table without its node".into()))?;
        let schema = format!("CREATE TABLE x({})", S::COLUMNS.join(", "));
        Ok((schema, Tab { base: ffi::sqlite3_vtab::default(), env, source: PhantomData }))
    }

    fn best_index(&self, info: &mut IndexInfo) -> rusqlite::Result<()> {
        let mut taken: Vec<(usize, &'static str, &'static str)> = Vec::new();
        for (i, c) in info.constraints().enumerate() {
            let Some(name) = usize::try_from(c.column()).ok().and_then(|n| S::COLUMNS.get(n)).map(|d| column_name(d)) else {
                continue;
            };
            if !c.is_usable() {
                continue;
            }
            let op = match c.operator() {
                IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_EQ if S::EQ.contains(&name) || S::RANGE.contains(&name) => "eq",
                IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_GE if S::RANGE.contains(&name) => "ge",
                IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_GT if S::RANGE.contains(&name) => "gt",
                IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_LE if S::RANGE.contains(&name) => "le",
                IndexConstraintOp::SQLITE_INDEX_CONSTRAINT_LT if S::RANGE.contains(&name) => "lt",
                _ => continue,
            };
            taken.push((i, name, op));
        }
        let mut plan = Vec::new();
        let mut cost = 1e9;
        for (n, (i, name, op)) in taken.iter().enumerate() {
            let mut usage = info.constraint_usage(*i);
            usage.set_argv_index(n as c_int + 1);
            // A hidden column is a parameter the source applies itself (its rows
            // show it empty), not one SQLite could check again.
            usage.set_omit(S::COLUMNS.iter().any(|d| column_name(d) == *name && d.contains("HIDDEN")));
            plan.push(format!("{name}:{op}"));
            cost /= if *op == "eq" { 100.0 } else { 10.0 };
        }
        info.set_idx_str(&plan.join(","));
        info.set_estimated_cost(cost);
        Ok(())
    }

    fn open(&'vtab mut self) -> rusqlite::Result<Cursor<'vtab, S>> {
        Ok(Cursor {
            base: ffi::sqlite3_vtab_cursor::default(),
            env: self.env.clone(),
            scan: Scan::default(),
            rows: Vec::new(),
            at: 0,
            next: None,
            rowid: 0,
            tab: PhantomData,
        })
    }
}

/// The column a declaration names (`name` of `name TEXT`).
fn column_name(declared: &'static str) -> &'static str {
    declared.split_whitespace().next().unwrap_or(declared)
}

#[repr(C)]
pub struct Cursor<'vtab, S: Source> {
    base: ffi::sqlite3_vtab_cursor,
    env: Arc<Env>,
    scan: Scan,
    rows: Vec<Row>,
    at: usize,
    next: Option<At>,
    rowid: i64,
    tab: PhantomData<&'vtab Tab<S>>,
}

/// A source's error as SQLite carries it back (`explain` in lib.rs reads it).
fn module_error(e: SqlError) -> rusqlite::Error {
    match e {
        SqlError::Limit(m) => rusqlite::Error::ModuleError(format!("limit: {m}")),
        other => rusqlite::Error::ModuleError(other.to_string()),
    }
}

impl<S: Source> Cursor<'_, S> {
    /// Reads pages until one has a row or the source ends.
    fn fill(&mut self, mut from: Option<At>) -> rusqlite::Result<()> {
        self.rows.clear();
        self.at = 0;
        while let Some(page_from) = from {
            let page = S::page(&self.env, &self.scan, page_from).map_err(module_error)?;
            self.env.scanned(S::NAME, page.rows.len()).map_err(module_error)?;
            from = page.next;
            if !page.rows.is_empty() {
                self.rows = page.rows;
                break;
            }
        }
        self.next = from;
        Ok(())
    }
}

unsafe impl<S: Source> VTabCursor for Cursor<'_, S> {
    fn filter(&mut self, _idx_num: c_int, idx_str: Option<&str>, args: &Filters<'_>) -> rusqlite::Result<()> {
        let mut scan = Scan::default();
        let plan = idx_str.unwrap_or("");
        for (n, part) in plan.split(',').filter(|p| !p.is_empty()).enumerate() {
            let (name, op) = part.split_once(':').unwrap_or((part, "eq"));
            let Some(&name) = S::COLUMNS.iter().map(|d| column_name(d)).collect::<Vec<_>>().iter().find(|c| **c == name) else {
                continue;
            };
            let value: SqlValue = args.get(n)?;
            let int = match &value {
                SqlValue::Integer(i) => Some(*i),
                SqlValue::Real(r) => Some(*r as i64),
                _ => None,
            };
            let taken = match (op, int) {
                ("eq", _) => Taken::Eq,
                ("ge", Some(i)) => Taken::Min(i),
                ("gt", Some(i)) => Taken::Min(i.saturating_add(1)),
                ("le", Some(i)) => Taken::Max(i),
                ("lt", Some(i)) => Taken::Max(i.saturating_sub(1)),
                _ => continue,
            };
            match taken {
                Taken::Eq => {
                    let v = match value {
                        SqlValue::Integer(i) => Val::Int(i),
                        SqlValue::Text(t) => Val::Text(t),
                        SqlValue::Blob(b) => Val::Blob(b),
                        SqlValue::Real(r) => Val::Int(r as i64),
                        SqlValue::Null => Val::Null,
                    };
                    scan.eq.insert(name, v);
                }
                Taken::Min(i) => {
                    let m = scan.min.entry(name).or_insert(i);
                    *m = (*m).max(i);
                }
                Taken::Max(i) => {
                    let m = scan.max.entry(name).or_insert(i);
                    *m = (*m).min(i);
                }
            }
        }
        self.scan = scan;
        self.rowid = 0;
        self.fill(Some((0, 0)))
    }

    fn next(&mut self) -> rusqlite::Result<()> {
        self.rowid += 1;
        self.at += 1;
        if self.at >= self.rows.len() {
            let from = self.next;
            self.fill(from)?;
        }
        Ok(())
    }

    fn eof(&self) -> bool {
        self.at >= self.rows.len()
    }

    fn column(&self, ctx: &mut Context, i: c_int) -> rusqlite::Result<()> {
        let cell = usize::try_from(i).ok().and_then(|i| self.rows.get(self.at)?.get(i)).unwrap_or(&Val::Null);
        ctx.set_result(cell)
    }

    fn rowid(&self) -> rusqlite::Result<i64> {
        Ok(self.rowid)
    }
}
