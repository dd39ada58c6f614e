//! A node's bounded memo of what it learned about `(table, key)` pairs: the object tags
//! it derived (`tags.rs`), the objects it knows to have a durable version (`node.rs`).
//!
//! Direct-mapped: a slot holds one `(table, key)` and its value, found by a hash keyed
//! per process and compared in full, so a collision (crafted or not) only evicts, and
//! never answers for another pair. Pairs longer than [`BYTES_MAX`] are not kept, so a
//! memo of `n` slots holds at most `n * BYTES_MAX` bytes of names.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Mutex;

/// The longest table name and key, together, that a memo keeps.
pub(crate) const BYTES_MAX: usize = 256;

pub(crate) struct Memo<V> {
    slots: Box<[Mutex<Option<Remembered<V>>>]>,
    hasher: RandomState,
}

struct Remembered<V> {
    table_len: usize,
    /// The table name, then the key.
    bytes: Box<[u8]>,
    value: V,
}

impl<V: Copy> Memo<V> {
    pub(crate) fn new(slots: usize) -> Memo<V> {
        assert!(slots.is_power_of_two(), "a memo has a power of two slots");
        Memo { slots: (0..slots).map(|_| Mutex::new(None)).collect(), hasher: RandomState::new() }
    }

    fn slot(&self, table: &str, key: &[u8]) -> &Mutex<Option<Remembered<V>>> {
        &self.slots[self.hasher.hash_one((table, key)) as usize & (self.slots.len() - 1)]
    }

    /// What is remembered of `(table, key)`.
    pub(crate) fn get(&self, table: &str, key: &[u8]) -> Option<V> {
        let held = |r: &Remembered<V>| {
            r.table_len == table.len() && r.bytes[..r.table_len] == *table.as_bytes() && r.bytes[r.table_len..] == *key
        };
        self.slot(table, key).lock().unwrap_or_else(|e| e.into_inner()).as_ref().filter(|r| held(r)).map(|r| r.value)
    }

    /// Remembers `value` for `(table, key)`, in place of what its slot held.
    pub(crate) fn insert(&self, table: &str, key: &[u8], value: V) {
        if table.len() + key.len() <= BYTES_MAX {
            let bytes = [table.as_bytes(), key].concat().into_boxed_slice();
            *self.slot(table, key).lock().unwrap_or_else(|e| e.into_inner()) =
                Some(Remembered { table_len: table.len(), bytes, value });
        }
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
