//! Reads of durable objects before the Init: a root whose Init is deferred (`init.rs`,
//! a node alone) reads objects, plainly or in a read-only transaction, at a *snapshot*:
//! the seqnum of its book's newest record when it first reads one (read from a position
//! past the node's start, so it covers every invocation that finished before this one
//! began). A read-only invocation then logs nothing without a key (`finish.rs`) and one
//! record with one (its Init, its readings and its result), instead of an Init for a
//! cursor and a result after it.
//!
//! A re-execution could not read at the snapshot (its Init's seqnum is later), so no
//! record may depend on it but the one that also holds the result, which nothing runs
//! again: an instance that read at a snapshot and then has to log anything else first (a
//! write, a call, any other effect) stops with `Superseded` before it logs, and its
//! invocation runs again with its Init first, as every invocation did before. The node
//! remembers the function's version (`Core::snapshots_refused`), whose later instances
//! then log their Init before such a read instead of running twice. While an instance
//! holds a snapshot, garbage collection keeps what it may read (`core/pins.rs`).

use super::*;

impl Instance {
    /// The position a log-free read of objects reads at: while the Init is deferred, the
    /// snapshot (taken at the first such read); otherwise the cursor, the Init logged
    /// first.
    pub(super) async fn read_point(&mut self, ctx: &mut Context) -> Result<u64, Abort> {
        if !self.initialized() {
            // A root started lazily defers its Init here if it may (`init.rs`).
            self.begin(ctx).await?;
        }
        let refused = || self.core.snapshots_refused.get(&self.function, &self.version.to_be_bytes()).is_some();
        if self.deferred.is_none() || refused() {
            self.flush(ctx).await?;
            self.init_checked(ctx).await?;
            return Ok(self.cursor);
        }
        if let Some(pin) = &self.snapshot {
            return Ok(pin.at());
        }
        // Everything is pinned while the position is looked for (`pins.rs`).
        let mut pin = self.core.pins.hold(0);
        let newest = self.core.log.read_prev(ctx, self.shadow(), Tag::ALL, SeqNum::MAX).await?;
        pin.move_to(newest.map_or(0, |r| r.seqnum.0));
        let at = pin.at();
        self.snapshot = Some(pin);
        Ok(at)
    }

    /// Whether the record about to be logged may be: one that holds the deferred Init of
    /// an instance that read at a snapshot must also hold its result. Otherwise the
    /// function's version is remembered and the attempt stops (`Superseded`: it runs
    /// again with its Init first).
    pub(super) fn snapshot_allows(&self, tail: Option<&Step>) -> Result<(), Abort> {
        self.child_may_log()?;
        if self.snapshot.is_none() || self.deferred.is_none() || matches!(tail, Some(Step::Result(kind::Result { .. }))) {
            return Ok(());
        }
        self.core.snapshots_refused.insert(&self.function, &self.version.to_be_bytes(), ());
        Err(Abort::Superseded)
    }
}
