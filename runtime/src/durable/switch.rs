//! Switching a table between read- and write-optimized without pausing invocations
//! (Halfmoon §4.7, §5.2), and `auto`, which switches from observed rates (§4.6).
//!
//! ```text
//!   transition log of (book, table):  End(R) ... Begin(R->W) ............ End(W)
//!   instances starting (init) in:     [ read-optimized ][ transitional  ][ write-optimized
//!                                            |                 |
//!                              every instance that started    migration: make the
//!                              before Begin has finished      target's store complete
//! ```
//!
//! An instance takes the protocol of the transition record at or before its init record
//! and keeps it for its whole life, re-executions included (the record and the init
//! record are both in the log), so no instance ever runs read-optimized alongside one
//! running write-optimized on the same table: between them run only transitional
//! instances, which log every read and write to both stores.
//!
//! Completing a switch (after the Begin record at seqnum `b`):
//! 1. wait until every root invocation whose init record precedes `b` has a result
//!    (a finished root has no running descendants);
//! 2. migrate, so the target protocol finds every value where it looks:
//!    - to write-optimized: each object's visible version is copied to the
//!      single-version entry at version `(write-log seqnum, 0)`; conditional, so a
//!      racing transitional write (which uses the same scheme) is never undone;
//!    - to read-optimized: each single-version entry written by a write-optimized
//!      instance (counter > 0) is copied into a new version with a write-log record
//!      that carries the entry's version cursor. A transitional write that raced in
//!      between, newer than that cursor, sits just before the migration record in the
//!      write log, and readers take it instead (`visible_write`);
//! 3. append End. The switch is listed in a platform stream, so a node that restarts
//!    completes the switches left unfinished.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use tally_logsvc::{BookId, Context, Error as LogError, SeqNum, Tag};

use super::record::{self, instances_tag, object_tag, transition_tag, Step, Transition};
use super::{check_table, version_value, visible_write, Abort, Ops};
use crate::config::Protocol;
use crate::error::RuntimeError;
use crate::registry::REGISTRY_BOOK;
use crate::runtime::Runtime;
use crate::state::{Family, Version};

/// Switches started by any node, `(book, table)` per record, in the registry's book.
const SWITCHES: Tag = Tag(Tag::RESERVED_BIT | 3);
/// How often a switch checks whether the earlier instances have finished.
const QUIET_POLL: Duration = Duration::from_millis(50);
/// Keys per page when a migration walks a table.
const PAGE: usize = 256;
/// `auto` switches only when the rates favour the other protocol by this factor.
const HYSTERESIS: f64 = 1.25;

/// A table's protocol as its transition log says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableStatus {
    pub protocol: Protocol,
    pub auto: bool,
    /// `(from, to)` while a switch is under way.
    pub switching: Option<(Protocol, Protocol)>,
    /// Every transition record: seqnum and record.
    pub history: Vec<(u64, Transition)>,
}

impl TableStatus {
    fn of(history: Vec<(u64, Transition)>) -> Option<TableStatus> {
        let (protocol, auto, switching) = match &history.last()?.1 {
            Transition::End { protocol, auto, .. } => (*protocol, *auto, None),
            Transition::Begin { from, to, auto, .. } => (*from, *auto, Some((*from, *to))),
        };
        Some(TableStatus { protocol, auto, switching, history })
    }
}

/// The transition log of `table` in `book`, whole (it is short).
async fn history(rt: &Runtime, ctx: &mut Context, book: BookId, table: &str) -> Result<Vec<(u64, Transition)>, RuntimeError> {
    let tag = transition_tag(table);
    let mut at = SeqNum(0);
    let mut out = Vec::new();
    while let Some(r) = rt.durable.log.read_next(ctx, book, tag, at).await? {
        at = SeqNum(r.seqnum.0 + 1);
        let t: Transition = record::decode("transition", &r.data)?;
        if t.table() == table {
            out.push((r.seqnum.0, t));
        }
    }
    Ok(out)
}

/// A table's status; `None` if no invocation has used it yet.
pub async fn status(rt: &Runtime, book: BookId, table: &str) -> Result<Option<TableStatus>, RuntimeError> {
    check_table(table).map_err(RuntimeError::InvalidArgument)?;
    Ok(TableStatus::of(history(rt, &mut Context::new(), book, table).await?))
}

