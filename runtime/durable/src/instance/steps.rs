//! The step log of an instance: taking recorded steps, logging new ones, and the
//! pending read-optimized writes and clock readings that ride the next record. The step
//! gate (`step_gate`), where a step sees its root's cancellation, is here too
//! (`cancel.rs` says how cancellation works).
//!
//! A read-optimized write of a value of at most `PUT_INLINE_MAX` (8 KiB) carries it in
//! its record (`Step::Put`), and readers take it from there. Its version (a hash of the
//! instance ID and step with the top bit set: a *marker*) is stored only so that garbage
//! collection and a switch's migration, which page through stored objects, find the
//! object, and without looking whether the name is taken (a crash may leave another
//! execution's value under it; no reader looks). One durable version per object is all
//! they need, so only the object's first write in a node's life stores its marker,
//! synced (`Durable::durable_objects`, a memo, says which objects have one), and garbage
//! collection stores the visible write's marker before it deletes older versions, so
//! the object keeps one. A small write thus stores nothing in the steady state. (A
//! marker stored without a sync could be lost in a machine crash while its record
//! survived, leaving the object invisible to both and losing its value in a switch to
//! write-optimized: the simulator's machine crashes found it, and its end-of-run check
//! that every object with a write in its write log has a stored version guards it.) A
//! larger value is stored as its version (the same hash, top bit clear, so never a name
//! a crashed execution's marker took: the first version stored under a name stays),
//! synced, before a `Step::Write` that names it.
//!
//! The writes are *pending* until the instance logs its next record: a put returns at
//! once, and the next record holds every pending step, as one [`Step::Group`] (one
//! position of the step log, one step each), with the step that logs them if that step
//! may end a group (`Step::ends_group`: the result, clock readings, a cancellation),
//! otherwise alone just before it. At most `PENDING_MAX` (32) steps or
//! `PENDING_BYTES_MAX` (1 MiB) of values and readings wait (both in `mod.rs`); more are
//! logged at once. Their versions are stored together just before that record, in one
//! store call (`StateStore::put_versions`: one RocksDB batch), but for a write that a
//! later pending write of its object replaces. The clock readings a guest takes before
//! a `Put` or before its result wait too, and go in that record just before the step.
//! Readings before a `Write` are logged before its version is stored (pending readings
//! first), since a version's name (instance and step) does not depend on its value and
//! the first store of it stays: a re-execution after a crash between the two would read
//! other values and find the crashed one's stored (the simulator's scenario
//! `a_re_execution_reads_the_clocks_and_random_numbers_of_the_crashed_one` pins it).
//! A lock's release and a call's outcome (once the child's Result holds it) wait in
//! the pending steps too (`holds.rs`, `children.rs`): a step that releases its locks
//! and returns, or a parent whose last call returned, appends one record, not three.
//! So does a try of a lock seen free, whose record then holds only if the lock's
//! stream did not change (its pending `cond`; a failure is `Superseded`).
//! Every other operation flushes the pending steps first (a read at the cursor must see
//! them; nothing outside the instance may see its effects out of order), and nothing
//! outside the instance can see them before: a crash, or a trap that runs again, loses
//! them as one before a write record always did. A read-optimized transfer (two reads,
//! two writes, a result) thus appends its Init and one record, and once its objects have
//! markers syncs no store write.
//!
//! A conflict takes the peer's recorded steps in order (`take_recorded_pending`); one
//! that differs from a pending step (other readings, a peer's `Cancelled` there, a
//! non-deterministic guest) stops this execution with `Superseded`. A write-log reader
//! takes a group's last write of its object, read in place (`record::write_in`: a
//! `Put`'s value is a slice of the record).

use super::*;

impl Instance {
    /// Moves past a step taken now or recorded earlier.
    pub(super) fn take(&mut self, seqnum: u64) {
        self.next += 1;
        if let Some(taken) = self.steps.get_mut(self.next - 1) {
            taken.step.shed();
        }
        self.reach(seqnum);
        self.follow();
    }

