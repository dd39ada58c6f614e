//! What the simulated nodes do: their actions delivered, persisted or checked.

use super::*;

impl Sim {
    /// The controllers were told something outside a message: they tick soon.
    pub(super) fn tick_controllers(&mut self) {
        for c in self.controller_ids() {
            self.tick_after_input(c);
        }
    }

    pub(super) fn controller_actions(&mut self, i: usize) {
        let id = self.controllers[i].id;
        let Some(c) = self.controllers[i].node.as_mut() else { return };
        for a in c.take_actions() {
            match a {
                ControllerAction::Send(to, msg) => self.send(id, to, msg),
                ControllerAction::Persist(config) => {
                    if self.controller_store.revision != self.controllers[i].revision {
                        // Another controller wrote since this one loaded: the driver
                        // stops it before it announces anything. The lease holder
                        // campaigns again and resumes from what is stored.
                        self.stats.cas_refused += 1;
                        self.controllers[i].node = None;
                        self.controllers[i].deposed_until = None;
                        if i == self.leader {
                            self.schedule(50_000, Event::Restart(id));
                        }
                        return;
                    }
                    self.controller_store.config = Some((*config).clone());
                    self.controller_store.revision += 1;
                    self.controllers[i].revision = self.controller_store.revision;
                }
                ControllerAction::Installed(config) => {
                    self.stats.versions += u64::from(config.current().version > 0);
                    let old_tier = self.config.as_ref().and_then(|c| c.tier.clone());
                    let shards = |t: &Option<crate::config::TierLayout>| t.as_ref().map(|t| t.shards.clone());
                    self.stats.tier_replacements += u64::from(old_tier.is_some() && shards(&old_tier) != shards(&config.tier));
                    self.config = Some(config.clone());
                    // The last entry a seal kept has each of its records durable
                    // somewhere (committed: everywhere, checked when it was).
                    let sealed = config.terms.iter().rev().find_map(|t| t.sealed.as_ref());
                    for e in sealed.into_iter().flatten().filter_map(|tail| tail.last.clone()) {
                        self.check_ordered_durable(&e, false, "kept by a seal");
                    }
                    self.oracle.on_installed(config);
                }
            }
        }
    }

    /// Performs `n`'s actions, unless `n` is a sequencer in a batch of inputs, or
    /// starts one.
    pub(super) fn after_input(&mut self, n: NodeId) {
        if self.batching.contains(&n) {
            return;
        }
        if matches!(self.slots[&n].node, Some(Node::Sequencer(_))) && self.rng.chance(SEQUENCER_BATCH) {
            self.batching.insert(n);
            let window = self.rng.below(BATCH_WINDOW_US);
            self.schedule(window, Event::Flush(n));
            return;
        }
        self.node_actions(n);
    }

