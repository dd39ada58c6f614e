//! Reads and aux data in complete mode: served once the index has reached the
//! caller's position, in place when the record is cached (`read_now`), or when only
//! its seqnum is asked for (`read_prev_seqnum_now`).

use super::*;

/// Whether the caller's context names a term past the configuration's: nothing answers
/// it in place (the submitted request says what is wrong).
fn past_term(config: &Configuration, context: &Context) -> bool {
    context.positions().iter().any(|p| p.term > config.current().term.0)
}

impl Engine {
    /// Serves the reads (and aux data) of `log` whose position the index has reached.
    pub(super) fn run_reads(&mut self, now: Micros, log: LogId) {
        if self.partial.is_some() {
            // A node seeking its start answers nothing before it (the reads wait).
            if self.follower.seeking(log) {
                return;
            }
            for r in std::mem::take(&mut self.logs[log.0 as usize].waiting) {
                self.partial_start(now, log, r);
            }
            return;
        }
        let l = &mut self.logs[log.0 as usize];
        let applied = l.applied;
        let (ready, waiting): (Vec<ReadOp>, Vec<ReadOp>) = l.waiting.drain(..).partition(|r| r.wait_for <= applied);
        l.waiting = waiting;
        for r in ready {
            match r.request {
                Request::SetAux { .. } => self.set_aux(log, r),
                _ => self.read(now, log, r),
            }
        }
    }

    /// Attaches aux data if its seqnum is a live record of the caller's book in the
    /// index, which has reached the caller's position; refuses it otherwise.
    pub(super) fn set_aux(&mut self, log: LogId, r: ReadOp) {
        let Request::SetAux { book, seqnum, aux } = r.request else { unreachable!("set_aux takes aux data") };
        let position = self.logs[log.0 as usize].applied;
        self.deadlines.remove(&(r.deadline, r.op));
        let result = self.attach_aux(log, book, seqnum, aux);
        self.complete(r.op, result, log, position);
    }

    /// [`Engine::set_aux`]'s outcome, once the index has reached the caller's position.
    fn attach_aux(&mut self, log: LogId, book: BookId, seqnum: SeqNum, aux: Bytes) -> Result<Reply, Error> {
        if !self.logs[log.0 as usize].index.is_live(book, seqnum) {
            return Err(Error::InvalidArgument(format!("seqnum {seqnum} is not a live record of book {}", book.0)));
        }
        let attached = self.cache.put_aux(seqnum, book, aux);
        assert!(attached, "the cache holds {seqnum}, a live record of book {}, as another book's", book.0);
        Ok(Reply::AuxSet)
    }

    /// Answers a read (`ReadNext` or `ReadPrev`) at once if it needs neither waiting
    /// nor IO: the book's log is indexed here, the index has reached the caller's
    /// position, and the record found (if any) is cached. So is aux data attached
    /// (`SetAux`, in complete mode): the cache is this engine's. The answer is the one
    /// [`Engine::submit`] would complete the request with; `None` means: submit it.
    ///
    /// It produces no actions, so a driver may call it from the caller's thread, under
    /// the lock it holds the engine with, instead of a round trip through its task.
    pub fn read_now(&mut self, context: &Context, request: &Request) -> Option<(Result<Reply, Error>, LogId, MetalogPosition)> {
        if !matches!(request, Request::ReadNext { .. } | Request::ReadPrev { .. } | Request::SetAux { .. }) {
            return None;
        }
        let config = self.config.as_ref()?;
        if past_term(config, context) {
            return None;
        }
        let log = config.log_of(request.book());
        let set_aux = matches!(request, Request::SetAux { .. });
        if config.partial() {
            // Aux data goes to the index tier as well.
            if self.follower.seeking(log) || set_aux {
                return None; // nothing answers before the node's start
            }
            let p = context.position(log).max(self.logs[log.0 as usize].read_floor);
            return self.partial_read_now(log, p, request);
        }
        if !self.reached(context, log) {
            return None;
        }
        let position = self.logs[log.0 as usize].applied;
        if let Request::SetAux { book, seqnum, aux } = request {
            // Refused by the engine's limits: submitted, and refused there.
            self.validate(request).ok()?;
            return Some((self.attach_aux(log, *book, *seqnum, aux.clone()), log, position));
        }
        match self.lookup(log, request) {
            Lookup::Done(record) => Some((Ok(Reply::Read(record)), log, position)),
            Lookup::Fetch(_) => None,
        }
    }

