//! A node's bounded memo of what it learned about `(table, key)` pairs: the object tags
//! it derived (`tags.rs`), the objects it knows to have a durable version (`core/`).
//!
//! Set-associative: a pair's hash (keyed per process) picks a set of [`WAYS`] slots,
//! where it is looked for and compared in full, so a collision (crafted or not) only
//! evicts, and never answers for another pair; a set that is full gives up the slot it
//! filled longest ago. Four ways rather than one: a few dozen hot objects in a memo
//! of thousands of slots would otherwise often share a slot and push each other out
//! at every use. Pairs longer than [`BYTES_MAX`] are not kept, so a memo of `n` slots
//! holds at most `n * BYTES_MAX` bytes of names.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Mutex;

/// The longest table name and key, together, that a memo keeps.
pub(crate) const BYTES_MAX: usize = 256;

pub(crate) struct Memo<V> {
    sets: Box<[Mutex<Set<V>>]>,
    hasher: RandomState,
}

/// Slots of a set.
const WAYS: usize = 4;

struct Set<V> {
    slots: [Option<Remembered<V>>; WAYS],
    /// The slot filled longest ago.
    oldest: usize,
}

struct Remembered<V> {
    table_len: usize,
    /// The table name, then the key.
    bytes: Box<[u8]>,
    value: V,
}

impl<V> Remembered<V> {
    fn holds(&self, table: &str, key: &[u8]) -> bool {
        self.table_len == table.len() && self.bytes[..self.table_len] == *table.as_bytes() && self.bytes[self.table_len..] == *key
    }
}

impl<V: Copy> Memo<V> {
    /// A memo of `slots` slots (a multiple of [`WAYS`] whose sets are a power of two).
    pub(crate) fn new(slots: usize) -> Memo<V> {
        let sets = slots / WAYS;
        assert!(sets * WAYS == slots && sets.is_power_of_two(), "a memo has a power of two sets of {WAYS} slots");
        let empty = || Mutex::new(Set { slots: std::array::from_fn(|_| None), oldest: 0 });
        Memo { sets: (0..sets).map(|_| empty()).collect(), hasher: RandomState::new() }
    }

    fn set(&self, table: &str, key: &[u8]) -> std::sync::MutexGuard<'_, Set<V>> {
        let set = &self.sets[self.hasher.hash_one((table, key)) as usize & (self.sets.len() - 1)];
        set.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What is remembered of `(table, key)`.
    pub(crate) fn get(&self, table: &str, key: &[u8]) -> Option<V> {
        self.set(table, key).slots.iter().flatten().find(|r| r.holds(table, key)).map(|r| r.value)
    }

    /// Remembers `value` for `(table, key)`: in its slot if it has one, else in its
    /// set's slot filled longest ago.
    pub(crate) fn insert(&self, table: &str, key: &[u8], value: V) {
        if table.len() + key.len() > BYTES_MAX {
            return;
        }
        let mut set = self.set(table, key);
        if let Some(r) = set.slots.iter_mut().flatten().find(|r| r.holds(table, key)) {
            r.value = value;
            return;
        }
        let bytes = [table.as_bytes(), key].concat().into_boxed_slice();
        let at = set.oldest;
        set.slots[at] = Some(Remembered { table_len: table.len(), bytes, value });
        set.oldest = (at + 1) % WAYS;
    }

    /// The value of `(table, key)`, from `derive` unless remembered.
    pub(crate) fn get_or(&self, table: &str, key: &[u8], derive: impl FnOnce() -> V) -> V {
        if let Some(v) = self.get(table, key) {
            return v;
        }
        let value = derive();
        self.insert(table, key, value);
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs that share a set stay together while they fit it; one more pushes out the
    /// one filled longest ago, and only that one. Names that concatenate alike are
    /// apart, and a pair too long to keep is never remembered.
    #[test]
    fn a_set_keeps_as_many_pairs_as_it_has_slots_and_gives_up_the_oldest() {
        let memo = Memo::new(WAYS);
        let pairs: [(&str, &[u8]); WAYS] = [("a", b"bc"), ("ab", b"c"), ("abc", b""), ("", b"abc")];
        for (i, (table, key)) in pairs.iter().enumerate() {
            memo.insert(table, key, i);
        }
        for _ in 0..3 {
            for (i, (table, key)) in pairs.iter().enumerate() {
                assert_eq!(memo.get(table, key), Some(i), "{table:?}/{key:?}");
            }
        }
        memo.insert("a", b"bc", 10);
        assert_eq!(memo.get("a", b"bc"), Some(10), "a pair held is updated in place");
        memo.insert("t", b"5", 5);
        assert_eq!(memo.get("t", b"5"), Some(5));
        assert_eq!(memo.get("a", b"bc"), None, "the oldest goes");
        assert_eq!((memo.get("ab", b"c"), memo.get("abc", b""), memo.get("", b"abc")), (Some(1), Some(2), Some(3)));
        let long = vec![b'k'; BYTES_MAX];
        memo.insert("t", &long, 6);
        assert_eq!(memo.get("t", &long), None);
        assert_eq!(memo.get("t", b"5"), Some(5), "a pair not kept evicts nothing");
    }
}
