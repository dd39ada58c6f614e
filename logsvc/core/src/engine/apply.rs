//! Metalog entries: delivered in order, our plain appends completed, the index applied
//! once each entry's record metadata is in (`assembly.rs`), our trims completed.

use super::*;

impl Engine {
    /// Takes the entries the follower can deliver for `log` and starts applying them.
    pub(super) fn drain_metalog(&mut self, now: Micros, log: LogId) {
        let Some(config) = self.config.clone() else { return };
        if log.0 >= config.n_logs {
            return; // a log added in a term this engine has not heard of yet
        }
        if let Some((at, first)) = self.follower.take_anchored(log) {
            self.anchored(now, log, at, first);
        }
        let before = self.follower.delivered(log);
        let entries = self.follower.poll(&config, log);
        let mut next_term = before.term;
        for e in entries {
            while next_term < e.term.0 {
                self.end_term(now, log, Term(next_term));
                next_term += 1;
            }
            let (term, version) = (e.term, e.version);
            self.deliver(now, &config, e);
            self.end_closed(now, log, term, version);
        }
        let after = self.follower.delivered(log);
        while next_term < after.term {
            self.end_term(now, log, Term(next_term));
            next_term += 1;
        }
        self.apply_ready(now, log);
    }

    /// The follower passed the end of sealed `term`: records of ours it did not order
    /// are appended again in our current shard.
    pub(super) fn end_term(&mut self, now: Micros, log: LogId, term: Term) {
        let config = self.config.clone().expect("terms end under a configuration");
        let l = &mut self.logs[log.0 as usize];
        let (ended, kept): (Vec<MyShard>, Vec<MyShard>) = l.retiring.drain(..).partition(|s| s.term <= term);
        l.retiring = kept;
        self.reassign_unordered(now, &config, ended);
    }

    /// Appends again the records of ended shards that were not ordered.
    fn reassign_unordered(&mut self, now: Micros, config: &Configuration, ended: Vec<MyShard>) {
        for shard in ended {
            for (_, p) in shard.pending {
                self.pending_count -= 1;
                if p.done {
                    continue;
                }
                self.reassign(now, config, p.op, p.record, p.position);
            }
        }
    }

    /// The follower found `log`'s start (partial mode: a node that started or joined):
    /// the entry at `at`, whose first record is at position `first`. Appends and trims
    /// held until now go out, and the local index starts there, empty.
    fn anchored(&mut self, now: Micros, log: LogId, at: MetalogPosition, first: u64) {
        let l = &mut self.logs[log.0 as usize];
        l.read_floor = l.read_floor.max(at);
        for r in &mut l.waiting {
            r.wait_for = r.wait_for.max(at);
        }
        self.partial_anchored(log, at, SeqNum::new(Term(at.term), log, first));
        let Some(config) = self.config.clone() else { return };
        let (held, other): (Vec<_>, Vec<_>) =
            self.unassigned.drain(..).partition(|(_, record, _, _)| config.log_of(record.meta.book) == log);
        self.unassigned = other.into();
        for (op, record, position, _) in held {
            self.reassign(now, &config, op, record, position);
        }
        let trims: Vec<OpId> = self.trims.iter().filter(|(_, t)| t.log == log).map(|(&op, _)| op).collect();
        for op in trims {
            self.send_trim(now, op);
        }
    }

    /// An entry of `version` was delivered: our shards of `log` that version closed
    /// will order nothing more, and their records it did not order are appended again.
    fn end_closed(&mut self, now: Micros, log: LogId, term: Term, version: u32) {
        let l = &mut self.logs[log.0 as usize];
        if l.retiring.iter().all(|s| s.term != term || s.closes.is_none_or(|c| c > version)) {
            return;
        }
        let config = self.config.clone().expect("entries are delivered under a configuration");
        let (ended, kept): (Vec<MyShard>, Vec<MyShard>) =
            l.retiring.drain(..).partition(|s| s.term == term && s.closes.is_some_and(|c| c <= version));
        l.retiring = kept;
        self.reassign_unordered(now, &config, ended);
    }

