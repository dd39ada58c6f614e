//! Index replicas: requests of a log this engine does not index go to an indexer, and
//! its answer comes back (see the module doc of `engine`).

use super::*;

impl Engine {
    /// Sends a request of a log this engine does not index to an indexer of that log.
    pub(super) fn forward(
        &mut self,
        now: Micros,
        op: OpId,
        log: LogId,
        position: MetalogPosition,
        request: Request,
        deadline: Micros,
    ) {
        let config = self.config.as_ref().expect("forwarding needs a configuration");
        let indexers = config.indexers_of(log);
        let req = self.next_req;
        self.next_req += 1;
        // Start with an indexer chosen by the engine id, to spread the forwarders.
        let turn = self.id.0 as usize;
        self.deadlines.insert((deadline, op), ());
        self.forwards.insert(req, Forwarded { op, log, request, position, indexers, turn, sent_at: 0, deadline, again: false });
        self.send_forward(now, req);
    }

    pub(super) fn send_forward(&mut self, now: Micros, req: u64) {
        let Some(f) = self.forwards.get_mut(&req) else { return };
        f.sent_at = now;
        f.again = false;
        let to = f.indexers[f.turn % f.indexers.len()];
        f.turn += 1;
        let (log, position, request) = (f.log, f.position, f.request.clone());
        let incarnation = self.incarnation;
        self.send(to, Message::Forward { req, incarnation, log, position, request });
    }

    pub(super) fn on_forward_reply(&mut self, now: Micros, req: u64, result: Result<Reply, Error>, position: MetalogPosition) {
        let Some(f) = self.forwards.get_mut(&req) else { return };
        if let Err(Error::Moved { term, .. }) = result {
            let current = self.config.as_ref().map_or(0, |c| c.current().term.0);
            let moved = self.config.as_ref().is_some_and(|c| c.log_of(f.request.book()) != f.log);
            if term <= current && !moved {
                // The indexer has not heard of this engine's configuration yet.
                f.again = true;
                f.sent_at = now;
                return;
            }
            // The book moved to a log added in the indexer's configuration: route the
            // request there, once this engine has that configuration, as if its
            // caller had seen that term.
            let f = self.forwards.remove(&req).expect("found");
            self.deadlines.remove(&(f.deadline, f.op));
            let mut context = Context::new();
            context.advance(f.log, MetalogPosition::new(Term(term), 0));
            self.submit(now, f.op, &context, f.request);
            return;
        }
        let Some(f) = self.forwards.remove(&req) else { return };
        self.deadlines.remove(&(f.deadline, f.op));
        self.complete(f.op, result, f.log, position);
    }
}
