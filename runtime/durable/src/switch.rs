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
//!      instance (counter > 0) is copied into a version named by `b` and the key, with a
//!      write-log record that carries the entry's version cursor. The record is also
//!      the first of the key's migration claim (`tags::migration(b, ..)`), appended
//!      conditionally at its offset 0: a migration run twice (retried, or on two nodes)
//!      writes each key's record once. A transitional write that raced in between,
//!      newer than that cursor, sits just before the migration record in the write log,
//!      and readers take it instead (`visible_write`);
//! 3. append End. The switch is listed in a platform stream, and the owner of its book
//!    (see [`crate::Peers`]) completes the switches left unfinished: the node that began
//!    one may have died, and ownership moves on when nodes leave.
//!
//! Quiescence counts a root finished when its Result is read, or when its step log ends in
//! a Result or was collected whole: garbage collection may trim the Result from the
//! INSTANCES stream before the switch reads it.
//!
//! `auto` is decided by the book's owner from the traffic that reaches it, with a band
//! (`HYSTERESIS`) against flapping. It does not use §4.6's criterion, which weighs reads
//! against writes because Halfmoon's read-optimized writes and write-optimized reads each
//! cost an append: here both wait for the invocation's next record, so each instance
//! counts, from the order of its operations on a table, the appends and synced store writes
//! each protocol would make (`Ops` in `table/costs.rs`: a read after writes costs read-optimized
//! an append; a run of writes costs write-optimized a sync, and an append when it follows
//! reads or a deferred Init), and `auto` picks the cheaper, a sync weighing
//! `auto_sync_cost` appends. A lazily started invocation costs write-optimized as many
//! appends or more whatever its order, so such traffic keeps a table read-optimized.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use tally_log_core::{BookId, Context, Error as LogError, SeqNum, Tag};

use crate::abort::{check_book, Abort};
use crate::config::Protocol;
use crate::error::Error;
use crate::node::{Durable, Tables};
use crate::record::kind;
use crate::record::{self, Step, TableRef, Transition};
use crate::store::{Family, Version};
use crate::table::{check_table, store_table, visible_write, written_value, Ops};
use crate::tags::{shadow, INSTANCES, PLATFORM_BOOK, SWITCHES};

/// How often a switch checks whether the earlier instances have finished.
const QUIET_POLL_MS: u64 = 50;
/// How long a switch waits after a failed attempt to complete it.
const RETRY_MS: u64 = 1000;
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

impl Durable {
    /// The transition log of `table` in `book`, whole (it is short), with every
    /// transition this node has seen in it.
    async fn history(&self, ctx: &mut Context, book: BookId, table: &str) -> Result<Vec<(u64, Transition)>, Error> {
        ctx.merge(&self.transitions_seen.lock().expect("not poisoned"));
        let tag = self.core.tags.transition(table);
        let mut at = SeqNum(0);
        let mut out = Vec::new();
        while let Some(r) = self.core.log.read_next(ctx, shadow(book), tag, at).await? {
            at = SeqNum(r.seqnum.0 + 1);
            let t: Transition = record::decode("transition", &r.data)?;
            if t.table() == table {
                out.push((r.seqnum.0, t));
            }
        }
        Ok(out)
    }

