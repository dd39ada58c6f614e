//! Locks and keyed invocations' keys as steps of an instance (`locks.rs` has the locks).
//!
//! An exclusive keyed invocation (its `InitKeyed` carries the key) takes `LockId::Key`
//! before its guest runs (`Instance::enter_key`), as a guest takes a lock: waiting in
//! place (a background run at most `sleep_in_place_max_ms`, one whose caller waits up to
//! its deadline), then suspending for `KEY_RETRY_MS` to try again. A waiter that saw one
//! holder all along runs the holder's root again (`Invoker::kick_holder`; `locks.rs`
//! says why).

use super::*;

/// What a wait for a lock leaves when its time is up and the lock is still held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Miss {
    /// A failed try, logged as a step: the guest sees `false`, and so must every
    /// execution after it.
    Logged,
    /// Nothing: the caller (a keyed invocation, before its guest runs) suspends and
    /// tries again later, so waiting for a held key appends nothing, however long.
    Unlogged,
}

impl Instance {
    /// Takes `lock` for this instance, waiting up to `timeout_ms` (and not past the
    /// attempt's deadline) while another holds it: each try made is a step, and the
    /// last one is made even when the lock looks held, so that every execution returns
    /// the same. True at once for a lock the instance holds.
    pub async fn lock_acquire(
        &mut self,
        ctx: &mut Context,
        lock: LockId,
        timeout_ms: u64,
        deadline_ms: u64,
    ) -> Result<bool, Abort> {
        self.acquire(ctx, lock, timeout_ms, deadline_ms, Miss::Logged).await
    }

    /// [`Instance::lock_acquire`], leaving what `miss` says when the lock stays held.
    async fn acquire(
        &mut self,
        ctx: &mut Context,
        lock: LockId,
        timeout_ms: u64,
        deadline_ms: u64,
        miss: Miss,
    ) -> Result<bool, Abort> {
        self.writable("taking a lock")?;
        // Tries taken before wait with this one's, in one record.
        if !self.only_tries_pending() {
            self.flush(ctx).await?;
        }
        if let LockId::Named(name) = &lock {
            locks::check_name(name).map_err(Abort::Refused)?;
        }
        self.init_checked(ctx).await?;
        if self.held.contains(&lock) {
            return Ok(true);
        }
        let now = self.core.clock.now_ms();
        let until = now.saturating_add(timeout_ms).min(deadline_ms.saturating_sub(IN_PLACE_MARGIN_MS)).max(now);
        let holder = self.id.to_string();
        let wake = locks::wake_key(self.book, &lock);
        // The state this wait first saw: a holder that keeps it all along is run again.
        let mut first_seen: Option<u64> = None;
        self.log_clocks(ctx).await?;
        loop {
            let asked = Step::LockTry(kind::LockTry {
                lock: lock.clone(),
                holder: holder.clone(),
                root: self.id.root(),
                prev: 0,
                last: false,
            });
            let (seqnum, tried) = match self.take_recorded::<kind::LockTry>(&asked)? {
                Some(taken) => taken,
                None => {
                    let view = locks::lock_at(&self.core, ctx, self.book, &lock, u64::MAX).await?;
                    let now = self.core.clock.now_ms();
                    let first = *first_seen.get_or_insert(view.tail);
                    if view.holder.is_some() && now < until {
                        let look = self.core.clock.sleep((until - now).min(locks::POLL_MS));
                        futures_util::future::select(look, self.core.completions.wait(&wake)).await;
                        continue;
                    }
                    if let (Some(root), true) = (&view.root, view.tail == first) {
                        self.core.invoker()?.kick_holder(ctx, self.book, root);
                    }
                    if view.holder.is_some() && miss == Miss::Unlogged {
                        return Ok(false);
                    }
                    let last = view.holder.is_some();
                    let (root, prev) = (self.id.root(), view.tail);
                    let step = kind::LockTry { lock: lock.clone(), holder: holder.clone(), root, prev, last };
                    if let Some(records) = view.records.filter(|_| !last && self.may_speculate(miss)) {
                        // Seen free: the try rides the next record, which holds only if
                        // the lock's stream still holds what this view counted.
                        self.step_gate(ctx).await?;
                        let cond = Cond { tag: self.core.tags.lock(&lock), position: records };
                        self.take_pending_if(ctx, step.into(), None, Some(cond)).await?;
                        self.held.insert(lock);
                        return Ok(true);
                    }
                    self.log_seqnum(ctx, step, &[self.core.tags.lock(&lock)]).await?
                }
            };
            let last = tried.last;
            let view = locks::lock_at(&self.core, ctx, self.book, &lock, seqnum).await?;
            if view.holder.as_ref() == Some(&holder) {
                self.held.insert(lock);
                return Ok(true);
            }
            if last {
                return Ok(false);
            }
        }
    }

    /// Whether a try of a lock seen free may ride the next record: a guest's lock (a
    /// keyed invocation's key is taken before its guest runs), with room for its
    /// condition, unless an earlier attempt of the run stopped (`take_locks_eagerly`).
    /// The Init is logged by then (`init_checked`), so no deferred Init's conditions
    /// share the record's.
    fn may_speculate(&self, miss: Miss) -> bool {
        let conds = self.pending.iter().filter(|p| p.cond.is_some()).count();
        self.speculate && miss == Miss::Logged && conds < UNCHANGED_MAX
    }

    /// Whether every pending step is a try that rides the next record (or none is).
    fn only_tries_pending(&self) -> bool {
        self.latest.is_empty() && self.pending.iter().all(|p| p.cond.is_some())
    }

