//! `state.get`, `state.put` and `state.delete` under each table protocol, and a table's
//! protocol as the instance sees it: the transition log decides, as of the instance's
//! start (`table/` keeps the transition logs, `switch.rs` makes the transitions);
//! `observe` counts for `auto`.
//!
//! A logged read (write-optimized, symmetric, transitional) past the recorded history is
//! taken as a pending `Read` step with its value, as clock readings are, and goes in the
//! next record: every operation but a read-optimized write logs the pending steps before
//! it acts, so nothing outside the instance depends on the value before it is logged,
//! and a crash before then only means that a re-execution reads again (a peer that
//! logged another value stops this execution when it logs).
//!
//! A write-optimized write is taken after the pending steps before it are logged (its
//! version's cursor and counter follow them) and waits in the instance
//! (`Instance::latest`) with the writes after it. They are stored together, synced,
//! before anything could reveal them: every record of the step log, a read of the
//! store, any flush (`store_latest`, `StateStore::put_if_newer_all`: one synced RocksDB
//! batch, one statement on PostgreSQL). Nothing outside the instance sees them before,
//! and a crash loses them as a crash before a synced write did; the re-execution writes
//! the same versions. A write-optimized transfer thus appends its Init, both reads in
//! one record (logged by the first write; on a node alone the deferred Init goes in it
//! too) and its result, and stores its two writes in one synced batch before the result.

use super::*;

impl Instance {
    /// Stops a late peer: fails with `Superseded` if the invocation's root has a
    /// result, or its step log is gone (collected after its result).
    pub(super) async fn check_unfinished(&self, ctx: &mut Context) -> Result<(), Abort> {
        let root = self.core.tags.step(&self.id.root());
        match self.core.log.read_prev(ctx, self.shadow(), root, SeqNum::MAX).await? {
            None => Err(Abort::Superseded),
            Some(r) => match record::decode_last("step", &r.data)? {
                Step::Result(kind::Result { .. }) => Err(Abort::Superseded),
                _ => Ok(()),
            },
        }
    }

    pub async fn get(&mut self, ctx: &mut Context, table: &str, key: &[u8]) -> Result<Option<Bytes>, Abort> {
        // Reads taken while the Init is deferred wait with it; pending writes are logged
        // first, so that a read sees them. A logged read (of a table known to be such)
        // waits in the pending steps too: it reads no cursor.
        let logged =
            matches!(self.protocols.get(table), Some(Effective::WriteOptimized | Effective::Symmetric | Effective::Transitional));
        if !logged && (self.deferred.is_none() || self.pending.iter().any(|p| p.write.is_some())) {
            self.flush(ctx).await?;
        }
        crate::table::check_object(table, key, None)?;
        let st = self.store_table(table);
        let protocol = self.protocol(ctx, table).await?;
        self.observe(table, protocol, None);
        if protocol != Effective::ReadOptimized {
            // A read of the store's newest version sees the instance's own writes.
            self.store_latest().await?;
        }
        let store = self.core.store.clone();
        match protocol {
            Effective::Unsafe => Ok(store.get_latest(&st, key).await?.and_then(|(_, v)| v)),
            Effective::ReadOptimized => {
                if let Some(value) = self.read_deferred(ctx, table, key).await? {
                    return Ok(value);
                }
                let visible = visible_write(&self.core, ctx, self.book, table, key, self.cursor).await?;
                match visible {
                    Some(w) => Ok(written_value(&*store, &st, table, key, &w.written).await?),
                    None => {
                        self.check_unfinished(ctx).await?;
                        Ok(None)
                    }
                }
            }
            Effective::WriteOptimized | Effective::Symmetric | Effective::Transitional => {
                // A logged read past the recorded history is taken to go in the next
                // record, as clock readings are (`take_clocks`): nothing outside the
                // instance depends on the value before that record, since every
                // operation but a read-optimized write (which goes in the same record,
                // after it) logs the pending steps before it acts. A re-execution after
                // a crash in between reads again; a peer that logged another value here
                // stops this execution when it logs (`take_recorded_pending`).
                let live = self.steps.get(self.next).is_none();
                if live {
                    self.take_clocks(ctx).await?;
                    self.step_gate(ctx).await?;
                } else {
                    self.log_clocks(ctx).await?;
                }
                let asked = Step::Read(kind::Read { table: table.to_string(), key: Bytes::copy_from_slice(key), value: None });
                let value = match self.recorded(&asked)? {
                    Some(_) => None,
                    None if protocol == Effective::Transitional => {
                        fresher_value(&self.core, ctx, self.book, &st, table, key).await?
                    }
                    None => store.get_latest(&st, key).await?.and_then(|(_, v)| v),
                };
                let read = kind::Read { table: table.to_string(), key: Bytes::copy_from_slice(key), value };
                if live && self.steps.get(self.next).is_none() && self.readings_fit(&read) {
                    let value = read.value.clone();
                    self.take_pending(ctx, read.into(), None).await?;
                    return Ok(value);
                }
                Ok(self.log(ctx, read, &[]).await?.value)
            }
        }
    }