    /// Moves the cursor to a step's record, if that is newer.
    pub(super) fn reach(&mut self, seqnum: u64) {
        if seqnum > self.cursor {
            self.cursor = seqnum;
            self.counter = 0;
        }
    }

    /// The recorded step `next`, if the log has it, checked against what is asked now.
    pub(super) fn recorded(&self, asked: &Step) -> Result<Option<Recorded>, Abort> {
        match self.steps.get(self.next) {
            Some(r) if r.step.same_operation(asked) => Ok(Some(r.clone())),
            Some(r) => Err(Abort::NonDeterministic(format!(
                "step {} of {} was a {} and is now a {}",
                self.next,
                self.id,
                r.step.describe(),
                asked.describe()
            ))),
            None => Ok(None),
        }
    }

    /// Logs a step of kind `K` ([`Instance::log_step`]) and returns what holds its place:
    /// the step itself, or what an earlier execution or a peer logged there, which is of
    /// the same kind (`recorded` refuses another as non-determinism), with its seqnum.
    pub(super) async fn log_seqnum<K: Kind>(&mut self, ctx: &mut Context, step: K, extra: &[Tag]) -> Result<(u64, K), Abort> {
        let logged = self.log_step(ctx, step.into(), extra).await?;
        Ok((logged.seqnum, self.of_kind(logged.step)?))
    }

    /// [`Instance::log_seqnum`] without the seqnum.
    pub(super) async fn log<K: Kind>(&mut self, ctx: &mut Context, step: K, extra: &[Tag]) -> Result<K, Abort> {
        Ok(self.log_seqnum(ctx, step, extra).await?.1)
    }

    /// The step recorded at the place of `asked` as a `K`, taken, if there is one.
    pub(super) fn take_recorded<K: Kind>(&mut self, asked: &Step) -> Result<Option<(u64, K)>, Abort> {
        let Some(r) = self.recorded(asked)? else { return Ok(None) };
        self.take(r.seqnum);
        Ok(Some((r.seqnum, self.of_kind(r.step)?)))
    }

    /// A step taken from the log as the kind its operation logs: `recorded` compared the
    /// kinds already, so another is a step log that changed under the instance.
    fn of_kind<K: Kind>(&self, step: Step) -> Result<K, Abort> {
        let what = step.describe();
        K::of(step)
            .ok_or_else(|| Abort::NonDeterministic(format!("step {} of {} is a {what}", self.next.saturating_sub(1), self.id)))
    }

    /// Logs `step` as step `next` (with `extra` tags besides the step log's), or takes
    /// what is recorded there: from an earlier execution, or from a peer that won the
    /// race for the position.
    pub(super) async fn log_step(&mut self, ctx: &mut Context, step: Step, extra: &[Tag]) -> Result<Recorded, Abort> {
        // The gate of steps logged before their effect, or of reads: a conditional
        // append and a call pass it before theirs (see `step_gate`).
        let guest_step = !matches!(
            step,
            Step::Clocks(kind::Clocks { .. })
                | Step::Result(kind::Result { .. })
                | Step::Cancelled
                | Step::CondAppend(kind::CondAppend { .. })
                | Step::Invoke(kind::Invoke { .. })
                | Step::LockRelease(kind::LockRelease { .. })
        );
        if guest_step {
            self.step_gate(ctx).await?;
        }
        if let Some(r) = self.recorded(&step)? {
            self.take(r.seqnum);
            return Ok(r);
        }
        match self.append_step(ctx, step, extra).await {
            // A peer saw the cancellation here first (after this execution's effect, for
            // a conditional append or a call: the effect stays, the guest is told of
            // the cancellation).
            Err(Abort::NonDeterministic(_))
                if matches!(self.steps.get(self.next), Some(Recorded { step: Step::Cancelled, .. })) =>
            {
                let seqnum = self.steps[self.next].seqnum;
                self.take(seqnum);
                self.cancelled = true;
                Err(Abort::Refused(Error::Cancelled))
            }
            other => other,
        }
    }

