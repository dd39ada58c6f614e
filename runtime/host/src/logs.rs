//! The logs of functions on this node: what each attempt's guest printed (stdout,
//! stderr) and what the platform told it (`tally` lines: refusals of its requests out),
//! one entry per line with the invocation's ID, function, version, book and attempt.
//!
//! The store is in memory and bounded twice: an attempt keeps at most
//! `logs_invocation_bytes_max` of each stream (`host/output.rs`; the oldest lines go
//! first, and one `tally` line says how much went), and the node at most `logs_bytes_max`
//! over every entry (oldest first out). Entries are numbered in the order they were
//! stored (`seq`), which is what a follower resumes from; a node's restart empties it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::watch;

use crate::host::Line;

/// What an entry costs besides its text and names (the store's bound counts it).
const ENTRY_OVERHEAD_BYTES: usize = 96;

/// One line of a function's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LogEntry {
    pub seq: u64,
    pub at_ms: u64,
    pub function: String,
    pub version: u32,
    pub book: u64,
    pub id: String,
    pub attempt: u32,
    /// `stdout`, `stderr` or `tally` (the platform's lines).
    pub stream: &'static str,
    pub line: String,
}

impl LogEntry {
    fn cost(&self) -> usize {
        ENTRY_OVERHEAD_BYTES + self.line.len() + self.function.len() + self.id.len()
    }
}

/// Which attempt the lines are of.
#[derive(Clone, Debug)]
pub struct LogSource {
    pub function: String,
    pub version: u32,
    pub book: u64,
    pub id: String,
    pub attempt: u32,
}

/// What a reader asks for: entries after `after` (a `seq`), of `function`, of one
/// invocation, at or after `since_ms`, at most `limit`.
#[derive(Clone, Debug, Default)]
pub struct LogQuery {
    pub function: Option<String>,
    pub id: Option<String>,
    pub since_ms: Option<u64>,
    pub after: Option<u64>,
    pub limit: usize,
}

impl LogQuery {
    fn matches(&self, e: &LogEntry) -> bool {
        self.function.as_ref().is_none_or(|f| *f == e.function)
            && self.id.as_ref().is_none_or(|id| *id == e.id)
            && self.since_ms.is_none_or(|s| e.at_ms >= s)
            && self.after.is_none_or(|a| e.seq > a)
    }
}

#[derive(Default)]
struct Inner {
    entries: VecDeque<Arc<LogEntry>>,
    bytes: usize,
    next: u64,
}

pub struct LogStore {
    inner: Mutex<Inner>,
    bytes_max: usize,
    /// The last `seq` stored, for followers.
    last: watch::Sender<u64>,
}

impl LogStore {
    pub fn new(bytes_max: usize) -> LogStore {
        LogStore { inner: Mutex::default(), bytes_max, last: watch::channel(0).0 }
    }

    /// Stores an attempt's lines of `stream`, in order.
    pub fn push(&self, source: &LogSource, stream: &'static str, lines: Vec<Line>) {
        if lines.is_empty() {
            return;
        }
        let mut inner = self.inner.lock().expect("not poisoned");
        for Line { at_ms, text } in lines {
            inner.next += 1;
            let entry = LogEntry {
                seq: inner.next,
                at_ms,
                function: source.function.clone(),
                version: source.version,
                book: source.book,
                id: source.id.clone(),
                attempt: source.attempt,
                stream,
                line: text,
            };
            inner.bytes += entry.cost();
            inner.entries.push_back(Arc::new(entry));
        }
        while inner.bytes > self.bytes_max {
            let Some(old) = inner.entries.pop_front() else { break };
            inner.bytes -= old.cost();
        }
        let last = inner.next;
        drop(inner);
        self.last.send_replace(last);
    }