    pub(super) fn my_shard_mut(&mut self, log: LogId, shard: ShardId) -> Option<&mut MyShard> {
        let l = self.logs.get_mut(log.0 as usize)?;
        if l.shard.as_ref().is_some_and(|s| s.shard == shard) {
            return l.shard.as_mut();
        }
        l.retiring.iter_mut().find(|s| s.shard == shard)
    }

    /// A committed entry arrived in order: complete our plain appends, queue it for
    /// the index, and ask for the metadata we lack.
    pub(super) fn deliver(&mut self, now: Micros, config: &Configuration, entry: MetalogEntry) {
        let log = entry.log;
        let lc = config.term(entry.term).expect("delivered entries belong to known terms").log(log).clone();
        let position = entry.position_after();
        let partial = config.partial();
        let indexed = config.indexes(log, self.id) && !partial;
        let mut runs = Vec::new();
        let mut conds = HashMap::new();
        // Partial mode: our conditional records, settled by the entry's decided update.
        let mut ours = Vec::new();
        let mut fetch = Vec::new();
        for (j, ids, start_position) in entry.runs() {
            let shard = lc.shards[j].shard;
            let first = Location { shard, local_id: ids.start };
            let count = ids.end - ids.start;
            let mine = self.my_shard_mut(log, shard).map(|s| {
                let mut metas = Vec::with_capacity(count as usize);
                let mut done = Vec::new();
                for (k, local_id) in ids.clone().enumerate() {
                    let p = s.pending.remove(&local_id).expect("an ordered record of ours is pending");
                    metas.push(p.record.meta.clone());
                    let seqnum = entry.seqnum_at(start_position + k as u64);
                    done.push((p, seqnum, Location { shard, local_id }));
                }
                (metas, done)
            });
            match mine {
                Some((metas, done)) => {
                    for (p, seqnum, location) in done {
                        self.pending_count -= 1;
                        // Readers of this engine are likely to want what it just wrote
                        // (a conditional record may yet lose, so it waits for a read).
                        if (indexed || partial) && !p.record.meta.is_conditional() {
                            let meta = &p.record.meta;
                            self.cache.put_record(seqnum, meta.book, meta.tags.clone(), p.record.data.clone());
                        }
                        if p.done {
                            continue;
                        }
                        if p.record.meta.is_conditional() && partial {
                            let meta = p.record.meta;
                            ours.push((seqnum, p.op, meta.book, meta.tags, p.record.data));
                        } else if p.record.meta.is_conditional() {
                            conds.insert(location, (p.op, p.record.data.clone()));
                        } else if self.appends_in_flight.remove(&p.op).is_some() {
                            self.complete(p.op, Ok(Reply::Appended(seqnum)), log, position);
                        }
                    }
                    runs.push((first, count, Some(metas)));
                }
                None => {
                    fetch.push((runs.len(), lc.shards[j].replicas.clone()));
                    runs.push((first, count, None));
                }
            }
        }
        if partial {
            let next = entry.seqnum_at(entry.start_position + entry.record_count());
            self.partial_delivered(now, log, position, next, ours);
        }
        if !indexed {
            // Conditional appends of this log went to an indexer (or, in partial mode,
            // wait for the entry's decided update).
            assert!(conds.is_empty(), "only indexers make conditional appends");
            let l = &mut self.logs[log.0 as usize];
            assert!(position > l.applied, "entries are delivered once, in order");
            l.applied = position;
            // Trims of ours land here only for a book that moved to this log.
            self.complete_trims(log, &entry.trims, position);
            return;
        }
        let sends = self.assembly.push(now, Applying { entry, runs, extra: conds }, fetch, &mut self.next_req);
        for (to, msg) in sends {
            self.send(to, msg);
        }
    }