    /// Logs `step` as step `next`, which holds nothing this instance knows of, or takes
    /// what a peer that won the race for the position logged there. The pending writes
    /// go in the same record if `step` may end a group; otherwise in one before it.
    pub(super) async fn append_step(&mut self, ctx: &mut Context, step: Step, extra: &[Tag]) -> Result<Recorded, Abort> {
        if !self.pending.is_empty() && (!self.may_end_group(&step) || self.too_large_with_pending(&step)) {
            self.flush(ctx).await?;
            // A peer's steps that the flush found after the writes come first.
            if let Some(r) = self.recorded(&step)? {
                self.take(r.seqnum);
                return Ok(r);
            }
        }
        Ok(self.log_record(ctx, Some((step, extra))).await?.expect("a step was asked for"))
    }

    /// Whether `step` may end a group after the pending steps: one that may end any
    /// ([`Step::ends_group`]), or a transaction's commit after nothing but the deferred
    /// Init and readings, so that a record of objects' streams holds no step of another
    /// stream (`snapshot.rs`).
    fn may_end_group(&self, step: &Step) -> bool {
        step.ends_group() || matches!(step, Step::TxnCommit(kind::TxnCommit { .. })) && self.pending_rides_a_commit()
    }

    /// Whether nothing is pending but the deferred Init and readings, which a commit may
    /// take with it.
    pub(super) fn pending_rides_a_commit(&self) -> bool {
        self.pending.iter().all(|p| p.step.is_init() || p.step.is_reading())
    }

    /// Whether `step` with the pending writes could pass the largest record a step may
    /// take (a result of `PAYLOAD_MAX` bytes fits alone, with room for framing).
    pub(super) fn too_large_with_pending(&self, step: &Step) -> bool {
        let pending: usize = self.pending.iter().map(|p| p.record_bytes).sum();
        record::encoded_len(step).saturating_add(pending) > crate::PAYLOAD_MAX
    }

    /// Takes `step` (with what a write stores) to be logged with the next record.
    pub(super) async fn take_pending(&mut self, ctx: &mut Context, step: Step, write: Option<PendingWrite>) -> Result<(), Abort> {
        self.take_pending_if(ctx, step, write, None).await
    }

    /// [`Instance::take_pending`], the record holding it only if `cond` holds.
    pub(super) async fn take_pending_if(
        &mut self,
        ctx: &mut Context,
        step: Step,
        write: Option<PendingWrite>,
        cond: Option<Cond>,
    ) -> Result<(), Abort> {
        let record_bytes = match (&write, &step) {
            (Some(w), Step::Put(kind::Put { value, .. })) => {
                w.st.len() + w.key.len() + value.as_ref().map_or(0, |v| v.len()) + 64
            }
            (Some(w), _) => w.st.len() + w.key.len() + 64,
            (None, _) => record::encoded_len(&step),
        };
        self.pending.push(Pending { step, write, record_bytes, cond });
        self.next += 1;
        self.follow();
        let held: usize = self.pending.iter().map(Pending::held_bytes).sum();
        if self.pending.len() >= PENDING_MAX || held >= PENDING_BYTES_MAX {
            self.flush(ctx).await?;
        }
        Ok(())
    }

    /// `log_clocks` before the result or a write that carries its value (`Step::Put`):
    /// live readings past the recorded history, if small, are taken to go in the next
    /// record, just before the step, since that record is the first effect that may
    /// depend on them (a peer's other readings there stop this execution then, as they
    /// would now). Never before a `Step::Write`: its version is stored before its
    /// record, under a name that does not depend on its value, so the readings it may
    /// depend on must be logged before that store (a re-execution after a crash between
    /// them would read other values and store them under the same name, where the first
    /// one stays); such a write logs the pending readings first (`put`). A `Put`'s
    /// stored version is never read.
    pub(super) async fn take_clocks(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        if self.steps.get(self.next).is_some() || !self.recorder.has_fresh() {
            return self.log_clocks(ctx).await;
        }
        let clocks = kind::Clocks { readings: self.recorder.take_fresh() };
        if !self.readings_fit(&clocks) {
            return self.log_readings(ctx, clocks.readings).await;
        }
        self.take_pending(ctx, clocks.into(), None).await
    }

