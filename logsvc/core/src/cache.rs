//! The engine's record cache: least recently used records and their aux data, bounded
//! in bytes. A cache, never ground truth: any entry may vanish at any time.
//!
//! Every entry names the book of its record, and aux data is attached only under that
//! book: the engine accepts aux data only for a live record of the caller's book, and
//! the cache holds to the same rule on its own.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use crate::types::{BookId, SeqNum, Tag};

#[derive(Clone, Debug)]
pub struct Cached {
    /// The book of the record at this seqnum.
    pub book: BookId,
    pub record: Option<(Vec<Tag>, Bytes)>,
    pub aux: Option<Bytes>,
}

impl Cached {
    fn bytes(&self) -> usize {
        // What an entry costs besides its data (its hash table slot with the table's
        // slack, its LRU node, its tag vector), so that many tiny records do not escape
        // the bound: measured as the heap a dev node gains per cached 100-byte record.
        ENTRY_OVERHEAD_BYTES
            + self.record.as_ref().map_or(0, |(t, d)| t.len() * 8 + d.len())
            + self.aux.as_ref().map_or(0, |a| a.len())
    }
}

const ENTRY_OVERHEAD_BYTES: usize = 176;

pub struct RecordCache {
    bytes_max: usize,
    bytes: usize,
    tick: u64,
    entries: HashMap<SeqNum, (Cached, u64)>,
    lru: BTreeMap<u64, SeqNum>,
}

impl RecordCache {
    pub fn new(bytes_max: usize) -> RecordCache {
        RecordCache { bytes_max, bytes: 0, tick: 0, entries: HashMap::new(), lru: BTreeMap::new() }
    }

    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn get(&mut self, seqnum: SeqNum) -> Option<&Cached> {
        self.tick += 1;
        let (entry, t) = self.entries.get_mut(&seqnum)?;
        self.lru.remove(t);
        *t = self.tick;
        self.lru.insert(self.tick, seqnum);
        Some(entry)
    }

    /// Caches the record at `seqnum`, a record of `book`, keeping aux data set under the
    /// same book.
    pub fn put_record(&mut self, seqnum: SeqNum, book: BookId, tags: Vec<Tag>, data: Bytes) {
        let aux = self.remove(seqnum).filter(|c| c.book == book).and_then(|c| c.aux);
        self.insert(seqnum, Cached { book, record: Some((tags, data)), aux });
    }

    /// Attaches aux data to `seqnum` as a record of `book`. Returns false, and attaches
    /// nothing, if the cache holds `seqnum` as a record of another book.
    #[must_use]
    pub fn put_aux(&mut self, seqnum: SeqNum, book: BookId, aux: Bytes) -> bool {
        if self.entries.get(&seqnum).is_some_and(|(c, _)| c.book != book) {
            return false;
        }
        let record = self.remove(seqnum).and_then(|c| c.record);
        self.insert(seqnum, Cached { book, record, aux: Some(aux) });
        true
    }

    pub fn remove(&mut self, seqnum: SeqNum) -> Option<Cached> {
        let (entry, t) = self.entries.remove(&seqnum)?;
        self.lru.remove(&t);
        self.bytes -= entry.bytes();
        Some(entry)
    }

    fn insert(&mut self, seqnum: SeqNum, entry: Cached) {
        let size = entry.bytes();
        if size > self.bytes_max {
            return;
        }
        while self.bytes + size > self.bytes_max {
            let (_, victim) = self.lru.pop_first().expect("bytes > 0 means entries exist");
            let (e, _) = self.entries.remove(&victim).expect("lru and entries agree");
            self.bytes -= e.bytes();
        }
        self.tick += 1;
        self.bytes += size;
        self.lru.insert(self.tick, seqnum);
        self.entries.insert(seqnum, (entry, self.tick));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_within_the_byte_bound() {
        let mut c = RecordCache::new(3 * (ENTRY_OVERHEAD_BYTES + 100));
        for i in 0..3 {
            c.put_record(SeqNum(i), BookId(1), vec![], Bytes::from(vec![0; 100]));
        }
        assert!(c.get(SeqNum(0)).is_some());
        c.put_record(SeqNum(3), BookId(1), vec![], Bytes::from(vec![0; 100]));
        assert!(c.get(SeqNum(1)).is_none(), "1 was least recently used");
        assert!(c.get(SeqNum(0)).is_some() && c.get(SeqNum(2)).is_some() && c.get(SeqNum(3)).is_some());
        assert!(c.bytes() <= 3 * (ENTRY_OVERHEAD_BYTES + 100));
        c.put_record(SeqNum(9), BookId(1), vec![], Bytes::from(vec![0; 10_000]));
        assert!(c.get(SeqNum(9)).is_none(), "an entry larger than the cache is not kept");
    }

    #[test]
    fn aux_data_and_record_share_an_entry() {
        let mut c = RecordCache::new(1 << 20);
        assert!(c.put_aux(SeqNum(1), BookId(7), Bytes::from_static(b"view")));
        c.put_record(SeqNum(1), BookId(7), vec![Tag(3)], Bytes::from_static(b"data"));
        let e = c.get(SeqNum(1)).unwrap();
        assert_eq!(e.aux.as_deref(), Some(&b"view"[..]));
        assert_eq!(e.record.as_ref().unwrap().1, Bytes::from_static(b"data"));
    }

    #[test]
    fn aux_data_never_crosses_books() {
        let mut c = RecordCache::new(1 << 20);
        c.put_record(SeqNum(1), BookId(9), vec![Tag(3)], Bytes::from_static(b"data"));
        assert!(!c.put_aux(SeqNum(1), BookId(1), Bytes::from_static(b"poison")), "book 1 cannot annotate book 9's record");
        let e = c.get(SeqNum(1)).unwrap();
        assert_eq!((e.book, e.aux.clone()), (BookId(9), None));
        // Aux data cached ahead of its record is dropped if the record turns out to be
        // another book's.
        assert!(c.put_aux(SeqNum(2), BookId(1), Bytes::from_static(b"early")));
        c.put_record(SeqNum(2), BookId(9), vec![], Bytes::from_static(b"data"));
        assert_eq!(c.get(SeqNum(2)).unwrap().aux, None);
    }
}
