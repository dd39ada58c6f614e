//! A table's protocol, in one home: its transition log (the first record, which names
//! the protocol of a table nobody used before, and the latest, with the count a
//! conditional append names to say the table did not switch since), the listing of the
//! tables that have one, where a value is under each protocol (the write-log record a
//! read-optimized read sees, migrations included; the fresher of the two stores during
//! a switch), and what each protocol would cost (`Ops`, which `auto` weighs,
//! `switch.rs`). The instance takes a table's protocol as of its start from here
//! (`instance/state.rs`); switches append to the transition log (`switch.rs`).

use std::collections::{BTreeMap, BTreeSet};

use tally_log_core::{BookId, Context, Error as LogError, SeqNum};

use crate::abort::{Abort, KEY_MAX, VALUE_MAX};
use crate::config::{Protocol, StateConfig};
use crate::core::Core;
use crate::error::Error;
use crate::record::{self, TableRef, Transition, Written};
use crate::store::{StateStore, Value};
use crate::tags::{shadow, PLATFORM_BOOK, TABLES};

pub(crate) mod costs;

pub(crate) use costs::LastOp;
pub use costs::Ops;

/// Table names: 1 to 64 of `a-z 0-9 - _`.
pub fn check_table(table: &str) -> Result<(), String> {
    let ok = !table.is_empty()
        && table.len() <= 64
        && table.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!("invalid table name {table:?}: 1 to 64 of a-z 0-9 - _"))
    }
}

/// Refuses a state key or value of `table` past the limits.
pub(crate) fn check_object(table: &str, key: &[u8], value: Option<&[u8]>) -> Result<(), Abort> {
    check_table(table).map_err(|m| Abort::Refused(Error::InvalidArgument(m)))?;
    if key.is_empty() {
        return Err(Abort::Refused(Error::InvalidArgument("state keys must not be empty".into())));
    }
    if key.len() > KEY_MAX {
        let size = Some(key.len() as u64);
        return Err(Abort::Refused(Error::TooLarge { what: "the state key", size, limit: KEY_MAX as u64 }));
    }
    if let Some(v) = value.filter(|v| v.len() > VALUE_MAX) {
        let size = Some(v.len() as u64);
        return Err(Abort::Refused(Error::TooLarge { what: "the state value", size, limit: VALUE_MAX as u64 }));
    }
    Ok(())
}

/// The store table of `(book, table)`.
pub(crate) fn store_table(book: BookId, table: &str) -> String {
    format!("{:x}/{table}", book.0)
}

/// The protocol a version declares for `table`: its own declaration, else the node's
/// `[state] tables`, else the node's default.
pub(crate) fn declared_protocol(config: &StateConfig, declared: &BTreeMap<String, Protocol>, table: &str) -> Protocol {
    declared.get(table).or_else(|| config.tables.get(table)).copied().unwrap_or(config.protocol)
}

impl Core {
    /// The tables of `book` that have a transition log.
    pub async fn tables(&self, book: BookId) -> Result<BTreeSet<String>, Error> {
        let mut guard = self.tables.listing.lock().await;
        let (next, by_book) = &mut *guard;
        let mut ctx = Context::new();
        while let Some(r) = self.log.read_next(&mut ctx, PLATFORM_BOOK, TABLES, *next).await? {
            *next = SeqNum(r.seqnum.0 + 1);
            match record::decode::<TableRef>("table listing", &r.data) {
                Ok(t) => {
                    by_book.entry(BookId(t.book)).or_default().insert(t.table);
                }
                Err(e) => tracing::error!(seqnum = %r.seqnum, "skipping a table listing: {e}"),
            }
        }
        Ok(by_book.get(&book).cloned().unwrap_or_default())
    }

    /// Lists a table whose transition log is about to be created.
    pub(crate) async fn register_table(&self, book: BookId, table: &str) -> Result<(), Abort> {
        let listing = record::encode(&TableRef { book: book.0, table: table.to_string() });
        self.log.append(&mut Context::new(), PLATFORM_BOOK, &[TABLES], listing).await?;
        // Listed here too: this node's reads of TABLES may lag behind its appends.
        self.tables.listing.lock().await.1.entry(book).or_default().insert(table.to_string());
        Ok(())
    }

    /// The newest transition record of `table` (which has one: `first_transition`)
    /// and how many records its transition log holds: the offset a conditional append
    /// names to say that the table did not switch since. Transition logs are never
    /// trimmed, so the count is of the records read (remembered per table).
    pub(crate) async fn latest_transition(
        &self,
        ctx: &mut Context,
        book: BookId,
        table: &str,
    ) -> Result<(Transition, u64), Abort> {
        let (tag, sb) = (self.tags.transition(table), shadow(book));
        let Some(latest) = self.log.read_prev(ctx, sb, tag, SeqNum::MAX).await? else {
            return Err(Abort::internal(format!("the transition log of {table:?} is empty")));
        };
        let t: Transition = record::decode("transition", &latest.data)?;
        if t.table() != table {
            return Err(Abort::internal(format!("tables {table:?} and {:?} share a transition tag", t.table())));
        }
        let key = (book, table.to_string());
        if let Some(&(seqnum, count)) = self.tables.transitions.lock().expect("not poisoned").get(&key) {
            if seqnum == latest.seqnum.0 {
                return Ok((t, count));
            }
        }
        let (mut count, mut at) = (0, SeqNum(0));
        while let Some(r) = self.log.read_next(ctx, sb, tag, at).await? {
            if r.seqnum > latest.seqnum {
                break;
            }
            count += 1;
            if r.seqnum == latest.seqnum {
                break;
            }
            at = SeqNum(r.seqnum.0 + 1);
        }
        self.tables.transitions.lock().expect("not poisoned").insert(key, (latest.seqnum.0, count));
        Ok((t, count))
    }