    /// Whether `step`, a reading (clocks, a logged read), may wait in the pending steps
    /// for the next record: small enough, with the readings already waiting.
    pub(super) fn readings_fit<K: Kind + serde::Serialize>(&self, step: &K) -> bool {
        let pending: usize =
            self.pending.iter().filter(|p| p.write.is_none() && !p.step.is_taken()).map(|p| p.record_bytes).sum();
        let bytes = record::step_len(step);
        bytes <= PENDING_READINGS_MAX && pending + bytes <= PENDING_READINGS_TOTAL_MAX
    }

    /// Logs the pending writes, each stored as its version first, in the step log's next
    /// record: the point from which they are visible, in order, as if logged one by one.
    /// Every operation but a read-optimized write calls this before it acts or reads at
    /// the cursor.
    pub(crate) async fn flush(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        match self.pending.is_empty() {
            true => self.store_latest().await,
            false => self.log_record(ctx, None).await.map(|_| ()),
        }
    }

    /// Stores the write-optimized writes taken since the last store, together: issued
    /// at once, synced, so that the embedded store commits them in one batch (one
    /// fsync where each alone synced its own). Every step before each was logged
    /// before it was taken (`put`), so a re-execution writes the same versions.
    pub(super) async fn store_latest(&mut self) -> Result<(), Abort> {
        if self.latest.is_empty() {
            return Ok(());
        }
        let writes = std::mem::take(&mut self.latest);
        self.core.store.put_if_newer_all(&writes).await?;
        self.effect()
    }

    /// `data`, a record, with the trailer a record holding an Init or a Result carries
    /// (`record::meta`; `(began, ended)` says which it holds, as [`record::meta::ends`]):
    /// when this execution began and ended, its trace and its breakdown.
    pub(super) fn with_meta(&self, data: Bytes, (began, ended): (bool, bool)) -> Bytes {
        if !began && !ended {
            return data;
        }
        let observe = &self.core.observe;
        let meta = match &self.answered {
            // Logged after the answer, by a task outside the execution's measurements.
            Some(a) => record::meta::Meta {
                started_ms: began.then_some(self.started_ms),
                ended_ms: ended.then_some(a.ended_ms),
                trace: a.trace,
                parts: if ended { a.parts.clone() } else { Vec::new() },
            },
            None => record::meta::Meta {
                started_ms: began.then_some(self.started_ms),
                ended_ms: ended.then(|| self.core.clock.wall_ms()),
                trace: observe.trace(),
                parts: if ended { observe.parts() } else { Vec::new() },
            },
        };
        record::meta::with_meta(data, &meta)
    }