    /// A read-optimized read taken as a step: one that a re-execution finds recorded
    /// (after the clock readings before it), or, while the Init is deferred, the newest
    /// write at the index's end, taken to go in the Init's record. `None` for a read at
    /// the cursor: past the deferred Init, or for a value stored as its version (the
    /// record would not hold it), after which the Init is logged.
    pub(super) async fn read_deferred(
        &mut self,
        ctx: &mut Context,
        table: &str,
        key: &[u8],
    ) -> Result<Option<Option<Bytes>>, Abort> {
        let is_read = |r: Option<&Recorded>| matches!(r, Some(Recorded { step: Step::Read(kind::Read { table: t, key: k, .. }), .. }) if t == table && k == key);
        let clocks_first = matches!(self.steps.get(self.next), Some(Recorded { step: Step::Clocks(kind::Clocks { .. }), .. }));
        if is_read(self.steps.get(self.next)) || (clocks_first && is_read(self.steps.get(self.next + 1))) {
            self.log_clocks(ctx).await?;
            if let Some(Recorded { step: Step::Read(kind::Read { value, .. }), seqnum }) = self.steps.get(self.next).cloned() {
                self.take(seqnum);
                return Ok(Some(value));
            }
            // Recorded clock readings this execution did not take there.
            return Err(Abort::NonDeterministic(format!("step {} of {} was clock readings", self.next, self.id)));
        }
        if self.deferred.is_none() {
            return Ok(None);
        }
        // The readings before the read go before it, as before any step.
        self.take_clocks(ctx).await?;
        if self.deferred.is_none() {
            return Ok(None);
        }
        let value = match visible_write(&self.core, ctx, self.book, table, key, u64::MAX).await? {
            None => None,
            Some(w) => match w.written.value {
                Some(value) => value,
                None => {
                    self.flush(ctx).await?;
                    return Ok(None);
                }
            },
        };
        let step = Step::Read(kind::Read { table: table.to_string(), key: Bytes::copy_from_slice(key), value: value.clone() });
        self.take_pending(ctx, step, None).await?;
        Ok(Some(value))
    }

