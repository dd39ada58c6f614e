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
//! again, or a transaction's commit, which records where it began: an instance that read
//! at a snapshot and then has to log anything else first (a write, a call, any other
//! effect) stops with `Superseded` before it logs, and its invocation runs again with its
//! Init first, as every invocation did before. The node remembers the function's version
//! (`Core::snapshots_refused`), whose later instances then log their Init before such a
//! read instead of running twice. While an instance holds a snapshot, garbage collection
//! keeps what it may read (`core/pins.rs`).
//!
//! A read-write transaction begun while the Init is deferred, and before any other read
//! at the snapshot, begins there too, and its commit rides the Init ([Init, readings,
//! commit]: a tweet is one append before its answer instead of two). The commit records
//! its start, the snapshot, so a re-execution begins every read-write transaction up to
//! that commit there (`write_point`) and reads what the first execution read: garbage
//! collection picks no point between a commit's start and its place (`gc.rs`), and the
//! recovery scan holds its horizon at the start while the root is open (`recovery.rs`),
//! as the pin did while it ran.

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
        if self.deferred.is_none() || self.snapshots_refused() {
            self.flush(ctx).await?;
            self.init_checked(ctx).await?;
            return Ok(self.cursor);
        }
        self.snapshot_read = true;
        self.snapshot_at(ctx).await
    }

    /// The snapshot, taken at the first call: the seqnum of the book's newest record.
    async fn snapshot_at(&mut self, ctx: &mut Context) -> Result<u64, Abort> {
        if let Some(pin) = &self.snapshot {
            return Ok(pin.at());
        }
        // Everything is pinned while the position is looked for (`pins.rs`).
        let mut pin = self.core.pins.hold(0);
        let newest = self.core.log.read_prev_seqnum(ctx, self.shadow(), Tag::ALL, SeqNum::MAX).await?;
        pin.move_to(newest.map_or(0, |s| s.0));
        let at = pin.at();
        self.snapshot = Some(pin);
        Ok(at)
    }

    /// The position a read-write transaction begins at: in a re-execution of a first
    /// record that holds a commit begun at a snapshot, that commit's start (every
    /// transaction before it began there); while the Init is deferred, no other read took
    /// the snapshot and nothing is pending but readings, the snapshot (the commit then
    /// rides the Init); otherwise the cursor, with the Init and the pending steps logged
    /// first.
    pub(super) async fn write_point(&mut self, ctx: &mut Context) -> Result<u64, Abort> {
        if !self.initialized() {
            self.begin(ctx).await?;
        }
        if let Some(start) = self.replayed_snapshot() {
            self.init_checked(ctx).await?;
            return Ok(start);
        }
        if self.deferred.is_some() && !self.snapshot_read && self.pending_rides_a_commit() && !self.snapshots_refused() {
            return self.snapshot_at(ctx).await;
        }
        self.flush(ctx).await?;
        self.init_checked(ctx).await?;
        Ok(self.cursor)
    }

    /// The start of the commit the step log's first record holds, begun at a snapshot
    /// before the record's place, if the instance has not taken it yet.
    fn replayed_snapshot(&self) -> Option<u64> {
        let first = self.steps.first().filter(|_| self.deferred.is_none())?.seqnum;
        let mut first_record = self.steps.iter().skip(self.next).take_while(|r| r.seqnum == first);
        first_record.find_map(|r| match &r.step {
            Step::TxnCommit(kind::TxnCommit { start, .. }) if *start < first => Some(*start),
            _ => None,
        })
    }

    fn snapshots_refused(&self) -> bool {
        self.core.snapshots_refused.get(&self.function, &self.version.to_be_bytes()).is_some()
    }

    /// Whether the record about to be logged may be: one that holds the deferred Init of
    /// an instance that read at a snapshot must also hold its result, or the commit of a
    /// transaction that began at the snapshot if nothing else read there. Otherwise the
    /// function's version is remembered and the attempt stops (`Superseded`: it runs
    /// again with its Init first).
    pub(super) fn snapshot_allows(&self, tail: Option<&Step>) -> Result<(), Abort> {
        self.child_may_log()?;
        let Some(at) = self.snapshot.as_ref().map(Pin::at).filter(|_| self.deferred.is_some()) else { return Ok(()) };
        let allowed = match tail {
            Some(Step::Result(kind::Result { .. })) => true,
            // Only transactions read at the snapshot, and this one records it.
            Some(Step::TxnCommit(kind::TxnCommit { start, .. })) => !self.snapshot_read && *start == at,
            _ => false,
        };
        if allowed {
            return Ok(());
        }
        self.core.snapshots_refused.insert(&self.function, &self.version.to_be_bytes(), ());
        Err(Abort::Superseded)
    }
}
