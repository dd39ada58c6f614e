//! A new configuration: a new term (shards of ours retire, reads and trims move with
//! books to added logs), or a later version of the current one (partial mode: a shard of
//! ours bound or closed; a node that starts seeks its first entry).

use super::*;

impl Engine {
    pub(super) fn on_config(&mut self, now: Micros, config: Arc<Configuration>) {
        if self.config.as_ref().is_some_and(|c| c.stamp() >= config.stamp()) {
            self.send(config.controller, Message::config_ack(&config));
            return;
        }
        let first = self.config.is_none();
        self.config = Some(config.clone());
        self.follower.on_config(&config);
        let known = self.logs.len();
        while self.logs.len() < config.n_logs as usize {
            self.logs.push(EngineLog { index: ColdIndex::index(self.cfg.cold_index.as_ref()), ..EngineLog::default() });
        }
        let first_floor = MetalogPosition::new(config.current().term, 0);
        for (i, l) in self.logs.iter_mut().enumerate().skip(known) {
            let log = LogId(i as u8);
            // Reads of a log wait for its first term at least (an added log's index is
            // empty before), and after a start for the term the engine started in.
            let added = config.first_term_of(log).expect("the configuration has its logs");
            l.read_floor = MetalogPosition::new(added, 0);
            if first {
                l.read_floor = l.read_floor.max(first_floor);
            }
            if let Some(term) = config.added_at(log).filter(|_| config.indexes(log, self.id) && !config.partial()) {
                let before = config.term(Term(term.0 - 1)).expect("the term before an added log's first").n_logs();
                let sources = (0..before).map(LogId).collect();
                let turn = self.id.0 as usize;
                l.import = Some(Import { term, sources, after: None, books: Vec::new(), req: 0, turn, sent_at: None });
            }
        }
        self.partial_on_config(&config);
        for t in &config.terms {
            for lc in &t.logs {
                for s in &lc.shards {
                    self.shard_replicas.insert(s.shard, s.replicas.clone());
                }
            }
        }
        let current = config.current();
        for lc in &current.logs {
            let l = &mut self.logs[lc.log.0 as usize];
            // A shard made for an earlier incarnation of this engine is not ours: that
            // incarnation may have used its local ids.
            let incarnation = self.incarnation;
            let mine =
                lc.shards.iter().find(|s| s.engine == self.id && s.incarnation == incarnation && s.open_at(current.version));
            // Partial mode: a node that starts, or joins the term through a version,
            // follows each log from the first entry of its shard's version on.
            if config.partial() && (first || self.follower.seeking(lc.log)) {
                self.follower.seek(lc.log, current.term, mine.map_or(u32::MAX, |s| s.since));
            }
            if l.shard.as_ref().map(|s| s.shard) == mine.map(|s| s.shard) {
                continue; // the same shard in a later version
            }
            if let Some(mut old) = l.shard.take() {
                if old.term == current.term {
                    old.closes = lc.shards.iter().find(|s| s.shard == old.shard).and_then(|s| s.until);
                }
                l.retiring.push(old);
            }
            l.shard = mine.map(|s| MyShard {
                term: current.term,
                closes: None,
                shard: s.shard,
                replicas: s.replicas.clone(),
                next_local_id: 0,
                pending: BTreeMap::new(),
            });
        }
        self.send(config.controller, Message::config_ack(&config));
        let waiting: Vec<_> = self.unassigned.drain(..).collect();
        for (op, record, position, _) in waiting {
            self.reassign(now, &config, op, record, position);
        }
        // Reads waiting for a book that moved to an added log start again there: the
        // log it left no longer sees its trims. The new log's index holds everything
        // the old one did of the book, so the caller's position there is no concern.
        for l in 0..self.logs.len() {
            let here = LogId(l as u8);
            let (stay, moved): (Vec<ReadOp>, Vec<ReadOp>) =
                self.logs[l].waiting.drain(..).partition(|r| config.log_of(r.request.book()) == here);
            self.logs[l].waiting = stay;
            for r in moved {
                self.deadlines.remove(&(r.deadline, r.op));
                self.start(now, r.op, config.log_of(r.request.book()), MetalogPosition::ZERO, r.request);
            }
        }
        for l in 0..config.n_logs {
            self.drain_metalog(now, LogId(l));
        }
        let trims: Vec<OpId> = self.trims.keys().copied().collect();
        for op in trims {
            self.send_trim(now, op);
        }
        for l in 0..config.n_logs {
            if self.logs[l as usize].import.as_ref().is_some_and(|i| i.sent_at.is_none()) {
                self.send_import(now, LogId(l));
            }
        }
        for a in std::mem::take(&mut self.awaiting_config) {
            self.deadlines.remove(&(a.deadline, a.op));
            self.submit(now, a.op, &a.context, a.request);
        }
    }

    /// Assigns a record again after its shard's term ended without ordering it, in its
    /// book's log of the configuration `config`.
    pub(super) fn reassign(&mut self, now: Micros, config: &Configuration, op: OpId, record: Record, position: MetalogPosition) {
        let log = config.log_of(record.meta.book);
        if record.meta.is_conditional() && !config.indexes(log, self.id) && !config.partial() {
            // The book moved to a log this engine does not index, whose indexers
            // decide its conditions. The record was never ordered, so it can be dropped.
            if let Some(deadline) = self.appends_in_flight.remove(&op) {
                self.deadlines.remove(&(deadline, op));
                let e =
                    Error::Unavailable(format!("book {} moved to log {} (a log was added); retry", record.meta.book.0, log.0));
                self.complete(op, Err(e), log, position);
            }
            return;
        }
        self.assign(now, log, op, record, position);
    }
}