    /// The first record of `table`'s transition log, creating it (with `declared`) if the
    /// table has none. First records never change, so they are cached.
    pub(crate) async fn first_transition(
        &self,
        ctx: &mut Context,
        book: BookId,
        table: &str,
        declared: Protocol,
    ) -> Result<Transition, Abort> {
        let cache_key = (book, table.to_string());
        if let Some(t) = self.tables.first.lock().expect("not poisoned").get(&cache_key) {
            return Ok(t.clone());
        }
        let tag = self.tags.transition(table);
        let sb = shadow(book);
        let found = match self.log.read_next(ctx, sb, tag, SeqNum(0)).await? {
            Some(r) => r,
            None => {
                let first = Transition::End {
                    table: table.to_string(),
                    protocol: if declared == Protocol::Auto { Protocol::ReadOptimized } else { declared },
                    auto: declared == Protocol::Auto,
                };
                // Listed first, so that no table escapes garbage collection.
                self.register_table(book, table).await?;
                match self.log.cond_append(ctx, sb, &[tag], record::encode(&first), tag, 0).await {
                    Ok(_) => {
                        self.tables.first.lock().expect("not poisoned").insert(cache_key, first.clone());
                        return Ok(first);
                    }
                    Err(LogError::Conflict { .. }) => self
                        .log
                        .read_next(ctx, sb, tag, SeqNum(0))
                        .await?
                        .ok_or_else(|| Abort::internal(format!("the transition log of {table:?} vanished")))?,
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let t: Transition = record::decode("transition", &found.data)?;
        if t.table() != table {
            return Err(Abort::internal(format!("tables {table:?} and {:?} share a transition tag", t.table())));
        }
        self.tables.first.lock().expect("not poisoned").insert(cache_key, t.clone());
        Ok(t)
    }

    /// Counts operations on a table that could be switched, with their costs.
    pub(crate) fn observe(&self, book: BookId, table: &str, ops: Ops) {
        let mut rates = self.tables.rates.lock().expect("not poisoned");
        let tables = rates.entry(book).or_default();
        match tables.get_mut(table) {
            Some(counted) => counted.add(ops),
            None => {
                tables.insert(table.to_string(), ops);
            }
        }
    }

    /// The operations counted since the last call, per book and table.
    pub fn take_rates(&self) -> BTreeMap<BookId, BTreeMap<String, Ops>> {
        std::mem::take(&mut *self.tables.rates.lock().expect("not poisoned"))
    }
}

/// One record of an object's write log: its seqnum, and the object's write it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    pub seqnum: u64,
    pub written: Written,
}

/// The last write-log record of `(table, key)` at or before `at` (skipping records of
/// other objects that share the tag).
async fn prev_write(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    table: &str,
    key: &[u8],
    mut at: u64,
) -> Result<Option<WriteRecord>, Abort> {
    let tag = core.tags.object(table, key);
    loop {
        let Some(r) = core.log.read_prev(ctx, shadow(book), tag, SeqNum(at)).await? else {
            return Ok(None);
        };
        if let Some(written) = record::write_in(&r.data, table, key)? {
            return Ok(Some(WriteRecord { seqnum: r.seqnum.0, written }));
        }
        match r.seqnum.0.checked_sub(1) {
            Some(prev) => at = prev,
            None => return Ok(None),
        }
    }
}

/// The write-log record that gives `(table, key)` its value for a reader at `at`: the
/// last one at or before `at`, unless that is a migration voided by a newer write
/// just before it (see [`Step::Write`]).
pub(crate) async fn visible_write(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    table: &str,
    key: &[u8],
    at: u64,
) -> Result<Option<WriteRecord>, Abort> {
    let Some(last) = prev_write(core, ctx, book, table, key, at).await? else {
        return Ok(None);
    };
    let (Some(from), Some(before)) = (last.written.migrated_from, last.seqnum.checked_sub(1)) else {
        return Ok(Some(last));
    };
    match prev_write(core, ctx, book, table, key, before).await? {
        Some(raced) if raced.written.migrated_from.is_none() && raced.seqnum > from => Ok(Some(raced)),
        _ => Ok(Some(last)),
    }
}

/// The value a write-log record gives `(table, key)`: the one it carries, else exactly
/// the version it names, which exists, since such versions are stored before the
/// record that points at them.
pub(crate) async fn written_value(
    store: &dyn StateStore,
    st: &str,
    table: &str,
    key: &[u8],
    written: &Written,
) -> Result<Value, Abort> {
    let version = written.version;
    if let Some(value) = &written.value {
        return Ok(value.clone());
    }
    match store.get_version(st, key, version).await? {
        Some(value) => Ok(value),
        None => Err(Abort::internal(format!("version {version} of {table:?}/{key:?} is missing from the store"))),
    }
}

/// A transitional read: the fresher of the single-version entry (its version cursor)
/// and the newest write-log record (its seqnum).
pub(crate) async fn fresher_value(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    st: &str,
    table: &str,
    key: &[u8],
) -> Result<Value, Abort> {
    let latest = core.store.get_latest(st, key).await?;
    let logged = visible_write(core, ctx, book, table, key, u64::MAX).await?;
    match (latest, logged) {
        (Some((v, value)), Some(w)) if v.cursor > w.seqnum => Ok(value),
        (Some((_, value)), None) => Ok(value),
        (_, Some(w)) => written_value(&*core.store, st, table, key, &w.written).await,
        (None, None) => Ok(None),
    }
}
