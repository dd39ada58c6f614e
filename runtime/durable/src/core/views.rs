//! A node's parsed views of durable objects, by the record they are the view after.
//!
//! An object's state after a record of its stream never changes (the log is immutable
//! below a reader's position, and a commit's outcome is decided once), so a reader whose
//! object's newest record at its read point is one kept here takes the parsed value and
//! its JSON text from here: it neither decodes the record's aux data nor parses a
//! view, nor serializes the value to answer or measure it, and it asks the log for the
//! record's seqnum alone (`LogBook::read_prev_seqnum`, which an engine that indexes the
//! book answers from its index in place), not the record (`objects::view_at`). A
//! transaction that committed keeps the views after its commit of the objects it wrote
//! (`objects::keep_committed`), so their next readers do not replay it. Entries are keyed
//! by book too, so no reader sees another book's; a trimmed record is never the newest
//! one a reader finds, so its entry only ages out. Bounded by the JSON bytes held
//! (`[state] views_bytes`; a working set larger than the bound replays from aux data), the
//! oldest entry that no reader found since it was last passed over leaving first (CLOCK);
//! a view over a sixteenth of the bound is not kept.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use tally_log_core::BookId;

/// An object's state after one record, parsed, and its JSON text once someone asked for
/// it (a reader of the whole object, a transaction's byte budget) or it was at hand.
pub(crate) struct View {
    pub value: Value,
    text: OnceLock<Box<str>>,
}

impl View {
    pub(crate) fn new(value: Value) -> View {
        View { value, text: OnceLock::new() }
    }

    /// A view whose JSON text is `text` (the text `value` was parsed from or serialized to).
    pub(crate) fn with_text(value: Value, text: Box<str>) -> View {
        View { value, text: OnceLock::from(text) }
    }

    /// The value's JSON text, serialized once.
    pub(crate) fn text(&self) -> &str {
        self.text.get_or_init(|| serde_json::to_string(&self.value).unwrap_or_default().into_boxed_str())
    }

    pub(crate) fn len(&self) -> usize {
        self.text().len()
    }
}

/// Views by book and record: a record holds the views of the few objects it touched,
/// each with whether a reader found it since it last came up for eviction.
type ByRecord = HashMap<(BookId, u64), Vec<(Box<str>, Arc<View>, bool)>>;

/// Bounded by `bytes_max` of JSON text (`StateConfig::views_bytes`).
pub(crate) struct Views {
    kept: Mutex<Kept>,
    bytes_max: usize,
}

#[derive(Default)]
struct Kept {
    views: ByRecord,
    /// What `views` holds, oldest first.
    order: VecDeque<(BookId, u64, Box<str>)>,
    bytes: usize,
}

impl Views {
    pub(crate) fn new(bytes_max: usize) -> Views {
        Views { kept: Mutex::default(), bytes_max }
    }

    /// The view of `object` after record `seqnum` of `book`, if it is kept.
    pub(crate) fn get(&self, book: BookId, seqnum: u64, object: &str) -> Option<Arc<View>> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let (_, view, found) = kept.views.get_mut(&(book, seqnum))?.iter_mut().find(|(o, _, _)| **o == *object)?;
        *found = true;
        Some(view.clone())
    }

    /// Keeps `view` as the view of `object` after record `seqnum` of `book`.
    pub(crate) fn put(&self, book: BookId, seqnum: u64, object: &str, view: Arc<View>) {
        // The text a view holds, and its name: what it costs at least.
        let cost = view.len().saturating_add(object.len());
        if cost > self.bytes_max / 16 {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.views.get(&(book, seqnum)).is_some_and(|r| r.iter().any(|(o, _, _)| **o == *object)) {
            return;
        }
        while kept.bytes + cost > self.bytes_max {
            let Some((b, s, o)) = kept.order.pop_front() else { break };
            let Some(record) = kept.views.get_mut(&(b, s)) else { continue };
            if let Some(at) = record.iter().position(|(name, _, _)| *name == o) {
                // A view found since it last came up gets another round (CLOCK): the
                // views readers keep finding stay, those nobody asked for go.
                if std::mem::take(&mut record[at].2) {
                    kept.order.push_back((b, s, o));
                    continue;
                }
                let (name, v, _) = record.swap_remove(at);
                if record.is_empty() {
                    kept.views.remove(&(b, s));
                }
                kept.bytes -= v.len().saturating_add(name.len());
            }
        }
        kept.bytes += cost;
        kept.order.push_back((book, seqnum, Box::from(object)));
        kept.views.entry((book, seqnum)).or_default().push((Box::from(object), view, false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BYTES_MAX: usize = 8 << 20;

    fn view(len: usize) -> Arc<View> {
        Arc::new(View::with_text(Value::Null, "x".repeat(len).into_boxed_str()))
    }

    #[test]
    fn a_view_is_found_by_its_book_record_and_object_only() {
        let views = Views::new(BYTES_MAX);
        views.put(BookId(1), 7, "a", view(3));
        assert_eq!(views.get(BookId(1), 7, "a").map(|v| v.len()), Some(3));
        assert!(views.get(BookId(2), 7, "a").is_none(), "another book's");
        assert!(views.get(BookId(1), 8, "a").is_none(), "another record's");
        assert!(views.get(BookId(1), 7, "b").is_none(), "another object's");
    }

    #[test]
    fn the_oldest_views_leave_first_and_the_bytes_stay_bounded() {
        let views = Views::new(BYTES_MAX);
        let len = BYTES_MAX / 64;
        for seqnum in 0..100u64 {
            views.put(BookId(1), seqnum, "o", view(len));
        }
        let kept = views.kept.lock().unwrap();
        assert!(kept.bytes <= BYTES_MAX, "{} bytes", kept.bytes);
        assert_eq!(kept.views.values().map(Vec::len).sum::<usize>(), kept.order.len());
        drop(kept);
        assert!(views.get(BookId(1), 0, "o").is_none(), "the oldest left");
        assert!(views.get(BookId(1), 99, "o").is_some(), "the newest stays");
        views.put(BookId(1), 100, "big", view(BYTES_MAX));
        assert!(views.get(BookId(1), 100, "big").is_none(), "a view too large for the cache is not kept");
    }

    #[test]
    fn a_view_readers_keep_finding_outlives_newer_ones_nobody_reads() {
        let views = Views::new(BYTES_MAX);
        let len = BYTES_MAX / 64;
        views.put(BookId(1), 0, "hot", view(len));
        for seqnum in 1..200u64 {
            assert!(views.get(BookId(1), 0, "hot").is_some(), "the view read all along left at {seqnum}");
            views.put(BookId(1), seqnum, "cold", view(len));
        }
        assert!(views.get(BookId(1), 100, "cold").is_none(), "a view nobody read left");
        assert!(views.kept.lock().unwrap().bytes <= BYTES_MAX);
    }
}