    /// Sets (or, with `None`, deletes) the value of `(table, key)`.
    pub async fn put(&mut self, ctx: &mut Context, table: &str, key: &[u8], value: Option<Bytes>) -> Result<(), Abort> {
        self.writable("a state write")?;
        crate::table::check_object(table, key, value.as_deref())?;
        let st = self.store_table(table);
        let store = self.core.store.clone();
        let protocol = self.protocol(ctx, table).await?;
        // A read-optimized write whose record carries its value stores nothing that a
        // reader looks at before that record, so the readings before it may wait for
        // the record too. One whose version is stored first waits for none.
        let inline = !value.as_ref().is_some_and(|v| v.len() > record::PUT_INLINE_MAX);
        self.observe(table, protocol, Some(!inline));
        let readings_pending = self.pending.iter().any(|p| p.write.is_none());
        match protocol {
            // Its steps before it are logged; the writes taken before it wait with it.
            Effective::WriteOptimized if !self.pending.is_empty() => self.flush(ctx).await?,
            Effective::WriteOptimized => {}
            Effective::ReadOptimized if inline || !readings_pending => {}
            _ => self.flush(ctx).await?,
        }
        match protocol {
            Effective::Unsafe => {}
            Effective::ReadOptimized if inline => self.take_clocks(ctx).await?,
            _ => self.log_clocks(ctx).await?,
        }
        match protocol {
            Effective::Unsafe => {
                store.put_latest(&st, key, value).await?;
                self.effect()
            }
            Effective::ReadOptimized => {
                // The version comes from the instance ID and the step (Halfmoon §4.1), the
                // same in every execution. The write is taken now and logged with the
                // next record of the step log (`flush`), its version stored just before:
                // nothing outside the instance can see it before that, and everything
                // the instance does next that could reveal it flushes first. A crash
                // before then loses the write as one before its record always did.
                // A small value goes in the record itself (`Step::Put`): readers take it
                // from there, and its version is stored as a marker, synced only for an
                // object's first (`store_pending`).
                self.step_gate(ctx).await?;
                let version = version_of(&self.id, self.next, inline);
                let key_bytes = Bytes::copy_from_slice(key);
                let (t, k) = (table.to_string(), key_bytes.clone());
                let write = match inline {
                    true => Step::Put(kind::Put { table: t, key: k, version, value: value.clone() }),
                    false => Step::Write(kind::Write { table: t, key: k, version, migrated_from: None }),
                };
                if let Some(r) = self.recorded(&write)? {
                    self.take(r.seqnum);
                    return Ok(());
                }
                let object = self.core.tags.object(table, key);
                let taken = PendingWrite { object, st, key: key_bytes, value, version, marker: inline, stored: false };
                self.take_pending(ctx, write, Some(taken)).await
            }
            Effective::Transitional => {
                let step = self.next;
                let version = version_of(&self.id, step, false);
                let key_bytes = Bytes::copy_from_slice(key);
                let write = Step::Write(kind::Write { table: table.to_string(), key: key_bytes, version, migrated_from: None });
                if self.recorded(&write)?.is_none() {
                    store.put_version(&st, key, version, value.clone()).await?;
                    self.effect()?;
                }
                let object = self.core.tags.object(table, key);
                let logged = self.log_step(ctx, write, &[object]).await?.seqnum;
                if protocol == Effective::Transitional {
                    // Visible to write-optimized readers too, ordered by the write log.
                    store.put_if_newer(&st, key, Version { cursor: logged, counter: 0 }, value).await?;
                    self.effect()?;
                }
                Ok(())
            }
            Effective::WriteOptimized => {
                // Taken now, stored with the writes around it before anything could
                // reveal it (`store_latest`): every record of the step log (the next
                // one may be this invocation's result), a read of a logged table, any
                // other operation that flushes. Nothing outside the instance sees it
                // before; a crash before then loses it, and the re-execution takes it
                // again under the same version (cursor and counter follow the steps).
                self.counter += 1;
                let version = Version { cursor: self.cursor, counter: self.counter };
                self.latest.push(LatestPut { table: st, key: Bytes::copy_from_slice(key), version, value });
                let held: usize = self.latest.iter().map(|w| w.key.len() + w.value.as_ref().map_or(0, |v| v.len())).sum();
                if self.latest.len() >= PENDING_MAX || held >= PENDING_BYTES_MAX {
                    self.store_latest().await?;
                }
                Ok(())
            }
            Effective::Symmetric => {
                let step = kind::LoggedWrite { table: table.to_string(), key: Bytes::copy_from_slice(key), value };
                let (seqnum, logged) = self.log_seqnum(ctx, step, &[]).await?;
                store.put_if_newer(&st, key, Version { cursor: seqnum, counter: 0 }, logged.value).await?;
                self.effect()
            }
        }
    }
}