/// Asks for `target` on a table: `read-optimized` or `write-optimized` switch to it
/// (and turn `auto` off), `auto` lets the runtime choose. Returns at once, with the
/// switch under way; the table's status shows when it ends.
pub async fn request(rt: &Arc<Runtime>, book: BookId, table: &str, target: Protocol) -> Result<TableStatus, RuntimeError> {
    check_table(table).map_err(RuntimeError::InvalidArgument)?;
    if !matches!(target, Protocol::ReadOptimized | Protocol::WriteOptimized | Protocol::Auto) {
        return Err(RuntimeError::InvalidArgument(format!(
            "tables switch to read-optimized, write-optimized or auto, not {}",
            target.name()
        )));
    }
    let mut ctx = Context::new();
    let mut hist = history(rt, &mut ctx, book, table).await?;
    let auto = target == Protocol::Auto;
    let position = hist.len() as u64;
    let next = match hist.last().map(|(_, t)| t) {
        None => {
            let protocol = if auto { Protocol::ReadOptimized } else { target };
            Transition::End { table: table.to_string(), protocol, auto }
        }
        Some(Transition::Begin { from, to, .. }) => {
            return Err(RuntimeError::Conflict(format!(
                "{table:?} is switching from {} to {}; ask again when it has finished",
                from.name(),
                to.name()
            )))
        }
        Some(Transition::End { protocol, .. }) if !matches!(protocol, Protocol::ReadOptimized | Protocol::WriteOptimized) => {
            return Err(RuntimeError::InvalidArgument(format!(
                "{table:?} is {}; only read-optimized and write-optimized tables switch",
                protocol.name()
            )))
        }
        Some(&Transition::End { protocol, .. }) => {
            let to = if auto { protocol } else { target };
            if to == protocol {
                Transition::End { table: table.to_string(), protocol, auto }
            } else {
                return begin(rt, book, table, to, auto, hist).await;
            }
        }
    };
    if position == 0 {
        rt.durable.register_table(book, table).await.map_err(Abort::into_error)?;
    }
    let seqnum = append_transition(rt, &mut ctx, book, table, next.clone(), position).await?;
    hist.push((seqnum, next));
    Ok(TableStatus::of(hist).expect("just appended"))
}

async fn append_transition(
    rt: &Runtime,
    ctx: &mut Context,
    book: BookId,
    table: &str,
    t: Transition,
    position: u64,
) -> Result<u64, RuntimeError> {
    let tag = transition_tag(table);
    match rt.durable.log.cond_append(ctx, book, &[tag], record::encode(&t), tag, position).await {
        Ok(s) => Ok(s.0),
        Err(LogError::Conflict { .. }) => {
            Err(RuntimeError::Conflict(format!("the protocol of {table:?} changed meanwhile; ask again")))
        }
        Err(e) => Err(e.into()),
    }
}

/// Appends Begin after `hist`, which ends with an End, and completes the switch in the
/// background.
async fn begin(
    rt: &Arc<Runtime>,
    book: BookId,
    table: &str,
    to: Protocol,
    auto: bool,
    mut hist: Vec<(u64, Transition)>,
) -> Result<TableStatus, RuntimeError> {
    let Some((_, Transition::End { protocol: from, .. })) = hist.last() else {
        unreachable!("a switch begins after an End");
    };
    let from = *from;
    let position = hist.len() as u64;
    let mut ctx = Context::new();
    let listing = Bytes::from(serde_json::to_vec(&(book.0, table)).expect("encodes"));
    rt.durable.log.append(&mut ctx, REGISTRY_BOOK, &[SWITCHES], listing).await?;
    let t = Transition::Begin { table: table.to_string(), from, to, auto };
    let b = append_transition(rt, &mut ctx, book, table, t.clone(), position).await?;
    tracing::info!(book = book.0, table, from = from.name(), to = to.name(), "switching");
    spawn_completion(rt, book, table.to_string(), b, to, auto, position + 1, ctx);
    hist.push((b, t));
    Ok(TableStatus::of(hist).expect("just appended"))
}