    pub(super) fn on_meta(&mut self, now: Micros, req: u64, shard: ShardId, start: LocalId, metas: Vec<RecordMeta>) {
        let (completed, more) = self.assembly.on_meta(now, req, shard, start, metas);
        if let Some((to, msg)) = more {
            self.send(to, msg);
        }
        if let Some(log) = completed {
            self.apply_ready(now, log);
        }
    }

    /// Applies, in order, every entry at the head of the queue whose metadata is complete.
    pub(super) fn apply_ready(&mut self, now: Micros, log: LogId) {
        if self.logs[log.0 as usize].import.is_some() {
            return; // the index applies nothing before the moved books' state
        }
        while let Some(a) = self.assembly.pop_ready(log) {
            self.apply(a);
        }
        // With nothing left to apply, the index is exactly at the follower's position,
        // which after a sealed term is (next term, 0).
        let delivered = self.follower.delivered(log);
        let l = &mut self.logs[log.0 as usize];
        if self.assembly.is_empty(log) && delivered > l.applied {
            l.applied = delivered;
            self.partial_reached(now, log, delivered);
        }
        self.run_reads(now, log);
    }

    pub(super) fn apply(&mut self, a: Applying) {
        let log = a.entry.log;
        let position = a.entry.position_after();
        let l = &mut self.logs[log.0 as usize];
        assert!(position > l.applied, "the index applies each entry once, in order");
        let mut records = Vec::new();
        let mut completions = Vec::new();
        // Conditional records of ours that won their offset: readers here are likely
        // to want them next (a step log, a write log).
        let mut placed = Vec::new();
        let mut position_in_run = a.entry.runs().map(|(_, _, p)| p);
        for (first, _, metas) in a.runs {
            let start = position_in_run.next().expect("runs match the entry");
            for (k, meta) in metas.expect("ready").into_iter().enumerate() {
                let seqnum = a.entry.seqnum_at(start + k as u64);
                let location = Location { shard: first.shard, local_id: first.local_id + k as u64 };
                let placement = l.index.apply_record(seqnum, location, &meta);
                if let Some((op, data)) = a.extra.get(&location) {
                    let result = match placement {
                        Placement::Placed => {
                            placed.push((seqnum, meta.book, meta.tags.clone(), data.clone()));
                            Ok(Reply::Appended(seqnum))
                        }
                        Placement::CondFailed { holder } => Err(Error::Conflict { holder }),
                    };
                    completions.push((*op, result));
                }
                records.push(IndexedRecord { seqnum, location, meta, placement });
            }
        }
        let mut died = Vec::new();
        for t in &a.entry.trims {
            died.extend(l.index.apply_trim(t.book, t.tag, t.seqnum));
        }
        l.applied = position;
        for (seqnum, book, tags, data) in placed {
            self.cache.put_record(seqnum, book, tags, data);
        }
        for (seqnum, _) in died {
            self.cache.remove(seqnum);
        }
        self.out.push(EngineAction::Indexed { log, position, records });
        for (op, result) in completions {
            if self.appends_in_flight.remove(&op).is_some() {
                self.complete(op, result, log, position);
            }
        }
        self.complete_trims(log, &a.entry.trims, position);
    }

    /// Completes the trims of ours among `trims`, which took effect at `position` of
    /// `log`.
    pub(super) fn complete_trims(&mut self, log: LogId, trims: &[TrimCommand], position: MetalogPosition) {
        for command in trims {
            let Some((_, op)) = command.origin.filter(|o| o.0 == self.id) else { continue };
            // Op ids start again with every incarnation, and a restarted engine replays
            // the trims of its earlier ones: only the very command completes a trim. An
            // earlier incarnation's identical command did the same, but maybe at a
            // position behind the caller's.
            if self.trims.get(&op).is_some_and(|t| t.command == *command) {
                let t = self.trims.remove(&op).expect("checked");
                let position = if t.log == log { position.max(t.position) } else { position };
                self.complete(op, Ok(Reply::Trimmed), log, position);
            }
        }
    }
}
