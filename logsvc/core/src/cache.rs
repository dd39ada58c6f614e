//! The engine's record cache: recently used records and their aux data, bounded in
//! bytes. A cache, never ground truth: any entry may vanish at any time.
//!
//! Eviction is CLOCK (second chance), an approximation of least recently used: entries
//! queue in insertion order, a hit only sets the entry's `referenced` bit, and an
//! eviction takes the oldest entry unless its bit is set, which it clears and queues
//! the entry again. A hit then costs one hash lookup, where a true LRU moved the
//! entry in an ordered map on every hit and insert (with a keyed hash of each
//! seqnum, the cache was a sixth of a dev node's CPU when appends filled it).
//!
//! Every entry names the book of its record, and aux data is attached only under that
//! book: the engine accepts aux data only for a live record of the caller's book, and
//! the cache holds to the same rule on its own.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

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
        // slack, its queue slot, its tag vector), so that many tiny records do not
        // escape the bound: measured as the heap a dev node gains per cached 100-byte
        // record.
        ENTRY_OVERHEAD_BYTES
            + self.record.as_ref().map_or(0, |(t, d)| t.len() * 8 + d.len())
            + self.aux.as_ref().map_or(0, |a| a.len())
    }
}

const ENTRY_OVERHEAD_BYTES: usize = 176;

/// Hashes a seqnum by one multiplication. Seqnums are assigned by the log, never chosen
/// by a caller, so no keyed hash is needed against crafted keys; consecutive seqnums
/// land in distinct buckets (an odd multiplier permutes the low bits).
#[derive(Default)]
struct SeqNumHasher(u64);

impl Hasher for SeqNumHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

struct Slot {
    entry: Cached,
    referenced: bool,
    /// Which insertion of this seqnum the slot is: a queue item of an earlier one is
    /// stale and skipped.
    generation: u64,
}

pub struct RecordCache {
    bytes_max: usize,
    bytes: usize,
    generation: u64,
    /// Slots boxed: a table slot is then 16 bytes rather than 120, so the table's
    /// slack (up to half its slots empty, and the old and new tables both held while
    /// it grows) costs little. Unboxed, the table of a full 256 MiB cache of 100-byte
    /// records held 252 MB, and 378 MB while it doubled.
    entries: HashMap<SeqNum, Box<Slot>, BuildHasherDefault<SeqNumHasher>>,
    /// Insertion order, oldest first, with the generation of each insertion; items of
    /// removed or replaced entries stay until they reach the front (or a compaction).
    queue: VecDeque<(SeqNum, u64)>,
}

impl RecordCache {
    pub fn new(bytes_max: usize) -> RecordCache {
        RecordCache { bytes_max, bytes: 0, generation: 0, entries: HashMap::default(), queue: VecDeque::new() }
    }

    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn get(&mut self, seqnum: SeqNum) -> Option<&Cached> {
        let slot = self.entries.get_mut(&seqnum)?;
        slot.referenced = true;
        Some(&slot.entry)
    }

    /// Caches the record at `seqnum`, a record of `book`, keeping aux data set under the
    /// same book.
    pub fn put_record(&mut self, seqnum: SeqNum, book: BookId, tags: Vec<Tag>, data: Bytes) {
        let aux = self.remove(seqnum).filter(|c| c.book == book).and_then(|c| c.aux);
        self.insert(seqnum, Cached { book, record: Some((tags, data)), aux });
    }

    /// Attaches aux data to the entry of `seqnum` (creating it), unless the entry is
    /// of another book.
    #[must_use]
    pub fn put_aux(&mut self, seqnum: SeqNum, book: BookId, aux: Bytes) -> bool {
        if self.entries.get(&seqnum).is_some_and(|s| s.entry.book != book) {
            return false;
        }
        let record = self.remove(seqnum).and_then(|c| c.record);
        self.insert(seqnum, Cached { book, record, aux: Some(aux) });
        true
    }

    pub fn remove(&mut self, seqnum: SeqNum) -> Option<Cached> {
        let slot = self.entries.remove(&seqnum)?;
        self.bytes -= slot.entry.bytes();
        Some(slot.entry)
    }

    fn insert(&mut self, seqnum: SeqNum, entry: Cached) {
        let size = entry.bytes();
        if size > self.bytes_max {
            return;
        }
        // Each entry gets one second chance, so this ends within two passes.
        while self.bytes + size > self.bytes_max {
            let (victim, generation) = self.queue.pop_front().expect("bytes > 0 means entries are queued");
            let Some(slot) = self.entries.get_mut(&victim).filter(|s| s.generation == generation) else { continue };
            if slot.referenced {
                slot.referenced = false;
                self.queue.push_back((victim, generation));
            } else {
                self.remove(victim);
            }
        }
        self.generation += 1;
        self.bytes += size;
        self.entries.insert(seqnum, Box::new(Slot { entry, referenced: false, generation: self.generation }));
        self.queue.push_back((seqnum, self.generation));
        // Stale items (of removed or replaced entries) pile up while the cache has
        // room: drop them once they outnumber the live ones.
        if self.queue.len() > 2 * self.entries.len() + 1024 {
            let entries = &self.entries;
            self.queue.retain(|(s, g)| entries.get(s).is_some_and(|slot| slot.generation == *g));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_oldest_entry_not_used_since_within_the_byte_bound() {
        let mut c = RecordCache::new(3 * (ENTRY_OVERHEAD_BYTES + 100));
        for i in 0..3 {
            c.put_record(SeqNum(i), BookId(1), vec![], Bytes::from(vec![0; 100]));
        }
        assert!(c.get(SeqNum(0)).is_some());
        c.put_record(SeqNum(3), BookId(1), vec![], Bytes::from(vec![0; 100]));
        assert!(c.get(SeqNum(1)).is_none(), "1 was the oldest entry not used since");
        assert!(c.get(SeqNum(0)).is_some() && c.get(SeqNum(2)).is_some() && c.get(SeqNum(3)).is_some());
        assert!(c.bytes() <= 3 * (ENTRY_OVERHEAD_BYTES + 100));
        c.put_record(SeqNum(9), BookId(1), vec![], Bytes::from(vec![0; 10_000]));
        assert!(c.get(SeqNum(9)).is_none(), "an entry larger than the cache is not kept");
    }

    #[test]
    fn replaced_and_removed_entries_leave_no_queue_behind() {
        let mut c = RecordCache::new(1 << 30);
        for round in 0..10_000u64 {
            c.put_record(SeqNum(round % 7), BookId(1), vec![], Bytes::from_static(b"data"));
            assert!(c.put_aux(SeqNum(round % 7), BookId(1), Bytes::from_static(b"view")));
            c.remove(SeqNum((round + 3) % 7));
        }
        assert!(c.queue.len() <= 2 * c.entries.len() + 1024, "{} queued for {} entries", c.queue.len(), c.entries.len());
        // A small cache evicts through stale items too, and stays within its bound.
        let bound = 4 * (ENTRY_OVERHEAD_BYTES + 4);
        let mut c = RecordCache::new(bound);
        for i in 0..1000u64 {
            c.put_record(SeqNum(i % 13), BookId(1), vec![], Bytes::from_static(b"data"));
            let _ = c.get(SeqNum(i % 5));
            assert!(c.bytes() <= bound);
        }
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