    /// An attempt after one that stopped with `Superseded` (among them one whose tries'
    /// record failed its conditions: their locks changed since it looked): each try is
    /// logged at once, so that a lock in demand does not stop the same invocation's
    /// attempts again and again.
    pub fn take_locks_eagerly(&mut self) {
        self.speculate = false;
    }

    /// Releases `lock`, which this instance holds: a step, taken to ride the
    /// instance's next record (`take_pending`) as a write does, so that a step's
    /// releases and its result are one append. Until that record lands the lock is
    /// still held in the log (nobody else can take it, so the release's `prev` stays
    /// the lock's last effective record); a crash loses the release with the record,
    /// and the re-execution releases again. The waiters on this node are woken once
    /// it lands (`log_record`).
    pub async fn lock_release(&mut self, ctx: &mut Context, lock: LockId) -> Result<(), Abort> {
        if let LockId::Named(name) = &lock {
            locks::check_name(name).map_err(Abort::Refused)?;
        }
        self.init_checked(ctx).await?;
        if !self.held.contains(&lock) {
            return Err(Abort::Refused(Error::InvalidArgument(format!("this invocation does not hold {lock}"))));
        }
        // A try still pending is logged first: a release names the lock's record.
        if self.pending.iter().any(|p| p.cond.is_some()) {
            self.flush(ctx).await?;
        }
        let holder = self.id.to_string();
        self.take_clocks(ctx).await?;
        let asked = Step::LockRelease(kind::LockRelease { lock: lock.clone(), holder: holder.clone(), prev: 0 });
        if self.recorded(&asked)?.is_some() {
            self.log_step(ctx, asked, &[]).await?;
            self.held.remove(&lock);
            return Ok(());
        }
        let view = locks::lock_at(&self.core, ctx, self.book, &lock, u64::MAX).await?;
        if view.holder.as_ref() != Some(&holder) {
            return Err(Abort::internal(format!("{lock} is held by {:?}, not by its holder", view.holder)));
        }
        self.held.remove(&lock);
        let step = Step::LockRelease(kind::LockRelease { lock, holder, prev: view.tail });
        self.take_pending(ctx, step, None).await
    }

    /// The key the invocation is addressed to, once `init` has read it.
    pub fn key(&self) -> Option<&InvocationKey> {
        self.key.as_ref()
    }

    /// Whether the invocation is a shared run of a key (`?key=K&shared=true`): it runs
    /// beside the key's exclusive holder, so it only reads. Any effect it asks for is
    /// refused, so that no caller can break a key's serialisation by asking to share it.
    pub fn is_shared(&self) -> bool {
        matches!(self.key, Some(InvocationKey { exclusive: false, .. }))
    }

    /// Refuses an effect of a shared keyed invocation (see [`Instance::is_shared`]).
    pub(super) fn writable(&self, what: &str) -> Result<(), Abort> {
        match self.is_shared() {
            true => Err(Abort::Refused(Error::InvalidArgument(format!(
                "{what}: a shared keyed invocation (key=K&shared=true) only reads"
            )))),
            false => Ok(()),
        }
    }

    /// Before the guest of a keyed invocation runs: an exclusive one takes its key's
    /// lock (`LockId::Key`), waiting in place at most `in_place_ms` (a caller that
    /// waits for the answer waits that long; a background run holds no slot of the
    /// node for long) and not past `deadline_ms`, then suspending for [`KEY_RETRY_MS`]
    /// to try again (each try that waited its whole time is a step). A shared one takes
    /// nothing.
    pub async fn enter_key(&mut self, ctx: &mut Context, deadline_ms: u64, in_place_ms: u64) -> Result<(), Abort> {
        self.flush(ctx).await?;
        let Some(InvocationKey { key, exclusive: true }) = self.key.clone() else { return Ok(()) };
        let lock = LockId::Key { function: self.function.clone(), key };
        loop {
            // A try an earlier execution logged and lost: that execution tried again.
            let replayed = self.steps.get(self.next).is_some();
            if self.acquire(ctx, lock.clone(), in_place_ms, deadline_ms, Miss::Unlogged).await? {
                return Ok(());
            }
            if !replayed {
                return Err(Abort::Suspended { wake_ms: self.core.clock.wall_ms().saturating_add(KEY_RETRY_MS) });
            }
        }
    }

    /// Releases every lock the instance holds, before its result. For an instance that
    /// did not replay its guest (`give_up`, `finish_after_recorded`), the locks it holds
    /// are those its recorded tries took and its recorded releases did not give back.
    pub(super) async fn release_held(&mut self, ctx: &mut Context, replayed: bool) -> Result<(), Abort> {
        if !replayed {
            let holder = self.id.to_string();
            let mut held = std::collections::BTreeSet::new();
            for r in self.steps.clone() {
                match r.step {
                    Step::LockTry(kind::LockTry { lock, .. }) => {
                        let LockView { holder: h, .. } = locks::lock_at(&self.core, ctx, self.book, &lock, r.seqnum).await?;
                        if h.as_ref() == Some(&holder) {
                            held.insert(lock);
                        }
                    }
                    Step::LockRelease(kind::LockRelease { lock, .. }) => {
                        held.remove(&lock);
                    }
                    _ => {}
                }
            }
            self.held = held;
        }
        for lock in self.held.clone() {
            self.lock_release(ctx, lock).await?;
        }
        Ok(())
    }
}