    async fn append_transition(
        &self,
        ctx: &mut Context,
        book: BookId,
        table: &str,
        t: Transition,
        position: u64,
    ) -> Result<u64, Error> {
        let tag = self.core.tags.transition(table);
        let appended = self.core.log.cond_append(ctx, shadow(book), &[tag], record::encode(&t), tag, position).await;
        self.transitions_seen.lock().expect("not poisoned").merge(ctx);
        match appended {
            Ok(s) => Ok(s.0),
            Err(LogError::Conflict { .. }) => {
                Err(Error::Conflict(format!("the protocol of {table:?} changed meanwhile; ask again")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Appends Begin after `hist`, which ends with an End, and completes the switch in the
    /// background.
    async fn begin(
        self: &Arc<Self>,
        book: BookId,
        table: &str,
        to: Protocol,
        auto: bool,
        mut hist: Vec<(u64, Transition)>,
    ) -> Result<TableStatus, Error> {
        let Some((_, Transition::End { protocol: from, .. })) = hist.last() else {
            unreachable!("a switch begins after an End");
        };
        let from = *from;
        let position = hist.len() as u64;
        let mut ctx = Context::new();
        let listing = record::encode(&TableRef { book: book.0, table: table.to_string() });
        self.core.log.append(&mut ctx, PLATFORM_BOOK, &[SWITCHES], listing).await?;
        let t = Transition::Begin { table: table.to_string(), from, to, auto };
        let b = self.append_transition(&mut ctx, book, table, t.clone(), position).await?;
        tracing::info!(book = book.0, table, from = from.name(), to = to.name(), "switching");
        let switch = Switch { book, table: table.to_string(), begin: b, to, auto, end_position: position + 1 };
        self.spawn_completion(switch, ctx);
        hist.push((b, t));
        Ok(TableStatus::of(hist).expect("just appended"))
    }

    /// Completes a switch in the background, retrying until it is done (one completion
    /// per table at a time on this node). Cancelling it (the node stops) loses nothing:
    /// the switch is listed, and the book's owner completes listed switches.
    fn spawn_completion(self: &Arc<Self>, switch: Switch, ctx: Context) {
        let key = (switch.book, switch.table.clone());
        if !self.completing.lock().expect("not poisoned").insert(key.clone()) {
            return;
        }
        let weak = Arc::downgrade(self);
        self.core.spawn.spawn(
            "switch-completion",
            Box::pin(async move {
                let mut ctx = ctx;
                loop {
                    let Some(d) = Durable::live(&weak) else { return };
                    match d.complete(&mut ctx, &switch).await {
                        Ok(()) => {
                            d.completing.lock().expect("not poisoned").remove(&key);
                            return;
                        }
                        Err(e) => {
                            tracing::warn!(book = switch.book.0, table = switch.table, "completing a switch, will retry: {e}");
                            let sleep = d.core.clock.sleep(RETRY_MS);
                            drop(d);
                            sleep.await;
                        }
                    }
                }
            }),
        );
    }

    pub(crate) async fn complete(&self, ctx: &mut Context, s: &Switch) -> Result<(), Error> {
        self.wait_quiet(ctx, s.book, s.begin).await?;
        self.migrate(ctx, s).await.map_err(Abort::into_error)?;
        let end = Transition::End { table: s.table.clone(), protocol: s.to, auto: s.auto };
        match self.append_transition(ctx, s.book, &s.table, end, s.end_position).await {
            // Another node completed it first.
            Ok(_) | Err(Error::Conflict(_)) => {}
            Err(e) => return Err(e),
        }
        tracing::info!(book = s.book.0, table = s.table, to = s.to.name(), "switched");
        Ok(())
    }

    /// Waits until every root invocation of `book` whose init record precedes `before`
    /// has a result. `ctx` has seen `before`, so every such init record is readable.
    async fn wait_quiet(&self, ctx: &mut Context, book: BookId, before: u64) -> Result<(), Error> {
        let mut at = 0;
        let mut open: BTreeSet<Tag> = BTreeSet::new();
        loop {
            while let Some(r) = self.core.log.read_next(ctx, shadow(book), INSTANCES, SeqNum(at)).await? {
                at = r.seqnum.0 + 1;
                let step = record::decode_steps("step", &r.data)?;
                let Some(step_tag) = self.core.tags.step_log_of(&r.tags, &step) else { continue };
                // A deferred Init comes with the root's first steps, maybe its result.
                let (init, last) = step.into_init_and_last();
                for step in init.into_iter().chain(last) {
                    match step {
                        Step::Init(kind::Init { id, .. }) | Step::InitKeyed(kind::InitKeyed { id, .. })
                            if id.is_root() && r.seqnum.0 < before =>
                        {
                            open.insert(step_tag);
                        }
                        Step::Result(kind::Result { .. }) => {
                            open.remove(&step_tag);
                        }
                        _ => {}
                    }
                }
            }
            // The reads end where the index ends, which `ctx` puts past `before`: every
            // root that started before it has been seen. Garbage collection may trim a
            // Result away before it was read here: a step log whose last record is a
            // Result, or that was collected whole, is finished.
            for tag in open.clone() {
                let last = self.core.log.read_prev(ctx, shadow(book), tag, SeqNum::MAX).await?;
                let finished = match last {
                    None => true,
                    Some(l) => matches!(record::decode_last("step", &l.data), Ok(Step::Result(kind::Result { .. }))),
                };
                if finished {
                    open.remove(&tag);
                }
            }
            if open.is_empty() {
                return Ok(());
            }
            self.core.clock.sleep(QUIET_POLL_MS).await;
        }
    }

    /// Makes the target protocol's store complete (see the module doc).
    pub(crate) async fn migrate(&self, ctx: &mut Context, s: &Switch) -> Result<(), Abort> {
        let (book, table) = (s.book, s.table.as_str());
        let st = store_table(book, table);
        let family = if s.to == Protocol::ReadOptimized { Family::Latest } else { Family::Versions };
        let mut after: Option<Bytes> = None;
        let mut migrated = 0u64;
        loop {
            let keys = self.core.store.list_keys(&st, family, after.as_deref(), PAGE).await?;
            for key in &keys {
                if s.to == Protocol::WriteOptimized {
                    let Some(w) = visible_write(&self.core, ctx, book, table, key, u64::MAX).await? else { continue };
                    let value = written_value(&*self.core.store, &st, table, key, &w.written).await?;
                    self.core.store.put_if_newer(&st, key, Version { cursor: w.seqnum, counter: 0 }, value).await?;
                    migrated += 1;
                    continue;
                }
                let Some((v, value)) = self.core.store.get_latest(&st, key).await? else { continue };
                if v.counter == 0 {
                    // Written with a write-log record of its own (transitional, migrated).
                    continue;
                }
                // After quiescence no write-optimized instance runs, so an entry with a
                // counter no longer changes: every run of this migration reads the same
                // value and names the same version.
                let version = migration_version(s.begin, key);
                self.core.store.put_version(&st, key, version, value).await?;
                let m = Step::Write(kind::Write {
                    table: table.to_string(),
                    key: key.clone(),
                    version,
                    migrated_from: Some(v.cursor),
                });
                let claim = self.core.tags.migration(s.begin, table, key);
                let tags = [claim, self.core.tags.object(table, key)];
                match self.core.log.cond_append(ctx, shadow(book), &tags, record::encode(&m), claim, 0).await {
                    Ok(_) => migrated += 1,
                    Err(LogError::Conflict { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            match keys.last() {
                Some(last) => after = Some(last.clone()),
                None => break,
            }
        }
        tracing::info!(book = book.0, table, migrated, "migrated to {}", s.to.name());
        Ok(())
    }

    /// Completes the listed switches of the books this node owns that are still under
    /// way. `w` holds what earlier rounds read: the listing stream's cursor, and the
    /// tables whose last switch was not yet seen complete.
    async fn resume_switches(self: &Arc<Self>, w: &mut SwitchWatch) -> Result<(), Error> {
        while let Some(r) = self.core.log.read_next(&mut w.ctx, PLATFORM_BOOK, SWITCHES, w.next).await? {
            w.next = SeqNum(r.seqnum.0 + 1);
            match record::decode::<TableRef>("switch listing", &r.data) {
                Ok(t) if !BookId(t.book).is_reserved() => {
                    w.pending.insert(t, r.seqnum.0);
                }
                Ok(t) => tracing::error!(seqnum = %r.seqnum, "skipping a switch listing of platform book {:#x}", t.book),
                Err(e) => tracing::error!(seqnum = %r.seqnum, "skipping a switch listing: {e}"),
            }
        }
        let owned: Vec<(TableRef, u64)> =
            w.pending.iter().filter(|(t, _)| self.core.peers.owns(BookId(t.book))).map(|(t, &at)| (t.clone(), at)).collect();
        for (t, listed_at) in owned {
            let book = BookId(t.book);
            if self.completing.lock().expect("not poisoned").contains(&(book, t.table.clone())) {
                continue;
            }
            let hist = self.history(&mut w.ctx, book, &t.table).await?;
            match hist.last() {
                Some((b, Transition::Begin { to, auto, .. })) => {
                    tracing::info!(book = book.0, table = t.table, "resuming a switch");
                    let end_position = hist.len() as u64;
                    let switch = Switch { book, table: t.table.clone(), begin: *b, to: *to, auto: *auto, end_position };
                    self.spawn_completion(switch, w.ctx.clone());
                }
                // Complete, if the End is later than the listing: a listing is appended
                // before its Begin, so an End before it is the previous switch's.
                Some((end, _)) if *end > listed_at => {
                    w.pending.remove(&t);
                }
                _ => {}
            }
        }
        Ok(())
    }

    async fn auto_step(self: &Arc<Self>, book: BookId, table: &str, ops: Ops) -> Result<(), Error> {
        let mut ctx = Context::new();
        let hist = self.history(&mut ctx, book, table).await?;
        let Some((_, Transition::End { protocol, auto: true, .. })) = hist.last() else { return Ok(()) };
        let cfg = &self.core.config;
        let sync_cost = f64::from(cfg.auto_sync_cost) / 100.0;
        let Some(to) = auto_choice(*protocol, ops, sync_cost, cfg.auto_min_ops) else {
            return Ok(());
        };
        tracing::info!(book = book.0, table, ?ops, "auto: {} costs less", to.name());
        match self.begin(book, table, to, true, hist).await {
            Ok(_) | Err(Error::Conflict(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// One switch to complete.
pub(crate) struct Switch {
    pub book: BookId,
    pub table: String,
    /// The seqnum of its Begin record.
    pub begin: u64,
    pub to: Protocol,
    pub auto: bool,
    /// The offset its End record takes in the transition log.
    pub end_position: u64,
}

/// The version a switch to read-optimized that began at `begin` stores for `key`.
fn migration_version(begin: u64, key: &[u8]) -> u64 {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"migration");
    h.update(begin.to_be_bytes());
    h.update(key);
    u64::from_be_bytes(h.finalize()[..8].try_into().expect("8 bytes"))
}

/// What the resumption of switches has read so far (see `Durable::resume_switches`).
struct SwitchWatch {
    ctx: Context,
    next: SeqNum,
    /// Listed tables not yet seen complete, with the seqnum of their last listing.
    pending: BTreeMap<TableRef, u64>,
}

/// Starts `auto` and the completion of switches left unfinished.
pub(crate) fn start(d: &Arc<Durable>) {
    let weak = Arc::downgrade(d);
    // Cancelling `auto` loses only the rates observed since its last look.
    d.core.spawn.spawn("auto", Box::pin(auto_loop(weak.clone())));
    // Cancelling the resumption loses nothing: the next start reads the listing again.
    d.core.spawn.spawn(
        "switch-resume",
        Box::pin(async move {
            let mut w = SwitchWatch { ctx: Context::new(), next: SeqNum::MIN, pending: BTreeMap::new() };
            loop {
                let Some(d) = Durable::live(&weak) else { return };
                if let Err(e) = d.resume_switches(&mut w).await {
                    tracing::warn!("resuming switches: {e}");
                }
                let sleep = d.core.clock.sleep(d.core.config.recovery_interval_ms);
                drop(d);
                sleep.await;
            }
        }),
    );
}

/// Every `auto_interval_ms`: for each `auto` table this node used, applies
/// [`auto_choice`] to the rates observed since the last look and starts the switch it
/// picks.
async fn auto_loop(weak: Weak<Durable>) {
    loop {
        let Some(d) = Durable::live(&weak) else { return };
        let sleep = d.core.clock.sleep(d.core.config.auto_interval_ms);
        drop(d);
        sleep.await;
        let Some(d) = Durable::live(&weak) else { return };
        for (book, tables) in d.core.take_rates() {
            // The book's owner decides, from the share of the book's traffic it sees.
            if !d.core.peers.owns(book) {
                continue;
            }
            for (table, ops) in tables {
                if let Err(e) = d.auto_step(book, &table, ops).await {
                    tracing::warn!(book = book.0, table, "auto: {e}");
                }
            }
        }
    }
}

/// What a logged read adds to the record that holds it, in appends: under
/// write-optimized every read is a step of the record, under read-optimized only those
/// taken with a deferred Init are. It only breaks ties, so that a table that is only
/// read goes read-optimized.
const LOGGED_READ_COST: f64 = 1.0 / 64.0;

/// Which protocol costs less for these operations, or `None` to stay with `current`
/// (inside the hysteresis band, or too few operations to tell). Halfmoon's runtime
/// criterion (§4.6) weighs reads against writes, since its read-optimized writes and
/// write-optimized reads each cost a log append; here both wait for the invocation's
/// next record, and what each protocol costs follows from the order of the operations
/// ([`Ops`]): appends, plus synced store writes that cost `sync_cost` appends each.
/// Read-optimized is kept on a tie.
pub fn auto_choice(current: Protocol, ops: Ops, sync_cost: f64, min_ops: u64) -> Option<Protocol> {
    if ops.reads + ops.writes < min_ops {
        return None;
    }
    let ro = ops.ro_appends as f64 + sync_cost * ops.ro_syncs as f64;
    let wo = ops.wo_appends as f64 + sync_cost * ops.wo_syncs as f64 + LOGGED_READ_COST * ops.reads as f64;
    match current {
        Protocol::ReadOptimized if wo * HYSTERESIS < ro => Some(Protocol::WriteOptimized),
        Protocol::WriteOptimized if ro < wo => Some(Protocol::ReadOptimized),
        _ => None,
    }
}

impl Tables<'_> {
    /// The books any invocation used (exactly-once), on any node.
    pub async fn books(&self) -> Result<std::collections::BTreeSet<BookId>, Error> {
        self.0.core.books().await
    }

    /// A table's status; `None` if no invocation has used it yet.
    pub async fn status(&self, book: BookId, table: &str) -> Result<Option<TableStatus>, Error> {
        let d = self.0;
        check_book(book)?;
        check_table(table).map_err(Error::InvalidArgument)?;
        Ok(TableStatus::of(d.history(&mut Context::new(), book, table).await?))
    }

    /// Asks for `target` on a table: `read-optimized` or `write-optimized` switch to it
    /// (and turn `auto` off), `auto` lets the runtime choose. Returns at once, with the
    /// switch under way; the table's status shows when it ends.
    pub async fn switch(&self, book: BookId, table: &str, target: Protocol) -> Result<TableStatus, Error> {
        let d = self.0;
        check_book(book)?;
        check_table(table).map_err(Error::InvalidArgument)?;
        if !matches!(target, Protocol::ReadOptimized | Protocol::WriteOptimized | Protocol::Auto) {
            return Err(Error::InvalidArgument(format!(
                "tables switch to read-optimized, write-optimized or auto, not {}",
                target.name()
            )));
        }
        let mut ctx = Context::new();
        let mut hist = d.history(&mut ctx, book, table).await?;
        let auto = target == Protocol::Auto;
        let position = hist.len() as u64;
        let next = match hist.last().map(|(_, t)| t) {
            None => {
                let protocol = if auto { Protocol::ReadOptimized } else { target };
                Transition::End { table: table.to_string(), protocol, auto }
            }
            Some(Transition::Begin { from, to, .. }) => {
                return Err(Error::Conflict(format!(
                    "{table:?} is switching from {} to {}; ask again when it has finished",
                    from.name(),
                    to.name()
                )))
            }
            Some(Transition::End { protocol, .. }) if !matches!(protocol, Protocol::ReadOptimized | Protocol::WriteOptimized) => {
                return Err(Error::InvalidArgument(format!(
                    "{table:?} is {}; only read-optimized and write-optimized tables switch",
                    protocol.name()
                )))
            }
            Some(&Transition::End { protocol, .. }) => {
                let to = if auto { protocol } else { target };
                if to == protocol {
                    Transition::End { table: table.to_string(), protocol, auto }
                } else {
                    return d.begin(book, table, to, auto, hist).await;
                }
            }
        };
        if position == 0 {
            d.core.register_table(book, table).await.map_err(Abort::into_error)?;
        }
        let seqnum = d.append_transition(&mut ctx, book, table, next.clone(), position).await?;
        hist.push((seqnum, next));
        Ok(TableStatus::of(hist).expect("just appended"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operations of `n` invocations of `shape` (`r` a read, `w` a write, `W` a
    /// write of a value too large for its record), started `lazy` (their Init deferred
    /// until a record) or not.
    fn invocations(n: u64, shape: &str, lazy: bool) -> Ops {
        let mut total = Ops::default();
        for _ in 0..n {
            let mut last = None;
            for op in shape.chars() {
                let write = match op {
                    'r' => None,
                    w => Some(w == 'W'),
                };
                let (ops, now) = Ops::of(last, write, lazy);
                total.add(ops);
                last = Some(now);
            }
        }
        total
    }

    #[test]
    fn auto_picks_the_protocol_whose_appends_and_syncs_cost_less() {
        let (r, w) = (Protocol::ReadOptimized, Protocol::WriteOptimized);
        // Read-optimized writes ride the next record, which a lazily started
        // invocation appends anyway: whatever the order, write-optimized costs as many
        // appends or more, and a sync per run of writes besides. Those tables stay or
        // go read-optimized however cheap a sync is (the transfer, writes alone,
        // writes then reads, alternating).
        for shape in ["rrww", "w", "ww", "wr", "wrr", "wrwr", "rwrw"] {
            let ops = invocations(50, shape, true);
            assert_eq!(auto_choice(r, ops, 0.0, 20), None, "{shape}: {ops:?}");
            assert_eq!(auto_choice(w, ops, 1.0, 20), Some(r), "{shape}: {ops:?}");
        }
        // Started with the Init logged (a keyed invocation), writes then reads: one
        // append under read-optimized (the read after the writes logs them), one sync
        // under write-optimized, which wins if a sync costs less than an append by
        // more than the band.
        let ops = invocations(50, "wwr", false);
        assert_eq!(ops, Ops { reads: 50, writes: 100, ro_appends: 50, ro_syncs: 0, wo_appends: 0, wo_syncs: 50 });
        assert_eq!(auto_choice(r, ops, 0.5, 20), Some(w));
        assert_eq!(auto_choice(r, ops, 0.9, 20), None, "inside the band");
        assert_eq!(auto_choice(w, ops, 0.9, 20), None, "inside the band");
        assert_eq!(auto_choice(w, ops, 1.0, 20), Some(r), "a tie goes read-optimized");
        // A large value makes a read-optimized run of writes sync too.
        let ops = invocations(50, "wWr", false);
        assert_eq!((ops.ro_appends, ops.ro_syncs, ops.wo_syncs), (50, 50, 50));
        assert_eq!(auto_choice(r, ops, 1.0, 20), Some(w));
        // Reads alone cost no appends either way; a logged read's bytes decide.
        let ops = invocations(50, "r", true);
        assert_eq!((ops.ro_appends, ops.wo_appends, ops.wo_syncs), (0, 0, 0));
        assert_eq!(auto_choice(w, ops, 1.0, 20), Some(r));
        assert_eq!(auto_choice(r, ops, 1.0, 20), None);
        // Too few operations to tell.
        assert_eq!(auto_choice(w, invocations(19, "r", true), 1.0, 20), None);
    }
}