    /// Logs the pending writes and `tail` (with its extra tags) as the step log's next
    /// record, a [`Step::Group`] if it holds more than one step, or takes what a peer
    /// logged there: a peer's record that holds a prefix of them leaves the rest for the
    /// next offset. Returns what holds `tail`.
    pub(super) async fn log_record(
        &mut self,
        ctx: &mut Context,
        tail: Option<(Step, &[Tag])>,
    ) -> Result<Option<Recorded>, Abort> {
        self.snapshot_allows(tail.as_ref().map(|(step, _)| step))?;
        loop {
            self.store_latest().await?;
            self.store_pending().await?;
            let init = self.deferred.clone();
            let mut tags = vec![self.step_tag];
            if init.is_some() {
                tags.push(INSTANCES);
            }
            tags.extend(self.pending.iter().filter_map(|p| p.write.as_ref()).map(|w| w.object));
            tags.extend(self.pending.iter().filter_map(|p| self.stream_of_taken(&p.step)));
            let mut steps: Vec<Step> = self.pending.iter().map(|p| p.step.clone()).collect();
            if let Some((step, extra)) = &tail {
                tags.extend_from_slice(extra);
                steps.push(step.clone());
            }
            if steps.iter().any(Step::is_library) {
                tags.push(crate::tags::LIBRARIES);
            }
            tags.sort_unstable();
            tags.dedup();
            let ends = record::meta::ends(&steps);
            let data = match steps.len() {
                1 => record::encode(&steps[0]),
                _ => record::encode(&Step::Group(kind::Group { steps })),
            };
            let data = self.with_meta(data, ends);
            let position = self.records;
            // A deferred Init's conditions, and those of lock tries taken on what the
            // instance saw of their locks.
            let speculated = self.pending.iter().any(|p| p.cond.is_some());
            let mut unchanged = init.clone().unwrap_or_default();
            unchanged.extend(self.pending.iter().filter_map(|p| p.cond));
            let appended = match init.is_some() || speculated {
                true => {
                    let at = Cond { tag: self.step_tag, position };
                    self.core.log.cond_append_if(ctx, self.shadow(), &tags, data, at, &unchanged).await
                }
                false => self.core.log.cond_append(ctx, self.shadow(), &tags, data, self.step_tag, position).await,
            };
            match appended {
                Ok(s) => {
                    self.records += 1;
                    for p in &self.pending {
                        match &p.step {
                            Step::QueuePush(kind::QueuePush { queue, .. }) => {
                                self.core.completions.notify(&crate::queues::wake_key(self.book, queue))
                            }
                            Step::LockRelease(kind::LockRelease { lock, .. }) => {
                                self.core.completions.notify(&crate::locks::wake_key(self.book, lock))
                            }
                            _ => {}
                        }
                    }
                    for mut p in std::mem::take(&mut self.pending) {
                        p.step.shed();
                        self.steps.push(Recorded { seqnum: s.0, step: p.step });
                    }
                    self.reach(s.0);
                    self.settle_init();
                    let Some((step, _)) = tail else {
                        self.follow();
                        self.effect()?;
                        return Ok(None);
                    };
                    let logged = Recorded { seqnum: s.0, step };
                    self.steps.push(logged.clone());
                    self.take(s.0);
                    self.effect()?;
                    return Ok(Some(logged));
                }
                Err(LogError::Conflict { .. }) if init.is_some() => {
                    self.load_steps(ctx, 0).await?;
                    // Offset 0 is free: a table this instance used switched since it
                    // looked (or the step log of a long finished peer was collected).
                    if self.records == 0 {
                        return Err(Abort::Superseded);
                    }
                    // A peer's, which must begin with exactly these steps.
                    self.take_recorded_pending()?;
                    self.settle_init();
                    if !self.pending.is_empty() {
                        continue;
                    }
                    let Some((step, _)) = &tail else { return Ok(None) };
                    if let Some(r) = self.recorded(step)? {
                        self.take(r.seqnum);
                        return Ok(Some(r));
                    }
                }
                // A lock tried on a state that changed since, or a peer's record at
                // the position (whose tries may hold other locks, or none: a try
                // logged at once may lose its race): the guest went on from locks it
                // may not hold, so this execution stops, and the next one replays what
                // the log holds.
                Err(LogError::Conflict { .. }) if speculated => return Err(Abort::Superseded),
                Err(LogError::Conflict { holder: Some(h) }) => {
                    let known = self.records;
                    self.load_steps(ctx, h.0).await?;
                    if self.records == known {
                        return Err(Abort::internal(format!("step record {position} of {} is held but unreadable", self.id)));
                    }
                    self.take_recorded_pending()?;
                    if !self.pending.is_empty() {
                        continue;
                    }
                    let Some((step, _)) = &tail else { return Ok(None) };
                    if let Some(r) = self.recorded(step)? {
                        self.take(r.seqnum);
                        return Ok(Some(r));
                    }
                }
                // The step log was trimmed: the invocation finished long ago.
                Err(LogError::Conflict { holder: None }) => return Err(Abort::Superseded),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The library stream a pending step goes to besides the step log: a push's queue
    /// shard, a try's or a release's lock.
    fn stream_of_taken(&self, step: &Step) -> Option<Tag> {
        match step {
            Step::QueuePush(kind::QueuePush { queue, shard, .. }) => Some(self.core.tags.queue_shard(queue, *shard)),
            Step::LockTry(kind::LockTry { lock, .. }) | Step::LockRelease(kind::LockRelease { lock, .. }) => {
                Some(self.core.tags.lock(lock))
            }
            _ => None,
        }
    }

    /// Drops the pending steps that the step log now holds (a peer logged them), in
    /// order. A recorded step that is not the pending one at its place, exactly (the
    /// same readings too), means that the guest went on from a step that the
    /// invocation's history does not have (a peer saw a cancellation there, read other
    /// clock values, or the guest is not deterministic): this execution stops, and one
    /// that replays the history runs on.
    pub(super) fn take_recorded_pending(&mut self) -> Result<(), Abort> {
        let base = self.next - self.pending.len();
        let mut taken = 0;
        while let Some(r) = self.steps.get(base + taken).filter(|_| taken < self.pending.len()) {
            if r.step != self.pending[taken].step {
                return Err(Abort::Superseded);
            }
            let seqnum = r.seqnum;
            self.reach(seqnum);
            taken += 1;
        }
        self.pending.drain(..taken);
        self.follow();
        Ok(())
    }

    /// Stores the version of every pending write not stored yet, together, except
    /// those of objects that a later pending write writes again (no reader sees them,
    /// since a record's last write of an object is the one it makes visible) and the
    /// markers of objects known to have a durable version. Synced: what is stored is a
    /// `Step::Write`'s value or the first marker of an object.
    ///
    /// A marker (a `Step::Put`'s version: its record carries the value) is only how
    /// garbage collection and a switch's migration find the object in the store, for
    /// which one durable version an object is enough. So the object's first write in
    /// this node's life stores one, synced, lest a machine crash lose it while its
    /// record survives, and later writes store none: garbage collection stores the
    /// marker of the version it keeps before deleting any other (`gc.rs`, `delete`), so
    /// an object keeps a version while its write log has a record.
    pub(super) async fn store_pending(&mut self) -> Result<(), Abort> {
        let store = self.core.store.clone();
        let pending: Vec<&PendingWrite> = self.pending.iter().filter_map(|p| p.write.as_ref()).collect();
        let mut puts = Vec::new();
        for (i, &w) in pending.iter().enumerate() {
            let again = pending[i + 1..].iter().any(|later| later.same_object(w));
            if w.stored || again {
                continue;
            }
            let marker = w.marker;
            if marker && self.core.durable_objects.get(&w.st, &w.key).is_some() {
                continue;
            }
            puts.push(VersionPut { table: w.st.clone(), key: w.key.clone(), version: w.version, value: w.value.clone(), marker });
        }
        let durable = !puts.is_empty();
        if durable {
            store.put_versions(puts, true).await?;
        }
        for w in self.pending.iter_mut().filter_map(|p| p.write.as_mut()) {
            w.stored = true;
            // A synced write makes every version stored before it durable as well.
            if durable {
                self.core.durable_objects.insert(&w.st, &w.key, ());
            }
        }
        match durable {
            true => self.effect(),
            false => Ok(()),
        }
    }

    /// Where a guest's step may see its root's cancellation, before the step's effect:
    /// a Cancelled step recorded here (an earlier execution saw it here), or one seen
    /// before (no step after that), fails the host call with `cancelled`; so does a
    /// cancellation found in the log (at most every `CANCEL_CHECK_MS`) past the
    /// recorded history, which is logged here first.
    pub(super) async fn step_gate(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        if let Some(Recorded { step: Step::Cancelled, seqnum }) = self.steps.get(self.next) {
            let seqnum = *seqnum;
            self.take(seqnum);
            self.cancelled = true;
        }
        if self.cancelled {
            return Err(Abort::Refused(Error::Cancelled));
        }
        if self.steps.get(self.next).is_none() && self.cancel_requested(ctx, false).await? {
            return Err(self.cancel(ctx).await);
        }
        Ok(())
    }
}