    /// The entries `q` asks for, oldest first: the last `q.limit` of them unless `q.after`
    /// is given, then the first `q.limit` after it; and where a reader goes on from (the
    /// last entry returned if `limit` cut the page, else the last one stored).
    pub fn query(&self, q: &LogQuery) -> (Vec<Arc<LogEntry>>, u64) {
        let inner = self.inner.lock().expect("not poisoned");
        // Entries are in `seq` order: a reader going on from a position (a follower,
        // woken by every store) skips what it has seen without looking at it.
        let from = q.after.map_or(0, |after| inner.entries.partition_point(|e| e.seq <= after));
        let matching = inner.entries.range(from..).filter(|e| q.matches(e));
        if q.after.is_some() {
            let found: Vec<Arc<LogEntry>> = matching.take(q.limit).cloned().collect();
            let next = if found.len() == q.limit { found.last().map_or(inner.next, |e| e.seq) } else { inner.next };
            return (found, next);
        }
        let mut found: Vec<Arc<LogEntry>> = matching.cloned().collect();
        found.drain(..found.len().saturating_sub(q.limit));
        (found, inner.next)
    }

    /// Changes to the last `seq` stored: a follower waits on it for new entries.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.last.subscribe()
    }

    /// Bytes the entries take, as the bound counts them.
    pub fn bytes(&self) -> usize {
        self.inner.lock().expect("not poisoned").bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(function: &str, id: &str) -> LogSource {
        LogSource { function: function.into(), version: 1, book: 0, id: id.into(), attempt: 1 }
    }

    fn lines(texts: &[&str], at_ms: u64) -> Vec<Line> {
        texts.iter().map(|t| Line { at_ms, text: t.to_string() }).collect()
    }

    #[test]
    fn entries_are_found_by_function_invocation_time_and_position() {
        let store = LogStore::new(1 << 20);
        store.push(&source("f", "a"), "stdout", lines(&["1", "2"], 10));
        store.push(&source("g", "b"), "stderr", lines(&["x"], 20));
        store.push(&source("f", "c"), "tally", lines(&["3"], 30));
        let q = |function: Option<&str>, id: Option<&str>, since_ms, after| LogQuery {
            function: function.map(str::to_string),
            id: id.map(str::to_string),
            since_ms,
            after,
            limit: 100,
        };
        let texts = |q: LogQuery| store.query(&q).0.iter().map(|e| e.line.clone()).collect::<Vec<_>>();
        assert_eq!(texts(q(Some("f"), None, None, None)), ["1", "2", "3"]);
        assert_eq!(texts(q(None, Some("b"), None, None)), ["x"]);
        assert_eq!(texts(q(None, None, Some(20), None)), ["x", "3"]);
        assert_eq!(texts(q(None, None, None, Some(2))), ["x", "3"]);
        assert_eq!(texts(LogQuery { limit: 1, ..q(None, None, None, None) }), ["3"], "the last ones");
        assert_eq!(texts(LogQuery { limit: 1, ..q(None, None, None, Some(0)) }), ["1"], "the first after");
        assert_eq!(*store.watch().borrow(), 4);
        assert_eq!(store.query(&LogQuery { limit: 1, ..q(None, None, None, Some(0)) }).1, 1, "a cut page goes on from its end");
        assert_eq!(store.query(&q(Some("g"), None, None, Some(0))).1, 4, "a whole page from the end of the store");
    }

    #[test]
    fn the_node_bound_lets_the_oldest_go() {
        // Each entry costs the overhead, its line (2 bytes), function and ID (1 each).
        let cost = ENTRY_OVERHEAD_BYTES + 4;
        let store = LogStore::new(10 * cost);
        for i in 0..100 {
            store.push(&source("f", "a"), "stdout", lines(&[&format!("{i:02}")], i));
        }
        let (all, _) = store.query(&LogQuery { limit: 1000, ..LogQuery::default() });
        assert_eq!(all.len(), 10);
        assert_eq!(all[0].line, "90");
        assert_eq!(store.bytes(), 10 * cost);
    }
}
