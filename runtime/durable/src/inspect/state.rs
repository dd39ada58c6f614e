//! A table's values as queries read them: its keys, and each key's value now or as of
//! a seqnum, under the protocol the table had there (its transition log decides, and
//! during a switch the fresher of the two stores, as a transitional read takes it).
//!
//! As of a seqnum `at`: a read-optimized value is the write visible at `at` in the key's
//! write log; a write-optimized or symmetric value is the single-version entry stored at
//! `at` (the newest whose version's cursor is at most `at`: the store keeps the entries
//! each write replaced, `StateStore::get_latest_at`). Garbage collection keeps what a
//! read at the history floor needs, versions, write logs and replaced entries alike,
//! and a read below the floor is refused (`Core::check_history`).

use std::collections::BTreeSet;

use bytes::Bytes;
use tally_log_core::{BookId, Context, SeqNum};

use super::steps::{protocol_at, History};
use crate::abort::check_book;
use crate::config::Protocol;
use crate::core::Core;
use crate::error::{Error, Result};
use crate::node::Tables;
use crate::record;
use crate::record::Transition;
use crate::store::Family;
use crate::table::{check_table, store_table, visible_write, written_value};
use crate::tags::{shadow, HISTORY};

/// One key's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateValue {
    pub value: Option<Bytes>,
    /// The table's protocol at the read (a switch as `from->to`).
    pub protocol: String,
    /// The seqnum the value was written at: its write-log record's, or the cursor of its
    /// single-version entry (the writer's position when it wrote).
    pub written_at: Option<u64>,
}

/// A value and the seqnum it was written at.
type Written = (Option<Bytes>, Option<u64>);

/// Keys of one table a listing returns at most.
pub const KEYS_MAX: usize = 1_000_000;

impl Core {
    /// Refuses a read of `book` as of `at` below its history floor (`gc.rs`): garbage
    /// collection may have removed what that read needs.
    pub(crate) async fn check_history(&self, ctx: &mut Context, book: BookId, at: u64) -> Result<()> {
        let Some(r) = self.log.read_prev(ctx, shadow(book), HISTORY, SeqNum::MAX).await? else { return Ok(()) };
        let floor: u64 = record::decode("history floor", &r.data)?;
        if at < floor {
            return Err(Error::InvalidArgument(format!(
                "book {} keeps its history from seqnum {floor} on ([state] history_kept_ms): {at} is older",
                book.0
            )));
        }
        Ok(())
    }
}

impl Tables<'_> {
    /// The keys `table` of `book` has in the store (either family, each once, in byte
    /// order), at most [`KEYS_MAX`].
    pub async fn keys(&self, book: BookId, table: &str) -> Result<Vec<Bytes>> {
        check_book(book)?;
        check_table(table).map_err(Error::InvalidArgument)?;
        let st = store_table(book, table);
        let store = &self.0.core.store;
        let mut keys = BTreeSet::new();
        for family in [Family::Versions, Family::Latest] {
            let mut after: Option<Bytes> = None;
            loop {
                let page = store.list_keys(&st, family, after.as_deref(), 1024).await.map_err(Error::from)?;
                let Some(last) = page.last().cloned() else { break };
                keys.extend(page);
                if keys.len() > KEYS_MAX {
                    return Err(Error::TooLarge {
                        what: "the keys of a table",
                        size: Some(keys.len() as u64),
                        limit: KEYS_MAX as u64,
                    });
                }
                after = Some(last);
            }
        }
        Ok(keys.into_iter().collect())
    }

    /// The value of `key` in `table` of `book`, now (`at` = `None`) or as of seqnum
    /// `at`; `history` is the table's transition log (`Tables::history`).
    pub async fn value_at(
        &self,
        ctx: &mut Context,
        book: BookId,
        table: &str,
        history: &History,
        key: &[u8],
        at: Option<u64>,
    ) -> Result<StateValue> {
        let seqnum = at.unwrap_or(u64::MAX);
        if at.is_some() {
            self.0.core.check_history(ctx, book, seqnum).await?;
        }
        let at_index = history.partition_point(|(s, _)| *s <= seqnum);
        let protocol = protocol_at(history, seqnum).unwrap_or_else(|| "none".to_string());
        let transition = history[..at_index].last().map(|(_, t)| t.clone());
        let (value, written_at) = match transition {
            None => (None, None),
            Some(Transition::End { protocol: Protocol::ReadOptimized, .. }) => {
                self.logged_at(ctx, book, table, key, seqnum).await?
            }
            Some(Transition::End { protocol: Protocol::Unsafe, .. }) if at.is_some() => {
                return Err(Error::InvalidArgument(format!(
                    "table {table:?} is unsafe: it has no history to read as of a seqnum"
                )))
            }
            Some(Transition::End { .. }) => self.latest_at(book, table, key, seqnum).await?,
            Some(Transition::Begin { .. }) => {
                // The fresher of the write log and the single-version entry, as of `at`.
                let logged = self.logged_at(ctx, book, table, key, seqnum).await?;
                match self.latest_at(book, table, key, seqnum).await? {
                    (value, Some(cursor)) if logged.1.is_none_or(|w| cursor > w) => (value, Some(cursor)),
                    _ => logged,
                }
            }
        };
        Ok(StateValue { value, protocol, written_at })
    }

    /// The value the write log of `(table, key)` gives as of `seqnum`, and its record's
    /// seqnum.
    async fn logged_at(&self, ctx: &mut Context, book: BookId, table: &str, key: &[u8], seqnum: u64) -> Result<Written> {
        let core = &self.0.core;
        let w = visible_write(core, ctx, book, table, key, seqnum).await.map_err(|a| a.into_error())?;
        let Some(w) = w else { return Ok((None, None)) };
        let value = written_value(&*core.store, &store_table(book, table), table, key, &w.written).await.map_err(|_| {
            Error::InvalidArgument(format!(
                "the value {table:?} had at seqnum {seqnum} is no longer kept (garbage collection passed it)"
            ))
        })?;
        Ok((value, Some(w.seqnum)))
    }

    /// The single-version entry of `(table, key)` stored at `seqnum`, and its version's
    /// cursor.
    async fn latest_at(&self, book: BookId, table: &str, key: &[u8], seqnum: u64) -> Result<Written> {
        let found = self.0.core.store.get_latest_at(&store_table(book, table), key, seqnum).await.map_err(Error::from)?;
        Ok(found.map_or((None, None), |(v, value)| (value, Some(v.cursor))))
    }

    /// The transition log of `table` of `book`, oldest first.
    pub async fn history(&self, ctx: &mut Context, book: BookId, table: &str) -> Result<History> {
        check_book(book)?;
        check_table(table).map_err(Error::InvalidArgument)?;
        self.0.core.table_history(ctx, book, table, 4096).await
    }
}