#[allow(clippy::too_many_arguments)]
fn spawn_completion(
    rt: &Arc<Runtime>,
    book: BookId,
    table: String,
    b: u64,
    to: Protocol,
    auto: bool,
    end_position: u64,
    ctx: Context,
) {
    let rt = rt.clone();
    tokio::spawn(async move {
        let mut ctx = ctx;
        loop {
            match complete(&rt, &mut ctx, book, &table, b, to, auto, end_position).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(book = book.0, table, "completing a switch, will retry: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    });
}

#[allow(clippy::too_many_arguments)]
async fn complete(
    rt: &Runtime,
    ctx: &mut Context,
    book: BookId,
    table: &str,
    b: u64,
    to: Protocol,
    auto: bool,
    end_position: u64,
) -> Result<(), RuntimeError> {
    wait_quiet(rt, ctx, book, b).await?;
    migrate(rt, ctx, book, table, to).await.map_err(Abort::into_error)?;
    let end = Transition::End { table: table.to_string(), protocol: to, auto };
    match append_transition(rt, ctx, book, table, end, end_position).await {
        // Another node completed it first.
        Ok(_) | Err(RuntimeError::Conflict(_)) => {}
        Err(e) => return Err(e),
    }
    tracing::info!(book = book.0, table, to = to.name(), "switched");
    Ok(())
}

/// Waits until every root invocation of `book` whose init record precedes `before`
/// has a result. `ctx` has seen `before`, so every such init record is readable.
async fn wait_quiet(rt: &Runtime, ctx: &mut Context, book: BookId, before: u64) -> Result<(), RuntimeError> {
    let tag = instances_tag();
    let mut at = 0;
    let mut open: HashSet<Tag> = HashSet::new();
    loop {
        while let Some(r) = rt.durable.log.read_next(ctx, book, tag, SeqNum(at)).await? {
            at = r.seqnum.0 + 1;
            let Some(&step_tag) = r.tags.iter().find(|&&t| t != tag) else { continue };
            match record::decode::<Step>("step", &r.data)? {
                Step::Init { root: true, .. } if r.seqnum.0 < before => {
                    open.insert(step_tag);
                }
                Step::Result { .. } => {
                    open.remove(&step_tag);
                }
                _ => {}
            }
        }
        // The reads end where the index ends, which `ctx` puts past `before`: every
        // root that started before it has been seen.
        if open.is_empty() {
            return Ok(());
        }
        tokio::time::sleep(QUIET_POLL).await;
    }
}

/// Makes the target protocol's store complete (see the module doc).
async fn migrate(rt: &Runtime, ctx: &mut Context, book: BookId, table: &str, to: Protocol) -> Result<(), Abort> {
    let d = &rt.durable;
    let st = format!("{:x}/{table}", book.0);
    let family = if to == Protocol::ReadOptimized { Family::Latest } else { Family::Versions };
    let mut after: Option<Bytes> = None;
    let mut migrated = 0u64;
    loop {
        let keys = d.store.list_keys(&st, family, after.as_deref(), PAGE).await?;
        for key in &keys {
            if to == Protocol::WriteOptimized {
                let Some(w) = visible_write(&d.log, ctx, book, table, key, u64::MAX).await? else { continue };
                let value = version_value(&*d.store, &st, table, key, w.version).await?;
                d.store.put_if_newer(&st, key, Version { cursor: w.seqnum, counter: 0 }, value).await?;
                migrated += 1;
                continue;
            }
            let Some((v, value)) = d.store.get_latest(&st, key).await? else { continue };
            if v.counter == 0 {
                // Written with a write-log record of its own (transitional, migrated).
                continue;
            }
            let version = d.log.append(ctx, book, &[], record::encode(&Step::PreWrite)).await?.0;
            d.store.put_version(&st, key, version, value).await?;
            let m = Step::Write { table: table.to_string(), key: key.clone(), version, migrated_from: Some(v.cursor) };
            d.log.append(ctx, book, &[object_tag(table, key)], record::encode(&m)).await?;
            migrated += 1;
        }
        match keys.last() {
            Some(last) => after = Some(last.clone()),
            None => break,
        }
    }
    tracing::info!(book = book.0, table, migrated, "migrated to {}", to.name());
    Ok(())
}

/// Completes the switches that were under way when this node (or another) stopped.
pub async fn resume(rt: &Arc<Runtime>) -> Result<(), RuntimeError> {
    let mut ctx = Context::new();
    let mut at = SeqNum(0);
    let mut listed = BTreeSet::new();
    while let Some(r) = rt.durable.log.read_next(&mut ctx, REGISTRY_BOOK, SWITCHES, at).await? {
        at = SeqNum(r.seqnum.0 + 1);
        match serde_json::from_slice::<(u64, String)>(&r.data) {
            Ok(entry) => {
                listed.insert(entry);
            }
            Err(e) => tracing::error!(seqnum = %r.seqnum, "skipping a malformed switch listing: {e}"),
        }
    }
    for (book, table) in listed {
        let book = BookId(book);
        let hist = history(rt, &mut ctx, book, &table).await?;
        if let Some((b, Transition::Begin { to, auto, .. })) = hist.last() {
            tracing::info!(book = book.0, table, "resuming a switch");
            spawn_completion(rt, book, table.clone(), *b, *to, *auto, hist.len() as u64, ctx.clone());
        }
    }
    Ok(())
}

/// Which protocol the §4.6 runtime criterion picks for these rates, or `None` to stay
/// with `current` (inside the hysteresis band, or too few operations to tell).
/// `write_cost` is how much more a read-optimized write costs than a write-optimized
/// one, relative to how much more a write-optimized read costs than a read-optimized
/// one (C_w / C_r: 1 here, one log append each; 2 in Halfmoon's prototype).
pub fn auto_choice(current: Protocol, ops: Ops, write_cost: f64, min_ops: u64) -> Option<Protocol> {
    if ops.reads + ops.writes < min_ops {
        return None;
    }
    let (reads, weighted_writes) = (ops.reads as f64, write_cost * ops.writes as f64);
    match current {
        Protocol::ReadOptimized if reads * HYSTERESIS < weighted_writes => Some(Protocol::WriteOptimized),
        Protocol::WriteOptimized if reads > weighted_writes * HYSTERESIS => Some(Protocol::ReadOptimized),
        _ => None,
    }
}

/// Every `interval`: for each `auto` table this node used, applies [`auto_choice`] to
/// the rates observed since the last look and starts the switch it picks.
pub fn spawn_auto(rt: Weak<Runtime>, interval: Duration) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(rt) = rt.upgrade() else { return };
            let rates: HashMap<BookId, HashMap<String, Ops>> = rt.durable.take_rates();
            for (book, tables) in rates {
                for (table, ops) in tables {
                    if let Err(e) = auto_step(&rt, book, &table, ops).await {
                        tracing::warn!(book = book.0, table, "auto: {e}");
                    }
                }
            }
        }
    });
}