impl Instance {
    /// The protocol of `table` for this instance. A table's protocol is the table's: its
    /// transition log decides (as of the instance's start), whatever a function
    /// declares; a declaration only names the protocol of a table nobody used yet.
    /// Using an `unsafe` table (no guarantee) needs an `unsafe` declaration.
    pub(super) async fn protocol(&mut self, ctx: &mut Context, table: &str) -> Result<Effective, Abort> {
        if let Some(&p) = self.protocols.get(table) {
            return Ok(p);
        }
        let declared = crate::table::declared_protocol(&self.core.config, &self.declared, table);
        // An unsafe table stays unsafe (tables switch only between read- and
        // write-optimized), so its first record says all, without an init record.
        let first = self.core.first_transition(ctx, self.book, table, declared).await?;
        let effective = match first {
            Transition::End { protocol: Protocol::Unsafe, .. } if declared == Protocol::Unsafe => Effective::Unsafe,
            Transition::End { protocol: Protocol::Unsafe, .. } => {
                return Err(Abort::Refused(Error::InvalidArgument(format!(
                    "table {table:?} is unsafe (its operations are not exactly-once); a function uses it only by \
                     declaring it unsafe too"
                ))))
            }
            _ => {
                self.begin(ctx).await?;
                match self.deferred_protocol(ctx, table).await? {
                    Some(effective) => effective,
                    None => match self.transition_at(ctx, table, first).await? {
                        Transition::End { protocol, .. } => effective(protocol),
                        Transition::Begin { .. } => Effective::Transitional,
                    },
                }
            }
        };
        self.protocols.insert(table.to_string(), effective);
        Ok(effective)
    }

    /// While the Init is deferred: the protocol `table` has now (its latest transition)
    /// if that is not a switch under way, and the deferred record then holds only if
    /// that stays so. A read-optimized read then reads at the index's end
    /// (`read_deferred`), a logged one (write-optimized, symmetric) the store's newest
    /// version, as it always does; both wait with the Init, and a write of those
    /// protocols logs it first (it flushes). `None` once the Init is logged (this logs
    /// it for a table being switched).
    pub(super) async fn deferred_protocol(&mut self, ctx: &mut Context, table: &str) -> Result<Option<Effective>, Abort> {
        let Some(unchanged) = &self.deferred else { return Ok(None) };
        if unchanged.len() < UNCHANGED_MAX {
            let (latest, records) = self.core.latest_transition(ctx, self.book, table).await?;
            let now = match latest {
                Transition::End { protocol, .. } if protocol != Protocol::Unsafe => Some(effective(protocol)),
                _ => None,
            };
            if let Some(now) = now {
                let unchanged = Cond { tag: self.core.tags.transition(table), position: records };
                self.deferred.as_mut().expect("checked").push(unchanged);
                self.deferred_tables.push(table.to_string());
                return Ok(Some(now));
            }
        }
        self.flush(ctx).await?;
        Ok(None)
    }

    /// The transition record in effect for `table` at this instance's start; `first`
    /// (the table's first record) if the table began after it.
    pub(super) async fn transition_at(&self, ctx: &mut Context, table: &str, first: Transition) -> Result<Transition, Abort> {
        let tag = self.core.tags.transition(table);
        let mut at = self.init_cursor;
        loop {
            let found = self.core.log.read_prev(ctx, self.shadow(), tag, SeqNum(at)).await?;
            let Some(r) = found else {
                // Nothing at or before the init record: the table began later.
                return Ok(first);
            };
            let t: Transition = record::decode("transition", &r.data)?;
            if t.table() == table {
                return Ok(t);
            }
            match r.seqnum.0.checked_sub(1) {
                Some(prev) => at = prev,
                None => return Ok(first),
            }
        }
    }

    /// Counts a read (`None`) or a write (`Some(large)`: its value is too large for its
    /// record) of `table`, switchable under `protocol`, with what it costs under
    /// read- and write-optimized as it follows this instance's last operation on the
    /// table ([`Ops`]).
    pub(super) fn observe(&mut self, table: &str, protocol: Effective, write: Option<bool>) {
        if matches!(protocol, Effective::Unsafe | Effective::Symmetric) {
            return;
        }
        let last = self.last_ops.get(table).copied();
        let (ops, now) = Ops::of(last, write, self.deferred.is_some());
        match self.last_ops.get_mut(table) {
            Some(l) => *l = now,
            None => {
                self.last_ops.insert(table.to_string(), now);
            }
        }
        self.core.observe(self.book, table, ops);
    }

    pub(super) fn store_table(&self, table: &str) -> String {
        crate::table::store_table(self.book, table)
    }
}