    /// [`Index::read_prev_seqnum`] at once, in complete mode, once the index has reached
    /// the caller's position (as [`Engine::read_now`], with no record to have cached):
    /// the seqnum of the record a `ReadPrev` would return; `None` means: read it.
    pub fn read_prev_seqnum_now(
        &self,
        context: &Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> Option<(Option<SeqNum>, LogId, MetalogPosition)> {
        let config = self.config.as_ref()?;
        if config.partial() || past_term(config, context) {
            return None;
        }
        let log = config.log_of(book);
        if !self.reached(context, log) {
            return None;
        }
        let l = &self.logs[log.0 as usize];
        Some((l.index.read_prev_seqnum(book, tag, max), log, l.applied))
    }

    /// Whether this engine indexes `log` (complete mode) and its index has reached the
    /// caller's position there.
    fn reached(&self, context: &Context, log: LogId) -> bool {
        let l = &self.logs[log.0 as usize];
        self.config.as_ref().is_some_and(|c| c.indexes(log, self.id)) && context.position(log).max(l.read_floor) <= l.applied
    }

    /// What the index of `log` says of a read, and the record if there is none or it
    /// is cached.
    pub(super) fn lookup(&mut self, log: LogId, request: &Request) -> Lookup {
        let l = &self.logs[log.0 as usize];
        let found = match *request {
            Request::ReadNext { book, tag, min } => l.index.read_next(book, tag, min),
            Request::ReadPrev { book, tag, max } => l.index.read_prev(book, tag, max),
            _ => unreachable!("lookup takes reads"),
        };
        let Some(found) = found else { return Lookup::Done(None) };
        if let Some(c) = self.cache.get(found.seqnum) {
            if let Some((tags, data)) = &c.record {
                let record = LogRecord { seqnum: found.seqnum, tags: tags.clone(), data: data.clone(), aux: c.aux.clone() };
                return Lookup::Done(Some(record));
            }
        }
        Lookup::Fetch(found)
    }

    pub(super) fn read(&mut self, now: Micros, log: LogId, r: ReadOp) {
        let position = self.logs[log.0 as usize].applied;
        let found = match self.lookup(log, &r.request) {
            Lookup::Done(record) => {
                self.deadlines.remove(&(r.deadline, r.op));
                self.complete(r.op, Ok(Reply::Read(record)), log, position);
                return;
            }
            Lookup::Fetch(found) => found,
        };
        let replicas = self.shard_replicas.get(&found.location.shard).cloned().unwrap_or_default();
        if replicas.is_empty() {
            self.deadlines.remove(&(r.deadline, r.op));
            let e = Error::Unavailable(format!("no replicas known for {:?}", found.location.shard));
            self.complete(r.op, Err(e), log, position);
            return;
        }
        let req = self.next_req;
        self.next_req += 1;
        // Start with a replica chosen by the engine id, to spread reads over replicas.
        let turn = self.id.0 as usize;
        self.record_fetches.insert(
            req,
            RecordFetch {
                op: r.op,
                log,
                request: r.request,
                found,
                position,
                replicas,
                turn,
                sent_at: 0,
                deadline: r.deadline,
                aux: None,
            },
        );
        self.send_record_fetch(now, req);
    }

    pub(super) fn send_record_fetch(&mut self, now: Micros, req: u64) {
        let Some(f) = self.record_fetches.get_mut(&req) else { return };
        f.sent_at = now;
        let to = f.replicas[f.turn % f.replicas.len()];
        f.turn += 1;
        let seqnum = f.found.seqnum;
        self.send(to, Message::ReadRecord { req, seqnum });
    }

    pub(super) fn on_record(&mut self, now: Micros, req: u64, seqnum: SeqNum, read: StoredRead) {
        let Some(f) = self.record_fetches.get(&req) else { return self.early_record(req, seqnum, read) };
        if f.found.seqnum != seqnum {
            return;
        }
        match read {
            StoredRead::Found(record) => {
                let f = self.record_fetches.remove(&req).expect("checked");
                self.cache.put_record(seqnum, record.meta.book, record.meta.tags.clone(), record.data.clone());
                let aux = f.aux.or_else(|| self.cache.get(seqnum).and_then(|c| c.aux.clone()));
                let out = LogRecord { seqnum, tags: record.meta.tags, data: record.data, aux };
                self.deadlines.remove(&(f.deadline, f.op));
                self.complete(f.op, Ok(Reply::Read(Some(out))), f.log, f.position);
            }
            StoredRead::Missing => {
                // The replica has not applied the entry yet, or lost the record: the
                // next tick asks another one.
                let _ = now;
            }
            StoredRead::Reclaimed => {
                // A trim the index has not applied yet removed the record: read again
                // once the index has moved past the position this read saw.
                let f = self.record_fetches.remove(&req).expect("checked");
                let log = f.log;
                if self.config.as_ref().is_some_and(|c| c.log_of(f.request.book()) != log) {
                    // The book moved to an added log, where the trim was ordered.
                    self.deadlines.remove(&(f.deadline, f.op));
                    let e = Error::Unavailable(format!("book {} moved to another log; read again", f.request.book().0));
                    self.complete(f.op, Err(e), log, f.position);
                    return;
                }
                let wait_for = MetalogPosition { term: f.position.term, index: f.position.index + 1 };
                self.logs[log.0 as usize].waiting.push(ReadOp { op: f.op, request: f.request, wait_for, deadline: f.deadline });
                self.run_reads(now, log);
            }
        }
    }
}
