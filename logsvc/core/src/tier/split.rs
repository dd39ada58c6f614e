//! A map from streams that grows without a full rehash: the stream table and the
//! postings keep one per book, and a book may have millions of streams (a new tag per
//! invocation), where one hash map's growth would move them all in one call.
//!
//! Small, it is one `HashMap`; at [`SPLIT_AT`] entries it becomes [`PARTS`] maps by the
//! tag's hash (one move of those entries), each growing on its own: an insert then moves
//! at most about 1/PARTS of the entries.

use std::collections::HashMap;

use crate::types::Tag;

/// Entries at which the map splits.
pub const SPLIT_AT: usize = 1 << 12;
/// Parts of a split map.
pub const PARTS: usize = 256;

#[derive(Debug)]
pub enum TagMap<V> {
    One(HashMap<Tag, V>),
    Parts(Box<[HashMap<Tag, V>]>),
}

impl<V> Default for TagMap<V> {
    fn default() -> Self {
        TagMap::One(HashMap::new())
    }
}

/// The part of `tag` (a multiplicative hash's top byte: sequential tags spread).
fn part_of(tag: Tag) -> usize {
    (tag.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % PARTS
}

impl<V> TagMap<V> {
    fn map(&self, tag: Tag) -> &HashMap<Tag, V> {
        match self {
            TagMap::One(m) => m,
            TagMap::Parts(p) => &p[part_of(tag)],
        }
    }

    fn map_mut(&mut self, tag: Tag) -> &mut HashMap<Tag, V> {
        match self {
            TagMap::One(m) => m,
            TagMap::Parts(p) => &mut p[part_of(tag)],
        }
    }

    fn maps(&self) -> &[HashMap<Tag, V>] {
        match self {
            TagMap::One(m) => std::slice::from_ref(m),
            TagMap::Parts(p) => p,
        }
    }

    pub fn get(&self, tag: &Tag) -> Option<&V> {
        self.map(*tag).get(tag)
    }

    pub fn get_mut(&mut self, tag: &Tag) -> Option<&mut V> {
        self.map_mut(*tag).get_mut(tag)
    }

    pub fn contains_key(&self, tag: &Tag) -> bool {
        self.map(*tag).contains_key(tag)
    }

    /// The entry of `tag`, a default one if it has none.
    pub fn entry_or_default(&mut self, tag: Tag) -> &mut V
    where
        V: Default,
    {
        if let TagMap::One(m) = self {
            if m.len() >= SPLIT_AT && !m.contains_key(&tag) {
                let mut parts: Vec<HashMap<Tag, V>> = (0..PARTS).map(|_| HashMap::new()).collect();
                for (t, v) in m.drain() {
                    parts[part_of(t)].insert(t, v);
                }
                *self = TagMap::Parts(parts.into_boxed_slice());
            }
        }
        self.map_mut(tag).entry(tag).or_default()
    }

    pub fn remove(&mut self, tag: &Tag) -> Option<V> {
        self.map_mut(*tag).remove(tag)
    }

    pub fn len(&self) -> usize {
        self.maps().iter().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.maps().iter().all(HashMap::is_empty)
    }

    pub fn keys(&self) -> impl Iterator<Item = &Tag> + '_ {
        self.maps().iter().flat_map(HashMap::keys)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Tag, &V)> + '_ {
        self.maps().iter().flat_map(HashMap::iter)
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&Tag, &mut V)> + '_ {
        let maps: &mut [HashMap<Tag, V>] = match self {
            TagMap::One(m) => std::slice::from_mut(m),
            TagMap::Parts(p) => p,
        };
        maps.iter_mut().flat_map(HashMap::iter_mut)
    }

    /// About the bytes it holds with entries of `entry` bytes: each map's slots (key,
    /// value and control byte) at the load they grow at.
    pub fn bytes(&self, entry: usize) -> usize {
        let slots = |capacity: usize| capacity * 8 / 7 * (entry + 1);
        let parts = if matches!(self, TagMap::Parts(_)) { PARTS * std::mem::size_of::<HashMap<Tag, V>>() } else { 0 };
        parts + self.maps().iter().map(|m| slots(m.capacity())).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_splits_past_its_bound_and_keeps_every_entry() {
        let mut m: TagMap<u64> = TagMap::default();
        let n = SPLIT_AT as u64 * 3;
        for i in 0..n {
            *m.entry_or_default(Tag(i * 7)) += i;
        }
        assert!(matches!(m, TagMap::Parts(_)), "split past {SPLIT_AT}");
        assert_eq!(m.len(), n as usize);
        for i in (0..n).step_by(997) {
            assert_eq!(m.get(&Tag(i * 7)), Some(&i));
        }
        assert_eq!(m.remove(&Tag(7)), Some(1));
        assert!(!m.contains_key(&Tag(7)) && m.get(&Tag(8)).is_none());
        // Each part grows alone: no part holds much more than its share.
        let TagMap::Parts(parts) = &m else { unreachable!() };
        let largest = parts.iter().map(HashMap::len).max().unwrap();
        assert!(largest < 2 * n as usize / PARTS, "a part holds {largest} of {n}");
    }
}