async fn auto_step(rt: &Arc<Runtime>, book: BookId, table: &str, ops: Ops) -> Result<(), RuntimeError> {
    let mut ctx = Context::new();
    let hist = history(rt, &mut ctx, book, table).await?;
    let Some((_, Transition::End { protocol, auto: true, .. })) = hist.last() else { return Ok(()) };
    let cfg = &rt.durable.config;
    let Some(to) = auto_choice(*protocol, ops, f64::from(cfg.auto_write_cost), cfg.auto_min_ops) else {
        return Ok(());
    };
    tracing::info!(book = book.0, table, reads = ops.reads, writes = ops.writes, "auto: {} suits better", to.name());
    match begin(rt, book, table, to, true, hist).await {
        Ok(_) | Err(RuntimeError::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_follows_the_runtime_criterion_with_hysteresis() {
        let ops = |reads, writes| Ops { reads, writes };
        let (r, w) = (Protocol::ReadOptimized, Protocol::WriteOptimized);
        // With C_w = 2 C_r (Halfmoon's prototype), reads must outnumber writes 2:1.
        assert_eq!(auto_choice(r, ops(10, 90), 2.0, 20), Some(w));
        assert_eq!(auto_choice(w, ops(90, 10), 2.0, 20), Some(r));
        // Inside the band around 2:1 nothing moves, either way.
        assert_eq!(auto_choice(r, ops(60, 33), 2.0, 20), None);
        assert_eq!(auto_choice(w, ops(70, 33), 2.0, 20), None);
        assert_eq!(auto_choice(r, ops(100, 45), 2.0, 20), None);
        assert_eq!(auto_choice(w, ops(100, 35), 2.0, 20), Some(r));
        // Too few operations to tell.
        assert_eq!(auto_choice(r, ops(0, 19), 2.0, 20), None);
        // Staying where it is.
        assert_eq!(auto_choice(r, ops(90, 10), 2.0, 20), None);
        assert_eq!(auto_choice(w, ops(10, 90), 2.0, 20), None);
    }
}
