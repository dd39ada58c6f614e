//! The clients' requests: completions checked against the oracle, and the next step.

use super::*;

impl Sim {
    pub(super) fn request_of(&self, op: OpId) -> Option<&Request> {
        self.clients.iter().find_map(|c| c.op.as_ref().filter(|(o, _, _)| *o == op).map(|(_, r, _)| r))
    }

    pub(super) fn on_complete(
        &mut self,
        engine: NodeId,
        op: OpId,
        result: Result<Reply, crate::Error>,
        log: LogId,
        position: MetalogPosition,
    ) {
        if let Some(call) = self.call.as_mut().filter(|c| c.engine == engine && c.op == op) {
            call.done = Some((result, log, position));
            return;
        }
        let Some(ci) = self.clients.iter().position(|c| c.engine == engine && c.op.as_ref().is_some_and(|(o, _, _)| *o == op))
        else {
            return;
        };
        let (_, request, before) = self.clients[ci].op.take().expect("found");
        let started = self.op_started.remove(&op).unwrap_or(0);
        let strict = self.settled_at(started);
        let ok = result.is_ok() || matches!(result, Err(crate::Error::Conflict { .. }));
        if ok && position < before.position(log) {
            let msg = format!("op {op} completed at {position} of {log:?}, behind the caller's position {before:?}");
            self.oracle.violations.push(msg);
        }
        // Partial mode: a function node answers nothing before its start (it joined
        // with no index and no replay).
        let read = matches!(request, Request::ReadNext { .. } | Request::ReadPrev { .. } | Request::SetAux { .. });
        if ok && read && self.opts.partial.is_some() {
            let incarnation = self.slots[&engine].incarnation;
            if let Some(start) = self.oracle.start_of(engine, incarnation, log).filter(|&s| position < s) {
                let msg = format!("engine {engine} answered op {op} at {position} of {log:?}, before its start {start}");
                if std::env::var_os("TALLY_SIM_DEBUG").is_some() {
                    let c = self.oracle.config().unwrap();
                    for t in &c.terms {
                        eprintln!(
                            "DBG term {} v{} log shards {:?}",
                            t.term.0,
                            t.version,
                            t.logs.get(usize::from(log.0)).map(|l| l
                                .shards
                                .iter()
                                .map(|s| (s.shard, s.engine, s.incarnation, s.since, s.until))
                                .collect::<Vec<_>>())
                        );
                    }
                    eprintln!("DBG incarnation {incarnation} request {request:?} result {result:?} before {before:?}");
                    if let Some(Node::Engine(e)) = &self.slots[&engine].node {
                        eprintln!("DBG {}", e.debug_state());
                    }
                }
                self.oracle.violations.push(msg);
            }
        }
        match (&request, &result) {
            (Request::Append { book, .. }, Ok(Reply::Appended(seqnum))) => {
                let location = self.op_locations[&op];
                self.oracle.check_append(location, &Ok(*seqnum));
                self.clients[ci].acked.push((*book, *seqnum));
                self.stats.appends_acked += 1;
            }
            (Request::Append { .. }, Err(crate::Error::Conflict { holder })) => {
                let location = self.op_locations[&op];
                self.oracle.check_append(location, &Err(*holder));
                self.stats.cond_conflicts += 1;
            }
            (Request::ReadNext { book, tag, min }, Ok(Reply::Read(got))) => {
                self.oracle.check_read(*book, *tag, *min, true, log, position, &before, got);
                self.stats.reads += 1;
            }
            (Request::ReadPrev { book, tag, max }, Ok(Reply::Read(got))) => {
                self.oracle.check_read(*book, *tag, *max, false, log, position, &before, got);
                self.stats.reads += 1;
            }
            (Request::Trim { .. }, Ok(Reply::Trimmed)) => self.stats.trims += 1,
            (Request::SetAux { aux, .. }, Ok(Reply::AuxSet)) => {
                self.oracle.check_aux(aux, true, log, position);
                self.stats.aux_accepted += 1;
            }
            (Request::SetAux { aux, .. }, Err(crate::Error::InvalidArgument(_))) => {
                self.oracle.check_aux(aux, false, log, position);
                self.stats.aux_refused += 1;
            }
            (_, Err(crate::Error::Timeout(_) | crate::Error::Unavailable(_))) if !strict => {}
            (_, Err(e)) if strict => {
                self.oracle.violations.push(format!("op {op} ({request:?}) failed in the liveness phase: {e}"));
            }
            (r, res) => self.oracle.violations.push(format!("unexpected completion of {r:?}: {res:?}")),
        }
        let c = &mut self.clients[ci];
        c.completed += 1;
        if ok {
            c.context.advance(log, position);
        }
        let think = self.rng.below(20_000);
        self.schedule(think, Event::ClientStep(ci as u32));
    }

