//! Added logs: an indexer of a new log takes over the index state of the books that
//! moved to it from indexers of their old logs (see the module doc of `engine`).

use super::*;

impl Engine {
    /// Asks an indexer of the log being imported from for its next books, or takes them
    /// from this engine's own index when it is one and has applied far enough.
    pub(super) fn send_import(&mut self, now: Micros, log: LogId) {
        let Some(config) = self.config.clone() else { return };
        let Some(im) = self.logs[log.0 as usize].import.as_mut() else { return };
        let Some(&source) = im.sources.front() else { return };
        let indexers = config.indexers_of(source);
        im.sent_at = Some(now);
        // A term installed while every engine was down names no engine to ask; the
        // tick asks again, by when a later term names some.
        let Some(&to) = indexers.get(im.turn % indexers.len().max(1)) else { return };
        im.turn += 1;
        let (term, after) = (im.term, im.after);
        let req = self.next_req;
        self.next_req += 1;
        im.req = req;
        if to == self.id {
            if let Some((books, more)) = self.export(term, source, log, after) {
                self.on_index_exported(now, req, books, more);
            }
            return;
        }
        self.send(to, Message::IndexExport { req, term, source, target: log, after });
    }

    /// The state of the books that moved from `source` to `target` in `term`, from
    /// the first after `after`; `None` until this engine's index of `source` holds
    /// every term before `term`.
    pub(super) fn export(
        &self,
        term: Term,
        source: LogId,
        target: LogId,
        after: Option<BookId>,
    ) -> Option<(Vec<BookState>, bool)> {
        let config = self.config.as_ref()?;
        let before = config.term(Term(term.0.checked_sub(1)?))?.n_logs();
        let now = config.term(term)?.n_logs();
        let l = self.logs.get(source.0 as usize)?;
        if !config.indexes(source, self.id) || l.applied < MetalogPosition::new(term, 0) || target.0 >= now {
            return None;
        }
        let moved = |b: BookId| book_to_log(b, before) == source && book_to_log(b, now) == target;
        Some(l.index.export(moved, after, EXPORT_WEIGHT_MAX))
    }

    pub(super) fn on_index_export(
        &mut self,
        from: NodeId,
        req: u64,
        term: Term,
        source: LogId,
        target: LogId,
        after: Option<BookId>,
    ) {
        // Not there yet: the importer asks again, maybe another indexer.
        if let Some((books, more)) = self.export(term, source, target, after) {
            self.send(from, Message::IndexExported { req, books, more });
        }
    }

    pub(super) fn on_index_exported(&mut self, now: Micros, req: u64, books: Vec<BookState>, more: bool) {
        let Some(log) = self.logs.iter().position(|l| l.import.as_ref().is_some_and(|i| i.req == req)) else { return };
        let l = &mut self.logs[log];
        let im = l.import.as_mut().expect("found above");
        im.after = books.last().map(|b| b.book).or(im.after);
        im.books.extend(books);
        im.turn = im.turn.saturating_sub(1); // the same indexer again for the rest
        if !more {
            im.sources.pop_front();
            im.after = None;
        }
        if !im.sources.is_empty() {
            self.send_import(now, LogId(log as u8));
            return;
        }
        let im = l.import.take().expect("found above");
        for b in im.books {
            l.index.import(b);
        }
        self.apply_ready(now, LogId(log as u8));
    }
}