    pub(super) fn node_actions(&mut self, n: NodeId) {
        let slot = self.slots.get_mut(&n).expect("known node");
        let records = slot.records.clone();
        let metalog = slot.metalog.clone();
        let incarnation = slot.incarnation;
        match slot.node.as_mut() {
            Some(Node::Sequencer(s)) => {
                let mut sent = false;
                s.end_batch(self.now);
                let actions = s.take_actions();
                // As the driver does: every write where the first stands, in one persist.
                let mut writes: Vec<MetalogWrite> = actions
                    .iter()
                    .filter_map(|a| if let SequencerAction::Persist(w) = a { Some(w.clone()) } else { None })
                    .collect();
                for a in actions {
                    match a {
                        SequencerAction::Send(to, msg) => {
                            sent = true;
                            // A backup acknowledges only entries it made durable.
                            if let Message::EntryAck { term, log, len } = &msg {
                                let durable = self.slots[&n].durable_len.get(&(*term, *log)).copied().unwrap_or(0);
                                if *len > durable {
                                    let what = format!(
                                        "sequencer {n} acknowledged {len} entries of term {} log {} holding {durable} durably",
                                        term.0, log.0
                                    );
                                    self.oracle.violations.push(what);
                                }
                            }
                            self.send(n, to, msg)
                        }
                        SequencerAction::Persist(_) if writes.is_empty() => {}
                        SequencerAction::Persist(_)
                            if sent && !self.liveness && self.may_crash(n) && self.rng.chance(self.opts.persist_crash) =>
                        {
                            // The messages are out; the writes and every later action
                            // are lost with the node.
                            self.stats.persist_crashes += 1;
                            self.crash(n);
                            return;
                        }
                        SequencerAction::Persist(_) => {
                            let slot = self.slots.get_mut(&n).expect("known node");
                            let durable = &mut slot.durable_len;
                            for w in &writes {
                                match w {
                                    MetalogWrite::Entry(e) => {
                                        let len = durable.entry((e.term, e.log)).or_default();
                                        *len = (*len).max(e.index + 1);
                                    }
                                    MetalogWrite::Truncate { term, log, len } => {
                                        durable.entry((*term, *log)).and_modify(|l| *l = (*l).min(*len));
                                    }
                                    MetalogWrite::Seal { .. } | MetalogWrite::Lead { .. } => {}
                                    MetalogWrite::Amnesiac { .. } => slot.lost_power = false,
                                }
                            }
                            let writes = std::mem::take(&mut writes);
                            match self.opts.metalog.syncs(&writes) {
                                true => metalog.persist(&writes),
                                false => metalog.write_unsynced(&writes),
                            }
                            .expect("the in-memory store never fails")
                        }
                        SequencerAction::Committed(e) => {
                            self.check_ordered_durable(&e, true, "committed");
                            self.oracle.on_committed(e)
                        }
                        SequencerAction::NeedsNewTerm { .. } => {}
                        SequencerAction::SendStored { to, term, log, from, end, gap } => {
                            let read = metalog.read_entries(term, log, from, end);
                            for msg in stored_entries_messages(term, log, from, end, gap, read) {
                                self.send(n, to, msg);
                            }
                        }
                    }
                }
            }
            Some(Node::Storage(s)) => {
                for a in s.take_actions() {
                    match a {
                        StorageAction::Send(to, msg) => {
                            self.check_progress(n, &records, &msg);
                            self.send(n, to, msg)
                        }
                        StorageAction::Write { batch, records: rs } => {
                            records.write(&rs).expect("the in-memory store never fails");
                            let d = self.opts.disk_min_us + self.rng.below(self.opts.disk_max_us - self.opts.disk_min_us + 1);
                            self.schedule(d, Event::DiskDone { node: n, incarnation, batch });
                        }
                        StorageAction::Read { to, req, seqnum, location } => {
                            // The read sees the store now; the node learns of it later,
                            // while trims may be ordered.
                            let stored = records.read(location);
                            let d = self.rng.below(self.opts.disk_min_us + 1);
                            self.schedule(d, Event::ReadDone { node: n, incarnation, to, req, seqnum, stored });
                        }
                        StorageAction::ReadMetas { to_node, req, shard, from, to } => {
                            let reply = meta_reply(req, shard, from, to, records.read_metas(shard, from, to));
                            self.send(n, to_node, reply);
                        }
                        StorageAction::Reclaim(locations) => {
                            records.reclaim(&locations).expect("the in-memory store never fails")
                        }
                        StorageAction::Discard { shard, from } => {
                            records.discard(shard, from).expect("the in-memory store never fails")
                        }
                    }
                }
            }
            Some(Node::Engine(e)) => {
                let actions = e.take_actions();
                // A local index never holds more than its bounds, structure by structure.
                let b = Self::local_bounds(n).unwrap_or(LocalBounds {
                    suffix_bytes: 0,
                    tag_cache_bytes: 0,
                    tag_bytes_max: 0,
                    popularity_bytes: 0,
                });
                // Now and then, every stream it caches against the canonical log at L
                // (streams of the books its configuration maps to that log).
                let sample = self.stats.events.is_multiple_of(8);
                let mut streams = Vec::new();
                let n_logs = e.n_logs().unwrap_or(0);
                for l in 0..n_logs {
                    if let Some((suffix, tags, popular)) = e.local_index_bytes(LogId(l)) {
                        if suffix > b.suffix_bytes || tags > b.tag_cache_bytes || popular > b.popularity_bytes {
                            let what =
                                format!("engine {n}'s local index of log {l} holds {suffix}/{tags}/{popular} bytes, over {b:?}");
                            self.oracle.violations.push(what);
                        }
                    }
                    if let Some(local) = e.local_index(LogId(l)).filter(|_| sample) {
                        let at = local.position();
                        let here = local.tags().cached().filter(|c| crate::types::book_to_log(c.0, n_logs) == LogId(l));
                        streams.extend(here.map(|c| (LogId(l), at, c)));
                    }
                }
                for (log, at, (book, tag, covered_from, complete, cached)) in streams {
                    if at <= self.oracle.position(log) {
                        self.oracle.check_local_stream(n.0, at, book, tag, covered_from, complete, &cached);
                    }
                }
                for a in actions {
                    self.engine_action(n, a);
                }
            }
            Some(Node::Aggregator(a)) => {
                for (to, msg) in a.take_actions() {
                    self.send(n, to, msg);
                }
            }
            Some(Node::Index(x)) => {
                for a in x.take_actions() {
                    match a {
                        IndexNodeAction::Send(to, msg) => self.send(n, to, msg),
                        IndexNodeAction::Applied { log, position, records, holder_lookups } => {
                            self.oracle.on_decided(n.0, log, position, &records, &holder_lookups)
                        }
                    }
                }
            }
            None => {}
        }
    }