    pub(super) fn client_step(&mut self, ci: u32) {
        let c = &self.clients[ci as usize];
        // The last second is a drain: requests in flight must complete within it.
        let drain_from = self.opts.safety_us + self.opts.liveness_us.saturating_sub(DRAIN_US);
        if c.op.is_some() || self.now >= drain_from {
            return;
        }
        // Now and then a client's session moves to another engine, as through another
        // gateway: its context goes with it.
        if self.rng.chance(0.1) {
            let engines: Vec<NodeId> = self.roster.iter().filter(|(_, r)| *r == Role::Engine).map(|(n, _)| *n).collect();
            self.clients[ci as usize].engine = engines[self.rng.below(engines.len() as u64) as usize];
        }
        let c = &self.clients[ci as usize];
        let engine = c.engine;
        let book = BookId(self.rng.below(self.opts.books));
        // Now and then a mark (a stream for conditions that keeps nothing alive).
        let tag = if self.rng.chance(0.1) { Tag(Tag::MARK_BITS | 20) } else { Tag(self.rng.below(3)) };
        let context = c.context.clone();
        let op = self.next_op;
        self.next_op += 1;
        let roll = self.rng.below(100);
        let request = match roll {
            0..=39 => {
                let tags = if tag == Tag::ALL { vec![] } else { vec![tag, Tag(10 + self.rng.below(2))] };
                let data = Bytes::from(format!("op{op}:{}", "x".repeat(self.rng.below(64) as usize)));
                Request::Append { book, tags, data, cond: None, unchanged: vec![] }
            }
            40..=54 => {
                // Conditional appends race for offsets of a small stream.
                // On a mark, the record may have a tag of its own that keeps it alive.
                let mark = self.rng.chance(0.3);
                let bits = if mark { Tag::MARK_BITS } else { 0 };
                let cond = Cond { tag: Tag(bits | (20 + self.rng.below(2))), position: self.rng.below(12) };
                let tags = if mark && self.rng.chance(0.5) { vec![Tag(1)] } else { vec![] };
                // Now and then conditions on streams the record does not join (one of
                // them may be the condition's own), with or without an offset to land at.
                let mut unchanged = Vec::new();
                while self.rng.chance(0.3) && unchanged.len() < 3 {
                    let bits = if self.rng.chance(0.3) { Tag::MARK_BITS } else { 0 };
                    unchanged.push(Cond { tag: Tag(bits | (20 + self.rng.below(3))), position: self.rng.below(12) });
                }
                let cond = if unchanged.is_empty() || self.rng.chance(0.7) { Some(cond) } else { None };
                let data = Bytes::from(format!("op{op}:cond"));
                Request::Append { book, tags, data, cond, unchanged }
            }
            55..=74 => {
                let min = c.acked.iter().rev().find(|(b, _)| *b == book).map_or(SeqNum::MIN, |&(_, s)| s);
                Request::ReadNext { book, tag, min }
            }
            75..=90 => Request::ReadPrev { book, tag, max: SeqNum::MAX },
            91..=95 => {
                let acked: Vec<SeqNum> = c.acked.iter().filter(|(b, _)| *b == book).map(|&(_, s)| s).collect();
                if acked.is_empty() {
                    Request::ReadPrev { book, tag, max: SeqNum::MAX }
                } else {
                    let seqnum = acked[self.rng.below(acked.len() as u64) as usize];
                    let tag = [Tag::ALL, Tag(1), Tag(10), Tag(20), Tag(Tag::MARK_BITS | 20)][self.rng.below(5) as usize];
                    Request::Trim { book, tag, seqnum }
                }
            }
            _ => {
                // Aux data on a record of the caller's book (accepted while it lives), on
                // another book's record or on a seqnum never written (both refused). The
                // value names the request, so the oracle knows where reads may show it.
                let (own, others): (Vec<&(BookId, SeqNum)>, Vec<_>) = c.acked.iter().partition(|(b, _)| *b == book);
                let seqnum = match self.rng.below(4) {
                    0 if !others.is_empty() => others[self.rng.below(others.len() as u64) as usize].1,
                    1 => SeqNum::new(Term(1), LogId(0), 1 << 39),
                    _ if !own.is_empty() => own[self.rng.below(own.len() as u64) as usize].1,
                    _ => SeqNum::MIN,
                };
                let aux = Bytes::from(format!("aux{op}"));
                self.oracle.on_aux_submitted(aux.clone(), book, seqnum);
                Request::SetAux { book, seqnum, aux }
            }
        };
        self.clients[ci as usize].op = Some((op, request.clone(), context.clone()));
        self.op_started.insert(op, self.now);
        let now = self.now;
        // Half the reads try the engine's in-place answer first, as a driver's client
        // does: it must be the answer the submitted read would get.
        let in_place = matches!(request, Request::ReadNext { .. } | Request::ReadPrev { .. }) && self.rng.chance(0.5);
        match self.slots.get_mut(&engine).and_then(|s| s.node.as_mut()) {
            Some(Node::Engine(e)) => match in_place.then(|| e.read_now(&context, &request)).flatten() {
                Some((result, log, position)) => {
                    self.stats.reads_in_place += 1;
                    self.on_complete(engine, op, result, log, position);
                    return;
                }
                None => {
                    e.submit(now, op, &context, request);
                    self.tick_after_input(engine);
                }
            },
            _ => {
                // The engine is down: try again later.
                self.clients[ci as usize].op = None;
                self.schedule(50_000, Event::ClientStep(ci));
                return;
            }
        }
        self.node_actions(engine);
    }
}
