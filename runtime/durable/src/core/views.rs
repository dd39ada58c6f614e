//! A node's parsed views of durable objects, by the record they are the view after.
//!
//! An object's state after a record of its stream never changes (the log is immutable
//! below a reader's position, and a commit's outcome is decided once), so a reader whose
//! object's newest record at its read point is one kept here takes the parsed value and
//! its JSON text from here: it neither decodes the record's aux data nor parses a
//! view, nor serializes the value to answer or measure it (`objects::view_at`). A
//! transaction that committed keeps the views after its commit of the objects it wrote
//! (`objects::keep_committed`), so their next readers do not replay it. Entries are keyed
//! by book too, so no reader sees another book's; a trimmed record is never the newest
//! one a reader finds, so its entry only ages out. Bounded by the JSON bytes held, the
//! oldest entry leaving first; a view over a sixteenth of the bound is not kept.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use tally_log_core::BookId;

/// The JSON text, in bytes, of the views a node keeps parsed.
const BYTES_MAX: usize = 8 << 20;

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

/// Views by book and record: a record holds the views of the few objects it touched.
type ByRecord = HashMap<(BookId, u64), Vec<(Box<str>, Arc<View>)>>;

#[derive(Default)]
pub(crate) struct Views(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    views: ByRecord,
    /// What `views` holds, oldest first.
    order: VecDeque<(BookId, u64, Box<str>)>,
    bytes: usize,
}

impl Views {
    /// The view of `object` after record `seqnum` of `book`, if it is kept.
    pub(crate) fn get(&self, book: BookId, seqnum: u64, object: &str) -> Option<Arc<View>> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.views.get(&(book, seqnum))?.iter().find(|(o, _)| **o == *object).map(|(_, v)| v.clone())
    }

    /// Keeps `view` as the view of `object` after record `seqnum` of `book`.
    pub(crate) fn put(&self, book: BookId, seqnum: u64, object: &str, view: Arc<View>) {
        // The text a view holds, and its name: what it costs at least.
        let cost = view.len().saturating_add(object.len());
        if cost > BYTES_MAX / 16 {
            return;
        }
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if kept.views.get(&(book, seqnum)).is_some_and(|r| r.iter().any(|(o, _)| **o == *object)) {
            return;
        }
        while kept.bytes + cost > BYTES_MAX {
            let Some((b, s, o)) = kept.order.pop_front() else { break };
            let Some(record) = kept.views.get_mut(&(b, s)) else { continue };
            if let Some(at) = record.iter().position(|(name, _)| *name == o) {
                let (name, v) = record.swap_remove(at);
                if record.is_empty() {
                    kept.views.remove(&(b, s));
                }
                kept.bytes -= v.len().saturating_add(name.len());
            }
        }
        kept.bytes += cost;
        kept.order.push_back((book, seqnum, Box::from(object)));
        kept.views.entry((book, seqnum)).or_default().push((Box::from(object), view));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(len: usize) -> Arc<View> {
        Arc::new(View::with_text(Value::Null, "x".repeat(len).into_boxed_str()))
    }

    #[test]
    fn a_view_is_found_by_its_book_record_and_object_only() {
        let views = Views::default();
        views.put(BookId(1), 7, "a", view(3));
        assert_eq!(views.get(BookId(1), 7, "a").map(|v| v.len()), Some(3));
        assert!(views.get(BookId(2), 7, "a").is_none(), "another book's");
        assert!(views.get(BookId(1), 8, "a").is_none(), "another record's");
        assert!(views.get(BookId(1), 7, "b").is_none(), "another object's");
    }

    #[test]
    fn the_oldest_views_leave_first_and_the_bytes_stay_bounded() {
        let views = Views::default();
        let len = BYTES_MAX / 64;
        for seqnum in 0..100u64 {
            views.put(BookId(1), seqnum, "o", view(len));
        }
        let kept = views.0.lock().unwrap();
        assert!(kept.bytes <= BYTES_MAX, "{} bytes", kept.bytes);
        assert_eq!(kept.views.values().map(Vec::len).sum::<usize>(), kept.order.len());
        drop(kept);
        assert!(views.get(BookId(1), 0, "o").is_none(), "the oldest left");
        assert!(views.get(BookId(1), 99, "o").is_some(), "the newest stays");
        views.put(BookId(1), 100, "big", view(BYTES_MAX));
        assert!(views.get(BookId(1), 100, "big").is_none(), "a view too large for the cache is not kept");
    }
}