    /// The records `e` orders are durable on every replica of their shard (`every`),
    /// or on one at least: the log never names a record it cannot serve.
    pub(super) fn check_ordered_durable(&mut self, e: &MetalogEntry, every: bool, what: &str) {
        let Some(config) = self.config.clone() else { return };
        let Some(t) = config.term(e.term) else { return };
        for (j, ids, _) in e.runs() {
            let shard = &t.log(e.log).shards[j];
            for local_id in ids {
                let location = Location { shard: shard.shard, local_id };
                let durable = shard.replicas.iter().filter(|r| self.slots[r].records.is_durable(location)).count();
                if durable == 0 || (every && durable < shard.replicas.len()) {
                    let msg = format!(
                        "entry {}:{} of {:?} {what} orders {location:?}, durable on {durable} of its {} replicas",
                        e.term.0,
                        e.index,
                        e.log,
                        shard.replicas.len()
                    );
                    self.oracle.violations.push(msg);
                    return;
                }
            }
        }
    }

    /// A storage node reports only records its disk would keep through a crash.
    pub(super) fn check_progress(&mut self, n: NodeId, records: &MemStore, msg: &Message) {
        let Message::Progress { term, log, stored, .. } = msg else { return };
        let Some(config) = self.config.clone() else { return };
        let Some(t) = config.term(*term) else { return };
        for &(slot, count) in stored {
            let shard = t.log(*log).shards[slot as usize].shard;
            let checked = self.durable_checked.entry((n, shard)).or_insert(0);
            for local_id in *checked..count {
                if !records.is_durable(Location { shard, local_id }) {
                    let what = format!("storage {n} reported {shard:?} stored up to {count}, but {local_id} is not durable");
                    self.oracle.violations.push(what);
                    return;
                }
            }
            *checked = (*checked).max(count);
        }
    }

    pub(super) fn engine_action(&mut self, n: NodeId, a: EngineAction) {
        match a {
            EngineAction::Send(to, msg) => self.send(n, to, msg),
            EngineAction::Assigned { op, location, record } => {
                // An engine that ran a request forwarded by another names it by its own
                // op id; the client's op id is in the data ("op<N>:...").
                let op = if self.request_of(op).is_some() { Some(op) } else { origin_op(&record.data) };
                // The client may have given up on the op (its engine crashed): the record
                // may be ordered all the same.
                if let Some((op, Request::Append { book, tags, data, cond, unchanged })) =
                    op.and_then(|o| self.request_of(o).map(|r| (o, r)))
                {
                    let mut tags = tags.clone();
                    tags.retain(|&t| t != Tag::ALL);
                    if let Some(c) = cond {
                        tags.push(c.tag);
                    }
                    tags.sort_unstable();
                    tags.dedup();
                    let meta = crate::message::RecordMeta { book: *book, tags, cond: *cond, unchanged: unchanged.clone() };
                    if record.meta != meta || record.data != data {
                        let msg = format!("engine {n} assigned {record:?} for op {op}, which asked for {meta:?}");
                        self.oracle.violations.push(msg);
                    }
                    self.op_locations.insert(op, location);
                }
                self.oracle.on_assigned(location, record.meta, record.data);
            }
            EngineAction::Indexed { log, position, records } => self.oracle.on_indexed(n.0, log, position, &records),
            EngineAction::Complete { op, result, log, position } => self.on_complete(n, op, result, log, position),
        }
    }
}
